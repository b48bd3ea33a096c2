"""Merge per-shard counts into one vocabulary and its IDF (the reduce step): the
``max_features`` terms with the highest total count, ties by term (not scikit-learn's
platform-dependent argsort), then sorted by term, as scikit-learn orders a vocabulary.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from factcheck.scoring.tfidf import smoothed_idf
from factcheck.scoring.topk import top_k


@dataclass
class TermStats:
    """Corpus-wide totals and document frequencies, added shard by shard."""

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
    # positions in term order: the core's ties by position are ties by term
    order = by_term[top_k(np.asarray(counts, dtype=np.int64)[by_term], limit)[0]]
    return sorted(terms[i] for i in order.tolist())


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

    def digest(self) -> str:
        h = hashlib.sha256()
        h.update("\n".join(self.terms).encode("utf-8"))
        h.update(b"\0")
        h.update(np.ascontiguousarray(self.idf, dtype="<f8").tobytes())
        return h.hexdigest()


def tag_vocabulary(vocab_terms: list[str], tag_counts: np.ndarray, n_docs: int,
                   tag_features: int) -> Vocabulary:
    """The tag model's vocabulary and IDF: the ``tag_features`` most frequent tags, ties by term
    (``tag_counts[j]``: passages tagged ``vocab_terms[j]``)."""
    present = np.flatnonzero(tag_counts > 0).tolist()
    names = [vocab_terms[j] for j in present]
    kept = top_terms(names, tag_counts[present], tag_features)
    lookup = dict(zip(names, present))  # the tagged terms' columns (kept is among them)
    df = np.asarray(tag_counts, dtype=np.int64)[np.fromiter(map(lookup.__getitem__, kept), dtype=np.int64,
                                                            count=len(kept))]
    return Vocabulary(kept, smoothed_idf(df, n_docs))
