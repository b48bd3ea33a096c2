"""One progress policy: a bar redraws only where it can (a terminal); elsewhere it is
silent, or with ``enabled=True`` one log line when it completes; ``False`` is silent."""

from __future__ import annotations

import io
import logging

import pytest

from factcheck.progress import progress, progress_setting


class _Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.fixture()
def records(monkeypatch):
    """The progress logger's records (whatever another test left in logging's setup)."""
    records = []
    handler = logging.Handler(logging.INFO)
    handler.emit = records.append
    logger = logging.getLogger("factcheck.progress")
    monkeypatch.setattr(logger, "disabled", False)
    monkeypatch.setattr(logger, "level", logging.INFO)
    logger.addHandler(handler)
    yield records
    logger.removeHandler(handler)


def _run(monkeypatch, stream, records, **kwargs):
    monkeypatch.setattr("sys.stderr", stream)
    assert sum(progress(range(1000), desc="counting", unit="items", **kwargs)) == 499500
    with progress(total=3, desc="by hand", unit="shards", **kwargs) as bar:
        for _ in range(3):
            bar.update(1)
    logged = [r.getMessage() for r in records]
    records.clear()
    return stream.getvalue(), logged


def test_off_a_terminal_a_bar_is_silent_or_one_line(monkeypatch, records):
    text, logged = _run(monkeypatch, io.StringIO(), records)
    assert text == "" and logged == []
    text, logged = _run(monkeypatch, io.StringIO(), records, enabled=True)
    assert text == ""
    assert [line.split(" in ")[0] for line in logged] == ["counting: 1000 items", "by hand: 3 shards"]


def test_on_a_terminal_a_bar_redraws_unless_disabled(monkeypatch, records):
    text, logged = _run(monkeypatch, _Terminal(), records)
    assert "\r" in text and "1000/1000" in text and logged == []
    text, logged = _run(monkeypatch, _Terminal(), records, enabled=False)
    assert text == "" and logged == []
    with progress_setting(False):  # what run_pipeline(progress=False) sets for everything it calls
        text, logged = _run(monkeypatch, _Terminal(), records)
    assert text == "" and logged == []


def test_a_bar_stopped_by_an_error_logs_nothing(monkeypatch, records):
    monkeypatch.setattr("sys.stderr", io.StringIO())
    with pytest.raises(KeyError), progress(total=2, desc="failing", enabled=True) as bar:
        bar.update(1)
        raise KeyError("x")
    assert records == []
