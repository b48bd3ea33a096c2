"""Text -> term counts: the one vectorised counter (docs/decisions.md, "Tokenising a batch")."""

from __future__ import annotations

import itertools
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from factcheck.text.analyzer import BREAK, DROPPED, TokenIds, check_analyzer, token_ids, word_tokens_of_texts

if TYPE_CHECKING:
    from factcheck.scoring.matrix import TermMatrix


@dataclass
class ShardCounts:
    """Counts of one shard: rows are passages, columns index ``terms`` (local)."""

    terms: list[str]
    matrix: sp.csr_matrix  # int32 counts, canonical (sorted indices, no duplicates)
    pairs: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # (row, first, second column) in text order

    @property
    def totals(self) -> np.ndarray:
        return np.asarray(self.matrix.sum(axis=0), dtype=np.int64).ravel()

    @property
    def doc_freq(self) -> np.ndarray:
        return np.bincount(self.matrix.indices, minlength=len(self.terms)).astype(np.int64)

    def to_columns(self, column: dict[str, int], dtype=None) -> sp.csr_matrix:
        """The counts on a fixed vocabulary's columns (other terms dropped), canonical, int32 indices."""
        m = self.matrix
        local = np.fromiter(map(column.get, self.terms, itertools.repeat(-1)), dtype=np.int64, count=len(self.terms))
        mapped = local[m.indices]
        keep = mapped >= 0
        kept_before = np.zeros(len(keep) + 1, dtype=np.int64)
        np.cumsum(keep, out=kept_before[1:])
        out = sp.csr_matrix((m.data[keep].astype(dtype or m.data.dtype), mapped[keep].astype(np.int32),
                             kept_before[m.indptr].astype(np.int32)), shape=(m.shape[0], len(column)))
        out.sort_indices()  # sorted local terms need not map to sorted columns
        return out


def count_docs(docs: list[list[str]]) -> ShardCounts:
    """The counts of documents already analysed (one list of terms each), terms sorted."""
    terms = sorted({t for doc in docs for t in doc})
    column = {t: j for j, t in enumerate(terms)}
    rows = np.repeat(np.arange(len(docs), dtype=np.int64), [len(d) for d in docs])
    cols = np.fromiter((column[t] for doc in docs for t in doc), dtype=np.int64, count=len(rows))
    matrix = sp.csr_matrix((np.ones(len(rows), dtype=np.int32), (rows, cols)), shape=(len(docs), len(terms)))
    matrix.sum_duplicates()
    return ShardCounts(terms, matrix)


def count_terms(texts: list[str], analyzer: str = "stems", first_seen: bool = False,
                pairs: bool = False) -> ShardCounts:
    """The term counts of ``texts`` under ``analyzer``, one row each, local terms sorted
    (``first_seen``: in the order the texts first use them). ``pairs``: also each pair of
    consecutive kept terms in a row (:attr:`ShardCounts.pairs`)."""
    memo = token_ids(check_analyzer(analyzer))
    underscore = analyzer == "stems"
    pieces = [_count_ids(texts[at:at + BATCH], memo, underscore, at, first_seen, pairs)
              for at in range(0, max(len(texts), 1), BATCH)]
    lengths, ids, counts, firsts, pair_rows, pair_ids = (np.concatenate(part) for part in zip(*pieces))
    # Stem ids are the process's; the shard's own columns are its terms, sorted or first-seen
    # (bincount: np.unique(ids), 10x faster).
    present = _first_uses(firsts) if first_seen else np.flatnonzero(np.bincount(ids, minlength=len(memo.stems)))
    terms = [memo.stems[i] for i in present.tolist()]
    order = range(len(terms)) if first_seen else sorted(range(len(terms)), key=terms.__getitem__)
    column = np.empty(len(memo.stems), dtype=np.int64)
    column[present[order]] = np.arange(len(order))
    indptr = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    matrix = sp.csr_matrix((counts.astype(np.int32), column[ids].astype(np.int32), indptr),
                           shape=(len(texts), len(terms)))
    matrix.sort_indices()  # canonical: no duplicates (ids were distinct in a row), sorted columns
    found = (pair_rows, column[pair_ids[:, 0]], column[pair_ids[:, 1]]) if pairs else None
    return ShardCounts([terms[i] for i in order], matrix, found)


BATCH = 10_000


def _first_uses(ids: np.ndarray) -> np.ndarray:
    """The distinct ``ids`` in the order of their first occurrence."""
    return ids[np.sort(np.unique(ids, return_index=True)[1])]


