"""The open mode's two stages: a candidate pool from the whole corpus (BM25 and the index's
passage vectors, exact search), ordered by a contextual model that embeds only the pool."""

from __future__ import annotations

import numpy as np

from factcheck.errors import InputError, Interval, check_choice, ref
from factcheck.retrieval.base import Retriever, Scored
from factcheck.scoring.topk import rank_order, top_k

__all__ = ["COMBINATIONS", "POOL_SIZE", "PoolRetriever", "combine_scores"]

POOL_SIZE = 100  # passages each first-stage method adds to a claim's pool
COMBINATIONS = ("cosine", "weighted", "rrf")  # how a pool is ordered (see combine_scores)
RRF_K = 60  # reciprocal-rank fusion's constant, as its paper (Cormack et al. 2009) sets it
# Recorded only when they differ from these: runs and model directories from before the
# combinations record the same parameters, and read back as the cosine alone.
DEFAULT_COMBINATION = {"combine": "cosine", "bm25_weight": 0.0, "dense_weight": 0.0}


def _minmax(x: np.ndarray) -> np.ndarray:
    low, high = x.min(), x.max()
    return (x - low) / (high - low) if high > low else np.zeros_like(x)


def _rrf_terms(rows: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """1 / (RRF_K + rank) of each pool member by ``scores`` (rank 1 the best; ties by row)."""
    order = rank_order(rows, scores)
    rank = np.empty(len(rows), dtype=np.float64)
    rank[order] = np.arange(1, len(rows) + 1)
    return 1.0 / (RRF_K + rank)


def combine_scores(combine: str, rows: np.ndarray, cos: np.ndarray, bm25: np.ndarray, dense: np.ndarray,
                   bm25_weight: float = 0.0, dense_weight: float = 0.0) -> np.ndarray:
    """One claim's pool scores from the second stage's cosine ``cos`` and the first stages'
    ``bm25`` and ``dense`` scores (arrays over the pool's ``rows``, ascending).

    * ``"cosine"``: ``cos`` alone;
    * ``"weighted"``: ``cos + bm25_weight * bm25' + dense_weight * dense'``, a first stage's
      score min-max normalised over the pool (0 where the pool's scores are all equal);
    * ``"rrf"``: reciprocal-rank fusion of the three orders, the sum of ``1 / (60 + rank)``.

    Each is a function of the pool alone, element by element or by its order, so it does not
    depend on the other claims.

    Example
    -------
    >>> rows = np.array([3, 5, 9])
    >>> cos, bm25, dense = np.array([.9, .5, .1]), np.array([0., 2., 4.]), np.array([.2, .2, .2])
    >>> combine_scores("weighted", rows, cos, bm25, dense, bm25_weight=0.5).tolist()
    [0.9, 0.75, 0.6]
    >>> np.argsort(-combine_scores("rrf", rows, cos, bm25, dense)).tolist()
    [0, 1, 2]
    """
    check_choice(combine, "combine", COMBINATIONS)
    if combine == "cosine":
        return cos
    if combine == "weighted":
        return cos + bm25_weight * _minmax(bm25) + dense_weight * _minmax(dense)
    return _rrf_terms(rows, cos) + _rrf_terms(rows, bm25) + _rrf_terms(rows, dense)


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
        A trained model's pool size and order are tuned
        (:func:`~factcheck.training.tuning.sweep_pool`); these defaults are the untrained ones.
    k1, b : float
        BM25 parameters.
    combine : {"cosine", "weighted", "rrf"}, default "cosine"
        How the pool is ordered: the second stage's cosine alone, or combined with the first
        stages' scores (:func:`combine_scores`).
    bm25_weight, dense_weight : float, default 0
        ``combine="weighted"``: the weights of the normalised BM25 and first-stage dense scores.
        The commands take them as ``--combine``, ``--bm25-weight`` and ``--dense-weight``, read
        from ``_parameter_constraints`` and this signature (docs/open-mode.md).

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
    _parameter_constraints = {"k": Interval(int, 1), "pool_size": Interval(int, 1), "k1": Interval(float, 0),
                              "b": Interval(float, 0, 1), "combine": COMBINATIONS,
                              "bm25_weight": Interval(float, 0), "dense_weight": Interval(float, 0)}

    def __init__(self, model="minilm", k: int = 4, pool_size: int = POOL_SIZE, k1: float = 0.9, b: float = 0.4,
                 combine: str = "cosine", bm25_weight: float = 0.0, dense_weight: float = 0.0):
        self.model = model
        self.k = k
        self.pool_size = pool_size
        self.k1 = k1
        self.b = b
        self.combine = combine
        self.bm25_weight = bm25_weight
        self.dense_weight = dense_weight

    def params(self) -> dict:
        """As :meth:`Retriever.params`, the combination's parameters left out where they are the default."""
        return {k: v for k, v in super().params().items()
                if k not in DEFAULT_COMBINATION or v != DEFAULT_COMBINATION[k]}

    def _check_params(self) -> None:
        super()._check_params()
        if self.combine != "weighted" and (self.bm25_weight or self.dense_weight):
            raise InputError(None, None, f"is read only with {ref('combine')} weighted, not {self.combine}",
                             param="bm25_weight" if self.bm25_weight else "dense_weight")
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
        return self.pools(claim, (self.pool_size,))[self.pool_size]

    def pools(self, claim: str, sizes) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """The claim's pool at each pool size of ``sizes`` (as :meth:`pool`'s, by size), from one
        BM25 scoring and one dense search: each size's pool is the top of the same arrays.

        :meth:`pool` is this at one size, so a pool derived here is the pool a retriever of that
        ``pool_size`` builds. A search through the nearest-neighbour index asks it for a number
        of candidates that may grow with the depth (:meth:`~factcheck.tagging.ann.AnnIndex.count`):
        one search per distinct count, the same for every size up to half the recorded candidates.
        """
        self._check_fitted()
        sizes = sorted({int(n) for n in sizes})
        bm25 = self.bm25_.scores(claim)
        lexical = top_k(bm25, sizes[-1])[0]  # score descending, ties by row: a top n is its first n
        lexical = lexical[bm25[lexical] > 0]  # a passage sharing no term with the claim is no candidate
        ann = self.first_.ann_
        searches = {}  # candidates asked -> the sizes searched with that many
        for n in sizes:
            searches.setdefault(None if ann is None else ann.count(n), []).append(n)
        out = {}
        for group in searches.values():
            dense = self.first_.search_scores(claim, group[-1])
            top = top_k(dense.scores, group[-1], dense.rows)[0]
            for n in group:
                rows = np.union1d(lexical[:n], top[:n]).astype(np.int64)
                first = dense.scores[rows] if dense.rows is None else self.first_.row_scores(dense.state, rows)
                out[n] = (rows, bm25[rows], first)
        return out

    def cosines(self, texts: list[str], rows: list[np.ndarray], embed=None) -> list[np.ndarray]:
        """The second stage's cosine of each claim of ``texts`` with the passages ``rows[i]``:
        every claim's new passages embedded together (and stored as one segment; ``embed``:
        how, as :meth:`~factcheck.tagging.pool_vectors.PoolVectorCache.vectors` takes it)."""
        every = np.unique(np.concatenate(rows)) if rows else np.zeros(0, dtype=np.int64)
        vectors = self.cache_.vectors(list(self.index_.texts.take(every)), embed) if len(every) else None
        queries = self.embedder_.embed(list(texts), kind="query") if texts else None
        # float64 row sums, no BLAS: a passage's score never depends on its pool-mates.
        return [np.einsum("ij,j->i", vectors[np.searchsorted(every, r)].astype(np.float64), q.astype(np.float64))
                for r, q in zip(rows, queries if texts else ())]

    def _scored(self, texts):
        pools = [self.pool(t) for t in texts]
        for (rows, bm25, dense), cos in zip(pools, self.cosines(texts, [p[0] for p in pools])):
            scores = combine_scores(self.combine, rows, cos, bm25, dense, self.bm25_weight, self.dense_weight)
            yield Scored(rows, scores, (rows, bm25, dense, cos))

    def _explain(self, claim, rows, scores, state) -> list[dict]:
        pool_rows, bm25, dense, cos = state
        at = np.searchsorted(pool_rows, rows)
        return [{"dense": float(cos[j]), "bm25": float(bm25[j]), "first_stage": float(dense[j]), "rank": i}
                for i, j in enumerate(at.tolist(), 1)]
