"""The session's demo runs (conftest.py) are what the command writes.

Most tests read a demo run made once per session in the test process (``make_run``:
``--jobs 1``, cross-validation's folds run one after another in this process instead of
in a worker). This checks that such a run holds the same files, byte for byte, as the
README's command run by a user (``factcheck run --quiet`` in a child process, every
core) -- apart from the stage timings -- so a test reading the
shared run tests what users get."""

from __future__ import annotations

import json
import re

import pytest

from helpers import written_files

pytestmark = pytest.mark.slow  # the command, in a child process


def comparable(run, name: str, digest: str):
    """What must be equal between two runs of the same input: the file's sha256, or for
    the two files that carry the run's clock, their text without it."""
    if name == "metrics.json":
        metrics = json.loads((run / name).read_text("utf-8"))
        del metrics["run"]["timings"]  # the clock (the index is recorded relative to the run)
        return metrics
    if name == "report.md":
        text = (run / name).read_text("utf-8").replace(str(run), "RUN")
        head, timings, tail = re.split(r"^(## Timings \(seconds\)\n(?:\n|\|.*\n)*)", text, maxsplit=1,
                                       flags=re.M)
        steps = [row.split(" | ")[0] for row in timings.splitlines() if row.startswith("| ")]
        return head, steps, tail  # the timings table keeps its rows, not its seconds
    return digest


def test_the_shared_demo_run_is_byte_for_byte_the_commands(demo_run, quiet_demo_command):
    command_run, _ = quiet_demo_command
    ours, theirs = written_files(demo_run), written_files(command_run)
    assert sorted(ours) == sorted(theirs)
    assert len(ours) >= 20 and "dev-claims-predictions.json" in ours and "model/classifier.skops" in ours
    differ = [name for name in ours
              if comparable(demo_run, name, ours[name]) != comparable(command_run, name, theirs[name])]
    assert not differ, differ


def test_a_claims_path_crosses_at_most_fifteen_modules(tmp_path, monkeypatch):
    """docs/architecture.md's count: the modules a claim's path in a run enters (reading,
    checking, writing its predictions), measured by scripts/claim_path.py. Fifteen, the goal:
    BM25's ranking enters `scoring.compiled` only when its compiled loop ranks, which a process
    that has ranked few postings, as this one is made to be, does not."""
    from helpers import DEMO
    from scripts.claim_path import claim_path_modules

    from factcheck.scoring import matrix
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(matrix.VARIABLE, raising=False)
    monkeypatch.setattr(matrix, "_loaded", None)  # as in a fresh process, whatever ran before
    monkeypatch.setattr(matrix, "_postings", 0)
    modules = claim_path_modules(str(DEMO))
    assert "factcheck.system.checker" in modules and len(modules) <= 15, modules
