"""Open mode retrieval: dense (embedding cosine, one claim at a time; through the vectors'
nearest-neighbour index where one was built, re-scored exactly) and hybrid (BM25 + dense)."""

from __future__ import annotations

import weakref

import numpy as np

from factcheck.errors import InputError, Interval, check_choice
from factcheck.retrieval.base import Retriever, Scored, require_directory
from factcheck.scoring.topk import top_k
from factcheck.text.analyzer import analyze, shared_stems

__all__ = ["DenseRetriever", "FUSIONS", "HybridRetriever", "fuse"]

FUSIONS = ("max", "rrf")
RRF_K = 60  # the usual constant of reciprocal-rank fusion (Cormack et al. 2009)


class DenseRetriever(Retriever):
    """The ``k`` passages whose vectors are closest (cosine) to the claim's.

    Parameters
    ----------
    k : int, default 4
        Passages returned as evidence.
    exact : bool, default False
        Score every passage even where the vectors have a nearest-neighbour index (by default
        its candidates are re-scored exactly: the same scores, the top may rarely differ). Exact
        search holds every vector as float32 (4 bytes a dimension); a search through the index
        reads the stored float16 shards' maps and widens only its candidates' rows.

    Example
    -------
    The index needs its passage vectors (:class:`~factcheck.tagging.vectors.PassageVectorJob`):

    >>> import factcheck
    >>> from factcheck.tagging.vectors import PassageVectorJob
    >>> index = factcheck.build_index("data/demo/evidence.json", "out/demo-index", progress=False)
    >>> _ = PassageVectorJob(progress=False).run("out/demo-index")
    >>> dense = DenseRetriever(k=3).fit(index)
    >>> dense.retrieve("Sea levels are rising.").ids
    ['evidence-8', 'evidence-37', 'evidence-7']
    """

    name = "dense"
    needs_vectors = True  # fit reads the index's passage vectors (a chunk index gets its own)
    block_rows = 65536  # passage vectors multiplied at a time: memory only, never the result (no parameter)
    _parameter_constraints = {"k": Interval(int, 1)}

    def __init__(self, k: int = 4, exact: bool = False):
        self.k = k
        self.exact = exact

    def params(self) -> dict:
        """:meth:`Retriever.params`, without ``exact`` unless it is set (records made before it
        existed keep their bytes)."""
        out = super().params()
        if not self.exact:
            del out["exact"]
        return out

    def _check_params(self) -> None:
        super()._check_params()
        if not isinstance(self.exact, (bool, np.bool_)):
            raise InputError(None, None, f"must be True or False, got {self.exact!r}", param="exact")

    def _fit(self, index) -> None:
        from factcheck.tagging.vectors import read_vectors_manifest
        from factcheck.text.embedding import load_embedder
        require_directory(index, self.name)
        data = read_vectors_manifest(index.root, index.manifest)
        self.embedder_ = load_embedder(data["model"])
        self.ann_ = None if self.exact else _shared_ann(index, data)
        self.vectors_, self.vectors_sha256_ = _shared_vectors(index, self.embedder_.identity, self.ann_ is not None)

    def scores(self, claim: str) -> np.ndarray:
        """Cosine of every passage with the claim (float32; zeros for a claim with no token)."""
        self._check_fitted()
        query = self.embedder_.embed([claim], kind="query")[0]
        out = np.empty(len(self.vectors_), dtype=np.float32)
        mapped = not isinstance(self.vectors_, np.ndarray)
        # Stored vectors are widened a block at a time, the blocks the whole matrix is cut in:
        # the same float32 rows in the same products, so the same scores (widening costs more
        # than the products: what scores every passage for every claim fits with ``exact``).
        block = np.empty((min(self.block_rows, len(out)), self.vectors_.shape[1]), np.float32) if mapped else None
        for start in range(0, len(out), self.block_rows):
            stop = min(start + self.block_rows, len(out))
            rows = self.vectors_.widen(start, stop, block[:stop - start]) if mapped else self.vectors_[start:stop]
            np.dot(rows, query, out=out[start:stop])
        return out

    def search_scores(self, claim: str, depth: int) -> Scored:
        """What a top ``depth`` of the claim is taken from: every passage's cosine (exact search),
        or the nearest-neighbour index's candidates' (ascending rows), scored as exactly, with
        the claim's vector as state (for :meth:`row_scores`)."""
        self._check_fitted()
        if self.ann_ is None:
            return Scored(None, self.scores(claim))
        query = self.embedder_.embed([claim], kind="query")[0]
        rows = self.ann_.search(query, depth)
        return Scored(rows, self.row_scores(query, rows), query)

    def row_scores(self, query: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Cosine of the passages ``rows`` with a claim's vector (float32): only those rows are
        widened where the vectors stay as stored."""
        return np.dot(self.vectors_[rows], query).astype(np.float32, copy=False)

    def _scored(self, texts):
        return self._scored_to(texts, self.k)

    def _scored_to(self, texts, depth):
        return (self.search_scores(c, depth)._replace(state=None) for c in texts)

    def _explain(self, claim, rows, scores, state) -> list[dict]:
        return [{"dense": s, "rank": i} for i, s in enumerate(scores.tolist(), 1)]


# Loaded vector matrices, shared by the retrievers fitted to the same vectors.
_LOADED = weakref.WeakValueDictionary()


def _shared_ann(index, data: dict):
    """The vectors' checked nearest-neighbour index (or ``None``), shared as the vectors are."""
    from factcheck.tagging.vectors import load_ann
    entry = data.get("ann")
    if not entry:
        return None
    key = ("ann", str(index.root.resolve()), entry["sha256"])
    loaded = _LOADED.get(key)
    if loaded is None:
        loaded = _LOADED[key] = load_ann(index.root, data)
    return loaded


def _shared_vectors(index, identity: dict, mapped: bool):
    """The passage vectors and their ``content_sha256``: searched through their nearest-neighbour
    index (``mapped``), they stay as stored (:class:`~factcheck.tagging.vectors.MappedVectors`,
    float16 maps: only the candidates' rows are widened); else one float32 matrix, the exact
    reference, which scoring every passage for every claim multiplies without widening."""
    from factcheck.tagging.vectors import load_vectors, open_vectors, read_vectors_manifest
    sha = read_vectors_manifest(index.root, index.manifest, identity)["content_sha256"]
    key = (str(index.root.resolve()), sha, mapped)
    vectors = _LOADED.get(key)
    if vectors is None:
        if mapped:
            vectors = open_vectors(index.root, index.manifest, identity)
        else:
            vectors = load_vectors(index.root, index.manifest, identity).astype(np.float32)
            vectors.flags.writeable = False  # shared: nobody may change it under another retriever
        _LOADED[key] = vectors
    return vectors, sha


def fuse(bm25: np.ndarray, dense: np.ndarray, alpha: float, fusion: str = "max",
         rrf_depth: int = 1000) -> np.ndarray:
    """One fused score per passage: ``"max"`` mixes the scores scaled by the claim's best,
    ``"rrf"`` is weighted reciprocal-rank fusion; ``alpha``: the dense side's weight."""
    if check_choice(fusion, "fusion", FUSIONS) == "max":
        # float64 so the scaling never merges two distinct float32 scores into a tie.
        lexical, semantic = (s.astype(np.float64) / s.max() if s.max() > 0 else np.zeros(len(s))
                             for s in (bm25, dense))
        return (1.0 - alpha) * lexical + alpha * semantic
    fused = np.zeros(len(bm25), dtype=np.float64)  # "rrf"
    for weight, scores in ((1.0 - alpha, bm25), (alpha, dense)):
        rows, _ = top_k(scores, rrf_depth)
        rows = rows[scores[rows] > 0]  # a passage the method does not match at all gets nothing
        fused[rows] += weight / (RRF_K + np.arange(1, len(rows) + 1))
    return fused


class HybridRetriever(Retriever):
    """BM25 and dense scores fused per passage; the ``k`` best fused passages.

    Parameters
    ----------
    k : int, default 4
        Passages returned as evidence.
    alpha : float, default 0.5
        Weight of the dense score (0: BM25 only, 1: dense only).
    fusion : {"max", "rrf"}, default "max"
        How the two score lists are combined (:func:`fuse`).
    k1, b : float
        BM25 parameters.
    rrf_depth : int, default 1000
        Depth of each list under ``"rrf"``.

    Example
    -------
    >>> import factcheck
    >>> from factcheck.tagging.vectors import PassageVectorJob
    >>> index = factcheck.build_index("data/demo/evidence.json", "out/demo-index", progress=False)
    >>> _ = PassageVectorJob(progress=False).run("out/demo-index")
    >>> hybrid = HybridRetriever(k=3, alpha=0.5).fit(index)
    >>> hybrid.params()
    {'k': 3, 'alpha': 0.5, 'fusion': 'max', 'k1': 0.9, 'b': 0.4}
    >>> hit = hybrid.retrieve("Sea levels are rising.").hits[0]
    >>> hit.id, sorted(hit.explanation)
    ('evidence-8', ['bm25', 'dense', 'fused', 'rank', 'shared_terms'])
    """

    name = "hybrid"
    needs_vectors = True
    # The fusion is checked at fit, not at the first claim.
    _parameter_constraints = {"k": Interval(int, 1), "alpha": Interval(float, 0, 1), "fusion": FUSIONS,
                              "k1": Interval(float, 0), "b": Interval(float, 0, 1), "rrf_depth": Interval(int, 1)}

    def __init__(self, k: int = 4, alpha: float = 0.5, fusion: str = "max", k1: float = 0.9, b: float = 0.4,
                 rrf_depth: int = 1000):
        self.k = k
        self.alpha = alpha
        self.fusion = fusion
        self.k1 = k1
        self.b = b
        self.rrf_depth = rrf_depth

    def params(self) -> dict:
        """:meth:`Retriever.params`, without ``rrf_depth`` unless the fusion is ``"rrf"``."""
        out = super().params()
        if self.fusion != "rrf":
            del out["rrf_depth"]
        return out

    def _fit(self, index) -> None:
        from factcheck.retrieval.bm25 import BM25Retriever
        self.bm25_ = BM25Retriever(k1=self.k1, b=self.b, k=self.k).fit(index)
        # exact: it scores every passage (its nearest-neighbour index would go unused).
        self.dense_ = DenseRetriever(k=self.k, exact=True).fit(index)
        self.vectors_sha256_ = self.dense_.vectors_sha256_

    def component_scores(self, claim: str) -> tuple[np.ndarray, np.ndarray]:
        """(BM25, dense) score of every passage for one claim: both exact, whatever index the
        vectors have (the fusion scales and ranks every passage's score)."""
        self._check_fitted()
        return self.bm25_.scores(claim), self.dense_.scores(claim)

    def _scored(self, texts):
        for claim in texts:
            bm25, dense = self.component_scores(claim)
            yield Scored(None, fuse(bm25, dense, self.alpha, self.fusion, self.rrf_depth), (bm25, dense))

    def _explain(self, claim, rows, scores, state) -> list[dict]:
        bm25, dense = state
        stems = set(analyze(claim))
        return [{"bm25": float(bm25[r]), "dense": float(dense[r]), "fused": s, "rank": i,
                 "shared_terms": shared_stems(stems, self.index_.text(r))}
                for i, (r, s) in enumerate(zip(rows.tolist(), scores.tolist()), 1)]