class TermColumns:
    """Texts -> their term counts on a fixed vocabulary's columns (term -> column): the one way
    a query is counted (BM25's and TF-IDF's). The same matrix as
    ``count_terms(texts, analyzer).to_columns(vocabulary, dtype)``, built without the texts'
    own sorted terms: the process's token ids (:func:`~factcheck.text.analyzer.token_ids`)
    go to columns through an array kept here, extended as the memo gains terms.

    Example
    -------
    >>> columns = TermColumns({"ice": 0, "sea": 1})
    >>> columns.counts(["Sea ice, sea!", "", "unknown words"]).toarray().tolist()
    [[1, 2], [0, 0], [0, 0]]
    """

    def __init__(self, vocabulary: dict[str, int]):
        self.vocabulary = vocabulary
        self._maps: dict[str, tuple[TokenIds, np.ndarray]] = {}  # analyzer -> (its memo, stem id -> column)

    def __getstate__(self):  # the maps follow the process's memo: rebuilt, not carried
        return {"vocabulary": self.vocabulary, "_maps": {}}

    def counts(self, texts: list[str], analyzer: str = "stems", dtype=np.int32) -> sp.csr_matrix:
        """The counts of ``texts`` under ``analyzer``, one row each (unknown terms dropped),
        canonical, int32 indices."""
        memo = token_ids(check_analyzer(analyzer))
        underscore = analyzer == "stems"
        n_cols = len(self.vocabulary)
        rows, cols, counts = [], [], []
        for at in range(0, len(texts), BATCH):
            tokens, marker = word_tokens_of_texts(texts[at:at + BATCH], underscore)
            ids = memo.ids(tokens, marker)
            del tokens
            # ids below 0 index the map's last two entries, which keep them as they are
            _, _, cell_rows, cell_cols, cell_counts = token_cells(self._column_map(memo, analyzer)[ids], n_cols)
            rows.append(cell_rows + at)
            cols.append(cell_cols)
            counts.append(cell_counts)
        indptr = np.zeros(len(texts) + 1, dtype=np.int64)
        if rows:
            np.cumsum(np.bincount(np.concatenate(rows), minlength=len(texts)), out=indptr[1:])
            cols, counts = np.concatenate(cols), np.concatenate(counts)
        else:
            cols, counts = np.zeros(0, np.int64), np.zeros(0, np.int64)
        # np.unique's cells come by row, then column: canonical as built
        out = sp.csr_matrix((counts.astype(dtype), cols.astype(np.int32), indptr.astype(np.int32)),
                            shape=(len(texts), n_cols))
        out.has_sorted_indices = True
        return out

    def _column_map(self, memo: TokenIds, analyzer: str) -> np.ndarray:
        """Each of ``memo``'s stem ids' column (DROPPED where the vocabulary lacks it), then
        BREAK and DROPPED themselves. A new array replaces the old one: a thread reading
        the old one still finds every id it holds (ids only grow)."""
        n = len(memo.stems)  # after memo.ids: every id the caller holds is below it
        held = self._maps.get(analyzer)
        if held is not None and held[0] is memo and len(held[1]) - 2 >= n:
            return held[1]
        known = held[1][:-2] if held is not None and held[0] is memo else np.zeros(0, dtype=np.int64)
        added = np.fromiter(map(self.vocabulary.get, memo.stems[len(known):n], itertools.repeat(DROPPED)),
                            dtype=np.int64, count=n - len(known))
        column = np.concatenate([known, added, [BREAK, DROPPED]])
        self._maps[analyzer] = (memo, column)
        return column


def token_cells(ids: np.ndarray, n_ids: int):
    """A batch's token ids (``BREAK`` closing each text) as ``(rows, ids, cell_rows, cell_ids,
    counts)``: each kept token's row and id, and the distinct (row, id) cells with counts."""
    ends = ids == BREAK
    rows = np.cumsum(ends) - ends  # the marker after text r closes row r
    kept = ids >= 0
    rows, ids = rows[kept], ids[kept]
    n_ids = max(n_ids, 1)
    cells, counts = np.unique(rows * n_ids + ids, return_counts=True)
    return rows, ids, cells // n_ids, cells % n_ids, counts


def _count_ids(texts: list[str], token_ids: TokenIds, underscore: bool = True, first_row: int = 0,
               first_seen: bool = False, pairs: bool = False):
    """(stems per row, stem ids, counts) of ``texts``, row by row, ids ascending in a row; with
    ``first_seen`` the distinct ids in the order of first use; with ``pairs`` each consecutive
    pair of kept tokens in one row as its row (from ``first_row``) and its two ids."""
    tokens, marker = word_tokens_of_texts(texts, underscore)
    ids = token_ids.ids(tokens, marker)
    del tokens
    rows, kept, cell_rows, cell_ids, counts = token_cells(ids, len(token_ids.stems))
    firsts = _first_uses(kept) if first_seen else kept[:0]
    same = np.flatnonzero(rows[:-1] == rows[1:]) if pairs else rows[:0]
    return (np.bincount(cell_rows, minlength=len(texts)), cell_ids, counts, firsts,
            first_row + rows[same], np.stack([kept[same], kept[same + 1]], axis=1))


@dataclass
class CorpusCounts:
    """A whole corpus counted: its terms (sorted), term-major counts, each unit's length."""

    terms: list[str]
    counts: TermMatrix     # terms x units, float32 counts (small integers, exact)
    lengths: np.ndarray    # terms per unit, duplicates counted (int64)
    # with pairs: (unit pointers, codes ``first * len(terms) + second``), each unit's distinct
    # pairs of consecutive kept terms, ascending
    pairs: tuple[np.ndarray, np.ndarray] | None = None


