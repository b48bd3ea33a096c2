"""A run directory is one unit; a model directory is one unit; gold ids are never skipped.

* A rerun of ``factcheck run`` into an existing directory, stopped part-way, used to leave
  the new predictions beside the old ``metrics.json``/``report.md`` (or the new
  ``rerank.skops`` beside the old ``classifier.skops``), and ``check``, ``predict``,
  ``serve``, ``evaluate`` and ``ablation`` read the mix. Now every one of them refuses it
  in one line until a run into it completes.
* ``classifier.skops`` records the sha256 of the ``rerank.skops`` it was trained with.
* Gold evidence ids missing from the index: one rule, refuse (naming how many and the
  first few), for ``run``, ``train``, ``train-rerank``, ``ablation`` and ``texts_of``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.crashpoints import crash_env
from helpers import DEMO, assert_one_line_error, in_process, run_cli

CLAIM = "Sea levels are rising."


@pytest.fixture()
def run_copy(demo_run, tmp_path) -> Path:
    """A private copy of the session's demo run (default retriever)."""
    dest = tmp_path / "run"
    shutil.copytree(demo_run, dest)
    return dest


def readers(run: Path, tmp_path: Path) -> dict:
    """Every command that reads a run directory's files, run in this process."""
    from factcheck.errors import InputError
    from factcheck.serve.app import create_app

    def serve():
        try:
            create_app(run, warm_up=False)
        except InputError as exc:
            return type("P", (), {"returncode": 2, "stderr": f"factcheck serve: error: {exc.one_line()}\n"})()
        return type("P", (), {"returncode": 0, "stderr": ""})()
    return {
        "check": lambda: in_process("check", "--run", run, CLAIM),
        "predict": lambda: in_process("predict", "--claims", DEMO / "dev-claims.json", "--index", run / "index",
                                      "--model", run / "model", "--out", tmp_path / "p.json"),
        "ablation": lambda: in_process("ablation", "--claims", DEMO / "dev-claims.json", "--index", run / "index",
                                       "--model", run / "model"),
        "evaluate": lambda: in_process("evaluate", "--predictions", run / "dev-claims-predictions.json",
                                       "--groundtruth", DEMO / "dev-claims.json"),
        "retrieve --method rerank": lambda: in_process(
            "retrieve", "--index", run / "index", "--claims", DEMO / "dev-claims.json", "--out", tmp_path / "r.json",
            "--method", "rerank", "--rerank-model", run / "model" / "rerank.skops"),
        "serve": serve,
    }


@pytest.fixture()
def other_data(tmp_path) -> Path:
    """The demo data with 4 training claims fewer: a rerun with it trains other models (the
    first 4: each label keeps the two claims or more training needs)."""
    data = tmp_path / "other-data"
    shutil.copytree(DEMO, data)
    claims = json.loads((data / "train-claims.json").read_text("utf-8"))
    (data / "train-claims.json").write_text(json.dumps(dict(list(claims.items())[4:])), "utf-8")
    return data


@pytest.mark.slow
def test_a_rerun_stopped_part_way_is_refused_by_every_reader(run_copy, other_data, tmp_path):
    """Killed with the new reranker beside the old classifier, the old predictions,
    metrics.json and report.md (more kill points, and the rerun to completion:
    ``python -m scripts.crash_test --run``)."""
    for name, read in readers(run_copy, tmp_path).items():
        assert read().returncode == 0, name  # a complete run: every reader reads it
    killed = run_cli("run", "--data-dir", other_data, "--out", run_copy, "--quiet", "--jobs", "1",
                     env=crash_env("after-rename:rerank.skops"))
    assert killed.returncode == -9, killed.stderr
    after = tmp_path / "after"
    after.mkdir()
    for name, read in readers(run_copy, after).items():
        assert_one_line_error(read(), "run-in-progress.json", "did not finish")  # before: all of them read the mix
    assert list(after.iterdir()) == []


