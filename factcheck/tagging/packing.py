"""Strings as (UTF-8 buffer, offsets) numpy pairs.

Shards hold ids and texts this way rather than as pickled lists: the bytes on disk are
then a pure function of the strings (pickle's memo depends on object identity), loading
is a memory copy or an mmap instead of a million object allocations, and a 1.2M-passage
corpus costs its UTF-8 size, not ~60 bytes of object header per string.
"""

from __future__ import annotations

import numpy as np


def pack_strings(strings: list[str]) -> tuple[np.ndarray, np.ndarray]:
    encoded = [s.encode("utf-8") for s in strings]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    if encoded:
        np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)), out=offsets[1:])
    buf = np.frombuffer(b"".join(encoded), dtype=np.uint8).copy()
    return buf, offsets


def unpack_strings(buf: np.ndarray, offsets: np.ndarray, start: int = 0, stop: int | None = None) -> list[str]:
    stop = len(offsets) - 1 if stop is None else stop
    raw = bytes(buf[offsets[start]:offsets[stop]])
    base = int(offsets[start])
    offs = (np.asarray(offsets[start:stop + 1]) - base).tolist()
    return [raw[a:b].decode("utf-8") for a, b in zip(offs[:-1], offs[1:])]


def unpack_one(buf: np.ndarray, offsets: np.ndarray, i: int) -> str:
    return bytes(buf[offsets[i]:offsets[i + 1]]).decode("utf-8")
