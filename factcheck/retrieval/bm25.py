"""BM25 over the full passage text, scored by bm25s and fed the project's own stems.

bm25s precomputes every (term, passage) score at index time, so an index is tied to its
``k1``/``b``/``method``. For the ``lucene`` variant the weights are derived from one
term-count matrix per tag index (:mod:`factcheck.retrieval.bm25_weights`, bit-identical
to bm25s's own build and ~100x faster), so a sweep over (k1, b) never re-indexes. The
chosen index is saved next to the tags (``DIR/bm25/<params>/``, a
:class:`~factcheck.tagging.derived.DerivedCache` entry: sha256-checked before every load,
rebuilt when damaged, skipped when the index is read-only) and reused when the tag index
and parameters match, so a served index need not re-analyse every passage. Queries are the claim's stems (duplicates
kept, as a bag of words). bm25s's own top-k selection uses ``argpartition``, which
breaks ties arbitrarily; we take its full score vector and select with
:func:`~factcheck.retrieval.base.stable_top` so equal scores keep corpus order.
"""

from __future__ import annotations

import logging
import weakref
from pathlib import Path

import bm25s
import numpy as np

from factcheck.retrieval.base import Hit, Ranking, Retriever, Selection, stable_top
from factcheck.retrieval.bm25_weights import TermCounts
from factcheck.tagging.derived import DerivedCache
from factcheck.text.analyzer import analyze, shared_stems

logging.getLogger("bm25s").setLevel(logging.WARNING)


class BM25Retriever(Retriever):
    name = "bm25"

    def __init__(self, k1: float = 1.2, b: float = 0.75, k: int = 5, method: str = "lucene",
                 cache: bool = True):
        self.k1 = k1
        self.b = b
        self.k = k
        self.method = method
        self.cache = cache

    def params(self) -> dict:
        return {"k1": self.k1, "b": self.b, "k": self.k, "method": self.method}

    def fit(self, index) -> "BM25Retriever":
        self.index = index
        key = {"plan_key": index.manifest.data.get("plan_key"), "k1": self.k1, "b": self.b,
               "method": self.method, "bm25s": bm25s.__version__}
        name = f"bm25/{self.method}-k1_{self.k1:g}-b_{self.b:g}"
        if self.cache:
            self._bm25 = DerivedCache(index.root).load_or_build(
                name, key, lambda folder: self._build(index).save(folder), _load)
        else:
            self._bm25 = self._build(index)
        return self

    def _build(self, index) -> bm25s.BM25:
        if self.method == "lucene":
            return term_counts(index).bm25(self.k1, self.b)
        model = bm25s.BM25(k1=self.k1, b=self.b, method=self.method)
        token_ids, vocab = index.stem_ids
        model.index((token_ids, dict(vocab)), show_progress=False)
        return model

    def scores(self, claim: str) -> np.ndarray:
        """BM25 score of every passage for one claim (float32, zeros for an empty query)."""
        ids = self._bm25.get_tokens_ids(analyze(claim))
        if not ids:
            return np.zeros(len(self.index), dtype=np.float32)
        return self._bm25.get_scores_from_ids(ids)

    def rank(self, claims: list[str], depth: int = 100) -> list[Ranking]:
        return [stable_top(self.scores(c), depth) for c in claims]

    def retrieve(self, claims: list[str]) -> list[Selection]:
        out = []
        for claim, ranking in zip(claims, self.rank(claims, self.k)):
            stems = set(analyze(claim))
            hits = []
            for rank, (row, score) in enumerate(zip(ranking.rows.tolist(), ranking.scores.tolist()), 1):
                hits.append(Hit(row, self.index.ids[row], float(score), {
                    "bm25": float(score), "rank": rank,
                    "shared_tags": shared_stems(stems, self.index.text(row)),
                }))
            out.append(Selection(hits, "ranked", {"params": self.params()}))
        return out


_TERM_COUNTS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def term_counts(index) -> TermCounts:
    """The index's term-count matrix, built once per loaded index and shared by every fit."""
    counts = _TERM_COUNTS.get(index)
    if counts is None:
        counts = _TERM_COUNTS[index] = TermCounts.from_index(index)
    return counts


def _load(folder: Path) -> bm25s.BM25:
    return bm25s.BM25.load(folder, mmap=False, allow_pickle=False)  # arrays and JSON only