def test_a_rerun_refused_for_bad_input_leaves_the_previous_run_readable(run_copy, tmp_path):
    """The marker is written only once the inputs are read: a typo does not lock a good run out."""
    proc = in_process("run", "--data-dir", DEMO, "--out", run_copy, "--quiet", "--evidence", tmp_path / "nope.json")
    assert_one_line_error(proc, "nope.json")
    assert not (run_copy / "run-in-progress.json").exists()
    assert in_process("check", "--run", run_copy, CLAIM).returncode == 0


def test_a_reranker_from_another_training_is_refused(run_copy, tmp_path, demo_index):
    """The old classifier beside a new rerank.skops (a training stopped between the two)."""
    other = tmp_path / "other.skops"
    proc = in_process("train-rerank", "--index", demo_index, "--claims", DEMO / "dev-claims.json",
                      "--rerank-model", other)
    assert proc.returncode == 0, proc.stderr
    shutil.copy(other, run_copy / "model" / "rerank.skops")
    proc = in_process("check", "--run", run_copy, "--method", "rerank", CLAIM)
    assert_one_line_error(proc, "rerank.skops", "not the reranker classifier.skops was trained with")
    proc = in_process("predict", "--claims", DEMO / "dev-claims.json", "--index", run_copy / "index",
                      "--model", run_copy / "model", "--out", tmp_path / "p.json")
    assert proc.returncode == 0  # the chosen retriever (bm25) does not read the reranker


# ---------------------------------------------------------------------- missing gold ids

def _claims_with_unknown_gold(tmp_path, how_many: int, source: str = "dev-claims.json") -> Path:
    claims = json.loads((DEMO / source).read_text("utf-8"))
    for cid in list(claims)[:how_many]:
        claims[cid]["evidences"] = claims[cid]["evidences"][:-1] + ["evidence-not-in-the-index"]
    path = tmp_path / "claims.json"
    path.write_text(json.dumps(claims), "utf-8")
    return path


def test_ablation_refuses_gold_ids_not_in_the_index(run_copy, tmp_path):
    """Before: dev claims against another index printed 'gold accuracy 0.273', exit 0; one
    missing id moved the demo's 0.750 to 0.625 without a word."""
    one = _claims_with_unknown_gold(tmp_path, 1)
    proc = in_process("ablation", "--claims", one, "--index", run_copy / "index", "--model", run_copy / "model")
    assert_one_line_error(proc, str(one), "1 id ('evidence-not-in-the-index') is not in the knowledge source")
    proc = in_process("ablation", "--claims", DEMO / "dev-claims.json", "--index", run_copy / "index",
                      "--model", run_copy / "model")
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("command", ["train", "train-rerank", "run"])
def test_every_command_reading_gold_ids_has_the_same_rule(tmp_path, demo_index, command):
    # Training claims: dev's have a label with a single claim, refused first (before the index is read).
    bad = _claims_with_unknown_gold(tmp_path, 3, "train-claims.json")
    if command == "run":
        data = tmp_path / "data"
        shutil.copytree(DEMO, data)
        shutil.copy(bad, data / "train-claims.json")
        proc = in_process("run", "--data-dir", data, "--out", tmp_path / "out", "--quiet", "--jobs", "1")
    elif command == "train":
        proc = in_process("train", "--index", demo_index, "--claims", bad, "--model", tmp_path / "m")
    else:
        proc = in_process("train-rerank", "--index", demo_index, "--claims", bad, "--rerank-model", tmp_path / "r.skops")
    assert_one_line_error(proc, "claims.json", "3 ids", "are not in the knowledge source")


def test_texts_of_never_skips_an_unknown_id(demo_index):
    from factcheck.errors import InputError
    from factcheck.tagging.index import TagIndex
    index = TagIndex.load(demo_index)
    assert index.texts_of(index.ids[:2]) == index.texts[:2]
    with pytest.raises(InputError, match=r"1 id \('nope'\) is not in this index"):
        index.texts_of([index.ids[0], "nope"])
