"""Tie-safe top-k of every row of a sparse weight matrix, vectorised.

The 2024 bug: tags came from ``np.argsort`` over a *dense* row, so once a passage had
fewer than k non-zero terms, zero-weight columns were padded in -- whichever ones the
unstable sort happened to put first (for 167,592 passages, the last vocabulary entry).
Here only stored, strictly positive weights are candidates; a row is ordered by weight
descending, ties by column ascending (= by term, since vocabularies are sorted), with
one stable sort over all non-zeros of the shard; a row with fewer than k candidates
keeps fewer; an empty row stays empty.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def top_k_rows(weights: sp.csr_matrix, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return (indptr, columns, values) of the top-k entries of each row, in tag order."""
    if k < 1:
        raise ValueError("k must be at least 1")
    m = sp.csr_matrix(weights)
    if not m.has_sorted_indices:
        m = m.sorted_indices()
    n_rows = m.shape[0]
    lengths = np.diff(m.indptr)
    rows = np.repeat(np.arange(n_rows, dtype=np.int64), lengths)
    positive = m.data > 0
    rows, cols, vals = rows[positive], m.indices[positive].astype(np.int32), m.data[positive]
    # By row, then weight descending; a stable sort keeps equal weights in column order.
    # One complex key (numpy orders complex numbers by real part, then imaginary part,
    # exactly) instead of a three-key lexsort: 0.11 s vs 0.75 s for a 1.9M-entry shard.
    order = np.argsort(rows + 1j * -vals, kind="stable")
    rows, cols, vals = rows[order], cols[order], vals[order]
    per_row = np.bincount(rows, minlength=n_rows)
    starts = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(per_row, out=starts[1:])
    rank = np.arange(len(rows), dtype=np.int64) - starts[rows]
    keep = rank < k
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(np.minimum(per_row, k), out=indptr[1:])
    return indptr, cols[keep], vals[keep]

