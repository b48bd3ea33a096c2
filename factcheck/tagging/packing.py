"""Strings as (UTF-8 buffer, offsets) numpy pairs.

Shards hold ids and texts this way rather than as pickled lists: the bytes on disk are
then a pure function of the strings (pickle's memo depends on object identity), loading
is a memory copy or an mmap instead of a million object allocations, and a 1.2M-passage
corpus costs its UTF-8 size, not ~60 bytes of object header per string.
"""

from __future__ import annotations

import numpy as np


def pack_strings(strings: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(UTF-8 of all strings, offsets). Encoded ``_BLOCK`` strings at a time, each block
    joined and encoded at once; a block's lengths are fixed string by string only when
    its UTF-8 is longer than its characters (some string is not ASCII).

    Why blocks: encoding 100K passages one by one cost ~40 ms a shard on the tagging
    driver; joining a whole shard at once was faster on ASCII text, but one wide
    character widens the joined string (2-4 bytes a character for the whole shard), which
    made the real corpus's shards slower and a shard with one emoji ~4x its size in
    memory."""
    lengths = np.fromiter(map(len, strings), dtype=np.int64, count=len(strings))
    parts = []
    for at in range(0, len(strings), _BLOCK):
        block = strings[at:at + _BLOCK]
        data = "".join(block).encode("utf-8")
        if len(data) != int(lengths[at:at + len(block)].sum()):
            wide = np.flatnonzero(~np.fromiter(map(str.isascii, block), dtype=bool, count=len(block)))
            lengths[at + wide] = [len(block[i].encode("utf-8")) for i in wide.tolist()]
        parts.append(data)
    offsets = np.zeros(len(strings) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return np.frombuffer(b"".join(parts), dtype=np.uint8).copy(), offsets


_BLOCK = 4096


def unpack_strings(buf: np.ndarray, offsets: np.ndarray, start: int = 0, stop: int | None = None) -> list[str]:
    stop = len(offsets) - 1 if stop is None else stop
    raw = bytes(buf[offsets[start]:offsets[stop]])
    base = int(offsets[start])
    offs = (np.asarray(offsets[start:stop + 1]) - base).tolist()
    return [raw[a:b].decode("utf-8") for a, b in zip(offs[:-1], offs[1:])]


def unpack_one(buf: np.ndarray, offsets: np.ndarray, i: int) -> str:
    return bytes(buf[offsets[i]:offsets[i + 1]]).decode("utf-8")
