"""Merge per-shard counts into one vocabulary and its IDF (the reduce step).

Selection rule (documented, stable): the ``max_features`` terms with the highest total
count over the corpus, ties broken by the term (ascending code points). scikit-learn's
``max_features`` orders by count with an unstable argsort, so which of several
equally-frequent terms survive the cut would depend on the platform; we do not use it.
The kept terms are then ordered alphabetically, as scikit-learn orders a vocabulary, so
column order *is* term order and "ties by term" is "ties by column".

IDF is scikit-learn's smoothed IDF, ``ln((1 + n) / (1 + df)) + 1``, computed with the
same float64 operations in the same order as ``TfidfTransformer.fit`` so the values are
bit-identical to fitting scikit-learn on the whole corpus at once.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np


@dataclass
class TermStats:
    """Corpus-wide totals and document frequencies, accumulated shard by shard."""

    totals: dict[str, list[int]]
    n_docs: int = 0

    @classmethod
    def empty(cls) -> "TermStats":
        return cls({}, 0)

    def add(self, terms: list[str], totals: np.ndarray, doc_freq: np.ndarray, n_docs: int) -> None:
        acc = self.totals
        for term, total, df in zip(terms, totals.tolist(), doc_freq.tolist()):
            entry = acc.get(term)
            if entry is None:
                acc[term] = [total, df]
            else:
                entry[0] += total
                entry[1] += df
        self.n_docs += n_docs


def top_terms(terms: list[str], counts: np.ndarray, limit: int) -> list[str]:
    """The ``limit`` terms with the highest count, ties by term; returned sorted by term."""
    if len(terms) <= limit:
        return sorted(terms)
    order = sorted(range(len(terms)), key=lambda i: (-int(counts[i]), terms[i]))
    return sorted(terms[i] for i in order[:limit])


def smoothed_idf(doc_freq: np.ndarray, n_docs: int) -> np.ndarray:
    """scikit-learn's ``smooth_idf=True`` IDF, operation for operation."""
    df = doc_freq.astype(np.float64)
    df += 1.0
    idf = np.full_like(df, fill_value=n_docs + 1, dtype=np.float64)
    idf /= df
    np.log(idf, out=idf)
    idf += 1.0
    return idf


@dataclass
class Vocabulary:
    terms: list[str]
    idf: np.ndarray

    @classmethod
    def from_stats(cls, stats: TermStats, max_features: int) -> "Vocabulary":
        names = list(stats.totals)
        totals = np.fromiter((v[0] for v in stats.totals.values()), dtype=np.int64, count=len(names))
        kept = top_terms(names, totals, max_features)
        df = np.fromiter((stats.totals[t][1] for t in kept), dtype=np.int64, count=len(kept))
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
