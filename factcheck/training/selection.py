"""Tune every retriever on the training split and pick the one with the best hold-out
evidence F; a hold-out under :data:`MIN_HOLDOUT_TO_CHOOSE` claims uses :data:`DEFAULT_METHOD`.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path

from factcheck.errors import FactcheckWarning
from factcheck.evaluation.evaluate import evaluate
from factcheck.formats.splits import MAX_SCORING_CLAIMS, claims_sample
from factcheck.training import tuning
from factcheck.retrieval.base import evidence_of, run_retrieval

MIN_HOLDOUT_TO_CHOOSE = 30  # below it one claim moves F more than the gaps between retrievers
DEFAULT_METHOD = "bm25"


@dataclass
class TunedRetrievers:
    """Every tuned retriever, its sweep and hold-out score, and which one the system uses."""

    retrievers: dict = field(default_factory=dict)
    sweeps: dict = field(default_factory=dict)
    holdout_scores: dict = field(default_factory=dict)
    best: str = "bm25"
    reader: str | None = None          # whose passages the classifier reads
    reader_scores: dict = field(default_factory=dict)
    chosen_by: str = "holdout"         # "holdout", "default" (hold-out too small) or "user"
    # name -> claim id -> evidence ids on the tuning claims, where its sweep already had them
    evidence: dict = field(default_factory=dict)


def tune_retrievers(index, fit, holdout, out: Path, method: str = "auto", progress=None,
                    mode: str = "course", pool: dict | None = None, jobs: int = 1) -> TunedRetrievers:
    """Every candidate tuned (sweeps written to ``out/tuning``) and scored on the hold-out
    (``pool``: the two-stage retriever's ``model`` and the pool settings given, when it is named;
    :func:`~factcheck.training.tuning.sweep_pool` tunes the others); ``jobs``: worker processes
    for the reranker's models and the pools' new passages (the same results whatever it is)."""
    from factcheck.retrieval.bm25 import BM25Retriever
    from factcheck.retrieval.tag_rule import TagRuleRetriever

    c = TunedRetrievers()

    def add(name, sweep, cls):
        c.sweeps[name] = sweep
        c.retrievers[name] = cls(**sweep.chosen).fit(index)

    add("tags", tuning.sweep_tags(TagRuleRetriever().fit(index), fit, holdout, progress=progress), TagRuleRetriever)
    add("bm25", tuning.sweep_bm25(index, fit, holdout, progress=progress), BM25Retriever)
    if mode == "open":
        from factcheck.retrieval.dense import DenseRetriever, HybridRetriever
        bm25 = c.sweeps["bm25"].chosen
        hybrid, dense = tuning.sweep_open(index, fit, holdout, bm25["k1"], bm25["b"], progress=progress)
        add("hybrid", hybrid, HybridRetriever)
        if method == "dense":  # weaker than BM25 on both evidence files: tuned only when named
            add("dense", dense, DenseRetriever)
        if method == "pool" or (method == "auto" and pool is not None):  # named, or a transformer given
            from factcheck.retrieval.pool import PoolRetriever
            add("pool", tuning.sweep_pool(index, fit, holdout, bm25["k1"], bm25["b"], pool, progress=progress,
                                          jobs=jobs), PoolRetriever)
    if method == "tfidf":  # no automatic candidate: tuned only when named
        from factcheck.retrieval.tfidf import TfidfRetriever
        add("tfidf", tuning.sweep_tfidf(index, fit, holdout, progress=progress), TfidfRetriever)
    if method in ("auto", "rerank"):  # training it takes minutes: not when another method is named
        from factcheck.training.rerank import train_reranker
        c.retrievers["rerank"] = train_reranker(index, fit, holdout, progress=progress, dense=(mode == "open"),
                                                  jobs=jobs)

    for name, sweep in c.sweeps.items():
        sweep.write_csv(out / "tuning" / f"{name}-sweep.csv")
    c.evidence = {name: sweep.evidence for name, sweep in c.sweeps.items() if sweep.evidence is not None}
    for name, retriever in c.retrievers.items():
        evidences = c.evidence.get(name) or evidence_of(run_retrieval(retriever, holdout, depth=0))
        c.holdout_scores[name] = tuning.mean_f([evidences[h.id] for h in holdout], holdout)
    if method != "auto":
        c.best, c.chosen_by = method, "user"
    elif len(holdout) < MIN_HOLDOUT_TO_CHOOSE:
        c.best, c.chosen_by = DEFAULT_METHOD, "default"
        warnings.warn(FactcheckWarning(
            f"the training hold-out has {len(holdout)} claims, too few to choose a retriever "
            f"(need {MIN_HOLDOUT_TO_CHOOSE}); using the default, {DEFAULT_METHOD}"), stacklevel=2)
    else:
        c.best = max(c.holdout_scores, key=lambda k: (c.holdout_scores[k], k))
    return c


def dev_scores(c: TunedRetrievers, dev, explained_by: dict | None = None,
               max_claims: int = MAX_SCORING_CLAIMS) -> dict:
    """Every candidate retriever on dev (reported once, never used for a choice), each on the
    same claims: every dev claim, or beyond ``max_claims`` a deterministic sample of them (by
    claim id, as the tuning sample), since each retriever ranks each of them at the index's
    size. ``explained_by``: retriever name -> dev's explanations already at hand (not ranked
    again). Each row records the claims it scored (``claims``)."""
    sample = claims_sample(dev, max_claims, param="max_scoring_claims")
    out = {}
    for name, retriever in c.retrievers.items():
        at_hand = (explained_by or {}).get(name)
        explained = {d.id: at_hand[d.id] for d in sample} if at_hand else run_retrieval(retriever, sample)
        result = evaluate({cid: {"evidences": e.ids} for cid, e in explained.items()}, sample, explained).to_json()
        out[name] = {"params": retriever.params(), "evidence_f": result["intervals"]["evidence_f"],
                     "retrieval": result["retrieval"], "claims": len(sample)}
    return out
