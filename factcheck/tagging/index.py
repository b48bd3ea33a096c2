"""Load a verified tag index: arrays stay memory-mapped, ids and texts are decoded when
asked for (docs/decisions.md, "Processes and memory")."""

from __future__ import annotations

import bisect
import json
from collections.abc import Mapping, Sequence
from functools import cached_property
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from factcheck.errors import InputError, as_path
from factcheck.formats.files import atomic_path
from factcheck.formats.npy import check_mapped, release
from factcheck.tagging import store
from factcheck.scoring.tfidf import tfidf_rows
from factcheck.tagging.packing import hash_packed, pack_strings, unpack_strings

__all__ = ["IdRows", "PackedStrings", "TagIndex", "TitledTexts", "export_tags", "multi_arange"]


class PackedStrings(Sequence):
    """Strings kept as per-shard (UTF-8 buffer, offsets) pairs, decoded when read."""

    MEMO = 1 << 20  # strings remembered at most (cleared when full)

    def __init__(self, parts: list[tuple[np.ndarray, np.ndarray]]):
        self._parts = parts
        counts = [len(off) - 1 for _, off in parts]
        self._starts = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)]).astype(np.int64)
        self._first = self._starts.tolist()  # for one row at a time: bisect on a list is cheaper
        self._memo: dict[int, str] = {}

    def __len__(self) -> int:
        return self._first[-1]

    def __getitem__(self, row):
        if isinstance(row, slice):
            return self.take(np.arange(*row.indices(len(self))))
        return self._one(row)

    def _one(self, row) -> str:
        row, n = int(row), len(self)
        if not -n <= row < n:
            raise IndexError(f"row {row} out of range for {n} strings")
        row %= n
        s = self._memo.get(row)
        if s is None:
            part = bisect.bisect_right(self._first, row) - 1
            buf, off = self._parts[part]
            local = row - self._first[part]
            s = bytes(buf[off[local]:off[local + 1]]).decode("utf-8")
            if len(self._memo) >= self.MEMO:
                self._memo.clear()
            self._memo[row] = s
        return s

    def take(self, rows) -> list[str]:
        """The strings of ``rows`` (negative counting from the end), in order."""
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        n = len(self)
        if len(rows) and (rows.min() < -n or rows.max() >= n):
            raise IndexError(f"row out of range for {n} strings")
        rows = np.where(rows < 0, rows + n, rows)
        part_of = np.searchsorted(self._starts, rows, side="right") - 1
        out = np.empty(len(rows), dtype=object)
        for part in np.unique(part_of).tolist():
            at = np.flatnonzero(part_of == part)
            buf, off = self._parts[part]
            local = rows[at] - self._starts[part]
            begin, end = off[local], off[local + 1]
            positions, _ = multi_arange(begin, end)
            raw = buf[positions].tobytes()
            bounds = np.zeros(len(at) + 1, dtype=np.int64)
            np.cumsum(end - begin, out=bounds[1:])
            cuts = bounds.tolist()
            if raw.isascii():  # one decode; byte offsets are character offsets
                text = raw.decode("ascii")
                strings = [text[a:b] for a, b in zip(cuts[:-1], cuts[1:])]
            else:
                strings = [raw[a:b].decode("utf-8") for a, b in zip(cuts[:-1], cuts[1:])]
            out[at] = strings
        return out.tolist()

    def batches(self):
        """``(first row, strings of one shard)`` for every shard, in order; a mapped shard's
        pages are released once decoded (a pass over every text leaves none resident)."""
        for start, (buf, off) in zip(self._first, self._parts):
            strings = unpack_strings(buf, off)
            release(buf, off)
            yield start, strings

    def __iter__(self):
        for _, strings in self.batches():
            yield from strings

    def __eq__(self, other):
        if isinstance(other, (Sequence, PackedStrings)) and not isinstance(other, (str, bytes)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self)} strings)"


class TitledTexts(PackedStrings):
    """Passage texts with their titles indexed (:func:`~factcheck.tagging.store.indexed_text`)."""

    def __init__(self, titles: PackedStrings, bodies: PackedStrings):
        self._titles, self._bodies = titles, bodies

    def __len__(self) -> int:
        return len(self._bodies)

    def _one(self, row) -> str:
        return store.indexed_text(self._titles[row], self._bodies[row])

    def take(self, rows) -> list[str]:
        return [store.indexed_text(t, b) for t, b in zip(self._titles.take(rows), self._bodies.take(rows))]

    def batches(self):
        for (start, titles), (_, bodies) in zip(self._titles.batches(), self._bodies.batches()):
            yield start, [store.indexed_text(t, b) for t, b in zip(titles, bodies)]


