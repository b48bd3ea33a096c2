"""Streaming readers of knowledge sources, in every format a user may hold.

A knowledge source is an ordered sequence of (id, text) passages, optionally with a title
each. Formats (:data:`FORMATS`), chosen by ``format`` or detected (:func:`detect_format`):

``course``
    The course's one JSON object ``{"id": "text", ...}`` (often one 160 MB line), parsed
    incrementally (:mod:`factcheck.formats.course_json`) rather than by ``json.load``.
``jsonl``, ``csv``
    One passage a record: ``id_column`` and ``text_column`` (``id``, ``text`` by default),
    and a ``title_column`` when one is named.
``fever``
    FEVER's ``wiki-pages/*.jsonl`` (a file or the directory): one passage per non-empty
    line, id ``page:line``, title the page's (:mod:`factcheck.formats.fever`).
``climate-fever``
    The evidence sentences of Climate-FEVER's release file, each once, titled by article
    (:mod:`factcheck.formats.climate_fever`).
``beir``
    A BEIR ``corpus.jsonl``: ``_id``, ``title``, ``text``.

Titles are stored in the index and shown; whether they are also *indexed* (tagged, and read
by the retrievers and the classifier in front of the text) is ``index_titles``: by default
yes for BEIR (its convention: title and text are one document), no for FEVER and the others
(FEVER's sentences are retrieved and scored as sentences).

Readers stream: the tagging driver must stay within memory bounded by a shard, not by the
corpus. Every record is validated at the boundary: ids are non-empty strings (JSONL/CSV
integer ids are accepted and written as text), texts are strings (an empty text is allowed
and later gets empty tags), and an id seen twice is an error naming the second place.
Errors are :class:`~factcheck.errors.InputError` with the file and the place (line/column,
record number, byte offset for bad UTF-8); an error about an option names its parameter.

No passage id, text or title may be longer than ``max_passage_chars`` characters (default
:data:`~factcheck.formats.utf8_stream.MAX_PASSAGE_CHARS`), and the readers stop before
holding a record that could not fit (one line of JSON lines or CSV, one member of the
course object): a huge string, or a small ``.gz`` inflating to one, is refused while it
streams. A CSV header naming a column twice is refused (which of the two is the text?).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from factcheck.errors import InputError
from factcheck.formats import climate_fever, fever
from factcheck.formats.course_json import iter_course, kind_of
from factcheck.formats.csv_rows import iter_csv
from factcheck.formats.files import check_regular_file, check_unicode, read_error, sha256_input
from factcheck.formats.jsonlines import first_record, iter_records
from factcheck.formats.utf8_stream import MAX_PASSAGE_CHARS, over_limit

__all__ = ["FORMATS", "SOURCE_OPTIONS", "SourceSpec", "detect_format", "source_spec", "iter_passage_records",
           "iter_passage_batches", "iter_passages", "read_passages"]

FORMATS = ("course", "jsonl", "csv", "fever", "climate-fever", "beir")
# The reader options of a knowledge source: source_spec's parameters, every command's flags.
SOURCE_OPTIONS = ("format", "id_column", "text_column", "title_column", "index_titles", "max_passage_chars")
TITLED_FORMATS = ("fever", "climate-fever", "beir")
BATCH = 4096  # JSONL/CSV records per batch (the course reader batches by buffer)
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


def detect_format(path: Path) -> str:
    """The format of a knowledge source: from its name (``.json``/``.json.gz`` course,
    ``.csv``/``.tsv`` CSV) or, for JSON lines and directories, from the first record:
    FEVER wiki pages (``id`` + ``lines``), a BEIR corpus (``_id`` + ``text``), Climate-FEVER
    (``claim_id`` + ``evidences``), else generic JSONL."""
    path = Path(path)
    if path.is_dir():
        first = SourceSpec(path, "jsonl").files()[0]
        return _detect_records(first, default="jsonl")
    name = path.name.lower().removesuffix(".gz")
    if name.endswith(".json"):
        return "course"
    if name.endswith((".csv", ".tsv")):
        return "csv"
    if name.endswith(JSONL_SUFFIXES):
        return _detect_records(path, default="jsonl")
    raise InputError(path, None, "cannot tell the format from the file name (.json/.json.gz course, .jsonl, "
                     f".csv/.tsv, or a wiki-pages directory); choose one of {', '.join(FORMATS)}", param="format")


def _detect_records(path: Path, default: str) -> str:
    check_regular_file(path)
    rec = first_record(path)
    if rec is None:
        return default
    if fever.is_wiki_record(rec):
        return "fever"
    if "_id" in rec and "text" in rec:
        return "beir"
    if climate_fever.is_claim_record(rec) and "evidences" in rec:
        return "climate-fever"
    return default


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
        JSONL/CSV: the field holding each passage's title (default: none).
    index_titles : bool or None
        Index the title with the text; None: the format's convention (BEIR yes, others no).
    max_passage_chars : int or None
        Refuse a passage whose id, text or title is longer than this many characters,
        checked while the input streams; None: :data:`~factcheck.formats.utf8_stream.MAX_PASSAGE_CHARS`.

    Returns
    -------
    SourceSpec

    Example
    -------
    >>> source_spec("data/demo/evidence.json").format
    'course'
    >>> from pathlib import Path
    >>> _ = Path("wiki-001.jsonl").write_text('{"id": "Ice", "text": "", "lines": "0\\\\tIce is cold."}\\n')
    >>> spec = source_spec("wiki-001.jsonl")
    >>> spec.format, spec.has_titles, spec.index_titles
    ('fever', True, False)
    """
    path = Path(path)
    columns = {"id_column": id_column, "text_column": text_column, "title_column": title_column}
    if format is None:
        explicit = any(v is not None for v in columns.values())
        format = detect_format(path)
        if explicit and format in ("beir", "fever", "climate-fever") and not path.is_dir():
            format = "jsonl"  # named fields: the user reads it as plain JSON lines
    elif format not in FORMATS:
        raise InputError(path, None, f"unknown format {format!r}; expected one of {', '.join(FORMATS)}",
                         param="format")
    for name, value in columns.items():
        if value is not None and format not in ("jsonl", "csv"):
            raise InputError(path, None, f"applies to JSONL and CSV sources only; the {format} format's fields "
                             "are fixed", param=name)
        if value is not None and (not isinstance(value, str) or not value):
            raise InputError(None, None, f"must be a non-empty field name, got {value!r}", param=name)
    if index_titles is not None and not isinstance(index_titles, bool):
        raise InputError(None, None, f"must be True, False or None, got {index_titles!r}", param="index_titles")
    titled = format in TITLED_FORMATS or title_column is not None
    if index_titles and not titled:
        raise InputError(path, None, f"the {format} format has no titles (name a title_column for JSONL/CSV)",
                         param="index_titles")
    if path.is_dir() and format != "fever" and format != "jsonl" and format != "beir":
        raise InputError(path, None, "is a directory; only JSON-lines formats (fever, beir, jsonl) read one")
    if max_passage_chars is None:
        max_passage_chars = MAX_PASSAGE_CHARS
    elif isinstance(max_passage_chars, bool) or not isinstance(max_passage_chars, int) or max_passage_chars < 1:
        raise InputError(None, None, f"must be a positive integer, got {max_passage_chars!r}",
                         param="max_passage_chars")
    return SourceSpec(path, format, id_column or "id", text_column or "text", title_column,
                      bool(index_titles if index_titles is not None else format == "beir"), max_passage_chars)


