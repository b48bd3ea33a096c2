"""Knowledge sources: how one is read (:func:`source_spec`), which format module reads it,
and the stream of passages (an id, a text and, for some formats, a title) every consumer
reads: ids non-empty and distinct, each id, text and title within ``max_passage_chars``.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from factcheck.errors import InputError, ref
from factcheck.formats import beir, climate_fever, course, csvfile, fever, jsonl
from factcheck.formats.common import check_id, check_text
from factcheck.formats.files import check_regular_file, check_unicode, read_error, sha256_input
from factcheck.formats.records import MAX_PASSAGE_CHARS, first_record, kind_of, length_cap, over_limit

__all__ = ["FORMATS", "SOURCE_OPTIONS", "SourceSpec", "detect_format", "source_spec", "as_source",
           "iter_passage_records", "iter_passage_batches", "read_passages", "is_collection", "read_collection"]

UNITS = {unit.NAME: unit for unit in (course, jsonl, csvfile, fever, climate_fever, beir)}
FORMATS = tuple(UNITS)
# The reader options of a knowledge source: source_spec's parameters, every command's flags.
SOURCE_OPTIONS = ("format", "id_column", "text_column", "title_column", "index_titles", "max_passage_chars")
COLUMN_FORMATS = ("jsonl", "csv")                    # id/text/title columns are options
TITLED_FORMATS = ("fever", "climate-fever", "beir")  # every passage has a title
DIRECTORY_FORMATS = ("jsonl", "fever", "beir")       # a directory of JSON-lines files reads as one
SUFFIXES = {".json": "course", ".csv": "csv", ".tsv": "csv"}
JSONL_SUFFIXES = (".jsonl", ".ndjson")


@dataclass(frozen=True)
class SourceSpec:
    """Where a knowledge source lives and how to read it (make one with :func:`source_spec`)."""

    path: Path
    format: str
    id_column: str = "id"
    text_column: str = "text"
    title_column: str | None = None
    index_titles: bool = False
    # Refuses input, never changes the output's bytes: not in describe() (nor the plan key).
    max_passage_chars: int = MAX_PASSAGE_CHARS

    @property
    def has_titles(self) -> bool:
        return self.format in TITLED_FORMATS or self.title_column is not None

    def files(self) -> list[Path]:
        """The file, or a directory's JSON-lines files in name order (FEVER's wiki-pages/)."""
        if not self.path.is_dir():
            return [self.path]
        found = sorted(p for p in self.path.iterdir()
                       if p.name.lower().removesuffix(".gz").endswith(JSONL_SUFFIXES) and not p.name.startswith("."))
        if not found:
            raise InputError(self.path, None, "a directory without .jsonl files (expected FEVER's wiki-pages/)")
        return found

    def sha256(self) -> str:
        """The input's checksum (a directory's: of its files' names and checksums)."""
        if not self.path.is_dir():
            return sha256_input(self.path)
        h = hashlib.sha256()
        for f in self.files():
            h.update(f"{f.name}\t{sha256_input(f)}\n".encode())
        return h.hexdigest()

    def size(self) -> int:
        try:
            return sum(f.stat().st_size for f in self.files())
        except OSError as exc:
            raise read_error(self.path, exc) from None

    def describe(self) -> dict:
        """What the index manifest records about its input (what changes its bytes)."""
        d = {"name": self.path.name, "format": self.format}
        if self.format == "csv" or (self.format == "jsonl" and (self.id_column, self.text_column) != ("id", "text")):
            d.update(id_column=self.id_column, text_column=self.text_column)
        if self.title_column is not None:
            d["title_column"] = self.title_column
        if self.has_titles:
            d["index_titles"] = self.index_titles
        return d


def detect_format(path: Path, max_passage_chars: int | None = None) -> str:
    """The format of a knowledge source: from its name, or for JSON lines and directories
    from the first record (FEVER wiki pages, BEIR, Climate-FEVER, else generic JSONL)."""
    path = Path(path)
    if path.is_dir():
        return _detect_records(SourceSpec(path, "jsonl").files()[0], max_passage_chars)
    name = path.name.lower().removesuffix(".gz")
    for suffix, fmt in SUFFIXES.items():
        if name.endswith(suffix):
            return fmt
    if name.endswith(JSONL_SUFFIXES):
        return _detect_records(path, max_passage_chars)
    raise InputError(path, None, "cannot tell the format from the file name (.json/.json.gz course, .jsonl, "
                     f".csv/.tsv, or a wiki-pages directory); choose one of {', '.join(FORMATS)}", param="format")


