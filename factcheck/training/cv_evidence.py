"""Out-of-fold evidence: a training claim's passages come from a reader that never saw its
label (the reranker: per fold, a copy whose memory holds only the other folds' claims).
"""

from __future__ import annotations

from typing import Callable

from factcheck.retrieval.base import evidence_of, run_retrieval


def out_of_fold_evidence(claims: list, folds: list, fit_reader: Callable[[list], object] | None = None,
                         reader=None) -> dict[str, list[str]]:
    """Evidence ids per claim id, from ``reader``, or from ``fit_reader(train_claims)`` per fold."""
    if reader is not None:
        return evidence_of(run_retrieval(reader, claims, depth=0))
    out: dict[str, list[str]] = {}
    covered = set()
    for test in folds:
        held = {int(i) for i in test}
        covered |= held
        r = fit_reader([c for i, c in enumerate(claims) if i not in held])
        part = [claims[i] for i in sorted(held)]
        out.update(evidence_of(run_retrieval(r, part, depth=0)))
    if covered != set(range(len(claims))):
        raise ValueError("folds must partition the claims")
    return {c.id: out[c.id] for c in claims}


def fold_memory_reranker(rerank, index):
    """``fit_reader`` for the reranker: the same model and cut-off, a memory of the given claims."""
    from factcheck.retrieval.rerank.memory import ClaimMemory
    from factcheck.retrieval.rerank.retriever import RerankRetriever

    inner = getattr(rerank, "inner_", rerank)  # a chunked reranker: its fitted inner one

    def fit_reader(train_claims):
        return RerankRetriever(inner.candidates, inner.model, inner.cutoff, ClaimMemory.from_claims(train_claims),
                               inner.report).fit(index, terms=inner.terms_, context=inner.context_, dense=inner.dense_)
    return fit_reader