def iter_passage_records(spec: SourceSpec) -> Iterator[tuple[list[str], list[str], list[str] | None]]:
    """Yield ``(ids, texts, titles)`` lists in file order (batches of any size; ``titles``
    None for a source without them, ``""`` for a passage without one); raise InputError on
    the first bad record. What the tagging driver reads: no per-passage Python work beyond
    the parse itself.

    Duplicate ids are checked exactly, with 8 bytes of memory per passage, and reported
    when the stream ends (before any consumer can declare its output complete).
    """
    seen = _DuplicateIds(spec)
    count = 0
    for ids, texts, titles, place in _records(spec):
        _check_lengths(spec, ids, texts, titles, place)
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


def iter_passages(spec: SourceSpec) -> Iterator[tuple[str, str]]:
    """Yield (id, text) in file order; raise InputError on the first bad record (see
    :func:`iter_passage_records`)."""
    for ids, texts in iter_passage_batches(spec):
        yield from zip(ids, texts)


def read_passages(spec: SourceSpec, *, titles: bool = False):
    """All ids and texts of a knowledge source, in memory: for small sources (demo data,
    tests, the web app); the tagging job streams instead.

    Parameters
    ----------
    spec : SourceSpec
        From :func:`source_spec`.
    titles : bool, default False
        Also return the titles (None for a source without them, ``""`` for a passage
        without one).

    Returns
    -------
    ids, texts : list of str
        In file order.
    titles : list of str or None
        With ``titles=True`` only.

    Example
    -------
    >>> ids, texts = read_passages(source_spec("data/demo/evidence.json"))
    >>> len(ids), ids[0]
    (40, 'evidence-1')
    """
    ids, texts, all_titles = [], [], []
    has = spec.has_titles
    for batch_ids, batch_texts, batch_titles in iter_passage_records(spec):
        ids += batch_ids
        texts += batch_texts
        if has:
            all_titles += batch_titles
    if titles:
        return ids, texts, (all_titles if has else None)
    return ids, texts


def _records(spec: SourceSpec):
    """The format's reader: batches ``(ids, texts, titles, place)``, ``place(i)`` naming record i."""
    cap = spec.max_passage_chars  # each reader also stops before holding a record that could not fit
    if spec.format == "course":
        return ((ids, texts, None, place) for ids, texts, place in iter_course(spec.path, cap))
    if spec.format == "fever":
        return _each_file(spec, lambda path: fever.iter_wiki_batches(path, max_passage_chars=cap))
    if spec.format == "climate-fever":
        return climate_fever.iter_evidence_batches(spec.path, max_passage_chars=cap)
    if spec.format == "beir":
        return _each_file(spec, lambda path: _batched(_iter_beir(path, cap), titled=True))
    if spec.format == "jsonl":
        return _each_file(spec, lambda path: _batched(_iter_jsonl(spec, path), spec.title_column is not None))
    return _batched(_iter_csv(spec), spec.title_column is not None)


