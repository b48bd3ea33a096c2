"""Decode an input file (plain or gzipped) to text chunk by chunk, for the streaming readers.

A decoding or decompression failure becomes a one-line :class:`~factcheck.errors.InputError`
naming the byte offset, so a bad byte deep inside a 1.2M-passage dump is found, not guessed.
"""

from __future__ import annotations

import codecs
import gzip
import zlib
from pathlib import Path
from typing import Iterator

from factcheck.errors import InputError
from factcheck.formats.files import open_binary

CHUNK_BYTES = 1 << 22

#: The longest passage text (and id) a knowledge source may hold, in characters, unless
#: the caller says otherwise (``max_passage_chars``; ``--max-passage-chars``). Generous:
#: the course's longest passage has ~3,000 characters, a whole Wikipedia article ~100K,
#: and tagging a 1 MB passage is tested. Why a cap at all: one 256 MB string took 71 s
#: and 1.9 GB, and a 14 MB .json.gz that inflated to one 3 GB string ran past 300 s (and,
#: under a memory limit, died).
MAX_PASSAGE_CHARS = 1 << 22


def raw_limit(max_chars: int) -> int:
    """How many characters one line (a JSONL or CSV record) may have while it is read:
    JSON spends at most 6 characters on one character of text (``\\uXXXX``), for the id
    and the text, plus room for other fields. Past this, no record within the cap can
    still be unfinished, so the reader stops before holding more."""
    return 12 * max_chars + (1 << 16)


def over_limit(path, max_chars: int, what: str) -> InputError:
    """The one-line error for a passage over the length cap (naming the parameter)."""
    return InputError(path, f"{max_chars}", what, param="max_passage_chars")


class Utf8Stream:
    """Decode a byte stream to text chunk by chunk, naming the byte offset of bad UTF-8.

    A leading byte-order mark is dropped; ``eof`` turns true with the last chunk.
    """

    def __init__(self, path: Path):
        self.path = path
        self._fh = open_binary(path)
        self._decoder = codecs.getincrementaldecoder("utf-8")("strict")
        self._bytes_read = 0
        self._first = True
        self.eof = False

    def read(self) -> str:
        try:
            block = self._fh.read(CHUNK_BYTES)
        except (EOFError, gzip.BadGzipFile, zlib.error, OSError) as exc:
            self._fh.close()
            raise InputError(self.path, f"byte {self._bytes_read}",
                             f"cannot read compressed stream ({exc})") from None
        final = not block
        try:
            text = self._decoder.decode(block, final=final)
        except UnicodeDecodeError as exc:
            self._fh.close()
            offset = self._bytes_read - len(self._decoder.getstate()[0]) + exc.start
            raise InputError(self.path, f"byte {max(offset, 0)}", "invalid UTF-8") from None
        self._bytes_read += len(block)
        if self._first and text:
            self._first = False
            if text.startswith("\ufeff"):
                text = text[1:]
        if final:
            self.eof = True
            self._fh.close()
        return text

    def lines(self, max_passage_chars: int | None = None) -> Iterator[str]:
        """Lines with their newline kept, as csv.reader wants them.

        Split on ``\\n`` only (``\\r\\n`` stays whole): ``str.splitlines`` also breaks at
        U+2028, U+0085, form feed and more, which ``json.dumps(..., ensure_ascii=False)``
        and ``csv.writer`` leave unescaped inside valid records.

        ``max_passage_chars``: the passage cap; a line longer than :func:`raw_limit` of it
        is an InputError as soon as that many characters of it are read, not once it is whole.
        A line longer than a chunk is kept in pieces and joined once (re-splitting the
        growing line at every chunk made one long line quadratic).
        """
        pieces: list[str] = []  # the unfinished line
        held = 0
        lineno = 1
        max_chars = None if max_passage_chars is None else raw_limit(max_passage_chars)
        while not self.eof:
            chunk = self.read()
            if "\n" not in chunk:
                pieces.append(chunk)
                held += len(chunk)
                if max_chars is not None and held > max_chars:
                    self.close()
                    raise self._too_long(lineno, max_passage_chars)
                continue
            parts = ("".join(pieces) + chunk).split("\n")
            last = parts.pop()
            pieces, held = [last], len(last)
            for part in parts:
                if max_chars is not None and len(part) > max_chars:
                    self.close()
                    raise self._too_long(lineno, max_passage_chars)
                lineno += 1
                yield part + "\n"
            if max_chars is not None and held > max_chars:
                self.close()
                raise self._too_long(lineno, max_passage_chars)
        rest = "".join(pieces)
        if rest:
            yield rest

    def _too_long(self, lineno: int, max_passage_chars: int) -> InputError:
        return over_limit(self.path, max_passage_chars, f"line {lineno} is longer than "
                          f"{raw_limit(max_passage_chars):,} characters, more than a record whose passage "
                          "is within this limit can be")

    def close(self):
        self._fh.close()
