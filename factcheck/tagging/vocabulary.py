"""Merge per-shard counts into one vocabulary and its IDF (the reduce step).

Selection rule (documented, stable): the ``max_features`` terms with the highest total
count over the corpus, ties broken by the term (ascending code points). scikit-learn's
``max_features`` orders by count with an unstable argsort, so which of several
equally-frequent terms survive the cut would depend on the platform; we do not use it.
The kept terms are then ordered alphabetically, as scikit-learn orders a vocabulary, so
column order *is* term order and "ties by term" is "ties by column".

IDF is scikit-learn's smoothed IDF, ``ln((1 + n) / (1 + df)) + 1``, computed with the
same float64 operations in the same order as ``TfidfTransformer.fit`` so the values are
bit-identical to fitting scikit-learn on the whole corpus at once. :func:`tfidf_rows`
is likewise ``TfidfTransformer(norm="l2").transform``, bit for bit, so the tagging
workers need not import scikit-learn.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp


@dataclass
class TermStats:
    """Corpus-wide totals and document frequencies, accumulated shard by shard.

    Terms get a column on first sight and the counts are added with numpy (why: a dict of
    per-term lists merges 13 shards' ~50K local terms each several times slower;
    docs/decisions.md).
    """

    column: dict[str, int]
    totals: np.ndarray
    doc_freq: np.ndarray
    n_docs: int = 0

    @classmethod
    def empty(cls) -> "TermStats":
        return cls({}, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), 0)

    def add(self, terms: list[str], totals: np.ndarray, doc_freq: np.ndarray, n_docs: int) -> None:
        column = self.column
        new = sorted(set(terms).difference(column))  # C loops; sorted: the same columns every run
        column.update(zip(new, range(len(column), len(column) + len(new))))
        cols = np.fromiter(map(column.__getitem__, terms), dtype=np.int64, count=len(terms))
        if len(column) > len(self.totals):
            grow = len(column) - len(self.totals)
            self.totals = np.concatenate([self.totals, np.zeros(grow, dtype=np.int64)])
            self.doc_freq = np.concatenate([self.doc_freq, np.zeros(grow, dtype=np.int64)])
        self.totals[cols] += np.asarray(totals, dtype=np.int64)  # a shard's terms are distinct
        self.doc_freq[cols] += np.asarray(doc_freq, dtype=np.int64)
        self.n_docs += n_docs


def top_terms(terms: list[str], counts: np.ndarray, limit: int) -> list[str]:
    """The ``limit`` terms with the highest count, ties by term; returned sorted by term."""
    if len(terms) <= limit:
        return sorted(terms)
    by_term = np.array(sorted(range(len(terms)), key=terms.__getitem__), dtype=np.int64)
    # a stable sort by count keeps equal counts in term order (3x faster than a tuple key)
    order = by_term[np.argsort(-np.asarray(counts, dtype=np.int64)[by_term], kind="stable")]
    return sorted(terms[i] for i in order[:limit].tolist())


def smoothed_idf(doc_freq: np.ndarray, n_docs: int) -> np.ndarray:
    """scikit-learn's ``smooth_idf=True`` IDF, operation for operation."""
    df = doc_freq.astype(np.float64)
    df += 1.0
    idf = np.full_like(df, fill_value=n_docs + 1, dtype=np.float64)
    idf /= df
    np.log(idf, out=idf)
    idf += 1.0
    return idf


def tfidf_rows(counts: sp.csr_matrix, idf: np.ndarray) -> sp.csr_matrix:
    """scikit-learn's ``TfidfTransformer(norm="l2")`` transform of ``counts`` with ``idf``,
    operation for operation: the counts converted to float64 as scikit-learn converts them
    (duplicates summed, indices sorted), times the column's IDF, then each row divided by
    the square root of its squares summed in the row's order (rows summing to zero stay as
    they are). Bit-identical to scikit-learn for finite input (``tests/unit/test_tagging.py``
    compares them); unlike scikit-learn it returns float64 for float32 input and does not
    refuse NaN, inf or an empty matrix.

    Why not scikit-learn itself: importing it costs each tagging worker ~0.75 CPU-s (it
    brings scipy.stats and pandas) for ~0.1 s of work. The row sums go through
    scipy's CSR mat-vec, which adds a row's entries one after the other as scikit-learn's
    loop does; numpy's own sums pair them up and round differently.
    """
    weights = sp.csr_matrix(counts).astype(np.float64)
    weights.data *= idf[weights.indices]
    squares = sp.csr_matrix((weights.data * weights.data, weights.indices, weights.indptr), shape=weights.shape)
    norms = np.sqrt(squares @ np.ones(weights.shape[1]))
    norms[norms == 0.0] = 1.0
    weights.data /= np.repeat(norms, np.diff(weights.indptr))
    return weights


@dataclass
class Vocabulary:
    terms: list[str]
    idf: np.ndarray

    @classmethod
    def from_stats(cls, stats: TermStats, max_features: int) -> "Vocabulary":
        names = list(stats.column)  # in column order
        kept = top_terms(names, stats.totals, max_features)
        df = stats.doc_freq[[stats.column[t] for t in kept]]
        return cls(kept, smoothed_idf(df, stats.n_docs))

    @property
    def index(self) -> dict[str, int]:
        return {t: i for i, t in enumerate(self.terms)}

    def digest(self) -> str:
        h = hashlib.sha256()
        h.update("\n".join(self.terms).encode("utf-8"))
        h.update(b"\0")
        h.update(np.ascontiguousarray(self.idf, dtype="<f8").tobytes())
        return h.hexdigest()


def tag_vocabulary(vocab_terms: list[str], tag_counts: np.ndarray, n_docs: int,
                   tag_features: int) -> Vocabulary:
    """The tag vectoriser's vocabulary and IDF (see :mod:`factcheck.tagging.tag_model`):
    the ``tag_features`` most frequent tags, ties by term; ``tag_counts[j]`` = passages
    tagged with ``vocab_terms[j]``, which is a tag's document frequency over tag strings."""
    present = np.flatnonzero(tag_counts > 0)
    names = [vocab_terms[j] for j in present]
    kept = top_terms(names, tag_counts[present], tag_features)
    lookup = {t: j for j, t in enumerate(vocab_terms)}
    df = np.array([tag_counts[lookup[t]] for t in kept], dtype=np.int64)
    return Vocabulary(kept, smoothed_idf(df, n_docs))
