"""Progress bars, one policy for every long loop. ``enabled``: ``False`` shows nothing;
``None`` (the default) a bar only where it can redraw (a terminal or a notebook), unless an
enclosing :func:`progress_setting` says otherwise; ``True`` the same bar, and elsewhere one
log record per bar when it completes (logger ``factcheck.progress``; never a carriage return).
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import sys
import time

log = logging.getLogger(__name__)

__all__ = ["progress", "progress_setting"]

_SETTING: contextvars.ContextVar[bool | None] = contextvars.ContextVar("factcheck_progress", default=None)


@contextlib.contextmanager
def progress_setting(enabled: bool | None):
    """Within the block, bars asked for with ``enabled=None`` follow ``enabled``."""
    token = _SETTING.set(enabled if enabled is not None else _SETTING.get())
    try:
        yield
    finally:
        _SETTING.reset(token)


def progress(iterable=None, *, desc: str, total: int | None = None, unit: str = "items",
             enabled: bool | None = None, leave: bool = True):
    """A progress bar over ``iterable``, or one advanced with ``update(n)`` (then use it as
    a context manager: it completes when the block ends without an error)."""
    enabled = _SETTING.get() if enabled is None else enabled
    if enabled is not False and _redraws():
        from tqdm.auto import tqdm
        return tqdm(iterable, desc=desc, total=total, unit=f" {unit.strip()}", leave=leave, file=sys.stderr)
    return _Summary(iterable, desc, unit, quiet=enabled is not True)


def _redraws() -> bool:
    """A terminal on stderr, or a notebook (where tqdm.auto draws a widget)."""
    from tqdm import auto, autonotebook, std  # noqa: F401 (auto first: it imports autonotebook quietly)
    if autonotebook.tqdm is not std.tqdm:
        return True
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # no stderr, or a closed one
        return False


class _Summary:
    """A bar that cannot redraw: it counts, and logs one line when it completes (unless quiet)."""

    def __init__(self, iterable, desc: str, unit: str, quiet: bool):
        self.iterable, self.desc, self.unit, self.quiet = iterable, desc, unit.strip(), quiet
        self.n, self.ended, self.start = 0, False, time.perf_counter()

    def __iter__(self):
        for item in self.iterable:
            yield item
            self.n += 1
        self.close()

    def update(self, n: int = 1) -> None:
        self.n += n

    def close(self) -> None:
        if not (self.ended or self.quiet):
            log.info("%s: %d %s in %.1f s", self.desc, self.n, self.unit, time.perf_counter() - self.start)
        self.ended = True

    def __enter__(self):
        return self

    def __exit__(self, kind, *exc) -> None:
        if kind is None:
            self.close()
        self.ended = True