class IdRows(Mapping):
    """Passage id -> row, a read-only mapping: the sorted hashes of every id and their rows
    (12 bytes a passage), candidates compared with the stored id."""

    def __init__(self, ids: PackedStrings, hashes: np.ndarray | None = None, rows: np.ndarray | None = None):
        """``hashes`` (sorted) and ``rows``: as :func:`~factcheck.tagging.store.open_index` found them."""
        self._ids = ids
        if hashes is None:
            hashes, rows = store.sorted_id_hashes([{"ids": buf, "id_offsets": off} for buf, off in ids._parts])
        self._hashes, self._rows = hashes, rows

    def rows(self, ids) -> np.ndarray:
        """Row of each id (-1 where the index has no such id), vectorised."""
        ids = list(ids)
        if not ids:
            return np.zeros(0, dtype=np.int64)
        h = hash_packed(*pack_strings(ids))
        lo = np.searchsorted(self._hashes, h, side="left")
        hi = np.searchsorted(self._hashes, h, side="right")
        at, owner = multi_arange(lo, hi)  # every candidate (more than one: a hash collision)
        rows = self._rows[at].astype(np.int64)
        same = np.fromiter(map(str.__eq__, self._ids.take(rows), (ids[i] for i in owner.tolist())),
                           dtype=bool, count=len(at))
        out = np.full(len(ids), -1, dtype=np.int64)
        out[owner[same]] = rows[same]
        return out

    def __getitem__(self, pid):
        if not isinstance(pid, str):
            raise KeyError(pid)
        row = int(self.rows([pid])[0])
        if row < 0:
            raise KeyError(pid)
        return row

    def __contains__(self, pid) -> bool:
        return isinstance(pid, str) and int(self.rows([pid])[0]) >= 0

    def __iter__(self):
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)


