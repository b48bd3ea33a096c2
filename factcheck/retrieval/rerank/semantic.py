"""Dense (embedding) evidence for the reranker: the open mode's extra features, float64
``einsum`` row sums (never BLAS calls)."""

from __future__ import annotations

import numpy as np

from factcheck.retrieval.rerank.candidates import FUSION_ALPHA
from factcheck.retrieval.rerank import features as F
from factcheck.retrieval.rerank.features import FEATURES, competition_rank
from factcheck.retrieval.rerank.memory import pool_similarities
from factcheck.scoring.topk import top_k

DENSE_FEATURES: list[str] = ["dense_cos", "dense_rel_top", "dense_log_rank", "fused_max",
                             "mem_dense_max", "mem_dense_centroid", "claim_dense_top",
                             "emem_max_sim", "emem_sum_sim", "emem_nearest_sim"]
ALL_FEATURES: list[str] = FEATURES + DENSE_FEATURES
MEMORY_PASSAGES = 30  # as the lexical memory features: the neighbours' most-cited passages


def load_scorer(index):
    """The open mode's scorer for ``index`` (exact: the candidates score every passage)."""
    from factcheck.retrieval.dense import DenseRetriever
    return DenseRetriever(k=1, exact=True).fit(index)


def pool_features(ctx, cands, k1: float, b: float, dense=None) -> np.ndarray:
    """A pool's feature matrix: the lexical columns, then (with a ``dense`` scorer) the dense ones."""
    X = F.compute(ctx, cands, k1, b)
    return X if dense is None else np.hstack([X, compute(dense.vectors_, cands)])


def compute(vectors: np.ndarray, cands) -> np.ndarray:
    """Dense feature matrix (len(cands.rows), len(DENSE_FEATURES))."""
    rows = cands.rows
    n = len(rows)
    out = np.zeros((n, len(DENSE_FEATURES)))
    if n == 0 or cands.dense is None:
        return out
    col = {f: j for j, f in enumerate(DENSE_FEATURES)}
    cos = cands.dense.astype(np.float64)
    top = max(cands.dense_top, 1e-9)
    out[:, col["dense_cos"]] = cos
    out[:, col["dense_rel_top"]] = cos / top
    out[:, col["dense_log_rank"]] = np.log1p(competition_rank(cands.dense_list_scores, cands.dense))
    out[:, col["fused_max"]] = ((1 - FUSION_ALPHA) * cands.bm25 / max(cands.bm25_top, 1e-9)
                                + FUSION_ALPHA * cos / top)
    out[:, col["claim_dense_top"]] = cands.dense_top
    nb = cands.dense_memory
    if nb is not None and len(nb.sims):
        nearest, max_sim, sum_sim = pool_similarities(nb, rows)
        out[:, col["emem_nearest_sim"]] = nearest
        if max_sim is not None:
            out[:, col["emem_max_sim"]] = max_sim
            out[:, col["emem_sum_sim"]] = sum_sim
    nb = cands.memory
    if nb is not None and len(nb.rows):
        pool = vectors[rows].astype(np.float64)
        best = top_k(nb.sum_sim, MEMORY_PASSAGES, nb.rows)[0]
        out[:, col["mem_dense_max"]] = np.einsum("id,jd->ij", pool, vectors[best].astype(np.float64)).max(axis=1)
        centroid = np.einsum("j,jd->d", nb.sum_sim, vectors[nb.rows].astype(np.float64))
        norm = float(np.sqrt(np.einsum("d,d->", centroid, centroid)))
        if norm > 0:
            out[:, col["mem_dense_centroid"]] = np.einsum("id,d->i", pool, centroid / norm)
    return out
