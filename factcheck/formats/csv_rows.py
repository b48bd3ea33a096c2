"""CSV rows, the one primitive the CSV readers (passages and claims) build on.

A plain or gzipped file (``.tsv``: tab-separated), decoded in chunks, parsed strictly (a
stray or unclosed quote is an error, not rows merged into one), the header first, then
every non-empty row with its place (``line 7 (row 6)``; a quoted field may span lines) and
exactly the header's width; any CSV error is a one-line :class:`~factcheck.errors.InputError`.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path
from typing import Iterator

from factcheck.errors import InputError
from factcheck.formats.utf8_stream import Utf8Stream

__all__ = ["iter_csv"]


def iter_csv(path: Path) -> Iterator[tuple[str, list[str]]]:
    """``(place, fields)``: the header (``"line 1 (header)"``) first, then each row."""
    path = Path(path)
    stream = Utf8Stream(path)
    delimiter = "\t" if path.name.lower().removesuffix(".gz").endswith(".tsv") else ","
    # No field-size limit below what JSON allows (csv's default refuses 128 KiB).
    csv.field_size_limit(sys.maxsize)
    reader = csv.reader(stream.lines(), delimiter=delimiter, strict=True)
    try:
        try:
            header = next(reader)
        except StopIteration:
            raise InputError(path, None, "empty file (expected a CSV header)") from None
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
        raise InputError(path, f"line {reader.line_num}", f"invalid CSV: {exc}") from None
    finally:
        stream.close()
