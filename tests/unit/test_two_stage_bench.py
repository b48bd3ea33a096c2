"""The two-stage benchmark's choices (benchmarks/two_stage.py): the pre-registered candidates
and their tie order, and the cross-validated choice made on each split's training part only."""

from __future__ import annotations

import numpy as np
import pytest

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


def _unit(seen):
    def embed(texts):
        seen.append(list(texts))
        return np.array([[1.0, 0.0] if "sea" in t else [0.6, 0.8] for t in texts])
    return embed


def test_bet_b_values_are_the_cosines_then_the_evidence_averaged_difference_and_product():
    from benchmarks.two_stage import contextual_values
    X = [("sea rises", ["sea level", "ice"]), ("ice melts", ["ice"]), ("sea rises", [])]
    claims, passages = [], []
    got = contextual_values(X, _unit(claims), _unit(passages))
    assert claims == [["ice melts", "sea rises"]] and passages == [["ice", "sea level"]]  # once, sorted
    q, E = np.array([1.0, 0.0]), np.array([[1.0, 0.0], [0.6, 0.8]])
    cos = E @ q
    centroid = E.sum(axis=0)
    assert np.allclose(got[0], [cos.max(), cos.mean(), cos.min(), centroid @ q / np.linalg.norm(centroid),
                                *np.abs(E - q).mean(axis=0), *(E * q).mean(axis=0)])
    assert np.allclose(got[1], [1, 1, 1, 1, 0, 0, 0.36, 0.64]) and not got[2].any()


@pytest.mark.parametrize("groups", [("claim", "stats"), ("claim", "stats", "dense")])
def test_bet_b_values_in_the_dense_view_give_the_matrix_of_a_group_of_their_own(groups):
    # The arm as first measured: the values were a feature group of their own, stacked last,
    # standardised per column and times stats_weight.
    import scipy.sparse as sp
    from sklearn.preprocessing import StandardScaler
    from benchmarks.two_stage import with_values
    from factcheck.classification.features import ClaimEvidenceFeatures
    rng = np.random.default_rng(3)
    n = 12
    views = {"claim": [f"claim {i % 3} words {i % 5}" for i in range(n)], "stats": rng.normal(size=(n, 11)),
             "dense": rng.normal(size=(n, 4))}
    values = rng.normal(size=(n, 9))
    extended, with_groups = with_values(views, groups, values)
    assert with_groups == ("claim", "stats", "dense") and views["dense"].shape == (n, 4)
    got = ClaimEvidenceFeatures(groups=with_groups, stats_weight=0.7, min_df=1).fit_views(extended)
    base = ClaimEvidenceFeatures(groups=groups, stats_weight=0.7, min_df=1).fit_views(views)
    own = StandardScaler().fit(values).transform(values) * 0.7
    expected = sp.hstack([base.transform_views(views), sp.csr_matrix(own)]).tocsr()
    assert np.array_equal(got.transform_views(extended).toarray(), expected.toarray())


def test_bet_b_values_refuse_a_dense_group_not_last():
    from benchmarks.two_stage import with_values
    with pytest.raises(ValueError, match="dense group must come last"):
        with_values({"dense": np.zeros((1, 4))}, ("dense", "stats"), np.zeros((1, 2)))