def _detect_records(path: Path, max_passage_chars: int | None) -> str:
    check_regular_file(path)
    rec = first_record(path, max_passage_chars)
    return next((unit.NAME for unit in (fever, beir, climate_fever) if rec is not None and unit.is_source(rec)),
                "jsonl")


def source_spec(path, format: str | None = None, id_column: str | None = None, text_column: str | None = None,
                title_column: str | None = None, index_titles: bool | None = None,
                max_passage_chars: int | None = None) -> SourceSpec:
    """How to read a knowledge source: the one place reader options are checked.

    Parameters
    ----------
    path : str or Path
        The file (``.gz`` read transparently), or FEVER's ``wiki-pages/`` directory.
    format : {"course", "jsonl", "csv", "fever", "climate-fever", "beir"} or None
        None: detected (:func:`detect_format`); naming columns means generic JSONL/CSV.
    id_column, text_column : str or None
        JSONL/CSV fields (default ``id`` and ``text``).
    title_column : str or None
        JSONL/CSV: the field holding each passage's title (default: a CSV's ``title`` column
        if it has one, as ``id`` and ``text`` are found; otherwise none).
    index_titles : bool or None
        Index the title with the text; None: the format's convention (BEIR yes, others no).
    max_passage_chars : int or None
        Refuse a passage whose id, text or title is longer than this many characters,
        checked while the input streams; None: :data:`~factcheck.formats.records.MAX_PASSAGE_CHARS`.

    Returns
    -------
    SourceSpec

    Example
    -------
    >>> source_spec("data/demo/evidence.json").format
    'course'
    """
    path = Path(path)
    columns = {"id_column": id_column, "text_column": text_column, "title_column": title_column}
    if format is None:
        explicit = any(v is not None for v in columns.values())
        format = detect_format(path, length_cap(max_passage_chars, "max_passage_chars", MAX_PASSAGE_CHARS))
        if explicit and format in TITLED_FORMATS and not path.is_dir():
            format = "jsonl"  # named fields: the user reads it as plain JSON lines
    elif format not in FORMATS:
        raise InputError(path, None, f"unknown format {format!r}; expected one of {', '.join(FORMATS)}",
                         param="format")
    for name, value in columns.items():
        if value is not None and format not in COLUMN_FORMATS:
            raise InputError(path, None, f"applies to JSONL and CSV sources only; the {format} format's fields "
                             "are fixed", param=name)
        if value is not None and (not isinstance(value, str) or not value):
            raise InputError(None, None, f"must be a non-empty field name, got {value!r}", param=name)
    if index_titles is not None and not isinstance(index_titles, bool):
        raise InputError(None, None, f"must be True, False or None, got {index_titles!r}", param="index_titles")
    if format == "csv" and title_column is None and not path.is_dir():
        title_column = csvfile.default_title(path, id_column or "id", text_column or "text")
    if index_titles and not (format in TITLED_FORMATS or title_column is not None):
        raise InputError(path, None, f"the {format} format has no titles (name a {ref('title_column')} for JSONL/CSV)",
                         param="index_titles")
    if path.is_dir() and format not in DIRECTORY_FORMATS:
        raise InputError(path, None, "is a directory; only JSON-lines formats (fever, beir, jsonl) read one")
    max_passage_chars = length_cap(max_passage_chars, "max_passage_chars", MAX_PASSAGE_CHARS)
    return SourceSpec(path, format, id_column or "id", text_column or "text", title_column,
                      bool(index_titles if index_titles is not None else format == "beir"), max_passage_chars)


def as_source(source, param: str = "source", **options) -> SourceSpec:
    """``source`` as a :class:`SourceSpec`: a path read with the reader ``options``, or a
    spec as it is (then an option is an error)."""
    if isinstance(source, SourceSpec):
        given = [name for name, value in options.items() if value is not None]
        if given:
            raise InputError(source.path, None, "given with a SourceSpec, which already says how to read the "
                             "file; pass the path instead", param=given[0])
        return source
    if not isinstance(source, (str, os.PathLike)):
        raise InputError(None, None, f"expected a path or a SourceSpec, got {type(source).__name__}", param=param)
    return source_spec(source, **options)


