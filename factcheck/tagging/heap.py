"""glibc heap settings for our own processes (a no-op elsewhere than glibc): why, in
docs/decisions.md, "Workers keep their freed heap"."""

from __future__ import annotations

import gc

__all__ = ["keep_freed_memory", "return_freed_memory"]

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h


def _libc():
    try:
        import ctypes  # here: a Python built without _ctypes can still tag
        libc = ctypes.CDLL(None)
        return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None
    except (ImportError, OSError, TypeError):  # Windows: CDLL(None) is a TypeError
        return None


def keep_freed_memory() -> None:
    """Serve blocks of up to 32 MB from the heap and keep what is freed for the next task."""
    libc = _libc()
    if libc is not None:
        libc.mallopt(_M_MMAP_THRESHOLD, 32 << 20)
        libc.mallopt(_M_TRIM_THRESHOLD, 1 << 30)


def return_freed_memory() -> None:
    """Give the heap's free pages back to the system now (docs/decisions.md, "One worker pool per job")."""
    gc.collect()
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)
