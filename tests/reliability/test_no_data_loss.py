"""Nothing a user has is lost to a refused or failed command.

* ``tag BAD --out INDEX --force`` builds the new index beside the old one and swaps it in
  only when complete: a refused input or a failure leaves the old index whole (it used to
  be deleted, then the input refused).
* A ``run`` into a finished run directory that is refused before writing anything leaves
  no ``run-in-progress.json`` (which made every reader refuse the untouched old run).
* A run holds its own index's lock to its end, so a ``tag --force`` into it is refused; a
  run whose index (given with ``--index``) is replaced under it fails instead of reporting
  success.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from helpers import DEMO, assert_one_line_error, in_process, tasks_in_this_process

CLAIM = "Sea levels are rising."


def digests(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture()
def index(demo_index, tmp_path) -> Path:
    dest = tmp_path / "index"
    shutil.copytree(demo_index, dest)
    return dest


@pytest.fixture()
def bad_evidence(tmp_path) -> Path:
    """The demo's evidence with one passage's text a number: refused while reading."""
    data = json.loads((DEMO / "evidence.json").read_text("utf-8"))
    data[list(data)[5]] = 5
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data), "utf-8")
    return path


@pytest.fixture()
def other_evidence(tmp_path) -> Path:
    """The demo's evidence and one passage more: a good input of another index."""
    data = json.loads((DEMO / "evidence.json").read_text("utf-8"))
    data["evidence-extra"] = "Glaciers in Greenland are melting faster than expected."
    path = tmp_path / "other.json"
    path.write_text(json.dumps(data), "utf-8")
    return path


def test_force_with_a_refused_input_leaves_the_old_index_whole(index, bad_evidence):
    before = digests(index)
    assert_one_line_error(in_process("tag", bad_evidence, "--out", index, "--force"), "bad.json", "passage 6")
    assert digests(index) == before  # before: every file deleted
    assert in_process("verify", index).returncode == 0


def test_force_over_a_manifest_not_ours_is_refused_before_building_anything(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "manifest.json").write_text('{"format": "someone-else/1"}', "utf-8")
    proc = in_process("tag", DEMO / "evidence.json", "--out", out, "--force")
    assert_one_line_error(proc, str(out / "manifest.json"), "not a factcheck tag index manifest")
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json"]


def test_force_that_fails_part_way_leaves_the_old_index_and_a_rerun_completes(index, other_evidence, monkeypatch):
    from factcheck.tagging import store
    before = digests(index)

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")
    with monkeypatch.context() as patch:
        patch.setattr(store, "write_manifest", full_disk)
        assert in_process("tag", other_evidence, "--out", index, "--force").returncode != 0
    assert {k: v for k, v in digests(index).items() if not k.startswith(".tmp-")} == before
    assert in_process("verify", index).returncode == 0
    assert in_process("tag", other_evidence, "--out", index, "--force").returncode == 0
    assert "evidence-extra" in in_process("search", "--index", index, "Greenland glaciers").stdout
    assert not list(index.glob(".tmp-*"))


def test_a_replacement_stopped_while_swapping_in_is_finished_by_a_rerun(index, other_evidence, monkeypatch):
    from factcheck.tagging import outdir

    def stop(name, partial=None):
        if name == "replacing-index":
            raise KeyboardInterrupt
    with monkeypatch.context() as patch:
        patch.setattr(outdir, "crashpoint", stop)
        assert in_process("tag", other_evidence, "--out", index, "--force").returncode != 0
    assert not (index / "manifest.json").exists()  # stopped between the old index's removal and the new one's
    assert in_process("tag", other_evidence, "--out", index).returncode == 0  # the same input: no --force needed
    assert in_process("verify", index).returncode == 0
    assert "evidence-extra" in in_process("search", "--index", index, "Greenland glaciers").stdout


def test_a_replacement_stopped_half_moved_in_is_finished_without_rebuilding(index, other_evidence, monkeypatch):
    from factcheck.tagging import outdir
    from factcheck.tagging.job import TagJob
    move, calls = outdir._move, []

    def stop_at_the_second(src, dst):
        calls.append(src)
        if src.name == "tags":  # its passages (and ids) moved in, not the rest
            raise KeyboardInterrupt
        move(src, dst)
    with monkeypatch.context() as patch:
        patch.setattr(outdir, "_move", stop_at_the_second)
        assert in_process("tag", other_evidence, "--out", index, "--force").returncode != 0
    assert (index / "passages").is_dir() and not (index / "manifest.json").exists()

    def no_tagging(*args, **kwargs):
        raise AssertionError("the complete replacement was built again")
    monkeypatch.setattr(TagJob, "_build", no_tagging)
    assert in_process("tag", other_evidence, "--out", index).returncode == 0
    assert in_process("verify", index).returncode == 0
    assert "evidence-extra" in in_process("search", "--index", index, "Greenland glaciers").stdout


