"""The two-stage benchmark's choices (benchmarks/two_stage.py): the pre-registered candidates
and their tie order, and the cross-validated choice made on each split's training part only."""

from __future__ import annotations

import numpy as np

from factcheck.classification.cv import Split


def test_the_candidates_are_the_pre_registered_ones_in_their_tie_order():
    from benchmarks.two_stage import settings
    found = settings()
    assert len(found) == 17 and found[0]["combine"] == "cosine" and found[-1]["combine"] == "rrf"
    weighted = [(s["bm25_weight"], s["dense_weight"]) for s in found if s["combine"] == "weighted"]
    assert len(set(weighted)) == 15 and (0.0, 0.0) not in weighted


def test_the_choice_reads_the_training_part_only_and_ties_go_to_the_first_candidate():
    from benchmarks.two_stage import cv_choice
    # claims 0-1 train, 2-3 test: candidate 1 wins on the training part, candidate 0 on the test part
    a = np.array([[0.2], [0.2], [1.0], [1.0]])
    b = np.array([[0.6], [0.6], [0.0], [0.0]])
    splits = [Split(0, 0, np.array([0, 1]), np.array([2, 3])), Split(0, 1, np.array([2, 3]), np.array([0, 1]))]
    assert cv_choice([a, b], splits).tolist() == [0.2, 0.2, 0.0, 0.0]
    assert cv_choice([b, b.copy()], splits).tolist() == b[:, 0].tolist()


def test_a_partial_run_rewrites_only_the_sections_it_measured(tmp_path, capsys):
    from benchmarks.two_stage import END_OF_PART_1, write_part_2
    out = tmp_path / "two-stage.md"
    write_part_2(out, ["### Pool recall", "", "recall 1", "", "### The bets", "", "bets 1", ""], "*by run 1*",
                 keep_others=False)
    write_part_2(out, ["### The bets", "", "bets 2", ""], "*by run 2*")
    text = out.read_text("utf-8")
    part_2 = text[text.index(END_OF_PART_1):]
    assert text.count(END_OF_PART_1) == 1 and "## Part 2" in part_2
    assert part_2.index("### Pool recall") < part_2.index("### The bets")
    assert "recall 1" in part_2 and "*by run 1*" in part_2  # kept, with what wrote it
    assert "bets 2" in part_2 and "bets 1" not in part_2 and part_2.count("*by run 2*") == 1
    capsys.readouterr()