def count_corpus(batches, analyzer: str = "stems", spill=None, first_seen: bool = False,
                 pairs: bool = False) -> CorpusCounts:
    """Count ``(first row, texts)`` batches in corpus order into one term-major matrix, terms
    sorted (``first_seen``: in the order the corpus first uses them); ``pairs``: see
    :attr:`CorpusCounts.pairs`.

    ``spill``: a new folder where each batch's counts are written (``.npy``) as it is counted
    and read back mapped, one batch at a time, when the matrix is filled; it is removed at the
    end. Without it every batch's counts stay in memory until the matrix is built (8 bytes
    an entry beside the matrix's own 8). The matrix is the same bytes either way.
    """
    return merge_counts((count_terms(list(texts), analyzer, first_seen, pairs) for _, texts in batches),
                        spill, first_seen, pairs)


def merge_counts(shards, spill=None, first_seen: bool = False, pairs: bool = False) -> CorpusCounts:
    """:class:`ShardCounts` of consecutive batches, in corpus order, as one :class:`CorpusCounts`
    (what :func:`count_corpus` gives for the batches' texts, counted with the same ``first_seen``
    and ``pairs``). Each batch is released once read: give an iterator that drops its own
    reference to free a batch's counts as the merge goes. ``spill``: as for :func:`count_corpus`.
    """
    from factcheck.scoring.matrix import TermFill, load_array, save_arrays
    batches_seen, lengths, column = [], [], {}
    df_seen = np.zeros(0, dtype=np.int64)  # units per term, by first-seen id
    if spill is not None:
        spill = Path(spill)
        spill.mkdir()
    try:
        for i, counted in enumerate(shards):
            m, terms = counted.matrix, counted.terms
            lengths.append(np.asarray(m.sum(axis=1), dtype=np.int64).ravel())
            # First-seen ids (the order first_seen keeps), the batch's new terms added in one pass.
            fresh = [t for t in terms if t not in column]
            column.update(zip(fresh, range(len(column), len(column) + len(fresh))))
            local = np.fromiter(map(column.__getitem__, terms), dtype=np.int64, count=len(terms))
            arrays = {"cols": local[m.indices].astype(np.int32), "data": m.data.astype(np.float32),
                      "row_ptr": np.asarray(m.indptr, dtype=np.int64)}
            if pairs:
                arrays.update(pair_rows=counted.pairs[0], pair_first=local[counted.pairs[1]].astype(np.int32),
                              pair_second=local[counted.pairs[2]].astype(np.int32))
            del counted, m
            df_seen = np.concatenate([df_seen, np.zeros(len(column) - len(df_seen), dtype=np.int64)])
            df_seen += np.bincount(arrays["cols"], minlength=len(column))
            if spill is None:
                batches_seen.append(arrays)
            else:
                save_arrays(spill, arrays, prefix=f"{i:06d}-")
                batches_seen.append(i)
            del arrays
        names = list(column) if first_seen else sorted(column)
        remap = np.empty(len(column), dtype=np.int32)
        remap[np.fromiter(map(column.__getitem__, names), dtype=np.int64, count=len(names))] = \
            np.arange(len(names), dtype=np.int32)
        del column
        n_terms = len(names)
        df = np.zeros(n_terms, dtype=np.int64)
        df[remap] = df_seen
        fill = TermFill(df, sum(map(len, lengths)), np.float32)
        pair_ptr, codes, n_pairs = [np.zeros(1, dtype=np.int64)], [], 0
        for i in range(len(batches_seen)):  # each batch's entries go to their terms, after the earlier batches'
            seen, batches_seen[i] = batches_seen[i], None
            arrays = seen if spill is None else {
                name: load_array(spill, f"{seen:06d}-{name}") for name in (
                    "cols", "data", "row_ptr", *(("pair_rows", "pair_first", "pair_second") if pairs else ()))}
            row_ptr = arrays["row_ptr"]
            n_rows = len(row_ptr) - 1
            fill.add(sp.csr_matrix((arrays["data"], remap[arrays["cols"]], row_ptr), shape=(n_rows, n_terms)))
            if pairs:  # each unit's distinct pairs, ascending by the final columns
                code = remap[arrays["pair_first"]].astype(np.int64) * n_terms + remap[arrays["pair_second"]]
                order = np.lexsort((code, arrays["pair_rows"]))
                code, pair_rows = code[order], arrays["pair_rows"][order]
                keep = np.ones(len(code), dtype=bool)
                keep[1:] = (code[1:] != code[:-1]) | (pair_rows[1:] != pair_rows[:-1])
                codes.append(code[keep])
                pair_ptr.append(n_pairs + np.cumsum(np.bincount(pair_rows[keep], minlength=n_rows)))
                n_pairs += len(codes[-1])
            del arrays, row_ptr
    finally:
        if spill is not None:
            shutil.rmtree(spill, ignore_errors=True)
    return CorpusCounts(names, fill.matrix(),
                        np.concatenate(lengths) if lengths else np.zeros(0, np.int64),
                        (np.concatenate(pair_ptr), np.concatenate(codes or [np.zeros(0, np.int64)])) if pairs else None)