def iter_passage_records(spec: SourceSpec) -> Iterator[tuple[list[str], list[str], list[str] | None]]:
    """``(ids, texts, titles)`` batches in file order (``titles`` None for a source without
    them); a duplicate id is an InputError at the end, before any consumer can finish."""
    seen = _DuplicateIds(spec)
    count = 0
    for ids, texts, titles, place in _records(spec):
        check_lengths(spec.path, spec.max_passage_chars, ids, texts, titles, place)
        seen.add(ids)
        count += len(ids)
        yield ids, texts, titles
    if count == 0:
        raise InputError(spec.path, None, "no passages (empty knowledge source)")
    seen.finish()


def iter_passage_batches(spec: SourceSpec) -> Iterator[tuple[list[str], list[str]]]:
    """:func:`iter_passage_records` without the titles: ``(ids, texts)`` batches."""
    for ids, texts, _titles in iter_passage_records(spec):
        yield ids, texts


def read_passages(source, *, titles: bool = False, format: str | None = None, id_column: str | None = None,
                  text_column: str | None = None, title_column: str | None = None,
                  max_passage_chars: int | None = None):
    """All ids and texts of a knowledge source, in memory (the tagging job streams instead).

    Parameters
    ----------
    source : str, Path or SourceSpec
        The knowledge source, read with the reader options (:func:`source_spec`); or a
        ``SourceSpec`` already made (then give no reader option).
    titles : bool, default False
        Also return the titles (None for a source without them, ``""`` for a passage without one).
    format, id_column, text_column, title_column, max_passage_chars
        How to read ``source`` (:func:`source_spec`).

    Returns
    -------
    ids, texts : list of str
        In file order.
    titles : list of str or None
        With ``titles=True`` only.

    Example
    -------
    >>> ids, texts = read_passages("data/demo/evidence.json")
    >>> len(ids), ids[0]
    (40, 'evidence-1')
    """
    spec = as_source(source, format=format, id_column=id_column, text_column=text_column, title_column=title_column,
                     max_passage_chars=max_passage_chars)
    ids, texts, all_titles = [], [], []
    for batch_ids, batch_texts, batch_titles in iter_passage_records(spec):
        ids += batch_ids
        texts += batch_texts
        if spec.has_titles:
            all_titles += batch_titles
    if titles:
        return ids, texts, (all_titles if spec.has_titles else None)
    return ids, texts


def is_collection(evidence) -> bool:
    """Whether ``evidence`` is passages in memory (a list of texts, a dict of id -> text, a
    pandas DataFrame) rather than a file to read."""
    return isinstance(evidence, (list, tuple, Mapping)) or is_data_frame(evidence)


def is_data_frame(obj) -> bool:
    """Whether ``obj`` is a pandas DataFrame."""
    # pandas is never imported here: a DataFrame can only exist if the caller imported it.
    pandas = sys.modules.get("pandas")
    return pandas is not None and isinstance(obj, pandas.DataFrame)


