"""A run says what it is doing: every stage announces itself on stderr when it
starts, and the stages' timings account for the run's wall time.

With a tiny corpus every stage is short, so this checks the announcements, not the
~10 s spacing itself: a stage that announces itself at its start and shows a tqdm bar
when long (the long ones: tagging, retriever training, classifier CV) is never silent
for long on real data either.
"""

from __future__ import annotations

import json
import re

import pytest

STAGE_LINE = re.compile(r"^\[\s*(\d+\.\d)s\] (.+) \.\.\.$")


@pytest.mark.slow
def test_every_stage_announces_itself_and_the_timings_cover_the_wall_time(demo_command):
    out, proc = demo_command  # the README's demo command, in a child process
    announced = [m.group(2) for line in proc.stderr.splitlines() if (m := STAGE_LINE.match(line))]
    timings = json.loads((out / "metrics.json").read_text())["run"]["timings"]
    stages = [name for name in timings if name != "total"]
    assert announced == stages, "every timed stage is announced once, in order"
    assert len(stages) >= 9
    covered = sum(timings[s] for s in stages)
    # The steps cover everything but writing metrics.json/report.md (milliseconds) and
    # rounding: a share of the wall time, not seconds (a busy machine stretches both).
    assert covered >= 0.8 * timings["total"] - 0.005 * len(stages), (covered, timings)
    assert re.search(r"\] done: .*report\.md$", proc.stderr.splitlines()[-1] if proc.stderr else "")


@pytest.mark.slow
def test_quiet_run_announces_nothing(quiet_demo_command):
    _, proc = quiet_demo_command
    assert not [line for line in proc.stderr.splitlines() if STAGE_LINE.match(line)]


@pytest.mark.slow
def test_progress_bars_leave_no_carriage_return_in_a_log(demo_command):
    """stderr is a pipe here, as a log file is: no bar redraws (main left hundreds of
    carriage returns from the training bars), and every line is a stage line, a note
    or the last one."""
    _, proc = demo_command
    assert "\r" not in proc.stderr
    lines = proc.stderr.splitlines()
    others = [line for line in lines[:-1] if not STAGE_LINE.match(line) and not line.startswith("factcheck run:")]
    assert not others, others


class _InThisProcess:
    """Stands in for joblib's worker pool: the folds run here, one after another."""

    def map(self, fn, *iterables):
        return map(fn, *iterables)

    def shutdown(self, wait=True):
        pass


@pytest.fixture
def folds_here(monkeypatch):
    from factcheck.classification import cv
    monkeypatch.setattr(cv, "get_memmapping_executor", lambda n, **kwargs: _InThisProcess())
    return cv


def test_the_classifier_cross_validation_draws_a_bar_on_a_terminal(folds_here, monkeypatch, capsys):
    # Minutes on a large training set: on a terminal its folds advance a bar (main was silent).
    from factcheck import progress
    monkeypatch.setattr(progress, "_redraws", lambda: True)
    assert folds_here.run_folds(pow, [(2, 3), (3, 2), (2, 2)], jobs=1) == [8, 9, 4]
    err = capsys.readouterr().err
    assert "classifier cross-validation" in err and "3/3" in err and "folds" in err


def test_the_classifier_selection_reports_its_folds_in_a_log(folds_here, demo_index, caplog, capsys):
    # Not a terminal: one line when the bar completes (progress=True), none with progress=False.
    import logging

    from factcheck.formats.claims import read_claims
    from factcheck.retrieval.bm25 import BM25Retriever
    from factcheck.tagging.index import TagIndex
    from factcheck.training.classifier_cv import select_classifier
    from helpers import DEMO
    index = TagIndex.load(demo_index)
    train = read_claims(DEMO / "train-claims.json", require_labels=True)
    readers = {"bm25": BM25Retriever().fit(index)}
    with caplog.at_level(logging.INFO, logger="factcheck.progress"):
        select_classifier(train, readers, index, jobs=1, progress=False)
        assert "cross-validation" not in caplog.text
        select_classifier(train, readers, index, jobs=1, progress=True)
    lines = [r.getMessage() for r in caplog.records if r.name == "factcheck.progress"]
    assert any(line.startswith("classifier cross-validation: ") and " folds in " in line for line in lines), lines
    assert "\r" not in capsys.readouterr().err

