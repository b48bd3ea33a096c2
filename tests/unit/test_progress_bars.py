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


def _run(monkeypatch, stream, caplog, **kwargs):
    monkeypatch.setattr("sys.stderr", stream)
    with caplog.at_level(logging.INFO, logger="factcheck.progress"):
        assert sum(progress(range(1000), desc="counting", unit="items", **kwargs)) == 499500
        with progress(total=3, desc="by hand", unit="shards", **kwargs) as bar:
            for _ in range(3):
                bar.update(1)
    return stream.getvalue(), [r.getMessage() for r in caplog.records]


def test_off_a_terminal_a_bar_is_silent_or_one_line(monkeypatch, caplog):
    text, logged = _run(monkeypatch, io.StringIO(), caplog)
    assert text == "" and logged == []
    caplog.clear()
    text, logged = _run(monkeypatch, io.StringIO(), caplog, enabled=True)
    assert text == ""
    assert [line.split(" in ")[0] for line in logged] == ["counting: 1000 items", "by hand: 3 shards"]


def test_on_a_terminal_a_bar_redraws_unless_disabled(monkeypatch, caplog):
    text, logged = _run(monkeypatch, _Terminal(), caplog)
    assert "\r" in text and "1000/1000" in text and logged == []
    text, logged = _run(monkeypatch, _Terminal(), caplog, enabled=False)
    assert text == "" and logged == []
    with progress_setting(False):  # what run_pipeline(progress=False) sets for everything it calls
        text, logged = _run(monkeypatch, _Terminal(), caplog)
    assert text == "" and logged == []


def test_a_bar_stopped_by_an_error_logs_nothing(monkeypatch, caplog):
    monkeypatch.setattr("sys.stderr", io.StringIO())
    with caplog.at_level(logging.INFO, logger="factcheck.progress"):
        with pytest.raises(KeyError), progress(total=2, desc="failing", enabled=True) as bar:
            bar.update(1)
            raise KeyError("x")
    assert caplog.records == []
