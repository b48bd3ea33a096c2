"""Ctrl-C: one line, no worker tracebacks; a run stopped by bad input leaves no shards.

A terminal's Ctrl-C sends SIGINT to the whole foreground process group; worker processes
caught importing printed their KeyboardInterrupt tracebacks after "interrupted". Now the
workers are started with SIGINT blocked (they never see it) and the driver, interrupted
alone, stops them. The ``FACTCHECK_SIGINT_AT`` hook sends the group its Ctrl-C at a named
point, so the test does not depend on timing.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from harness.crashpoints import fault_env
from helpers import DEMO, ROOT, assert_one_line_error, in_process


def _sigint_blocked(_=None) -> bool:
    """In a worker: is SIGINT in this process's blocked mask?"""
    for line in open("/proc/self/status", encoding="ascii"):
        if line.startswith("SigBlk:"):
            return bool(int(line.split()[1], 16) & (1 << (signal.SIGINT - 1)))
    raise AssertionError("no SigBlk line")


@pytest.mark.slow
def test_tagging_workers_never_see_a_terminals_ctrl_c():
    from factcheck.tagging.backends import WorkerPool
    with WorkerPool("loky", 2) as pool:
        assert pool.map(_sigint_blocked, [(i,) for i in range(4)]) == [True] * 4
    assert not _sigint_blocked()  # and this process still gets it


@pytest.mark.slow
def test_cross_validation_workers_never_see_a_terminals_ctrl_c():
    from factcheck.classification import cv
    try:
        assert cv.run_folds(_sigint_blocked, [(i,) for i in range(4)], jobs=2) == [True] * 4
    finally:
        cv.release_workers()
    assert not _sigint_blocked()


def _as_from_a_terminal():
    """In the child, before exec: SIGINT at its default and unblocked, as a shell starts a
    command (an ignored or blocked SIGINT would be inherited from whatever ran the tests)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


@pytest.mark.slow
@pytest.mark.parametrize("point", ["mid-write:passages-00000", "after-split"])
def test_ctrl_c_while_workers_start_is_one_line(tmp_path, point):
    out = tmp_path / "index"
    proc = subprocess.run([sys.executable, "-m", "factcheck", "tag", str(DEMO / "evidence.json"), "--out", str(out),
                           "--jobs", "2", "--shard-size", "5"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env=fault_env(point, sigint=True), start_new_session=True,
                          preexec_fn=_as_from_a_terminal)
    assert proc.returncode == 130, (proc.stderr, "SIGINT in the test process:", signal.getsignal(signal.SIGINT))
    assert proc.stderr.splitlines() == ["factcheck tag: interrupted"], proc.stderr
    assert not (out / "manifest.json").exists()


def test_a_duplicate_id_found_at_the_end_removes_the_shards_written(tmp_path):
    """Before: the shards of every passage before the end stayed (278 MB at 1.2M)."""
    corpus = json.loads((DEMO / "evidence.json").read_text("utf-8"))
    items = list(corpus.items())
    src = tmp_path / "e.json"
    src.write_text("{" + ", ".join(json.dumps(k) + ": " + json.dumps(v) for k, v in items + [items[0]]) + "}", "utf-8")
    out = tmp_path / "index"
    proc = in_process("tag", src, "--out", out, "--jobs", "1", "--shard-size", "10")
    assert_one_line_error(proc, "duplicate passage id")
    assert not out.exists() or sorted(p.name for p in out.rglob("*")) == []
    fixed = tmp_path / "fixed.json"
    fixed.write_text(json.dumps(corpus), "utf-8")
    assert in_process("tag", fixed, "--out", out, "--jobs", "1", "--shard-size", "10").returncode == 0


@pytest.mark.slow
@pytest.mark.parametrize("point", ["before-rename:rerank.skops", "before-rename:confusion.png"])
def test_a_run_killed_mid_write_is_quiet_and_its_rerun_leaves_no_temporaries(tmp_path, point):
    """Before: the kill's loky resource tracker printed multi-line ``leaked folder/semlock``
    warnings, and ``model/.tmp-rerank.skops.*`` / ``plots/.tmp-*.png.*`` stayed after a rerun."""
    from harness.crashpoints import crash_env
    from helpers import make_run
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "factcheck", "run", "--data-dir", str(DEMO), "--out", str(out),
                           "--quiet", "--jobs", "2"], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env=crash_env(point))
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert "resource_tracker" not in proc.stderr and "leaked" not in proc.stderr, proc.stderr
    assert list(out.rglob(".tmp-*")), "the kill left no temporary: the point moved"
    (out / "plots" / ".tmp-notes.txt").parent.mkdir(exist_ok=True)
    (out / "plots" / ".tmp-notes.txt").write_text("the user's")  # not of our shape: kept
    make_run(out)
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob(".tmp-*")) == ["plots/.tmp-notes.txt"]
