"""The streaming primitives every reader builds on: the lines of a plain or gzipped UTF-8
file, JSON lines and CSV rows, each with its place (``line 7``, ``line 7 (row 6)``, ``byte
1234``) and each problem as one :class:`~factcheck.errors.InputError`.
"""

from __future__ import annotations

import csv
import gzip
import json
import math
import re
import zlib
from pathlib import Path
from typing import Iterator

from factcheck.errors import InputError, check_number
from factcheck.formats.files import open_binary

__all__ = ["MAX_PASSAGE_CHARS", "MAX_QUERY_CHARS", "raw_limit", "over_limit", "length_cap", "check_length",
           "kind_of", "shown", "parse_int", "parse_float", "iter_lines", "decode_object", "iter_records",
           "first_record", "iter_csv"]

#: The default cap on a passage's id, text or title, in characters (``max_passage_chars``).
MAX_PASSAGE_CHARS = 1 << 22
#: The default cap on a claim or query (``max_claim_chars``, ``max_query_chars``): far beyond
#: a real one (a 100 MB claim took 4.5-7 GB to check).
MAX_QUERY_CHARS = 1 << 16
TOO_LONG_NUMBER = "a number with more than 4,300 digits (more than Python converts)"
# An escape that may decode to a lone surrogate (only lines holding one are checked).
SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def raw_limit(max_chars: int) -> int:
    """The most characters a record within the passage cap can have (JSON spends at most 6 a
    character, on the id and the text, plus room for other fields)."""
    return 12 * max_chars + (1 << 16)


def over_limit(path, max_chars: int, what: str, param: str = "max_passage_chars") -> InputError:
    return InputError(path, f"{max_chars}", what, param=param)


def length_cap(value, param: str, default: int) -> int:
    """A length cap option: ``default`` for None, else a positive integer (or the error naming ``param``)."""
    return default if value is None else check_number(value, param, integer=True, low=1)


def check_length(path, what: str, text: str, max_chars: int, param: str) -> str:
    """``text`` when at most ``max_chars`` characters long, else the error naming ``param``."""
    if len(text) > max_chars:
        raise over_limit(path, max_chars, f"{what} is {len(text):,} characters long, more than this limit", param)
    return text


def kind_of(value) -> str:
    """How an error message names a JSON value's type."""
    if value is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", list: "a list",
            dict: "an object", str: "a string"}.get(type(value), type(value).__name__)


def shown(text: str, width: int = 40) -> str:
    """``text`` quoted for a one-line message, cut to ``width`` characters and its length."""
    return repr(text) if len(text) <= width else f"{text[:width]!r}... ({len(text):,} characters)"


INT64 = (-(1 << 63), (1 << 63) - 1)
_INTEGER = re.compile(r"[+-]?[0-9]+")


def parse_int(path, place, text: str, what: str, low: int = INT64[0], high: int = INT64[1]) -> int:
    """``text`` (ASCII digits, a sign allowed) as an integer in ``[low, high]``, or the error
    naming ``what`` (never an overflow further on)."""
    digits = text.strip()
    if not _INTEGER.fullmatch(digits):
        raise InputError(path, place, f"{what} must be an integer, got {shown(text)}")
    if len(digits.lstrip("+-").lstrip("0")) <= 19 and low <= int(digits) <= high:
        return int(digits)
    raise InputError(path, place, f"{what} must be an integer from {low:,} to {high:,}, got {shown(text)}")


def parse_float(path, place, text: str, what: str) -> float:
    """``text`` as a finite float (what ``float`` reads), or the one-line error naming ``what``."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise InputError(path, place, f"{what} must be a finite number, got {shown(text)}")
    return value


def read_failure(path, offset: int, exc: Exception) -> InputError:
    """A read or decompression error at ``offset`` (bytes of the uncompressed stream)."""
    return InputError(path, f"byte {offset}", f"cannot read compressed stream ({exc})")


READ_ERRORS = (EOFError, gzip.BadGzipFile, zlib.error, OSError)


def iter_lines(path: Path, max_passage_chars: int | None = None) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` of a plain or gzipped UTF-8 file, each line with its ``\\n``
    (split on ``\\n`` only: U+2028 may stand inside a record; a byte-order mark dropped). A
    line longer than :func:`raw_limit` of ``max_passage_chars`` (None: the default) is refused
    before it is read whole."""
    path = Path(path)
    limit = raw_limit(MAX_PASSAGE_CHARS if max_passage_chars is None else max_passage_chars)
    size = 4 * limit + 1
    offset = 0
    with open_binary(path) as fh:
        lineno = 0
        while True:
            lineno += 1
            try:
                raw = fh.readline(size)
            except READ_ERRORS as exc:
                raise read_failure(path, offset, exc) from None
            if not raw:
                return
            cut = len(raw) == size and not raw.endswith(b"\n")
            if not cut:
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise InputError(path, f"byte {offset + exc.start}", "invalid UTF-8") from None
                if offset == 0 and line.startswith("\ufeff"):
                    line = line[1:]
            if cut or len(line) - line.endswith("\n") > limit:
                if max_passage_chars is None:
                    raise InputError(path, f"line {lineno}", f"longer than {limit:,} characters, more than any "
                                     "record read here can be")
                raise over_limit(path, max_passage_chars, f"line {lineno} is longer than {limit:,} characters, "
                                 "more than a record whose passage is within this limit can be")
            offset += len(raw)
            yield lineno, line