def _each_file(spec: SourceSpec, reader):
    files = spec.files()
    if len(files) == 1 and files[0] == spec.path:
        yield from reader(spec.path)
        return
    for f in files:
        for ids, texts, titles, place in reader(f):
            yield ids, texts, titles, (lambda i, place=place, name=f.name: f"{name} {place(i)}")


def _batched(records, titled: bool):
    ids, texts, titles, places = [], [], [], []
    for pid, text, title, place in records:
        ids.append(pid)
        texts.append(text)
        titles.append(title)
        places.append(place)
        if len(ids) == BATCH:
            yield ids, texts, titles if titled else None, places.__getitem__
            ids, texts, titles, places = [], [], [], []
    if ids:
        yield ids, texts, titles if titled else None, places.__getitem__


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
        for ids, _texts, _titles, place_of in _records(self.spec):
            for i, pid in enumerate(ids):
                if hash(pid) not in suspects:
                    continue
                place = place_of(i)
                if pid in first_place:
                    raise InputError(self.spec.path, place,
                                     f"duplicate passage id {pid!r} (first seen at {first_place[pid]})")
                first_place[pid] = place


# --------------------------------------------------------------------------- JSONL, BEIR

def _iter_jsonl(spec: SourceSpec, path: Path):
    id_col, text_col, title_col = spec.id_column, spec.text_column, spec.title_column
    what = f"a JSON object with {id_col!r} and {text_col!r}"
    for place, obj in iter_records(path, what=what, max_passage_chars=spec.max_passage_chars):
        pid = check_id(path, place, obj.get(id_col, MISSING), id_col)
        text = _check_text(path, place, obj.get(text_col, MISSING), text_col)
        title = None if title_col is None else _check_text(path, place, obj.get(title_col, MISSING), title_col)
        check_unicode(path, place, pid, "the id")
        check_unicode(path, place, text, "the text")
        if title:
            check_unicode(path, place, title, "the title")
        yield pid, text, title, place


def _iter_beir(path: Path, max_passage_chars: int | None = None):
    """BEIR's ``corpus.jsonl``: ``_id``, ``text`` and ``title`` (absent or empty: no title)."""
    for place, obj in iter_records(path, what='a BEIR corpus object {"_id", "title", "text"}',
                                   max_passage_chars=max_passage_chars):
        pid = check_id(path, place, obj.get("_id", MISSING), "_id")
        text = _check_text(path, place, obj.get("text", MISSING), "text")
        title = obj.get("title")
        title = "" if title is None else _check_text(path, place, title, "title")
        check_unicode(path, place, pid, "the id")
        check_unicode(path, place, text, "the text")
        check_unicode(path, place, title, "the title")
        yield pid, text, title, place


# --------------------------------------------------------------------------- CSV

def _iter_csv(spec: SourceSpec):
    path = spec.path
    rows = iter_csv(path, max_field_chars=spec.max_passage_chars)  # no field over the cap: the parser's limit
    _, header = next(rows)
    at = {}
    for param in ("id_column", "text_column", "title_column"):
        column = getattr(spec, param)
        if column is None:
            continue
        if column not in header:
            found = ", ".join(repr(h) for h in header) or "none"
            raise InputError(path, None, f"no column {column!r} in the header (line 1; found {found})", param=param)
        at[param] = header.index(column)
    id_at, text_at, title_at = at["id_column"], at["text_column"], at.get("title_column")
    for place, row in rows:
        pid = check_id(path, place, row[id_at], spec.id_column)
        yield pid, row[text_at], None if title_at is None else row[title_at], place


# --------------------------------------------------------------------------- validation

def _check_lengths(spec: SourceSpec, ids: list[str], texts: list[str], titles, place) -> None:
    """Every format's batches against the passage cap (``len`` of each string: cheap)."""
    cap = spec.max_passage_chars
    for what, values in (("id", ids), ("text", texts), ("title", titles or ())):
        if values and max(map(len, values)) > cap:
            i = next(i for i, v in enumerate(values) if len(v) > cap)
            raise over_limit(spec.path, cap, f"{place(i)} (id {ids[i][:40]!r}) has a {what} of {len(values[i]):,} "
                             "characters, more than this limit")

MISSING = object()  # a field absent from a record


def check_id(path, place, value, column):
    """A record's id: a non-empty string, or an integer written as text (JSONL, CSV)."""
    if value is MISSING:
        raise InputError(path, place, f"missing {column!r}")
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InputError(path, place, f"{column!r} must be a string, got {kind_of(value)}")
    value = str(value)
    if not value:
        raise InputError(path, place, f"{column!r} is empty")
    return value


def _check_text(path, place, value, column):
    if value is MISSING:
        raise InputError(path, place, f"missing {column!r}")
    if not isinstance(value, str):
        raise InputError(path, place, f"{column!r} must be a string, got {kind_of(value)}")
    return value
