"""A ``factcheck run`` output directory as one unit: :data:`MARKER` is written before the
run's first write and removed after its last; every reader of a run's files refuses a
directory holding it (:func:`refuse_unfinished`): its files may come from two runs.
"""

from __future__ import annotations

import os
from pathlib import Path

from factcheck.errors import InputError
from factcheck.formats.files import write_json_atomic

__all__ = ["MARKER", "begin_run", "end_run", "unfinished_marker", "refuse_unfinished"]

MARKER = "run-in-progress.json"


def begin_run(out: Path) -> None:
    """Mark ``out`` as being written, before the run's first write into it."""
    write_json_atomic(Path(out) / MARKER, {"format": "factcheck-run-in-progress/1", "pid": os.getpid(),
                                           "meaning": "a `factcheck run` into this directory started and has "
                                                      "not finished: its files may mix two runs"})


def end_run(out: Path) -> None:
    """After the run's last write: ``out`` holds one complete run."""
    (Path(out) / MARKER).unlink()


def unfinished_marker(path: Path) -> Path | None:
    """The marker that makes ``path`` part of an unfinished run, or ``None``: in ``path`` (or
    a file's folder) or its parent (a run's ``model/``)."""
    path = Path(path)
    near = path if path.is_dir() else path.parent
    for folder in (near, near.parent):
        marker = folder / MARKER
        if marker.exists():
            return marker
    return None


def refuse_unfinished(path: Path) -> None:
    """One-line InputError when ``path`` belongs to a run directory whose run did not finish."""
    marker = unfinished_marker(path)
    if marker is not None:
        raise InputError(marker, None, "a `factcheck run` into this directory did not finish (it was "
                         "stopped or failed), so its files may mix two runs; rerun it to completion "
                         "(every reader refuses the directory until then)")
