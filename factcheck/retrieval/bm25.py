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

from factcheck.errors import check_choice, check_number
from factcheck.retrieval.base import Hit, Retriever, Selection, TopK, stable_top
from factcheck.retrieval.bm25_weights import TermCounts
from factcheck.retrieval.sparse_scores import accumulate, postings, stable_top_sparse
from factcheck.tagging.derived import DerivedCache
from factcheck.text.analyzer import analyze, shared_stems

logging.getLogger("bm25s").setLevel(logging.WARNING)

# bm25s's variants (``bm25s.BM25(method=...)``)
BM25_METHODS = ("lucene", "robertson", "atire", "bm25l", "bm25+")


class BM25Retriever(Retriever):
    """The ``k`` passages with the highest BM25 score for the claim's stems.

    Parameters
    ----------
    k1 : float, default 1.2
        Term-frequency saturation (finite, at least 0).
    b : float, default 0.75
        Length normalisation, in [0, 1].
    k : int, default 5
        Passages returned as evidence by :meth:`retrieve`.
    method : {"lucene", "robertson", "atire", "bm25l", "bm25+"}, default "lucene"
        bm25s's BM25 variant. ``"lucene"`` derives its weights from one term-count
        matrix per index (bit-identical to bm25s's own build, and much faster to sweep).
    cache : bool, default True
        Keep the built BM25 index inside the tag index directory (``DIR/bm25/...``) and
        reuse it; never changes a result.

    Attributes
    ----------
    index_ : TagIndex
        The index fitted to.

    See Also
    --------
    TagRuleRetriever : the 2024 tag rule.
    RerankRetriever : a learned reranker over BM25 candidates.

    Example
    -------
    >>> import factcheck
    >>> index = factcheck.build_index("data/demo/evidence.json", "out/demo-index", progress=False)
    >>> bm25 = factcheck.BM25Retriever(k=3).fit(index)
    >>> bm25
    BM25Retriever(k=3)
    >>> bm25.get_params()
    {'b': 0.75, 'cache': True, 'k': 3, 'k1': 1.2, 'method': 'lucene'}
    >>> selection = bm25.retrieve("Sea levels are rising.")
    >>> selection.ids
    ['evidence-8', 'evidence-39', 'evidence-7']
    >>> selection.hits[0].explanation["shared_tags"]
    ['level', 'rise', 'sea']
    >>> bm25.rank("Sea levels are rising.", depth=5).ids
    ['evidence-8', 'evidence-39', 'evidence-7', 'evidence-37', 'evidence-24']
    """

    name = "bm25"
    _unrecorded = ("cache",)

    def __init__(self, k1: float = 1.2, b: float = 0.75, k: int = 5, method: str = "lucene",
                 cache: bool = True):
        self.k1 = k1
        self.b = b
        self.k = k
        self.method = method
        self.cache = cache

    def _check_params(self) -> None:
        check_number(self.k1, "k1", low=0.0)
        check_number(self.b, "b", low=0.0, high=1.0)
        check_number(self.k, "k", integer=True, low=1)
        check_choice(self.method, "method", BM25_METHODS)

    def _fit(self, index) -> None:
        key = {"plan_key": index.manifest.data.get("plan_key"), "k1": self.k1, "b": self.b,
               "method": self.method, "bm25s": bm25s.__version__}
        name = f"bm25/{self.method}-k1_{self.k1:g}-b_{self.b:g}"
        if self.cache:
            self._bm25 = DerivedCache(index.root).load_or_build(
                name, key, lambda folder: self._build(index).save(folder), _load)
            # The counts serve a tuning sweep's many settings; once the chosen setting is
            # on disk they are ~12 bytes a non-zero that nothing reads any more.
            _TERM_COUNTS.pop(index, None)
        else:
            self._bm25 = self._build(index)

    def _build(self, index) -> bm25s.BM25:
        if self.method == "lucene":
            return term_counts(index).bm25(self.k1, self.b)
        model = bm25s.BM25(k1=self.k1, b=self.b, method=self.method)
        token_ids, vocab = index.stem_ids
        model.index((token_ids, dict(vocab)), show_progress=False)
        return model

    def scores(self, claim: str) -> np.ndarray:
        """BM25 score of every passage for one claim (float32, zeros for an empty query)."""
        self._check_fitted()
        ids = self._bm25.get_tokens_ids(analyze(claim))
        if not ids:
            return np.zeros(len(self.index_), dtype=np.float32)
        return self._bm25.get_scores_from_ids(ids)

    def touched(self, claim: str) -> tuple[np.ndarray, np.ndarray]:
        """The claim's non-zero scores only: (rows ascending, float32 scores), the same
        bits as :meth:`scores` there -- bm25s's additions, term by term in query order,
        over the postings of the claim's terms instead of a corpus-sized vector."""
        self._check_fitted()
        ids = self._bm25.get_tokens_ids(analyze(claim))
        weights = self._bm25.scores
        pos, owner = postings(weights["indptr"], ids)
        return accumulate(np.asarray(weights["indices"][pos]), np.asarray(weights["data"][pos]), owner,
                          np.dtype(self._bm25.dtype))

    def _rank(self, texts: list[str], depth: int) -> list[TopK]:
        if self._bm25.nonoccurrence_array is not None:  # variants that score absent terms too
            return [stable_top(self.scores(c), depth) for c in texts]
        n = len(self.index_)
        return [stable_top_sparse(*self.touched(c), n, depth) for c in texts]

    def _retrieve(self, texts: list[str]) -> list[Selection]:
        out = []
        for claim, ranking in zip(texts, self._rank(texts, self.k)):
            stems = set(analyze(claim))
            hits = []
            for rank, (row, score) in enumerate(zip(ranking.rows.tolist(), ranking.scores.tolist()), 1):
                hits.append(Hit(row, self.index_.ids[row], float(score), {
                    "bm25": float(score), "rank": rank,
                    "shared_tags": shared_stems(stems, self.index_.text(row)),
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
    # Arrays and JSON only; memory-mapped, so a query reads the postings of its terms and a
    # served index does not hold every weight in its own memory (~8 bytes a non-zero).
    return bm25s.BM25.load(folder, mmap=True, allow_pickle=False)
