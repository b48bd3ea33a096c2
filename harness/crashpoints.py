"""Fault injection for crash tests: die by SIGKILL at a named point, on request.

The product announces each point as the audit event ``factcheck.crashpoint``
(:func:`sys.audit`, through :func:`factcheck.formats.files.crashpoint`); it carries no
fault-injection code itself. This module is the other half, for tests and
``scripts/crash_test.py`` only: :func:`crash_env` gives a child process the environment
variable ``FACTCHECK_CRASH_AT`` and a ``PYTHONPATH`` whose ``sitecustomize``
(``harness/site/``) calls :func:`install` at start-up, so worker processes, which inherit
the environment, get the hook too.

* ``FACTCHECK_CRASH_AT=after-split``            -- the first time ``after-split`` is reached;
* ``FACTCHECK_CRASH_AT=before-rename:tags-00003@2`` -- the 2nd time (in this process).

The process then kills itself with SIGKILL: no ``finally``, no atexit, no flushing, the
same as a power cut as far as the files on disk are concerned. A point reached in a
worker kills that worker (joblib then raises in the parent); use ``--jobs 1`` to crash
the main process at an exact point.

``FACTCHECK_ENOSPC_AT=POINT`` (same syntax; :func:`fault_env`) raises
``OSError(ENOSPC)`` there instead -- what a write on a full disk raises, with no file
name -- so a test sees what a user with a full disk sees, in any process, worker or not.
``FACTCHECK_SIGINT_AT=POINT`` (:func:`fault_env` with ``sigint=True``) sends SIGINT to
the whole process group there, as a terminal's Ctrl-C does, and carries on.

Points announced:

* ``mid-write:FILE`` -- the temporary file of FILE is complete; it is cut to half its size
  and the process dies (a kill half-way through writing FILE; for a folder of arrays, its
  last file is cut);
* ``before-rename:FILE`` -- FILE is fully written under its temporary name, not renamed;
* ``after-rename:FILE`` -- FILE is in place (its "done" record is not written yet);
* ``after-split``, ``after-count``, ``after-tag``, ``before-manifest``, ``after-manifest``
  -- stage boundaries of the tagging job;
* ``replacing-index`` -- ``--force`` over a complete index: the old index's files are
  deleted, the complete replacement (``.tmp-replacement/``) is not moved in yet.

FILE is the destination's base name (``passages-00001``, ``manifest.json``,
``passages__passages-00001.json`` for a done record, ``plan.json``, ...).
"""

from __future__ import annotations

import errno
import os
import signal
import sys
from pathlib import Path

ENV = "FACTCHECK_CRASH_AT"
ENOSPC_ENV = "FACTCHECK_ENOSPC_AT"
SIGINT_ENV = "FACTCHECK_SIGINT_AT"
EVENT = "factcheck.crashpoint"
ROOT = Path(__file__).resolve().parents[1]
SITE = Path(__file__).resolve().parent / "site"


def parse(spec: str | None) -> tuple[str, int] | None:
    """``"name@2"`` -> ``("name", 2)``; ``"name"`` -> ``("name", 1)``; empty -> ``None``."""
    if not spec:
        return None
    name, at, nth = spec.rpartition("@")
    if at and nth.isdigit() and int(nth) >= 1:
        return name, int(nth)
    return spec, 1


def install(spec: str | None = None, enospc: str | None = None, sigint: str | None = None) -> bool:
    """Kill this process at the point ``spec`` names (default: ``$FACTCHECK_CRASH_AT``), or
    raise ``OSError(ENOSPC)`` at the point ``enospc`` names (default:
    ``$FACTCHECK_ENOSPC_AT``); ``False`` (nothing installed) when there is neither. Audit
    hooks cannot be removed: call this in a process that is meant to die or fail."""
    kill = parse(spec if spec is not None else os.environ.get(ENV))
    full = parse(enospc if enospc is not None else os.environ.get(ENOSPC_ENV))
    ctrl_c = parse(sigint if sigint is not None else os.environ.get(SIGINT_ENV))
    if kill is None and full is None and ctrl_c is None:
        return False
    seen: dict[str, int] = {}

    def hook(event: str, args: tuple) -> None:
        if event != EVENT:
            return
        for what, target in (("kill", kill), ("full", full), ("ctrl-c", ctrl_c)):
            if target is None or args[0] != target[0]:
                continue
            seen[what] = seen.get(what, 0) + 1
            if seen[what] != target[1]:
                continue
            if what == "full":
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            if what == "ctrl-c":
                os.killpg(os.getpgid(0), signal.SIGINT)
                return
            partial = args[1]
            if partial is not None:
                os.truncate(partial, os.path.getsize(partial) // 2)
            os.kill(os.getpid(), signal.SIGKILL)

    sys.addaudithook(hook)
    return True


def crash_env(crash_at: str | None, base: dict | None = None) -> dict:
    """An environment for a child process that dies at ``crash_at`` (``None``: one that
    does not: the variable is removed)."""
    return _env(ENV, crash_at, base)


def fault_env(enospc_at: str | None, base: dict | None = None, sigint: bool = False) -> dict:
    """An environment for a child process whose write at ``enospc_at`` fails as on a full
    disk (``None``: one where none does); with ``sigint``, its process group gets a Ctrl-C
    there instead (start the child in a session of its own)."""
    return _env(SIGINT_ENV if sigint else ENOSPC_ENV, enospc_at, base)


def _env(var: str, point: str | None, base: dict | None) -> dict:
    env = dict(os.environ if base is None else base)
    for name in (ENV, ENOSPC_ENV, SIGINT_ENV):
        env.pop(name, None)
    if point:
        env[var] = point
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SITE), str(ROOT), env.get("PYTHONPATH")) if p)
    return env
