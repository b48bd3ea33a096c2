"""TF-IDF: smoothed IDF, optional sublinear tf, L2-normalised rows (scikit-learn's, bit for bit,
without importing it: docs/decisions.md)."""

from __future__ import annotations

from functools import cached_property

import numpy as np
import scipy.sparse as sp

from factcheck.scoring.counting import ShardCounts, TermColumns, count_docs

__all__ = ["TfidfSpace", "smoothed_idf", "tfidf_rows"]


def smoothed_idf(doc_freq: np.ndarray, n_docs: int) -> np.ndarray:
    """``ln((1 + n_docs) / (1 + df)) + 1`` per term, in scikit-learn's operations."""
    df = np.asarray(doc_freq).astype(np.float64)
    df += 1.0
    idf = np.full_like(df, fill_value=n_docs + 1, dtype=np.float64)
    idf /= df
    np.log(idf, out=idf)
    idf += 1.0
    return idf


def tfidf_rows(counts, idf: np.ndarray, sublinear: bool = False) -> sp.csr_matrix:
    """The L2-normalised TF-IDF rows of canonical term ``counts`` (squares summed in order, as scikit-learn).

    Example
    -------
    >>> import scipy.sparse as sp
    >>> tfidf_rows(sp.csr_matrix([[3, 4], [0, 0]]), np.ones(2)).toarray().tolist()
    [[0.6, 0.8], [0.0, 0.0]]
    """
    weights = sp.csr_matrix(counts).astype(np.float64)
    if sublinear:
        np.log(weights.data, out=weights.data)
        weights.data += 1.0
    weights.data *= idf[weights.indices]
    squares = sp.csr_matrix((weights.data * weights.data, weights.indices, weights.indptr), shape=weights.shape)
    norms = np.sqrt(squares @ np.ones(weights.shape[1]))
    norms[norms == 0.0] = 1.0
    weights.data /= np.repeat(norms, np.diff(weights.indptr))
    return weights


class TfidfSpace:
    """A fitted TF-IDF space: ``terms`` (the columns), their ``idf_`` and whether tf is ``sublinear``.

    Example
    -------
    >>> space, rows = TfidfSpace.fit([["sea", "ice"], ["sea", "level", "rise"]])
    >>> space.terms, space.idf_.round(3).tolist()
    (['ice', 'level', 'rise', 'sea'], [1.405, 1.405, 1.405, 1.0])
    >>> space.transform(["Ice, ice and unknowns"]).toarray().tolist()
    [[1.0, 0.0, 0.0, 0.0]]
    """

    def __init__(self, terms: list[str], idf: np.ndarray, sublinear: bool = False):
        self.terms = list(terms)
        self.idf_ = np.asarray(idf, dtype=np.float64)
        self.sublinear = sublinear

    @cached_property
    def vocabulary_(self) -> dict[str, int]:
        return {t: j for j, t in enumerate(self.terms)}

    @cached_property
    def columns(self) -> TermColumns:
        """Texts -> counts on this space's terms."""
        return TermColumns(self.vocabulary_)

    @classmethod
    def fit(cls, docs, sublinear: bool = False) -> tuple["TfidfSpace", sp.csr_matrix]:
        """The space of a corpus (ShardCounts, or each document's terms) and its rows."""
        counts = docs if isinstance(docs, ShardCounts) else count_docs(docs)
        space = cls(counts.terms, smoothed_idf(counts.doc_freq, counts.matrix.shape[0]), sublinear)
        return space, tfidf_rows(counts.matrix, space.idf_, sublinear)

    def transform(self, texts: list[str], analyzer: str = "stems") -> sp.csr_matrix:
        """Each text, analysed by ``analyzer``, as a row of this space (unknown terms dropped)."""
        return tfidf_rows(self.columns.counts(list(texts), analyzer), self.idf_, self.sublinear)
