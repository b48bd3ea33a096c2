"""BM25, Lucene's variant, rounded as bm25s's ``lucene`` index (float32 IDF and weights)."""

from __future__ import annotations

import numpy as np

from factcheck.formats.npy import release
from factcheck.scoring.matrix import TermMatrix

__all__ = ["bm25_weight", "bm25_weights", "length_norm", "lucene_idf", "mean_length"]

_BLOCK_ENTRIES = 1 << 20  # about 40 bytes an entry of float64 temporaries


def lucene_idf(doc_freq: np.ndarray, n_units: int) -> np.ndarray:
    """Lucene's BM25 IDF of each term (float64; 0 for a term no unit holds)."""
    df = np.asarray(doc_freq, dtype=np.float64)
    with np.errstate(divide="ignore"):
        out = np.log(1.0 + (n_units - df + 0.5) / (df + 0.5))
    out[df == 0] = 0.0
    return out


def mean_length(doc_len: np.ndarray) -> np.float64:
    """``avgdl``: the mean unit length (0 for no unit)."""
    doc_len = np.asarray(doc_len)
    return doc_len.mean() if len(doc_len) else np.float64(0.0)


def length_norm(doc_len: np.ndarray, k1: float, b: float, rows=None, avgdl=None) -> np.ndarray:
    """``k1 * (1 - b + b * dl / avgdl)`` per unit (float64); ``rows``: of those units only (the
    same bits as indexing every unit's), ``avgdl``: :func:`mean_length` of ``doc_len``, when known."""
    doc_len = np.asarray(doc_len)
    if avgdl is None:
        avgdl = mean_length(doc_len)
    if rows is not None:
        doc_len = doc_len[rows]
    if not avgdl:
        return np.full(len(doc_len), k1 * (1 - b), dtype=np.float64)
    return k1 * ((1 - b) + b * doc_len.astype(np.float64) / avgdl)


def bm25_weight(tf, norm, idf) -> np.ndarray:
    """The float32 weight of counts ``tf`` given :func:`length_norm` ``norm`` and ``idf`` (broadcast)."""
    tf = np.asarray(tf, dtype=np.float64)
    idf = np.asarray(idf, dtype=np.float32).astype(np.float64)
    return (idf * (tf / (norm + tf))).astype(np.float32)


def bm25_weights(counts: TermMatrix, doc_len: np.ndarray, k1: float, b: float) -> TermMatrix:
    """The BM25 weights of term counts (term-major) and unit lengths, a block of terms at a time.

    Example
    -------
    >>> import scipy.sparse as sp
    >>> counts = TermMatrix.from_units(sp.csr_matrix([[1.0, 0.0], [2.0, 1.0]]))
    >>> [round(float(w), 4) for w in bm25_weights(counts, np.array([1, 3]), 1.2, 0.75).data]
    [0.1042, 0.0999, 0.2616]
    """
    idf = lucene_idf(counts.df, counts.n_units)
    norm = length_norm(doc_len, k1, b)
    indptr = np.asarray(counts.indptr, dtype=np.int64)
    out = np.empty(len(counts.data), dtype=np.float32)
    n_terms = counts.n_terms
    cuts = np.searchsorted(indptr, np.arange(_BLOCK_ENTRIES, int(indptr[-1]), _BLOCK_ENTRIES), side="right") - 1
    bounds = sorted({0, *cuts.tolist(), n_terms})
    for t0, t1 in zip(bounds[:-1], bounds[1:]):
        a, e = int(indptr[t0]), int(indptr[t1])
        term_idf = np.repeat(idf[t0:t1], np.diff(indptr[t0:t1 + 1]))
        out[a:e] = bm25_weight(counts.data[a:e], norm[counts.indices[a:e]], term_idf)
        # Mapped counts are read once here. From the start: a page fault maps its neighbours too,
        # some before this block.
        release(counts.data[:e], counts.indices[:e])
    return counts.with_data(out)
