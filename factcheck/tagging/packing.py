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