class _DuplicateKey(ValueError):
    pass


def _no_duplicates(pairs):
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen = set()
        for k, _ in pairs:
            if k in seen:
                raise _DuplicateKey(k)
            seen.add(k)
    return obj


def decode_object(path, place: str | None, line: str, *, what: str = "a JSON object") -> dict:
    """One line (``place`` None: a whole file) as a JSON object, a key twice refused."""
    try:
        obj = json.loads(line, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as exc:
        hint = ""
        if place is None and exc.msg == "Extra data" and exc.lineno > 1:  # a second value on a later line
            hint = (" (one JSON value a line is JSON lines: name the file .jsonl or choose "
                    "format jsonl, fever or climate-fever)")
        where = f"line {exc.lineno}" if place is None else place
        raise InputError(path, f"{where}, column {exc.colno}", f"invalid JSON: {exc.msg}{hint}") from None
    except _DuplicateKey as dup:
        raise InputError(path, place, f"duplicate key {dup.args[0]!r} in one JSON object") from None
    except RecursionError:
        raise InputError(path, place, "JSON nested too deeply") from None
    except ValueError:  # an integer of over 4,300 digits
        raise InputError(path, place, f"invalid JSON: {TOO_LONG_NUMBER}") from None
    if not isinstance(obj, dict):
        raise InputError(path, place or "top level", f"expected {what}, got {kind_of(obj)}")
    return obj


def iter_records(path: Path, *, what: str = "a JSON object",
                 max_passage_chars: int | None = None) -> Iterator[tuple[str, dict]]:
    """``(place, object)`` for every non-blank line of a JSON-lines file; ``what`` names the
    expected record in errors."""
    for lineno, line in iter_lines(path, max_passage_chars):
        if line and not line.isspace():
            yield f"line {lineno}", decode_object(path, f"line {lineno}", line, what=what)


def first_record(path: Path, max_passage_chars: int | None = None) -> dict | None:
    """The first record of a JSON-lines file, or None when the first non-blank line is not a
    JSON object on its own (a pretty-printed JSON file)."""
    for _, line in iter_lines(path, max_passage_chars):
        if line.strip():
            try:
                return decode_object(path, "line 1", line)
            except InputError:
                return None
    return None


def iter_csv(path: Path, max_field_chars: int | None = None) -> Iterator[tuple[str, list[str]]]:
    """``(place, fields)`` of a CSV file (``.tsv``: tab-separated), parsed strictly: the
    header first, then each non-empty row with exactly its width; ``max_field_chars`` is
    checked by the parser as a field grows."""
    path = Path(path)
    delimiter = "\t" if path.name.lower().removesuffix(".gz").endswith(".tsv") else ","
    csv.field_size_limit(raw_limit(MAX_PASSAGE_CHARS) if max_field_chars is None else max_field_chars)
    reader = csv.reader((line for _, line in iter_lines(path, max_field_chars)), delimiter=delimiter, strict=True)
    start = 1  # the line the record being read starts on (a quoted field may span lines)
    try:
        header = next(reader, None)
        if header is None:
            raise InputError(path, None, "empty file (expected a CSV header)")
        twice = sorted({h for h in header if header.count(h) > 1})
        if twice:
            raise InputError(path, "line 1 (header)", f"names the column {twice[0]!r} twice "
                             f"({', '.join(repr(h) for h in header)})")
        yield "line 1 (header)", header
        width, row_no = len(header), 0
        start = reader.line_num + 1
        for row in reader:
            start = reader.line_num + 1
            if not row:
                continue
            row_no += 1
            place = f"line {reader.line_num} (row {row_no})"
            if len(row) != width:
                raise InputError(path, place, f"expected {width} fields, found {len(row)}")
            yield place, row
    except csv.Error as exc:
        if max_field_chars is not None and "field larger than field limit" in str(exc):
            raise over_limit(path, max_field_chars, f"line {start}: a field of the record starting here is "
                             "longer than this limit (or a quote opened in it is never closed)") from None
        if str(exc) == "unexpected end of data":  # the file ended inside a quoted field
            raise InputError(path, f"line {start}", "invalid CSV: a quoted field opened on this line is never "
                             "closed (an unbalanced \")") from None
        raise InputError(path, f"line {reader.line_num}", f"invalid CSV: {exc}") from None
