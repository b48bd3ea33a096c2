"""glibc heap settings for our own processes (elsewhere than glibc these do nothing).

Why this matters here: on this project's machines (virtual machines) a first touch of a
page costs microseconds, and glibc hands large blocks back to the system as soon as
they are freed, so a worker that allocates and frees the same ~10 MB arrays shard after
shard faults them in again every time (at 1.2M passages: ~0.7 s of each tagging
worker's time in the kernel, 40% of the tag step's; docs/decisions.md).
"""

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
    """For a short-lived worker process whose tasks allocate alike (the tagging job's; a
    :class:`~factcheck.tagging.backends.WorkerPool` with ``keep_heap=True``): serve blocks
    of up to 32 MB from the heap and keep what is freed for the next shard instead of
    returning it (this removes most of the tag step's page faults: docs/decisions.md)."""
    libc = _libc()
    if libc is not None:
        libc.mallopt(_M_MMAP_THRESHOLD, 32 << 20)
        libc.mallopt(_M_TRIM_THRESHOLD, 1 << 30)


def return_freed_memory() -> None:
    """Give the heap's free pages back to the system now (``factcheck run`` calls it after
    retriever training, before the classifier's worker processes start: on the 1.2M bench
    corpus the driver went from 2.40 to 2.15 GiB during cross-validation, which kept the
    whole process tree under 3 GB)."""
    gc.collect()
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)
