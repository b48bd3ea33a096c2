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

    def lines(self) -> Iterator[str]:
        """Lines with their newline kept, as csv.reader wants them.

        Split on ``\\n`` only (``\\r\\n`` stays whole): ``str.splitlines`` also breaks at
        U+2028, U+0085, form feed and more, which ``json.dumps(..., ensure_ascii=False)``
        and ``csv.writer`` leave unescaped inside valid records.
        """
        pending = ""
        while not self.eof:
            pending += self.read()
            parts = pending.split("\n")
            pending = parts.pop()
            for part in parts:
                yield part + "\n"
        if pending:
            yield pending

    def close(self):
        self._fh.close()
