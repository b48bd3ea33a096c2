"""Retrieval measured on its own: recall@k, MRR, any-gold rate, fallback share.

Inputs are plain ids, so any retriever (or a predictions file) can be scored:
``ranked`` is a claim's passages in rank order (as deep as measured), ``selected`` the
passages finally returned as evidence.
"""

from __future__ import annotations

import numpy as np

from factcheck.evaluation.intervals import bootstrap_mean, wilson

DEFAULT_KS = (1, 5, 10, 20, 50, 100)
FALLBACK_CAPABLE = {"filtered", "reranked", "fallback"}


def recall_at(ranked: list[str], gold: list[str], k: int) -> float:
    """The share of the distinct gold ids among the first ``k`` ranked (0 without gold)."""
    gold_set = set(gold)
    return len(gold_set.intersection(ranked[:k])) / len(gold_set) if gold_set else 0.0


def reciprocal_rank(ranked: list[str], gold: list[str]) -> float:
    """1 / the rank of the first gold id (0 if none is ranked)."""
    gold_set = set(gold)
    for i, pid in enumerate(ranked, start=1):
        if pid in gold_set:
            return 1.0 / i
    return 0.0


def retrieval_metrics(claims, ranked: dict[str, list[str]] | None, selected: dict[str, list[str]],
                      paths: dict[str, str] | None = None, ks=DEFAULT_KS) -> dict:
    """Metrics with 95% intervals over the claims present in ``selected`` that have gold
    evidence (as IR evaluation skips unjudged queries: a FEVER NOT ENOUGH INFO claim has no
    gold sentence to find; ``without_gold`` counts the claims left out, when any are)."""
    present = [c for c in claims if c.id in selected and c.evidences]
    out: dict = {"claims": len(present)}
    skipped = sum(1 for c in claims if c.id in selected and not c.evidences)
    if skipped:
        out["without_gold"] = skipped
    if ranked is not None:
        depth = min((len(ranked[c.id]) for c in present), default=0)
        out["ranking_depth"] = depth
        for k in ks:
            if k <= depth:
                out[f"recall@{k}"] = bootstrap_mean([recall_at(ranked[c.id], c.evidences, k) for c in present])
        out["mrr"] = bootstrap_mean([reciprocal_rank(ranked[c.id], c.evidences) for c in present])
    hits = [bool(set(selected[c.id]) & set(c.evidences)) for c in present]
    out["any_gold"] = wilson(int(sum(hits)), len(hits))
    out["selected_recall"] = bootstrap_mean([recall_at(selected[c.id], c.evidences, len(selected[c.id]))
                                             for c in present])
    out["mean_selected"] = float(np.mean([len(selected[c.id]) for c in present])) if present else 0.0
    # Only retrievers that can fall back (tag rule: filtered/fallback; reranker: reranked/
    # fallback) get a fallback share; for BM25 (always "ranked") it would be a meaningless 0.
    if paths and any(p in FALLBACK_CAPABLE for p in paths.values()):
        fb = [paths.get(c.id) == "fallback" for c in present]
        out["fallback_share"] = wilson(int(sum(fb)), len(fb))
    return out
