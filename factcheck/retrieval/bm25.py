"""BM25 (Lucene's) over the full passage text's stems; counts and weights cached in the index."""

from __future__ import annotations

import weakref

import numpy as np

from factcheck.errors import Interval
from factcheck.retrieval.base import TermRetriever
from factcheck.scoring.bm25 import bm25_weights
from factcheck.scoring.counting import CorpusCounts, TermColumns, count_corpus, merge_counts
from factcheck.scoring.matrix import TermMatrix, load_array, save_arrays
from factcheck.tagging.derived import DerivedCache
from factcheck.tagging.packing import pack_strings, unpack_strings
from factcheck.text.analyzer import analyze, shared_stems

COUNTS_VERSION = "stems-term-major/1"


class BM25Retriever(TermRetriever):
    """The ``k`` passages with the highest BM25 score for the claim's stems.

    Parameters
    ----------
    k1 : float, default 1.2
        Term-frequency saturation.
    b : float, default 0.75
        Length normalisation, in [0, 1].
    k : int, default 5
        Passages returned as evidence by :meth:`retrieve`.

    Example
    -------
    >>> import factcheck
    >>> index = factcheck.build_index("data/demo/evidence.json", "out/demo-index", progress=False)
    >>> bm25 = factcheck.BM25Retriever(k=3).fit(index)
    >>> selection = bm25.retrieve("Sea levels are rising.")
    >>> selection.ids
    ['evidence-8', 'evidence-39', 'evidence-7']
    >>> selection.hits[0].explanation["shared_terms"]
    ['level', 'rise', 'sea']
    >>> bm25.rank("Sea levels are rising.", k=5).ids
    ['evidence-8', 'evidence-39', 'evidence-7', 'evidence-37', 'evidence-24']
    """

    name = "bm25"
    _parameter_constraints = {"k1": Interval(float, 0), "b": Interval(float, 0, 1), "k": Interval(int, 1)}

    def __init__(self, k1: float = 1.2, b: float = 0.75, k: int = 5):
        self.k1 = k1
        self.b = b
        self.k = k

    def _fit(self, index, terms: "SweepTerms | None" = None) -> None:
        if terms is not None:  # a sweep's setting: weights for its claims' terms only
            self.weights_ = cached_weights(None, "", {}, terms.counts, terms.lengths, self.k1, self.b)
            self.vocabulary_, self._columns = terms.vocabulary, terms.columns
            return
        counts, cache, key = stem_counts(index, self._cache)
        # "lucene": the one BM25 variant, kept in the cache's name and key so caches made before still match.
        self.weights_ = cached_weights(cache, "bm25/lucene", {"counts": key, "k1": self.k1, "b": self.b,
                                                              "method": "lucene"},
                                       counts.counts, counts.lengths, self.k1, self.b)
        self.vocabulary_ = dict(zip(counts.terms, range(len(counts.terms))))
        self._columns = TermColumns(self.vocabulary_)

    def queries(self, claims: list[str]):
        """The claims' stem counts over the weights' terms (float32, one row each)."""
        return self._columns.counts(list(claims), "stems", np.float32)

    def _term_queries(self, texts):
        return self.weights_, self.queries(texts)

    def _explain(self, claim, rows, scores, state) -> list[dict]:
        stems = set(analyze(claim))
        return [{"bm25": s, "rank": i, "shared_terms": shared_stems(stems, self.index_.text(r))}
                for i, (r, s) in enumerate(zip(rows.tolist(), scores.tolist()), 1)]


_COUNTS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


class SweepTerms:
    """The index's stem counts of the terms some claims hold, looked up once for a sweep over
    (k1, b): a :class:`BM25Retriever` fitted with them (``fit(index, terms=...)``) derives its
    weights for these terms alone, not the whole index's, and scores those claims with the same
    bits as fitted without them; it is for those claims only (another claim's other terms count
    for nothing there)."""

    def __init__(self, index, texts: list[str]):
        counts = stem_counts(index)[0]
        queries = TermColumns(dict(zip(counts.terms, range(len(counts.terms))))).counts(list(texts), "stems")
        held = np.unique(queries.indices)
        self.counts = counts.counts.take_terms(held)
        self.lengths = counts.lengths
        # ascending term ids keep their order: each claim's terms are summed in the same order
        self.vocabulary = {counts.terms[t]: i for i, t in enumerate(held.tolist())}
        self.columns = TermColumns(self.vocabulary)


