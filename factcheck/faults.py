"""Fault injection for crash tests: die by SIGKILL at a named point, on request.

``crashpoint(name)`` does nothing unless the environment variable ``FACTCHECK_CRASH_AT``
names that point when this module is first imported:

* ``FACTCHECK_CRASH_AT=after-split``            -- the first time ``after-split`` is reached;
* ``FACTCHECK_CRASH_AT=before-rename:tags-00003.joblib@2`` -- the 2nd time (in this process).

The process then kills itself with SIGKILL: no ``finally``, no atexit, no flushing, the
same as a power cut as far as the files on disk are concerned. Worker processes inherit
the environment, so a point reached in a worker kills that worker (joblib then raises in
the parent); use ``--jobs 1`` to crash the main process at an exact point.

Points used (see ``scripts/crash_test.py``):

* ``mid-write:FILE`` -- the temporary file of FILE is complete; it is cut to half its size
  and the process dies (a kill half-way through writing FILE);
* ``before-rename:FILE`` -- FILE is fully written under its temporary name, not renamed;
* ``after-rename:FILE`` -- FILE is in place (its "done" record is not written yet);
* ``after-split``, ``after-count``, ``after-tag``, ``before-manifest``, ``after-manifest``
  -- stage boundaries of the tagging job.

FILE is the destination's base name (``passages-00001.joblib``, ``manifest.json``,
``passages__passages-00001.joblib.json`` for a done record, ``plan.json``, ...).

The variable is read once, at import; when it is unset a crashpoint costs one comparison.
"""

from __future__ import annotations

import os
import signal

ENV = "FACTCHECK_CRASH_AT"


def _parse(spec: str | None) -> tuple[str, int] | None:
    if not spec:
        return None
    name, at, nth = spec.rpartition("@")
    if at and nth.isdigit() and int(nth) >= 1:
        return name, int(nth)
    return spec, 1


_TARGET = _parse(os.environ.get(ENV))
_seen = 0


def crashpoint(name: str, partial: str | os.PathLike | None = None) -> None:
    """SIGKILL this process if ``FACTCHECK_CRASH_AT`` names this point (and occurrence).

    ``partial``: a file to cut to half its length first (a write interrupted half-way).
    """
    global _seen
    if _TARGET is None or name != _TARGET[0]:
        return
    _seen += 1
    if _seen != _TARGET[1]:
        return
    if partial is not None:
        size = os.path.getsize(partial)
        os.truncate(partial, size // 2)
    os.kill(os.getpid(), signal.SIGKILL)
