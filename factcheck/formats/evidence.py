"""Streaming readers of knowledge sources: course JSON, JSONL and CSV.

A knowledge source is an ordered sequence of (id, text) passages. Readers stream: the
tagging driver must stay within memory bounded by a shard, not by the corpus, so the
course format (a single JSON object, often on one line) is parsed incrementally
(:mod:`factcheck.formats.course_json`) rather than by ``json.load``.

Every record is validated at the boundary: ids are non-empty strings (JSONL/CSV integer
ids are accepted and written as text), texts are strings (an empty text is allowed and
later gets empty tags), and an id seen twice is an error naming the second place. Errors
are :class:`~factcheck.errors.InputError` with the file and the place (line/column,
record number, byte offset for bad UTF-8).
"""

from __future__ import annotations

import csv
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from factcheck.errors import InputError
from factcheck.formats.course_json import TOO_LONG_NUMBER, Batch, iter_course, kind_of
from factcheck.formats.files import check_unicode
from factcheck.formats.utf8_stream import Utf8Stream

FORMATS = ("course", "jsonl", "csv")
BATCH = 4096  # JSONL/CSV records per batch (the course reader batches by buffer)


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
    """Where a knowledge source is and how to read it (what the readers and the tagging job take).

    Parameters
    ----------
    path : str or Path
        The knowledge source.
    fmt : {"course", "jsonl", "csv"} or None
        None: from the name (``.json[.gz]`` course, ``.jsonl``/``.ndjson`` JSONL, ``.csv``/``.tsv`` CSV).
    id_column, text_column : str
        The id and text fields (JSONL) or columns (CSV).

    Returns
    -------
    SourceSpec

    Example
    -------
    >>> source_spec("data/demo/evidence.json").format
    'course'
    """
    path = Path(path)
    fmt = fmt or detect_format(path)
    if fmt not in FORMATS:
        raise InputError(path, None, f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    return SourceSpec(path, fmt, id_column, text_column)


def iter_passage_batches(spec: SourceSpec) -> Iterator[tuple[list[str], list[str]]]:
    """Yield ``(ids, texts)`` lists in file order (batches of any size); raise InputError
    on the first bad record. What the tagging driver reads: no per-passage Python work
    beyond the parse itself.

    Duplicate ids are checked exactly, with 8 bytes of memory per passage, and reported
    when the stream ends (before any consumer can declare its output complete).
    """
    seen = _DuplicateIds(spec)
    count = 0
    for ids, texts, _place in _records(spec):
        seen.add(ids)
        count += len(ids)
        yield ids, texts
    if count == 0:
        raise InputError(spec.path, None, "no passages (empty knowledge source)")
    seen.finish()


def iter_passages(spec: SourceSpec) -> Iterator[tuple[str, str]]:
    """Yield (id, text) in file order; raise InputError on the first bad record (see
    :func:`iter_passage_batches`)."""
    for ids, texts in iter_passage_batches(spec):
        yield from zip(ids, texts)


def read_passages(spec: SourceSpec) -> tuple[list[str], list[str]]:
    """All ids and texts of a knowledge source, in memory: for small sources (demo data,
    tests, the web app); the tagging job streams instead.

    Parameters
    ----------
    spec : SourceSpec
        From :func:`source_spec`.

    Returns
    -------
    ids, texts : list of str
        In file order.

    Example
    -------
    >>> ids, texts = read_passages(source_spec("data/demo/evidence.json"))
    >>> len(ids), ids[0]
    (40, 'evidence-1')
    """
    ids, texts = [], []
    for batch_ids, batch_texts in iter_passage_batches(spec):
        ids += batch_ids
        texts += batch_texts
    return ids, texts


def _records(spec: SourceSpec) -> Iterator[Batch]:
    """The format's reader: batches ``(ids, texts, place)``, ``place(i)`` naming record i."""
    if spec.format == "course":
        return iter_course(spec.path)
    return _batched({"jsonl": _iter_jsonl, "csv": _iter_csv}[spec.format](spec))


def _batched(records) -> Iterator[Batch]:
    ids, texts, places = [], [], []
    for pid, text, place in records:
        ids.append(pid)
        texts.append(text)
        places.append(place)
        if len(ids) == BATCH:
            yield ids, texts, places.__getitem__
            ids, texts, places = [], [], []
    if ids:
        yield ids, texts, places.__getitem__


class _DuplicateIds:
    """Exact duplicate-id detection in O(8 bytes) per passage.

    Keeps a 64-bit hash per id; equal hashes are re-checked against the real ids in a
    second streaming pass, so a hash collision can never produce a false error.
    """

    def __init__(self, spec: SourceSpec):
        self.spec = spec
        self._blocks: list[np.ndarray] = []
        self._pending: list[int] = []

    def add(self, ids: list[str]) -> None:
        self._pending.extend(map(hash, ids))
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
        for ids, _texts, place_of in _records(self.spec):
            for i, pid in enumerate(ids):
                if hash(pid) not in suspects:
                    continue
                place = place_of(i)
                if pid in first_place:
                    raise InputError(self.spec.path, place,
                                     f"duplicate passage id {pid!r} (first seen at {first_place[pid]})")
                first_place[pid] = place


# --------------------------------------------------------------------------- JSONL

def _iter_jsonl(spec: SourceSpec):
    stream = Utf8Stream(spec.path)
    for lineno, line in enumerate(stream.lines(), start=1):
        if not line.strip():
            continue
        place = f"line {lineno}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            stream.close()
            raise InputError(spec.path, f"{place}, column {exc.colno}", f"invalid JSON: {exc.msg}") from None
        except ValueError:  # an integer of over 4,300 digits
            stream.close()
            raise InputError(spec.path, place, f"invalid JSON: {TOO_LONG_NUMBER}") from None
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
    stream = Utf8Stream(spec.path)
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
        raise InputError(spec.path, place, f"{column!r} must be a string, got {kind_of(value)}")
    value = str(value)
    if not value:
        raise InputError(spec.path, place, f"{column!r} is empty")
    return value


def _check_text(spec, place, value, column):
    if value is _MISSING:
        raise InputError(spec.path, place, f"missing {column!r}")
    if not isinstance(value, str):
        raise InputError(spec.path, place, f"{column!r} must be a string, got {kind_of(value)}")
    return value
