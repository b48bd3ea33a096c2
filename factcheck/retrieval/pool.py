"""The open mode's two stages: a candidate pool from the whole corpus (BM25 and the index's
passage vectors, exact search), ordered by a contextual model that embeds only the pool."""

from __future__ import annotations

import numpy as np

from factcheck.errors import InputError, check_number
from factcheck.retrieval.base import Retriever, Scored
from factcheck.scoring.topk import top_k

__all__ = ["POOL_SIZE", "PoolRetriever"]

POOL_SIZE = 100  # passages each first-stage method adds to a claim's pool


class PoolRetriever(Retriever):
    """BM25's top ``pool_size`` and the passage vectors' top ``pool_size`` (the first stage,
    over every passage), ordered by the cosine of ``model``'s claim and passage vectors (the
    second stage, over that pool only).

    The pool is a function of the claim, the corpus and the first stage alone, and each
    passage's second-stage vector of its text and the model alone, so the results do not depend
    on the other claims, their order, the worker processes or what the cache held
    (:class:`~factcheck.tagging.pool_vectors.PoolVectorCache`, where those vectors are kept).

    Parameters
    ----------
    model : str, Path or dict
        The second stage's embedding model: ``"minilm"``, an ONNX model directory, or its
        settings (:func:`~factcheck.text.embedding.load_embedder`).
    k : int, default 4
        Passages returned as evidence.
    pool_size : int, default 100
        Passages each first-stage method adds to the pool (BM25's only those sharing a term).
    k1, b : float
        BM25 parameters.

    Example
    -------
    The index needs its (first-stage) passage vectors; here the bundled static model is both stages:

    >>> import factcheck
    >>> from factcheck.tagging.vectors import PassageVectorJob
    >>> index = factcheck.build_index("data/demo/evidence.json", "out/demo-index", progress=False)
    >>> _ = PassageVectorJob(progress=False).run("out/demo-index")
    >>> pool = PoolRetriever(model=None, k=3, pool_size=5).fit(index)
    >>> sorted(pool.retrieve("Sea levels are rising.").hits[0].explanation)
    ['bm25', 'dense', 'first_stage', 'rank']
    """

    name = "pool"
    needs_vectors = True  # the first stage reads the index's passage vectors

    def __init__(self, model="minilm", k: int = 4, pool_size: int = POOL_SIZE, k1: float = 0.9, b: float = 0.4):
        self.model = model
        self.k = k
        self.pool_size = pool_size
        self.k1 = k1
        self.b = b

    def _check_params(self) -> None:
        check_number(self.k, "k", integer=True, low=1)
        check_number(self.pool_size, "pool_size", integer=True, low=1)
        check_number(self.k1, "k1", low=0.0)
        check_number(self.b, "b", low=0.0, high=1.0)
        if self.model is not None and not isinstance(self.model, (str, dict)) and not hasattr(self.model, "__fspath__"):
            raise InputError(None, None, f"must be a packaged model's name or a directory, got {self.model!r}",
                             param="model")

    def _fit(self, index) -> None:
        from factcheck.retrieval.bm25 import BM25Retriever
        from factcheck.retrieval.dense import DenseRetriever
        from factcheck.tagging.pool_vectors import PoolVectorCache
        from factcheck.text.embedding import load_embedder
        self.bm25_ = BM25Retriever(k1=self.k1, b=self.b, k=self.k).fit(index)
        self.first_ = DenseRetriever(k=self.k).fit(index)
        self.vectors_sha256_ = self.first_.vectors_sha256_
        self.embedder_ = load_embedder(self.model)
        self.cache_ = PoolVectorCache(index.root, self.embedder_)

    def pool(self, claim: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The claim's pool: its rows (ascending) and their BM25 and first-stage dense scores."""
        self._check_fitted()
        bm25, dense = self.bm25_.scores(claim), self.first_.search_scores(claim, self.pool_size)
        lexical = top_k(bm25, self.pool_size)[0]
        lexical = lexical[bm25[lexical] > 0]  # a passage sharing no term with the claim is no candidate
        rows = np.union1d(lexical, top_k(dense.scores, self.pool_size, dense.rows)[0]).astype(np.int64)
        first = dense.scores[rows] if dense.rows is None else self.first_.row_scores(dense.state, rows)
        return rows, bm25[rows], first

    def _scored(self, texts):
        pools = [self.pool(t) for t in texts]
        every = np.unique(np.concatenate([p[0] for p in pools])) if pools else np.zeros(0, dtype=np.int64)
        # Every pool's new passages embedded together, and stored as one segment.
        vectors = self.cache_.vectors(list(self.index_.texts.take(every))) if len(every) else None
        queries = self.embedder_.embed(list(texts), kind="query") if texts else None
        for i, (rows, bm25, dense) in enumerate(pools):
            mine = vectors[np.searchsorted(every, rows)].astype(np.float64)
            # float64 row sums, no BLAS: a passage's score never depends on its pool-mates.
            cos = np.einsum("ij,j->i", mine, queries[i].astype(np.float64))
            yield Scored(rows, cos, (rows, bm25, dense))

    def _explain(self, claim, rows, scores, state) -> list[dict]:
        pool_rows, bm25, dense = state
        at = np.searchsorted(pool_rows, rows)
        return [{"dense": s, "bm25": float(bm25[j]), "first_stage": float(dense[j]), "rank": i}
                for i, (s, j) in enumerate(zip(scores.tolist(), at.tolist()), 1)]
