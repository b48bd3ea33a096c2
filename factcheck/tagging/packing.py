"""Strings as (UTF-8 buffer, offsets) numpy pairs: bytes that are a pure function of the
strings, memory-mapped when read, at their UTF-8 size."""

from __future__ import annotations

import numpy as np


def pack_strings(strings: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(UTF-8 of all strings, offsets), encoded ``_BLOCK`` strings at a time; a block's
    lengths are fixed string by string only when it is not ASCII (docs/decisions.md,
    "Strings packed in blocks")."""
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
    """The strings ``start:stop`` of a packed pair."""
    stop = len(offsets) - 1 if stop is None else stop
    raw = bytes(buf[offsets[start]:offsets[stop]])
    base = int(offsets[start])
    offs = (np.asarray(offsets[start:stop + 1]) - base).tolist()
    return [raw[a:b].decode("utf-8") for a, b in zip(offs[:-1], offs[1:])]


def offsets_fault(offsets: np.ndarray, end: int) -> str | None:
    """What is wrong with CSR ``indptr`` or string offsets over ``end`` entries, or None: they
    must start at 0, never decrease and end at ``end``."""
    if len(offsets) == 0 or offsets[0] != 0 or offsets[-1] != end:
        return f"must start at 0 and end at {end}"
    if np.any(offsets[1:] < offsets[:-1]):
        return "decreases"
    return None


def strings_of(buf, offsets) -> list[str]:
    """Every string of a packed pair read from a file someone else may have written: a
    ValueError unless ``buf`` is 1-D uint8 and ``offsets`` 1-D int64 from 0, never
    decreasing, ending at its length, and each string decodes."""
    if not (isinstance(buf, np.ndarray) and isinstance(offsets, np.ndarray) and buf.dtype == np.uint8
            and offsets.dtype == np.int64 and buf.ndim == 1 and offsets.ndim == 1 and len(offsets)):
        raise ValueError("not a packed string table")
    if offsets_fault(offsets, len(buf)):
        raise ValueError("a packed string table's offsets do not cut its buffer")
    return unpack_strings(buf, offsets)


# 64-bit polynomial hash of UTF-8 bytes (wrapping uint64 arithmetic), then mixed by
# splitmix64's finaliser; a lookup compares the strings, so a collision is never a wrong row.
_BASE = np.uint64(0x100000001B3)
_POWERS = np.ones(1, dtype=np.uint64)


def hash_packed(buf: np.ndarray, off: np.ndarray) -> np.ndarray:
    """One uint64 per string of a packed (buffer, offsets) pair."""
    global _POWERS
    off = np.asarray(off, dtype=np.int64)
    n = len(off) - 1
    lengths = np.diff(off)
    longest = int(lengths.max(initial=0))
    if len(_POWERS) < longest + 1:
        grow = max(longest + 1, 64, 2 * len(_POWERS))
        _POWERS = np.concatenate([[np.uint64(1)], np.cumprod(np.full(grow - 1, _BASE, dtype=np.uint64))])
    data = np.asarray(buf[off[0]:off[-1]], dtype=np.uint64)
    out = np.zeros(n, dtype=np.uint64)
    if len(data):
        pos = np.arange(len(data), dtype=np.int64) - np.repeat(off[:-1] - off[0], lengths)
        with np.errstate(over="ignore"):
            terms = (data + np.uint64(1)) * _POWERS[pos]
            present = lengths > 0  # reduceat of an empty segment would read the next one
            out[present] = np.add.reduceat(terms, (off[:-1] - off[0])[present])
    with np.errstate(over="ignore"):
        h = out ^ (lengths.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15))
        h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return h ^ (h >> np.uint64(31))
