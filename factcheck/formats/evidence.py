"""Streaming readers of knowledge sources: course JSON, JSONL and CSV.

A knowledge source is an ordered sequence of (id, text) passages. Readers stream: the
tagging driver must stay within memory bounded by a shard, not by the corpus, so the
course format (a single JSON object, often on one line) is parsed incrementally with the
C string scanner of the standard library rather than by ``json.load``.

Every record is validated at the boundary: ids are non-empty strings (JSONL/CSV integer
ids are accepted and written as text), texts are strings (an empty text is allowed and
later gets empty tags), and an id seen twice is an error naming the second place. Errors
are :class:`~factcheck.errors.InputError` with the file and the place (line/column,
record number, byte offset for bad UTF-8).
"""

from __future__ import annotations

import codecs
import csv
import gzip
import json
import re
import sys
import zlib
from dataclasses import dataclass
from json.decoder import scanstring
from pathlib import Path
from typing import Iterator

import numpy as np

from factcheck.errors import InputError
from factcheck.formats.files import check_unicode, open_binary

FORMATS = ("course", "jsonl", "csv")
CHUNK_BYTES = 1 << 22
_WS = re.compile(r"[ \t\n\r]*")


@dataclass(frozen=True)
class SourceSpec:
    """Where a knowledge source lives and how to read it."""

    path: Path
    format: str
    id_column: str = "id"
    text_column: str = "text"

    def describe(self) -> dict:
        d = {"name": self.path.name, "format": self.format}
        if self.format == "csv":
            d.update(id_column=self.id_column, text_column=self.text_column)
        return d


def detect_format(path: Path) -> str:
    name = Path(path).name.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    if name.endswith(".json"):
        return "course"
    if name.endswith((".jsonl", ".ndjson")):
        return "jsonl"
    if name.endswith((".csv", ".tsv")):
        return "csv"
    raise InputError(path, None, "cannot tell the format from the file name; "
                     "use .json/.json.gz (course), .jsonl or .csv, or pass --format")


