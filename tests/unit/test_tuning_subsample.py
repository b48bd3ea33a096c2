"""Tuning and training use at most ``--max-tuning-claims`` training claims: a sample that
depends only on the ids beyond it, every claim (the same list) up to it."""

from __future__ import annotations

import pytest

from factcheck.errors import InputError
from factcheck.formats.claims import Claim
from factcheck.formats.splits import MAX_TUNING_CLAIMS, tuning_subsample


def claims(n: int, prefix: str = "claim-") -> list[Claim]:
    return [Claim(f"{prefix}{i}", f"text {i}", "SUPPORTS") for i in range(n)]


def test_the_course_training_claims_are_used_whole():
    course = claims(1228)  # the course's train-claims.json
    assert MAX_TUNING_CLAIMS > 1228 and tuning_subsample(course) is course


def test_beyond_the_cap_a_sample_in_input_order_that_depends_only_on_the_ids():
    many = claims(500)
    sample = tuning_subsample(many, 120)
    assert len(sample) == 120 and len({c.id for c in sample}) == 120
    position = {c.id: i for i, c in enumerate(many)}
    assert [position[c.id] for c in sample] == sorted(position[c.id] for c in sample)
    shuffled = many[::-1]
    assert {c.id for c in tuning_subsample(shuffled, 120)} == {c.id for c in sample}
    assert tuning_subsample(many, 500) is many


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "10"])
def test_a_bad_cap_names_its_parameter(bad):
    with pytest.raises(InputError, match="max_tuning_claims"):
        tuning_subsample(claims(3), bad)


def test_train_uses_the_sample_and_says_so(tmp_path, demo_index):
    from factcheck.classification import cv
    from helpers import DEMO, in_process, tasks_in_this_process

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cv, "run_folds", tasks_in_this_process)
        proc = in_process("train", "--index", demo_index, "--claims", DEMO / "train-claims.json",
                          "--model", tmp_path / "model", "--max-tuning-claims", "14")
    assert proc.returncode == 0, proc.stderr
    assert "trained on 14 claims (a sample of 16)" in proc.stdout
    proc = in_process("train", "--index", demo_index, "--claims", DEMO / "train-claims.json",
                      "--model", tmp_path / "model2", "--max-tuning-claims", "0")
    assert proc.returncode == 2 and "--max-tuning-claims" in proc.stderr


@pytest.mark.parametrize("name", ["max_tuning_claims", "max_scoring_claims", "max_evidence"])
@pytest.mark.parametrize("bad", [0, -3, 1.5, True])
def test_run_config_refuses_a_bad_cap_naming_it(name, bad):
    from factcheck.pipeline.run import RunConfig
    with pytest.raises(InputError, match=f"^{name}: (must be at least 1|expected an integer), got"):
        RunConfig(**{name: bad})


def test_a_sample_that_misses_a_label_is_refused_naming_the_cap():
    # One REFUTES claim among 200: a sample of 10 misses it, and the classifier would never
    # predict it (or, with two labels, training blamed the file for holding one label).
    many = claims(199) + [Claim("claim-rare", "text", "REFUTES")]
    with pytest.raises(InputError, match=r"max_tuning_claims: the sample of 10 of the 200 training claims holds "
                                         r"no claim labelled 'REFUTES' \(1 of them are\)"):
        tuning_subsample(many, 10)
    assert {c.label for c in tuning_subsample(many, 199)} == {"SUPPORTS", "REFUTES"}


def test_run_scores_every_retriever_on_one_dev_sample_beyond_the_scoring_cap(tmp_path, demo_index):
    import json
    from factcheck.classification import cv
    from helpers import DEMO, in_process, tasks_in_this_process

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cv, "run_folds", tasks_in_this_process)
        proc = in_process("run", "--data-dir", DEMO, "--index", demo_index, "--out", tmp_path / "out",
                          "--max-scoring-claims", "2", "--quiet")
    assert proc.returncode == 0, proc.stderr
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    rows = metrics["run"]["retrievers_on_dev"]
    assert len(rows) >= 2 and {r["claims"] for r in rows.values()} == {2} and metrics["claims"] > 2
    assert (f"Every retriever on the same 2 of the {metrics['claims']} dev claims"
            in (tmp_path / "out" / "report.md").read_text())