@pytest.mark.slow
def test_a_replacement_killed_while_swapping_in_is_finished_by_a_rerun(index, other_evidence, tmp_path):
    """SIGKILL between the old index's removal and the new one's moving in: the rerun finds
    the complete replacement and finishes (the in-process version above stops there too)."""
    from harness.crashpoints import crash_env
    from helpers import run_cli
    killed = run_cli("tag", other_evidence, "--out", index, "--force", env=crash_env("replacing-index"))
    assert killed.returncode == -9, killed.stderr
    assert (index / ".tmp-replacement" / "manifest.json").is_file() and not (index / "manifest.json").exists()
    assert in_process("tag", other_evidence, "--out", index).returncode == 0
    assert in_process("verify", index).returncode == 0
    assert not (index / ".tmp-replacement").exists()
    assert "evidence-extra" in in_process("search", "--index", index, "Greenland glaciers").stdout


@pytest.fixture()
def run_copy(demo_run, tmp_path) -> Path:
    dest = tmp_path / "run"
    shutil.copytree(demo_run, dest)
    return dest


def test_a_run_refused_for_other_parameters_leaves_the_previous_run_readable(run_copy):
    before = digests(run_copy)
    proc = in_process("run", "--data-dir", DEMO, "--out", run_copy, "--quiet", "--jobs", "1", "--top-k", "5")
    assert_one_line_error(proc, "different run's index", "--force")
    assert not (run_copy / "run-in-progress.json").exists()  # before: written, and every reader refused the run
    assert digests(run_copy) == before
    assert in_process("check", "--run", run_copy, CLAIM).returncode == 0


def test_a_forced_run_with_refused_evidence_leaves_the_previous_run_whole(run_copy, bad_evidence, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(DEMO, data)
    shutil.copy(bad_evidence, data / "evidence.json")
    before = digests(run_copy)
    proc = in_process("run", "--data-dir", data, "--out", run_copy, "--quiet", "--jobs", "1", "--force")
    assert_one_line_error(proc, "evidence.json", "passage 6")
    assert digests(run_copy) == before  # before: the run's index deleted, and the run marked unfinished
    assert in_process("check", "--run", run_copy, CLAIM).returncode == 0


@pytest.mark.parametrize("whose", ["the run's", "given with --index"])
def test_a_run_never_finishes_with_its_index_replaced(tmp_path, demo_index, other_evidence, monkeypatch, whose):
    """Another `factcheck tag --force` into the index while the run trains: refused for the
    run's own index (the run holds its lock), else the run fails instead of reporting success."""
    from factcheck.classification import cv
    from factcheck.pipeline import run as pipeline

    out = tmp_path / "run"
    index = out / "index"
    extra = []
    if whose != "the run's":
        index = tmp_path / "index"
        shutil.copytree(demo_index, index)
        extra = ["--index", index]
    train, tagged = pipeline.train_system, []

    def replaced_meanwhile(*args, **kwargs):
        tagged.append(in_process("tag", other_evidence, "--out", index, "--force"))
        return train(*args, **kwargs)
    monkeypatch.setattr(pipeline, "train_system", replaced_meanwhile)
    monkeypatch.setattr(cv, "run_folds", tasks_in_this_process)
    proc = in_process("run", "--data-dir", DEMO, "--out", out, "--quiet", "--jobs", "1", *extra)
    if whose == "the run's":
        assert_one_line_error(tagged[0], str(index), "in use by another factcheck run")
        assert proc.returncode == 0, proc.stderr
        assert in_process("verify", index).returncode == 0
        assert "evidence-extra" not in in_process("search", "--index", index, "Greenland glaciers").stdout
    else:
        assert tagged[0].returncode == 0
        assert proc.returncode == 2, proc.stderr  # before: success, for an index no longer there
        error = proc.stderr.splitlines()[-1]
        assert str(index) in error and "replaced or removed" in error and "Traceback" not in proc.stderr
        assert not (out / "metrics.json").exists() and (out / "run-in-progress.json").exists()


def test_metrics_record_the_runs_own_index_relative_to_it(demo_run):
    """Two runs of the same input write the same metrics.json but for its timings."""
    assert json.loads((demo_run / "metrics.json").read_text("utf-8"))["run"]["index"] == "index"


@pytest.mark.parametrize("stale", ["foreign file", "regular file"])
def test_a_replacement_folder_that_is_not_ours_is_refused_before_anything_moves(index, other_evidence, stale):
    """A foreign file in a stale ``.tmp-replacement`` used to be moved into the index on the
    swap; a regular file of that name was refused by one path and ignored by another."""
    replacement = index / ".tmp-replacement"
    if stale == "foreign file":
        (replacement / "work").mkdir(parents=True)
        (replacement / "work" / "plan.json").write_text("{}", "utf-8")
        planted = replacement / "notes.txt"
    else:
        planted = replacement
    planted.write_text("the user's", "utf-8")
    before = digests(index)
    for force in ((), ("--force",)):
        assert_one_line_error(in_process("tag", other_evidence, "--out", index, *force), str(planted))
        assert digests(index) == before and planted.read_text("utf-8") == "the user's"
    from factcheck.errors import InputError
    from factcheck.tagging.index import TagIndex
    from factcheck.formats.evidence import source_spec
    from factcheck.tagging.job import TagJob
    memory = TagJob(progress=False).run(source_spec(other_evidence), index.parent / "other")
    with pytest.raises(InputError, match="move"):
        TagIndex.load(index.parent / "other").save(index, force=True)
    assert digests(index) == before and memory.n_passages == 41
