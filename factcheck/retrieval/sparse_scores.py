"""Scores that are zero outside a few rows: a claim's passages, without the whole corpus.

A lexical score is non-zero only on the postings of the claim's terms, a few thousand
rows of millions. Scoring into a corpus-sized vector and selecting from it costs every
claim O(passages) -- allocating and clearing the vector, comparing every entry -- which
is what made per-claim work grow with the corpus (the BM25 sweep and the reranker's
candidates at 5M passages: docs/decisions.md). Here the touched rows are kept sorted
with their scores, and :func:`stable_top_sparse` selects exactly what
:func:`~factcheck.retrieval.base.stable_top` selects from the full vector.

Bit-identity is the point: :func:`accumulate` adds each row's contributions in the
order the terms come, as ``np.add.at`` / ``np.bincount`` over the full vector do, so
every score has the same bits (``tests/unit/test_sparse_scores.py`` compares them).
"""

from __future__ import annotations

import numpy as np

from factcheck.retrieval.base import TopK, stable_top
from factcheck.tagging.index import multi_arange

__all__ = ["accumulate", "first_rows_not_in", "postings", "scores_at", "stable_top_sparse"]


def accumulate(rows: np.ndarray, values: np.ndarray, owner: np.ndarray, dtype) -> tuple[np.ndarray, np.ndarray]:
    """Sum ``values`` per row: the postings of a claim's terms, concatenated term after
    term (``owner``: the term of each entry, non-decreasing; within one term a row occurs
    once). Returns the rows touched (ascending) and their sums in ``dtype``, each row's
    terms added in term order starting from zero -- what adding every term's postings
    into a zero vector gives (``np.add.at`` term by term in float32, as bm25s scores;
    one ``np.bincount`` in float64, as the reranker's BM25)."""
    if not len(rows):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=dtype)
    touched, inv = _unique_inverse(np.asarray(rows))
    if np.dtype(dtype) == np.float64:
        out = np.bincount(inv, weights=np.asarray(values, dtype=np.float64), minlength=len(touched))
    else:
        out = np.zeros(len(touched), dtype=dtype)
        cuts = np.flatnonzero(np.diff(owner)) + 1
        for a, b in zip([0, *cuts.tolist()], [*cuts.tolist(), len(rows)]):
            out[inv[a:b]] += values[a:b]  # a row once per term: this += is np.add.at's addition
    return touched.astype(np.int64), out


def _unique_inverse(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(rows, return_inverse=True)``, sorting stably: the postings are one
    ascending run per term, which a stable (merge) sort joins in O(n log terms) where
    ``np.unique``'s quicksort took most of a claim's BM25 time (a permutation cannot change
    the values, so the result is the same arrays)."""
    order = np.argsort(rows, kind="stable")
    ordered = rows[order]
    new = np.empty(len(rows), dtype=bool)
    new[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
    inv = np.empty(len(rows), dtype=np.intp)
    inv[order] = np.cumsum(new) - 1
    return ordered[new], inv


def postings(indptr: np.ndarray, terms) -> tuple[np.ndarray, np.ndarray]:
    """Positions of the given terms' entries in a column-major matrix, term after term,
    and the term (position in ``terms``) of each."""
    terms = np.asarray(terms, dtype=np.int64)
    return multi_arange(indptr[terms], indptr[terms + 1])


def scores_at(touched: np.ndarray, scores: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The scores of ``rows`` (0 for rows not touched), as the full vector would give them."""
    rows = np.asarray(rows, dtype=np.int64)
    if not len(touched):
        return np.zeros(len(rows), dtype=scores.dtype)
    at = np.minimum(np.searchsorted(touched, rows), len(touched) - 1)
    return np.where(touched[at] == rows, scores[at], 0).astype(scores.dtype)


def first_rows_not_in(sorted_rows: np.ndarray, count: int, n: int) -> np.ndarray:
    """The ``count`` smallest row numbers in [0, n) absent from ``sorted_rows``."""
    limit = count
    while True:
        limit = min(limit, n)
        present = sorted_rows[: np.searchsorted(sorted_rows, limit)]
        missing = np.setdiff1d(np.arange(limit, dtype=np.int64), present, assume_unique=True)
        if len(missing) >= count or limit == n:
            return missing[:count]
        limit *= 2


def stable_top_sparse(touched: np.ndarray, scores: np.ndarray, n: int, depth: int) -> TopK:
    """``stable_top(full, depth)`` of the n-vector ``full`` that holds ``scores`` at rows
    ``touched`` (ascending) and zeros elsewhere: the positive scores by score descending,
    ties by row, then the remaining rows in corpus order with score 0."""
    depth = min(depth, n)
    if len(scores) and scores.min() < 0:  # negative scores order the zeros too: the full path
        full = np.zeros(n, dtype=scores.dtype)
        full[touched] = scores
        return stable_top(full, depth)
    top = stable_top(scores, depth)  # positions in touched; rows ascending, so ties stay by row
    keep = top.scores > 0
    rows, vals = touched[top.rows[keep]], top.scores[keep]
    if len(rows) < depth:
        fill = first_rows_not_in(np.sort(rows), depth - len(rows), n)
        rows = np.concatenate([rows, fill])
        vals = np.concatenate([vals, np.zeros(len(fill), dtype=scores.dtype)])
    return TopK(rows.astype(np.int64), vals)
