"""Crash-resume: SIGKILL `factcheck tag` at exact points and at random moments, rerun,
and compare with an uninterrupted run byte for byte.

The harness is scripts/crash_test.py (also runnable on its own for long runs); the
fault-injection hook is harness/crashpoints.py (``FACTCHECK_CRASH_AT``).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys

import pytest

from factcheck.errors import IntegrityError
from factcheck.formats.evidence import source_spec
from factcheck.tagging.index import TagIndex, export_tags
from factcheck.tagging.job import TagJob

from harness import crashpoints
from scripts import crash_test

N_PASSAGES, SHARD = 4000, 500  # 8 shards

# In the order a fresh run reaches them; each rerun resumes and dies at the next one.
EXACT_POINTS = [
    "before-rename:plan.json",                          # the very first file of a fresh run
    "mid-write:passages-00001",                         # half-way through a shard folder's write
    "after-rename:passages-00002",                      # shard in place, no done record yet
    "mid-write:passages__passages-00003.json",          # done record half-written
    "after-split",
    "before-rename:counts-00004",
    "after-count",
    "mid-write:tags-00002",
    "after-tag",
    "mid-write:vocabulary",
    "mid-write:ids",                                    # the id lookup's sorted hashes
    "before-manifest",
    "mid-write:manifest.json",                          # half-way through the manifest write
    "after-manifest",                                   # manifest in place, work/ not yet removed
]


@pytest.fixture(scope="module")
def sample(real_sample_20k, tmp_path_factory):
    """The first 4,000 passages of the real 20K sample, and the uninterrupted reference."""
    items = list(json.loads(real_sample_20k.read_text("utf-8")).items())[:N_PASSAGES]
    root = tmp_path_factory.mktemp("crash")
    src = root / "sample.json"
    src.write_text(json.dumps(dict(items), ensure_ascii=False), encoding="utf-8")
    ref = root / "reference"
    TagJob(progress=False, jobs=1, shard_size=SHARD).run(source_spec(src), ref)
    export_tags(ref, root / "reference.jsonl")
    return {"src": src, "ids": [pid for pid, _ in items], "ref": ref,
            "export": (root / "reference.jsonl").read_bytes()}


def assert_identical_to_reference(sample, out, scratch):
    assert crash_test.compare_index(sample["ref"], out) == []
    rc, err, data = crash_test.export_ids(out, scratch)  # `factcheck export-tags`
    assert rc == 0, err
    assert crash_test.id_problems(data, sample["ids"]) == []  # every id exactly once, in order
    assert data == sample["export"]


def test_exact_points_are_in_pipeline_order():
    order = crash_test.all_points(N_PASSAGES // SHARD)
    assert all(p in order for p in EXACT_POINTS)
    assert sorted(EXACT_POINTS, key=order.index) == EXACT_POINTS


@pytest.mark.slow
def test_sigkill_at_exact_points_then_resume_is_byte_identical(sample, tmp_path):
    out = tmp_path / "index"
    for point in EXACT_POINTS:
        run = crash_test.run_tag(sample["src"], out, SHARD, jobs=1, crash_at=point)
        assert run.killed, f"{point} not reached: exit {run.returncode}: {run.stderr[-500:]}"
        if EXACT_POINTS.index(point) < EXACT_POINTS.index("after-manifest"):
            # Nothing that looks complete before the manifest is renamed into place...
            assert not (out / "manifest.json").exists(), point
            with pytest.raises(IntegrityError, match="manifest.json: missing"):
                TagIndex.load(out)
        # ...and a manifest, once there, always vouches for a whole index.
        assert crash_test.manifest_problem(out) is None, point
    final = crash_test.run_tag(sample["src"], out, SHARD, jobs=1)
    assert final.returncode == 0, final.stderr
    assert_identical_to_reference(sample, out, tmp_path / "export.jsonl")


@pytest.mark.slow
def test_worker_crash_and_random_group_kills_with_two_jobs(sample, tmp_path):
    out = tmp_path / "index"
    # 1. A crash point inside a loky worker: the worker dies, joblib raises in the driver.
    run = crash_test.run_tag(sample["src"], out, SHARD, jobs=2, crash_at="mid-write:counts-00003")
    assert run.returncode not in (0, 2, -signal.SIGKILL), run.stderr[-500:]
    assert not (out / "manifest.json").exists()
    # 2. Time-based SIGKILLs of the whole process group (driver + workers) while writing,
    # at moments inside the writing window of an uninterrupted run measured here (~0.6 s
    # since the workers stopped importing scikit-learn: fixed delays of up to 1 s had
    # begun to miss it), as scripts/crash_test.py draws them.
    probe = crash_test.run_tag(sample["src"], tmp_path / "probe", SHARD, jobs=2, kill_after=1e9)
    assert probe.returncode == 0 and probe.started is not None, probe.stderr[-500:]
    window = probe.seconds - probe.started
    rng = random.Random(int(os.environ.get("FACTCHECK_CRASH_SEED", "5")))
    killed = 0
    for i in range(2):
        delay = rng.uniform(0.0, 0.5) * window / (i + 1)  # seconds after the run's first write
        run = crash_test.run_tag(sample["src"], out, SHARD, jobs=2, kill_after=delay)
        assert run.returncode in (0, -signal.SIGKILL), run.stderr[-500:]
        killed += run.killed
        assert crash_test.manifest_problem(out) is None
        if run.returncode == 0:  # finished before its kill
            break
    assert killed >= 1
    # 3. Resume with another number of jobs: still the same bytes.
    final = crash_test.run_tag(sample["src"], out, SHARD, jobs=1)
    assert final.returncode == 0, final.stderr
    assert_identical_to_reference(sample, out, tmp_path / "export.jsonl")


def test_crashpoint_spec_parsing_and_no_op_without_the_variable(monkeypatch):
    from factcheck.formats.files import crashpoint
    assert crashpoints.parse(None) is None and crashpoints.parse("") is None
    assert crashpoints.parse("after-split") == ("after-split", 1)
    assert crashpoints.parse("before-rename:tags-00003@2") == ("before-rename:tags-00003", 2)
    assert crashpoints.parse("odd@name") == ("odd@name", 1)
    monkeypatch.delenv(crashpoints.ENV, raising=False)
    assert crashpoints.install() is False
    crashpoint("after-split")  # does nothing (we are still alive)


@pytest.mark.slow
def test_crashpoint_fires_on_the_nth_occurrence_only(tmp_path):
    code = ("import sys; from factcheck.formats.files import crashpoint\n"
            "for i in range(1, 4):\n"
            "    print(i, flush=True); crashpoint('p'); crashpoint('q')\n")
    env = crashpoints.crash_env("p@2")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL
    assert proc.stdout.split() == ["1", "2"]
    env = crashpoints.crash_env("mid-write:x.json")
    part = tmp_path / "x.json.tmp"
    part.write_bytes(b"0123456789")
    code = f"from factcheck.formats.files import crashpoint; crashpoint('mid-write:x.json', partial={str(part)!r})"
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL
    assert part.read_bytes() == b"01234"  # cut half-way, as a kill mid-write leaves it
