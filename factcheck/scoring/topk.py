"""The one top-k: score descending, ties by row ascending, nothing padded."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

__all__ = ["DEPTH", "first_per_group", "rank_order", "top_k", "top_k_rows"]

DEPTH = 100  # ranking depth kept for recall@k / MRR

# top_k_rows ranks rows longer than this on average one at a time, shorter ones in one sort.
_LONG_ROWS = 256


def rank_order(rows, *scores) -> np.ndarray:
    """The one tie order: positions of ``rows`` by the first of ``scores`` descending, ties
    by the next score descending, and so on, last by row ascending.

    Example
    -------
    >>> rank_order([7, 3, 5], [1.0, 2.0, 1.0])
    array([1, 2, 0])
    >>> rank_order([7, 3, 5], [1.0, 1.0, 1.0], [0.0, 0.0, 0.5])
    array([2, 1, 0])
    """
    return np.lexsort((np.asarray(rows), *(-np.asarray(s) for s in reversed(scores))))


def top_k(scores, k: int, rows=None) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best of ``scores`` as ``(rows, scores)``, best first, ties by row; ``rows``: the
    distinct row of each score (None: the positions).

    Example
    -------
    >>> top_k([0.5, 2.0, 0.5, 1.0], 3)
    (array([1, 3, 0]), array([2. , 1. , 0.5]))
    >>> top_k([0.5, 0.5], 1, rows=[9, 4])
    (array([4]), array([0.5]))
    """
    scores = np.asarray(scores)
    rows = None if rows is None else np.asarray(rows)
    n = len(scores)
    k = max(0, min(int(k), n))
    if k == 0:
        return np.zeros(0, dtype=np.int64), scores[:0]
    if k < n:
        cut = np.partition(scores, n - k)[n - k]
        pos = np.flatnonzero(scores >= cut)
        if len(pos) > 2 * k + 64:  # many ties at the cut: only the ones with the smallest rows can be in
            above = pos[scores[pos] > cut]
            tied = pos[scores[pos] == cut]
            need = k - len(above)
            if rows is not None:
                tied = tied[np.argpartition(rows[tied], need - 1)[:need]]
            pos = np.concatenate([above, tied[:need]])  # positions ascend: the first are the smallest
    else:
        pos = np.arange(n)
    chosen = pos if rows is None else rows[pos]
    vals = scores[pos]
    order = rank_order(chosen, vals)[:k]
    return chosen[order].astype(np.int64), vals[order]


def top_k_rows(matrix, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`top_k` of every row of a sparse matrix (zeros left out), as CSR ``(indptr, columns, values)``.

    Example
    -------
    >>> import scipy.sparse as sp
    >>> m = sp.csr_matrix([[0.0, 1.0, 1.0, 3.0], [2.0, 0.0, 0.0, 0.0]])
    >>> [a.tolist() for a in top_k_rows(m, 2)]
    [[0, 2, 3], [3, 1, 0], [3.0, 1.0, 2.0]]
    """
    if k < 1:
        raise ValueError("k must be at least 1")
    m = sp.csr_matrix(matrix)
    n_rows = m.shape[0]
    long_rows = m.nnz > _LONG_ROWS * max(n_rows, 1)
    if not long_rows and not m.has_sorted_indices:
        m = m.sorted_indices()
    bounds = m.indptr.astype(np.int64)
    nonzero = m.data != 0
    if long_rows:
        cols, vals = [], []
        for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            keep = nonzero[a:b]
            c, v = top_k(m.data[a:b][keep], k, m.indices[a:b][keep])
            cols.append(c)
            vals.append(v)
        counts = np.array([len(c) for c in cols], dtype=np.int64)
        cols = np.concatenate(cols).astype(m.indices.dtype) if cols else m.indices[:0]
        vals = np.concatenate(vals) if vals else m.data[:0]
    else:
        rows = np.repeat(np.arange(n_rows, dtype=np.int64), np.diff(bounds))[nonzero]
        cols, vals = m.indices[nonzero], m.data[nonzero]
        # By row, then value descending: one stable sort of a complex key, ~7x faster than lexsort.
        order = np.argsort(rows + 1j * -vals.astype(np.float64), kind="stable")
        rows, cols, vals = rows[order], cols[order], vals[order]
        per_row = np.bincount(rows, minlength=n_rows)
        starts = np.zeros(n_rows + 1, dtype=np.int64)
        np.cumsum(per_row, out=starts[1:])
        keep = np.arange(len(rows), dtype=np.int64) - starts[rows] < k
        cols, vals = cols[keep], vals[keep]
        counts = np.minimum(per_row, k)
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    return indptr, cols, vals


def first_per_group(rows, group: np.ndarray, limit: int) -> tuple[np.ndarray, np.ndarray]:
    """A ranking collapsed to its groups: the positions of each group's first row, and the groups.

    Example
    -------
    >>> first_per_group(np.array([5, 1, 4, 0]), np.array([0, 0, 1, 1, 2, 2]), 5)
    (array([0, 1]), array([2, 0]))
    """
    groups = group[np.asarray(rows, dtype=np.int64)]
    # np.unique(groups, return_index=True) without its wrapping: this runs once per claim.
    order = np.argsort(groups, kind="stable")
    sorted_groups = groups[order]
    starts = np.empty(len(groups), dtype=bool)
    starts[:1] = True
    np.not_equal(sorted_groups[1:], sorted_groups[:-1], out=starts[1:])
    first = np.sort(order[starts])[:limit]
    return first, groups[first]
