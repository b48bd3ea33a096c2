"""CSV rows, the one primitive the CSV readers (passages and claims) build on.

A plain or gzipped file (``.tsv``: tab-separated), decoded in chunks, parsed strictly (a
stray or unclosed quote is an error, not rows merged into one), the header first, then
every non-empty row with its place (``line 7 (row 6)``; a quoted field may span lines) and
exactly the header's width; any CSV error is a one-line :class:`~factcheck.errors.InputError`.
A header naming a column twice is refused: which of the two would be the text?
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path
from typing import Iterator

from factcheck.errors import InputError
from factcheck.formats.utf8_stream import Utf8Stream, over_limit

__all__ = ["iter_csv"]


def iter_csv(path: Path, max_field_chars: int | None = None) -> Iterator[tuple[str, list[str]]]:
    """``(place, fields)``: the header (``"line 1 (header)"``) first, then each row.

    ``max_field_chars``: a knowledge source's passage cap (``max_passage_chars``), checked
    by the parser as a field grows (also across the lines of a quoted field); None: no
    limit below what JSON allows (csv's default refuses 128 KiB)."""
    path = Path(path)
    stream = Utf8Stream(path)
    delimiter = "\t" if path.name.lower().removesuffix(".gz").endswith(".tsv") else ","
    csv.field_size_limit(sys.maxsize if max_field_chars is None else max_field_chars)
    reader = csv.reader(stream.lines(max_field_chars), delimiter=delimiter, strict=True)
    try:
        try:
            header = next(reader)
        except StopIteration:
            raise InputError(path, None, "empty file (expected a CSV header)") from None
        twice = sorted({h for h in header if header.count(h) > 1})
        if twice:  # csv.DictReader would keep the last, index() the first: refuse to guess
            raise InputError(path, "line 1 (header)", f"names the column {twice[0]!r} twice "
                             f"({', '.join(repr(h) for h in header)})")
        yield "line 1 (header)", header
        width, row_no = len(header), 0
        for row in reader:
            if not row:
                continue
            row_no += 1
            place = f"line {reader.line_num} (row {row_no})"
            if len(row) != width:
                raise InputError(path, place, f"expected {width} fields, found {len(row)}")
            yield place, row
    except csv.Error as exc:
        if max_field_chars is not None and "field larger than field limit" in str(exc):
            raise over_limit(path, max_field_chars, f"line {reader.line_num}: a field longer than "
                             "this limit") from None
        raise InputError(path, f"line {reader.line_num}", f"invalid CSV: {exc}") from None
    finally:
        stream.close()