def multi_arange(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Concatenated ``arange(s, e)`` for each pair, and which pair each element came from."""
    lens = (np.asarray(ends) - np.asarray(starts)).astype(np.int64)
    owner = np.repeat(np.arange(len(lens)), lens)
    if not len(owner):
        return owner, owner
    offsets = np.cumsum(lens) - lens
    return np.asarray(starts)[owner] + (np.arange(len(owner)) - offsets[owner]), owner


def _concat(arrays: list[np.ndarray], dtype) -> np.ndarray:
    return np.concatenate([np.asarray(a, dtype=dtype) for a in arrays]) if arrays else np.zeros(0, dtype)


class TagIndex:
    """All passages of an index with their tags, in input order: what retrievers ``fit`` to.

    Open one with :meth:`load` (or :func:`factcheck.build_index`); every array stays
    memory-mapped where the index keeps it. :func:`factcheck.build_index` without a
    directory builds one in memory (``root`` None), which :meth:`save` writes.

    Parameters
    ----------
    root : Path or None
        The index directory; None for an index held in memory.
    manifest : Manifest
        Its verified manifest.
    arrays : IndexArrays
        Its arrays, opened and checked (:func:`~factcheck.tagging.store.open_index`).
    stem_counts : list of ShardCounts or None, default None
        An index built in memory: the stem counts its build made of each shard's
        :meth:`text_batches` texts, kept for :meth:`take_stem_counts`.

    Example
    -------
    >>> import factcheck
    >>> _ = factcheck.build_index("data/demo/evidence.json", "out/demo-index", progress=False)
    >>> index = TagIndex.load("out/demo-index")
    >>> row = index.row_of["evidence-8"]
    >>> len(index), row, index.ids[row]
    (40, 7, 'evidence-8')
    >>> index.tags(row)[:3], index.text(row)[:30]
    (['acceler', 'altimetri', 'rate'], 'The rate of sea level rise has')
    >>> page = '{"id": "Savages_-LRB-2012_film-RRB-", "text": "", "lines": "0\\\\tSavages is a film.\\\\n1\\\\tIt is long."}'
    >>> from pathlib import Path
    >>> _ = Path("wiki-001.jsonl").write_text(page + "\\n")
    >>> fever = factcheck.build_index("wiki-001.jsonl", "out/fever-index", progress=False)
    >>> list(fever.ids), fever.title(0), fever.body(1), index.title(row)
    (['Savages_-LRB-2012_film-RRB-:0', 'Savages_-LRB-2012_film-RRB-:1'], 'Savages (2012 film)', 'It is long.', None)
    """

    def __init__(self, root: Path, manifest: store.Manifest, arrays: store.IndexArrays, stem_counts=None):
        self.root = None if root is None else Path(root)
        self._stem_counts = stem_counts
        self.manifest = manifest
        p = arrays.passages
        #: Every passage id, in row order (``ids.take(rows)`` decodes many at once).
        self.ids = PackedStrings([(s["ids"], s["id_offsets"]) for s in p])
        self._bodies = PackedStrings([(s["texts"], s["text_offsets"]) for s in p])
        titled = manifest.data["titles"]
        self._titles = PackedStrings([(s["titles"], s["title_offsets"]) for s in p]) if titled else None
        self.index_titles = bool(manifest.data["index_titles"] and titled)
        #: Every passage's :meth:`text`, in row order.
        self.texts = TitledTexts(self._titles, self._bodies) if self.index_titles else self._bodies
        # Each shard's tag arrays stay mapped where they are; a row is found by its shard's
        # start (nothing is joined at load: a join costs 12 bytes a passage and a copy).
        self._starts = np.array([s["start"] for s in manifest.shards] + [manifest.n_passages], dtype=np.int64)
        self._arrays = arrays

    @classmethod
    def load(cls, root, verify: bool = False) -> "TagIndex":
        """Open the index in ``root`` (an :class:`~factcheck.IntegrityError` if it does not match).

        Every open checks the structure of every file, cheaply (docs/trust-model.md): no
        symbolic link, sizes and headers as the manifest says, offsets, term ids, UTF-8 and
        ids unique across shards; what was checked is what stays mapped.

        Parameters
        ----------
        root : str or Path
            The index directory (``factcheck tag ... --out DIR``, or ``OUT/index`` of a run).
        verify : bool, default False
            Also check every file's sha256 against the manifest, as ``factcheck verify`` does
            (reads the whole index).

        Returns
        -------
        TagIndex
        """
        root = as_path(root, "root")
        manifest = store.read_manifest(root)
        store.check_layout(root, manifest)
        return cls(root, manifest, store.open_index(root, manifest, verify=verify))

    def check_unchanged(self) -> None:
        """An :class:`~factcheck.IntegrityError` if a file of this index's directory mapped by
        this process (its arrays, its caches) was cut short or edited in place since it was
        checked (docs/trust-model.md)."""
        check_mapped(self.root)

    def __len__(self) -> int:
        return len(self.ids)

    def __repr__(self) -> str:
        where = "in memory" if self.root is None else str(self.root)
        return f"<TagIndex of {len(self)} passages, {where}>"

    @property
    def where(self) -> str:
        """The index directory, or ``"the in-memory index"``: how errors name this index."""
        return "the in-memory index" if self.root is None else str(self.root)

    def save(self, path, force: bool = False) -> Path:
        """Write this index into the directory ``path`` as ``factcheck tag`` lays one out (atomically);
        :meth:`load` opens it memory-mapped.

        Parameters
        ----------
        path : str or Path
            A new (or empty) directory; one holding this same index is kept as it is.
        force : bool, default False
            Replace another index found in ``path``.

        Returns
        -------
        Path

        Example
        -------
        >>> import factcheck
        >>> index = factcheck.build_index(["Sea levels are rising.", "Arctic sea ice is shrinking."])
        >>> index.save("out/two-passages")
        PosixPath('out/two-passages')
        >>> list(TagIndex.load("out/two-passages").ids)
        ['0', '1']
        """
        from factcheck.tagging.memory import save_index
        return save_index(self, path, force)

    @cached_property
    def row_of(self) -> IdRows:
        """Passage id -> row (a read-only mapping)."""
        return IdRows(self.ids, self._arrays.id_hashes, self._arrays.id_rows)

    def rows_of(self, ids) -> np.ndarray:
        """Row of each id, -1 where this index has none (vectorised :attr:`row_of`)."""
        return self.row_of.rows(ids)

    @property
    def has_titles(self) -> bool:
        """Whether the knowledge source gave its passages titles (FEVER pages, BEIR, ...)."""
        return self._titles is not None

    def _row(self, passage) -> int:
        if isinstance(passage, str):
            row = int(self.rows_of([passage])[0])
            if row < 0:
                raise KeyError(f"no passage {passage!r} in the index {self.where}")
            return row
        if isinstance(passage, (int, np.integer)) and not isinstance(passage, bool):
            return int(passage)
        raise TypeError(f"passage must be a passage id (str) or a row (int), got {type(passage).__name__}")

    def title(self, passage) -> str | None:
        """The title of ``passage`` (an id or a row); None when it has none."""
        row = self._row(passage)
        if self._titles is None:
            return None
        return self._titles[row] or None

    def titles_of(self, rows) -> list[str | None]:
        """The titles of ``rows`` (None for a passage without one), in one vectorised read."""
        if self._titles is None:
            return [None] * len(rows)
        return [t or None for t in self._titles.take(rows)]

    def body(self, passage) -> str:
        """The own text of ``passage`` (an id or a row), without its title."""
        return self._bodies[self._row(passage)]

    def text(self, passage) -> str:
        """``passage`` (an id or a row) as retrievers read it (with its title, if indexed)."""
        return self.texts[self._row(passage)]

    def texts_of(self, ids) -> list[str]:
        """Texts of the given passage ids, in order (an InputError for ids not in the index)."""
        ids = list(ids)
        rows = self.rows_of(ids).tolist()
        missing = [i for i, r in zip(ids, rows) if r < 0]
        if missing:
            raise InputError(self.root, None, f"{_ids_line(missing)} not in this index"
                             + (" (in memory)" if self.root is None else ""))
        return self.texts.take(rows)

    def require_gold(self, claims, path) -> None:
        """An InputError unless every gold evidence id of ``claims`` (read from ``path``) is in this index."""
        pairs = [(c.id, e) for c in claims for e in c.evidences]
        rows = self.rows_of([e for _, e in pairs]).tolist()
        missing = [pair for pair, r in zip(pairs, rows) if r < 0]
        if missing:
            raise InputError(path, f"claim {missing[0][0]!r}", f"gold evidence {_ids_line([e for _, e in missing])} "
                             f"not in the knowledge source {self.where} (of {len({c for c, _ in missing})} "
                             "claims); is it the knowledge source these claims were written for?")

    def take_stem_counts(self):
        """The stems of each :meth:`text_batches` shard as the in-memory build counted them to
        tag (:func:`~factcheck.scoring.counting.count_terms`, analyzer "stems"), handed over
        once: an iterator of :class:`~factcheck.scoring.counting.ShardCounts` in shard order
        that drops each shard's counts as it yields them, so the index keeps no copy once
        they are taken (BM25's fit merges them, :func:`~factcheck.scoring.counting.merge_counts`).
        None for an index opened from a directory, or once taken."""
        shards, self._stem_counts = self._stem_counts, None
        if shards is None:
            return None

        def drain():
            shards.reverse()
            while shards:
                yield shards.pop()
        return drain()

    def text_batches(self, desc: str | None = None):
        """``(first row, texts)`` one shard at a time; ``desc``: a progress bar's label."""
        if desc is None:
            return self.texts.batches()
        from factcheck.progress import progress
        return progress(self.texts.batches(), desc=desc, total=len(self.manifest.shards), unit="shards")

    def tag_rows(self, rows=None, array: str = "terms") -> tuple[np.ndarray, np.ndarray]:
        """``(indptr, values)``: the tags of ``rows`` (all when None) in CSR form, read from
        each shard's mapped arrays; ``array`` "terms" (columns of :attr:`vocabulary`, int32)
        or "weights" (float64). Nothing is kept: a caller holding every row's tags chose to."""
        dtype = {"terms": np.int32, "weights": np.float64}[array]
        parts = self._arrays.tags
        if rows is None:
            indptrs, base = [np.zeros(1, np.int64)], 0
            for t in parts:
                indptrs.append(t["indptr"][1:] + base)
                base += int(t["indptr"][-1])
            return np.concatenate(indptrs), _concat([t[array] for t in parts], dtype)
        groups, begin, end = self._tag_bounds(rows)
        indptr = np.zeros(len(begin) + 1, dtype=np.int64)
        np.cumsum(end - begin, out=indptr[1:])
        values = np.empty(int(indptr[-1]), dtype=dtype)
        # Every row's positions in its shard at once (values in row order), then one gather a
        # shard: two aranges a shard a call were most of a reranker pool's tag features.
        source, owner = multi_arange(begin, end)
        if len(groups) == 1:
            values[:] = parts[groups[0][0]][array][source]
            return indptr, values
        # The positions grouped by shard with one stable sort (not a scan of every position for
        # each shard, which grows with the shards a pool touches).
        row_shard = np.empty(len(begin), dtype=np.int64)
        for s, at in groups:
            row_shard[at] = s
        of_shard = row_shard[owner]
        by_shard = np.argsort(of_shard, kind="stable")
        bounds = np.searchsorted(of_shard[by_shard], [s for s, _ in groups] + [np.iinfo(np.int64).max])
        for (s, _), lo, hi in zip(groups, bounds[:-1], bounds[1:]):
            dest = by_shard[lo:hi]
            values[dest] = parts[s][array][source[dest]]
        return indptr, values

    def tag_batches(self):
        """``(first row, (indptr, terms))`` one shard at a time: :meth:`tag_rows` of the shard's
        rows, its own mapped arrays (read-only, not copied). A shard's pages leave the process's
        resident set when the next shard is asked for: a pass over every shard holds one."""
        for start, t in zip(self._starts.tolist(), self._arrays.tags):
            indptr, terms = np.asarray(t["indptr"], dtype=np.int64), np.asarray(t["terms"], dtype=np.int32)
            yield start, (indptr, terms)
            release(indptr, terms)

    def _tag_bounds(self, rows) -> tuple[list, np.ndarray, np.ndarray]:
        """``(groups, begin, end)``: each of ``rows``' tags' bounds in its shard's arrays, and
        ``(shard, positions in rows)`` for every shard they are in."""
        rows = self._rows_in_range(rows)
        parts = self._arrays.tags
        shard = np.searchsorted(self._starts, rows, side="right") - 1
        begin, end = np.empty(len(rows), np.int64), np.empty(len(rows), np.int64)
        groups = [(s, np.flatnonzero(shard == s)) for s in np.unique(shard).tolist()]
        for s, at in groups:
            local = rows[at] - self._starts[s]
            begin[at], end[at] = parts[s]["indptr"][local], parts[s]["indptr"][local + 1]
        return groups, begin, end

    def tag_counts(self, rows=None) -> np.ndarray:
        """How many tags each passage of ``rows`` (all when None) has (int64); some rows read
        their shards' bounds only."""
        if rows is None:
            return _concat([np.diff(t["indptr"]) for t in self._arrays.tags], np.int64)
        _, begin, end = self._tag_bounds(rows)
        return end - begin

    def _rows_in_range(self, rows) -> np.ndarray:
        """``rows`` as int64, negative ones counted from the end (as indexing a joined array did)."""
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        n = len(self)
        if len(rows) and (rows.min() < -n or rows.max() >= n):
            raise IndexError(f"row out of range for {n} passages")
        return np.where(rows < 0, rows + n, rows)

    @cached_property
    def tag_indptr(self) -> np.ndarray:
        """Every passage's tags' bounds in :attr:`tag_terms` (CSR); joined from the shards on
        first use and kept (:meth:`tag_rows` reads some rows without joining)."""
        return self.tag_rows()[0]

    @cached_property
    def tag_terms(self) -> np.ndarray:
        """Every tag's column of :attr:`vocabulary` (int32); joined on first use and kept."""
        return self.tag_rows()[1]

    @cached_property
    def tag_weights(self) -> np.ndarray:
        """Every tag's TF-IDF weight (float64, aligned with ``tag_terms``); joined on first use."""
        return self.tag_rows(array="weights")[1]

    @property
    def vocabulary(self) -> list[str]:
        """The passage model's terms, by column (what ``tag_terms`` index)."""
        return self._arrays.terms

    @property
    def passage_idf(self) -> np.ndarray:
        """The passage model's IDF (float64, by column of :attr:`vocabulary`)."""
        return self._arrays.vocabulary["idf"]

    @property
    def tag_vocabulary(self) -> list[str]:
        """The tag model's terms, by column (every one a :attr:`vocabulary` term)."""
        return self._arrays.tag_terms

    @property
    def tag_idf(self) -> np.ndarray:
        """The tag model's IDF (float64, by column of :attr:`tag_vocabulary`)."""
        return self._arrays.vocabulary["tag_idf"]

    @cached_property
    def passage_vectorizer(self):
        """The TF-IDF space the tags were chosen in (:class:`~factcheck.scoring.tfidf.TfidfSpace`)."""
        from factcheck.scoring.tfidf import TfidfSpace
        return TfidfSpace(self.vocabulary, np.array(self.passage_idf))

    @cached_property
    def tag_vectorizer(self):
        """The TF-IDF space of :attr:`tag_vocabulary` (the tag rule's cosine space)."""
        from factcheck.scoring.tfidf import TfidfSpace
        return TfidfSpace(self.tag_vocabulary, np.array(self.tag_idf))

    def tags(self, row: int) -> list[str]:
        """The tags of the passage in ``row``, best first."""
        vocab = self.vocabulary
        return [vocab[j] for j in self.tag_rows([row])[1].tolist()]

    def weights(self, row: int) -> list[float]:
        """The TF-IDF weights of the passage's tags, in :meth:`tags` order."""
        return self.tag_rows([row], "weights")[1].tolist()

    @cached_property
    def _tag_columns(self) -> np.ndarray:
        """Passage-vocabulary column -> tag-vocabulary column (-1: not a tag-model term)."""
        tag_column = np.full(len(self.vocabulary), -1, dtype=np.int64)
        passage_column = {t: j for j, t in enumerate(self.vocabulary)}
        tag_column[[passage_column[t] for t in self.tag_vocabulary]] = np.arange(len(self.tag_vocabulary))
        return tag_column

    def tag_space_rows(self, rows=None, tags=None) -> sp.csr_matrix:
        """The given passages' tags (all when ``rows`` is None) in the tag vectoriser's TF-IDF
        space, CSR: bit for bit ``tag_vectorizer.transform(tag_strings)`` (docs/decisions.md);
        ``tags``: :meth:`tag_rows` of ``rows``, when already read."""
        vec = self.tag_vectorizer
        indptr, terms = self.tag_rows(rows) if tags is None else tags
        cols = self._tag_columns[terms]
        kept = cols >= 0
        kept_before = np.zeros(len(kept) + 1, dtype=np.int64)
        np.cumsum(kept, out=kept_before[1:])
        n_rows = len(indptr) - 1
        counts = sp.csr_matrix((np.ones(int(kept_before[-1]), dtype=np.float64), cols[kept].astype(np.int32),
                                kept_before[indptr]), shape=(n_rows, len(vec.vocabulary_)))
        counts.sort_indices()  # as CountVectorizer leaves them (a passage's tags are distinct)
        return tfidf_rows(counts, vec.idf_)

    @cached_property
    def tag_space(self) -> sp.csr_matrix:
        """:meth:`tag_space_rows` of every passage, computed once per index."""
        return self.tag_space_rows()

    @cached_property
    def tag_strings(self) -> list[str]:
        """Each passage's tags joined by spaces (what the tag vectoriser reads)."""
        vocab = np.array(self.vocabulary, dtype=object)
        indptr, terms = self.tag_rows()
        names = vocab[terms].tolist()
        bounds = indptr.tolist()
        return [" ".join(names[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]


def _ids_line(ids: list[str], first: int = 3) -> str:
    """``3 ids ('a', 'b', 'c') are`` / ``12 ids ('a', 'b', 'c', ...) are`` / ``1 id ('a') is``."""
    shown = ", ".join(repr(i) for i in ids[:first]) + (", ..." if len(ids) > first else "")
    return f"{len(ids)} id{'' if len(ids) == 1 else 's'} ({shown}) {'is' if len(ids) == 1 else 'are'}"


def export_tags(root, dest, verify: bool = False) -> int:
    """One JSON line per passage, in input order: ``{"id", "tags", "weights"}``."""
    index = TagIndex.load(root, verify=verify)
    vocab = index.vocabulary
    with atomic_path(Path(dest)) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        for (start, ids), t in zip(index.ids.batches(), index._arrays.tags):  # one shard at a time
            bounds, terms, weights = t["indptr"].tolist(), t["terms"].tolist(), t["weights"].tolist()
            for i, pid in enumerate(ids):
                a, b = bounds[i], bounds[i + 1]
                record = {"id": pid, "tags": [vocab[j] for j in terms[a:b]], "weights": weights[a:b]}
                fh.write(json.dumps(record, ensure_ascii=False) + "\n")
    return len(index)