def read_collection(evidence, param: str = "evidence", *, format: str | None = None, id_column: str | None = None,
                    text_column: str | None = None, title_column: str | None = None,
                    index_titles: bool | None = None, max_passage_chars: int | None = None):
    """``(ids, texts, titles or None, index_titles)`` of passages in memory, checked as a file's are.

    Parameters
    ----------
    evidence : list of str, dict of str to str, or pandas.DataFrame
        Texts (ids ``"0"``, ``"1"``, ... in order), id -> text, or a frame with the columns
        ``id_column`` (default ``"id"``; without one, row numbers as ids), ``text_column``
        (default ``"text"``) and ``title_column`` (default ``"title"`` when the frame has one).
    param : str
        The parameter ``evidence`` was given as, for errors.
    format, id_column, text_column, title_column, index_titles, max_passage_chars
        As for :func:`source_spec`; the columns apply to a DataFrame only, ``format`` to files only.

    Example
    -------
    >>> read_collection(["Sea levels are rising.", "Ice melts."])
    (['0', '1'], ['Sea levels are rising.', 'Ice melts.'], None, False)
    >>> read_collection({"a": "Sea levels are rising.", "a ": "Ice"})[0]
    ['a', 'a ']
    """
    if format is not None:
        raise InputError(None, None, f"applies to a file; {param} is a {type(evidence).__name__} in memory",
                         param="format")
    cap = length_cap(max_passage_chars, "max_passage_chars", MAX_PASSAGE_CHARS)
    columns = {"id_column": id_column, "text_column": text_column, "title_column": title_column}
    for name, value in columns.items():
        if value is not None and (not isinstance(value, str) or not value):
            raise InputError(None, None, f"must be a non-empty field name, got {value!r}", param=name)
    titles = None
    if is_data_frame(evidence):
        header = [str(c) for c in evidence.columns]
        for name, value in columns.items():
            if value is not None and value not in header:
                raise InputError(None, None, f"no column {value!r} in the DataFrame (found "
                                 f"{', '.join(map(repr, header)) or 'none'})", param=name)
        text_column = text_column or "text"
        if text_column not in header:
            raise InputError(None, None, f"no column 'text' in the DataFrame (found {', '.join(map(repr, header))}): "
                             "name the text column", param="text_column")
        id_column = id_column or ("id" if "id" in header else None)
        title_column = title_column or ("title" if "title" in header else None)
        n = len(evidence)
        raw_ids = evidence[id_column].tolist() if id_column else list(range(n))
        place = (lambda i: f"row {i}")
        ids = [check_id(None, f"row {i} of {param}", v, id_column or "id") for i, v in enumerate(raw_ids)]
        texts = [check_text(None, f"row {i} of {param}", v, text_column)
                 for i, v in enumerate(evidence[text_column].tolist())]
        if title_column:
            # A missing title (None, or pandas' NaN: the one value unequal to itself) is no title.
            titles = [check_text(None, f"row {i} of {param}", "" if v is None or v != v else v, title_column,
                                 "the title") for i, v in enumerate(evidence[title_column].tolist())]
    else:
        given = [name for name, value in columns.items() if value is not None]
        if given:
            raise InputError(None, None, f"applies to a file or a DataFrame; {param} is a "
                             f"{type(evidence).__name__} of texts", param=given[0])
        if isinstance(evidence, Mapping):
            keys = list(evidence)
            place = (lambda i: f"[{keys[i]!r}]")
            ids = [check_id(None, f"{param}[{k!r}]", k, "the key") for k in keys]
            texts = [_text(v, f"{param}[{k!r}]") for k, v in evidence.items()]
        else:
            place = (lambda i: f"[{i}]")
            texts = [_text(v, f"{param}[{i}]") for i, v in enumerate(evidence)]
            ids = [str(i) for i in range(len(texts))]
    if index_titles is not None and not isinstance(index_titles, bool):
        raise InputError(None, None, f"must be True, False or None, got {index_titles!r}", param="index_titles")
    if index_titles and titles is None:
        raise InputError(None, None, f"{param} has no titles (a DataFrame's {ref('title_column')} holds them)",
                         param="index_titles")
    if not ids:
        raise InputError(None, None, "no passages (an empty collection)", param=param)
    check_lengths(None, cap, ids, texts, titles, lambda i: f"{param} {place(i)}")
    first: dict[str, int] = {}
    for i, pid in enumerate(ids):
        if first.setdefault(pid, i) != i:
            raise InputError(None, f"{param} {place(i)}", f"duplicate passage id {pid!r} (first seen at "
                             f"{place(first[pid])})", param=param)
    return ids, texts, titles, bool(index_titles)


def _text(value, place: str) -> str:
    if not isinstance(value, str):
        raise InputError(None, place, f"a passage's text must be a string, got {kind_of(value)}")
    return check_unicode(None, place, value, "the text")


def _records(spec: SourceSpec):
    unit = UNITS[spec.format]
    files = spec.files()
    if files == [spec.path]:
        yield from unit.passages(spec, spec.path)
        return
    for f in files:
        for ids, texts, titles, place in unit.passages(spec, f):
            yield ids, texts, titles, (lambda i, place=place, name=f.name: f"{name} {place(i)}")


def check_lengths(path, cap: int, ids: list[str], texts: list[str], titles, place) -> None:
    """An InputError naming ``place(i)`` of the first id, text or title longer than ``cap``."""
    for what, values in (("id", ids), ("text", texts), ("title", titles or ())):
        if values and max(map(len, values)) > cap:
            i = next(i for i, v in enumerate(values) if len(v) > cap)
            raise over_limit(path, cap, f"{place(i)} (id {ids[i][:40]!r}) has a {what} of {len(values[i]):,} "
                             "characters, more than this limit")


class _DuplicateIds:
    """Exact duplicate-id detection at 8 bytes a passage: a 64-bit hash per id, equal hashes
    re-checked against the ids in a second streaming pass."""

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
        for ids, _texts, _titles, place_of in _records(self.spec):
            for i, pid in enumerate(ids):
                if hash(pid) not in suspects:
                    continue
                place = place_of(i)
                if pid in first_place:
                    raise InputError(self.spec.path, place,
                                     f"duplicate passage id {pid!r} (first seen at {first_place[pid]})")
                first_place[pid] = place