def cached_weights(cache: DerivedCache | None, name: str, key: dict, counts: TermMatrix, lengths: np.ndarray,
                   k1: float, b: float) -> TermMatrix:
    """The BM25 weights of term-major ``counts`` for ``k1`` and ``b``, kept in an index's derived
    ``cache`` as ``{name}-k1_{k1}-b_{b}`` under ``key`` (None: computed, not kept). Every BM25
    over an index (this retriever's, the reranker's) builds and caches its weights here."""
    def derive():
        return bm25_weights(counts, lengths, k1, b).data
    if cache is None:
        return counts.with_data(derive())
    return counts.with_data(cache.load_or_build(f"{name}-k1_{k1:g}-b_{b:g}", key,
                                                lambda folder: save_arrays(folder, {"data": derive()}),
                                                lambda folder: load_array(folder, "data")))


SPILL = "counting"  # each shard's counts while the cache's matrix is built (removed before it is recorded)


def stem_counts(index, cache: bool = True) -> tuple[CorpusCounts, DerivedCache | None, dict | None]:
    """``(counts, cache, key)``: the index's stem counts from its derived cache ``bm25/counts``
    under ``key`` (counted once per index through disk, then mapped by every process and every
    later run), or, for an index in memory or with ``cache`` False, :func:`corpus_counts`'s
    (``cache`` and ``key`` None). Every BM25 over an index reads its counts here: the
    retriever's fit and a sweep's :class:`SweepTerms`."""
    if not cache or index.root is None:  # an index in memory has no directory to cache in
        return corpus_counts(index), None, None
    derived = DerivedCache(index.root)
    key = {"plan_key": index.manifest.data.get("plan_key"), "passages": len(index), "version": COUNTS_VERSION}

    def build(folder):
        _save_counts(corpus_counts(index, spill=folder / SPILL), folder)
        _COUNTS.pop(index, None)  # its saved copy, mapped, replaces it: freed before the files are hashed
    counts = derived.load_or_build("bm25/counts", key, build, _load_counts)
    _COUNTS.pop(index, None)
    return counts, derived, key


def corpus_counts(index, spill=None) -> CorpusCounts:
    """The index's stem counts, counted once per loaded index and shared by every fit: an
    index built in memory hands over the counts its build made (the same texts, the same
    counter), merged as :func:`~factcheck.scoring.counting.count_corpus` merges its batches;
    ``spill``: :func:`~factcheck.scoring.counting.count_corpus`'s folder for each shard's counts."""
    counts = _COUNTS.get(index)
    if counts is None:
        shards = index.take_stem_counts()
        counts = _COUNTS[index] = (count_corpus(index.text_batches(desc="BM25 term counts"), spill=spill)
                                   if shards is None else merge_counts(shards, spill=spill))
    return counts


def save_terms(folder, terms: list[str], **arrays) -> None:
    """``terms`` packed and ``arrays``, as ``.npy`` in ``folder``."""
    buf, offsets = pack_strings(terms)
    save_arrays(folder, {"terms_utf8": buf, "terms_offsets": offsets, **arrays})


def load_terms(folder) -> list[str]:
    """The terms :func:`save_terms` wrote."""
    return unpack_strings(load_array(folder, "terms_utf8"), load_array(folder, "terms_offsets"))


def _save_counts(counts: CorpusCounts, folder) -> None:
    save_terms(folder, counts.terms, lengths=counts.lengths)
    counts.counts.save(folder)


def _load_counts(folder) -> CorpusCounts:
    terms, counts, lengths = load_terms(folder), TermMatrix.load(folder), load_array(folder, "lengths")
    if len(terms) != counts.n_terms or len(lengths) != counts.n_units:
        raise ValueError("inconsistent BM25 counts")
    return CorpusCounts(terms, counts, lengths)