def source_spec(path, fmt: str | None = None, id_column: str = "id",
                text_column: str = "text") -> SourceSpec:
    path = Path(path)
    fmt = fmt or detect_format(path)
    if fmt not in FORMATS:
        raise InputError(path, None, f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    return SourceSpec(path, fmt, id_column, text_column)


def iter_passages(spec: SourceSpec) -> Iterator[tuple[str, str]]:
    """Yield (id, text) in file order; raise InputError on the first bad record.

    Duplicate ids are checked exactly, with 8 bytes of memory per passage, and reported
    when the stream ends (before any consumer can declare its output complete).
    """
    reader = {"course": _iter_course, "jsonl": _iter_jsonl, "csv": _iter_csv}[spec.format]
    seen = _DuplicateIds(spec)
    count = 0
    for pid, text, place in reader(spec):
        seen.add(pid, place)
        count += 1
        yield pid, text
    if count == 0:
        raise InputError(spec.path, None, "no passages (empty knowledge source)")
    seen.finish()


def read_passages(spec: SourceSpec) -> tuple[list[str], list[str]]:
    """All ids and texts in memory: for small sources (demo data, tests, the web app)."""
    ids, texts = [], []
    for pid, text in iter_passages(spec):
        ids.append(pid)
        texts.append(text)
    return ids, texts


class _DuplicateIds:
    """Exact duplicate-id detection in O(8 bytes) per passage.

    Keeps a 64-bit hash per id; equal hashes are re-checked against the real ids in a
    second streaming pass, so a hash collision can never produce a false error.
    """

    def __init__(self, spec: SourceSpec):
        self.spec = spec
        self._blocks: list[np.ndarray] = []
        self._pending: list[int] = []
        self._places: dict[int, str] = {}

    def add(self, pid: str, place: str) -> None:
        self._pending.append(hash(pid))
        if len(self._pending) >= 65536:
            self._flush()

    def _flush(self):
        if self._pending:
            self._blocks.append(np.array(self._pending, dtype=np.int64))
            self._pending = []

    def finish(self) -> None:
        self._flush()
        if not self._blocks:
            return
        # One array, sorted in place: the peak stays near 8 bytes per passage.
        hashes = np.empty(sum(len(b) for b in self._blocks), dtype=np.int64)
        at = 0
        while self._blocks:  # free each block as it is copied
            block = self._blocks.pop(0)
            hashes[at:at + len(block)] = block
            at += len(block)
        hashes.sort()
        dup = np.flatnonzero(hashes[1:] == hashes[:-1])
        if dup.size == 0:
            return
        suspects = set(hashes[dup].tolist())
        first_place: dict[str, str] = {}
        reader = {"course": _iter_course, "jsonl": _iter_jsonl, "csv": _iter_csv}[self.spec.format]
        for pid, _text, place in reader(self.spec):
            if hash(pid) not in suspects:
                continue
            if pid in first_place:
                raise InputError(self.spec.path, place,
                                 f"duplicate passage id {pid!r} (first seen at {first_place[pid]})")
            first_place[pid] = place


# --------------------------------------------------------------------------- decoding

class _Utf8Stream:
    """Decode a byte stream to text chunk by chunk, naming the byte offset of bad UTF-8."""

    def __init__(self, spec: SourceSpec):
        self.path = spec.path
        self._fh = open_binary(spec.path)
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


# --------------------------------------------------------------------------- course JSON

class _NeedMore(Exception):
    pass


def _iter_course(spec: SourceSpec):
    """Incremental parse of ``{"id": "text", ...}`` with the stdlib C string scanner."""
    stream = _Utf8Stream(spec)
    buf = stream.read()
    while not stream.eof and not buf.strip():
        buf += stream.read()
    lines_before = 0      # newlines in the text already dropped from buf
    col_before = 0        # characters after the last dropped newline
    record = 0            # passages yielded so far

    def where(i: int) -> str:
        i = min(i, len(buf))
        nl = buf.count("\n", 0, i)
        col = i - buf.rfind("\n", 0, i) if nl else col_before + i + 1
        return f"line {lines_before + nl + 1}, column {col}"

    def fail(i: int, message: str):
        stream.close()
        raise InputError(spec.path, where(i), message)

    pos = _WS.match(buf, 0).end()
    if pos >= len(buf):
        fail(pos, "empty file (expected a JSON object of passages)")
    if buf[pos] != "{":
        fail(pos, 'expected a JSON object {"id": "text", ...} at the top level')
    pos += 1
    after_comma = False
    while True:
        start = pos
        try:
            pid, text, pos, closed = _course_record(buf, pos, stream.eof, record + 1, fail)
        except _NeedMore:
            if stream.eof:
                fail(len(buf), "truncated JSON (the file ends inside the object)")
            dropped_nl = buf.count("\n", 0, start)
            if dropped_nl:
                lines_before += dropped_nl
                col_before = start - buf.rfind("\n", 0, start) - 1
            else:
                col_before += start
            buf = buf[start:] + stream.read()
            pos = 0
            continue
        if pid is None:  # closing brace
            if after_comma:
                fail(pos - 1, "trailing comma before '}'")
            break
        record += 1
        place = f"passage {record}"
        check_unicode(spec.path, place, pid, "the id")
        check_unicode(spec.path, place, text, "the text")
        yield pid, text, place
        after_comma = not closed
        if closed:
            break
    # Only whitespace may follow the object.
    while True:
        rest = _WS.match(buf, pos).end()
        if rest < len(buf):
            fail(rest, "unexpected data after the JSON object")
        if stream.eof:
            break
        lines_before += buf.count("\n")
        buf, pos = stream.read(), 0
    if record == 0:
        raise InputError(spec.path, None, "no passages (empty JSON object)")


def _course_record(buf: str, pos: int, eof: bool, number: int, fail):
    """Parse one ``"id": "text"`` member at ``pos``.

    Returns (id, text, next position, closed) where ``closed`` says the object ended
    after this member; (None, None, next, True) for the closing brace. Raises _NeedMore
    when the member runs past the end of the buffer.
    """
    i = _WS.match(buf, pos).end()
    if i >= len(buf):
        raise _NeedMore
    if buf[i] == "}":
        return None, None, i + 1, True
    if buf[i] != '"':
        fail(i, "expected a passage id (a JSON string)")
    pid_at = i
    pid, i = _scan(buf, i, eof, fail)
    i = _WS.match(buf, i).end()
    if i >= len(buf):
        raise _NeedMore
    if not pid:
        fail(pid_at, f"passage {number}: the passage id is empty")
    if buf[i] != ":":
        fail(i, "expected ':' after the passage id")
    i = _WS.match(buf, i + 1).end()
    if i >= len(buf):
        raise _NeedMore
    if buf[i] != '"':
        kind = _json_kind(buf, i)
        if kind is None and not eof:
            raise _NeedMore
        fail(i, f"passage {number} (id {pid!r}): text must be a string, got {kind or 'invalid JSON'}")
    text, i = _scan(buf, i, eof, fail)
    i = _WS.match(buf, i).end()
    if i >= len(buf):
        raise _NeedMore
    if buf[i] == ",":
        return pid, text, i + 1, False
    if buf[i] == "}":
        return pid, text, i + 1, True
    fail(i, "expected ',' or '}' after a passage")


def _scan(buf: str, quote_at: int, eof: bool, fail):
    try:
        return scanstring(buf, quote_at + 1, True)
    except json.JSONDecodeError as exc:
        # A string cut by the buffer end shows up as unterminated or as a cut escape.
        if not eof and (exc.msg.startswith("Unterminated string") or exc.pos >= len(buf) - 6):
            raise _NeedMore from None
        fail(exc.pos, exc.msg)


def _json_kind(buf: str, i: int) -> str | None:
    """Name the JSON value at ``buf[i]`` for an error message, or None if incomplete."""
    if buf[i] in "[{" and len(buf) - i > 1 and buf[i + 1] in "[{":
        return "a nested value"  # never parse it: 100,000 levels would overflow the stack
    try:
        value, _ = json.JSONDecoder().raw_decode(buf, i)
    except json.JSONDecodeError:
        return None
    except RecursionError:
        return "a nested value"
    return _kind(value)


# --------------------------------------------------------------------------- JSONL

def _iter_jsonl(spec: SourceSpec):
    stream = _Utf8Stream(spec)
    for lineno, line in enumerate(stream.lines(), start=1):
        if not line.strip():
            continue
        place = f"line {lineno}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            stream.close()
            raise InputError(spec.path, f"{place}, column {exc.colno}", f"invalid JSON: {exc.msg}") from None
        except RecursionError:
            stream.close()
            raise InputError(spec.path, place, "JSON nested too deeply") from None
        if not isinstance(obj, dict):
            stream.close()
            raise InputError(spec.path, place, "expected a JSON object with \"id\" and \"text\"")
        pid = _check_id(spec, place, obj.get(spec.id_column, _MISSING), spec.id_column)
        text = _check_text(spec, place, obj.get(spec.text_column, _MISSING), spec.text_column)
        check_unicode(spec.path, place, pid, "the id")
        check_unicode(spec.path, place, text, "the text")
        yield pid, text, place


# --------------------------------------------------------------------------- CSV

def _iter_csv(spec: SourceSpec):
    stream = _Utf8Stream(spec)
    delimiter = "\t" if spec.path.name.lower().removesuffix(".gz").endswith(".tsv") else ","
    # strict: a stray or unclosed quote is an error, not rows merged into one passage.
    # No field-size limit below what JSON allows (csv's default refuses 128 KiB).
    csv.field_size_limit(sys.maxsize)
    reader = csv.reader(stream.lines(), delimiter=delimiter, strict=True)
    try:
        header = next(reader)
    except StopIteration:
        raise InputError(spec.path, None, "empty file (expected a CSV header)") from None
    try:
        id_at = header.index(spec.id_column)
        text_at = header.index(spec.text_column)
    except ValueError:
        stream.close()
        raise InputError(spec.path, "line 1 (header)",
                         f"needs columns {spec.id_column!r} and {spec.text_column!r}; found "
                         f"{', '.join(repr(h) for h in header) or 'none'} "
                         "(set --id-column/--text-column)") from None
    width = len(header)
    row_no = 0
    try:
        for row in reader:
            if not row:
                continue
            row_no += 1
            place = f"line {reader.line_num} (row {row_no})"
            if len(row) != width:
                stream.close()
                raise InputError(spec.path, place, f"expected {width} fields, found {len(row)}")
            pid = _check_id(spec, place, row[id_at], spec.id_column)
            yield pid, row[text_at], place
    except csv.Error as exc:
        stream.close()
        raise InputError(spec.path, f"line {reader.line_num}", f"invalid CSV: {exc}") from None


# --------------------------------------------------------------------------- validation

_MISSING = object()


def _check_id(spec, place, value, column):
    if value is _MISSING:
        raise InputError(spec.path, place, f"missing {column!r}")
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InputError(spec.path, place, f"{column!r} must be a string, got {_kind(value)}")
    value = str(value)
    if not value:
        raise InputError(spec.path, place, f"{column!r} is empty")
    return value


def _check_text(spec, place, value, column):
    if value is _MISSING:
        raise InputError(spec.path, place, f"missing {column!r}")
    if not isinstance(value, str):
        raise InputError(spec.path, place, f"{column!r} must be a string, got {_kind(value)}")
    return value


def _kind(value) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", list: "a list",
            dict: "an object"}.get(type(value), type(value).__name__)
