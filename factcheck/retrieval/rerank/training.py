"""Training data and the tuning loop: fit on the 80% part, choose on the 20% part.

* Features of a *fit* claim are computed with that claim hidden from the label memory
  (leave-one-out), so a memory hit in training means what it means on unseen claims.
* Features of a *holdout* claim use the memory of the fit claims only.
* Every model configuration in the grid is fitted on the fit claims and scored on the
  holdout claims *after* tuning its cut-off there; the best mean holdout F wins (ties:
  first in grid order). Dev claims never enter this module.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from tqdm.auto import tqdm

from factcheck.retrieval.rerank import features as F
from factcheck.retrieval.rerank.candidates import CandidateGenerator
from factcheck.retrieval.rerank.cutoff import Cutoff, tune_cutoff
from factcheck.retrieval.rerank.model import ModelConfig, RelevanceModel


@dataclass
class ClaimSet:
    """Candidates, features and labels of a list of claims, stacked."""

    rows: list[np.ndarray]   # per claim: pool rows (candidate-stage order)
    X: np.ndarray            # all pools' features, stacked
    y: np.ndarray            # 1 = gold
    owner: np.ndarray        # claim position of each stacked row
    n_gold: list[int]        # distinct gold passages per claim (also those outside the pool)

    def per_claim(self, scores: np.ndarray):
        """Per claim: (rows, scores, is-gold) ordered by score desc, ties by BM25 then row
        (the order :class:`~.retriever.RerankRetriever` returns)."""
        bounds = np.concatenate([[0], np.cumsum([len(r) for r in self.rows])])
        bm25 = self.X[:, F.FEATURES.index("bm25")]
        for i, rows in enumerate(self.rows):
            s = scores[bounds[i]:bounds[i + 1]]
            y = self.y[bounds[i]:bounds[i + 1]]
            order = np.lexsort((rows, -bm25[bounds[i]:bounds[i + 1]], -s))
            yield rows[order], s[order], y[order]


def build_claim_set(generator: CandidateGenerator, ctx, claims, row_of: dict, leave_one_out: bool,
                    progress: bool | None = None, desc: str = "reranker features") -> ClaimSet:
    rows, Xs, ys, owners, n_gold = [], [], [], [], []
    k1, b = generator.config.k1, generator.config.b
    # ~90 ms a claim at 1.2M passages (candidates + features): minutes for the training
    # claims, so it shows a bar (tqdm's default stream, stderr).
    for i, claim in enumerate(tqdm(claims, desc=desc, unit=" claims", disable=progress is False)):
        cands = generator.generate(claim.text, exclude_memory=i if leave_one_out else None)
        gold = np.array(sorted({row_of[e] for e in claim.evidences if e in row_of}), dtype=np.int64)
        rows.append(cands.rows)
        Xs.append(F.compute(ctx, cands, k1, b))
        ys.append(np.isin(cands.rows, gold).astype(np.int64))
        owners.append(np.full(len(cands.rows), i, dtype=np.int64))
        n_gold.append(len(set(claim.evidences)))
    X = np.vstack(Xs) if Xs else np.zeros((0, len(F.FEATURES)))
    return ClaimSet(rows, X, np.concatenate(ys) if ys else np.zeros(0, np.int64),
                    np.concatenate(owners) if owners else np.zeros(0, np.int64), n_gold)


@dataclass
class Trial:
    config: ModelConfig
    features: list[str]
    model: RelevanceModel
    cutoff: Cutoff
    holdout_f: float


def fit_and_tune(fit_set: ClaimSet, holdout_set: ClaimSet, features: list[str],
                 grid: list[ModelConfig], progress: bool | None = None) -> tuple[Trial, list[dict]]:
    """Fit each configuration, tune its cut-off on the holdout, keep the best."""
    best, log = None, []
    for config in tqdm(grid, desc="reranker models", unit=" models", disable=progress is False):
        model = RelevanceModel(features, config).fit(fit_set.X, fit_set.y)
        cutoff, f = tune_holdout_cutoff(model, holdout_set)
        log.append({"model": config.to_json(), "cutoff": cutoff.to_json(), "holdout_f": f})
        if best is None or f > best.holdout_f + 1e-12:
            best = Trial(config, list(features), model, cutoff, f)
    return best, log


def tune_holdout_cutoff(model: RelevanceModel, holdout_set: ClaimSet) -> tuple[Cutoff, float]:
    scores = model.predict(holdout_set.X)
    probs, correct = [], []
    for _, s, y in holdout_set.per_claim(scores):
        probs.append(s)
        correct.append(y)
    return tune_cutoff(probs, correct, holdout_set.n_gold)


def recall_at(claim_set: ClaimSet, scores: np.ndarray | None, k: int) -> float:
    """Mean recall@k over claims: of the pool in candidate-stage order (``scores=None``)
    or ordered by ``scores``; gold outside the pool counts as missed."""
    out = []
    if scores is None:
        bounds = np.concatenate([[0], np.cumsum([len(r) for r in claim_set.rows])])
        for i in range(len(claim_set.rows)):
            y = claim_set.y[bounds[i]:bounds[i + 1]]
            out.append(y[:k].sum() / max(claim_set.n_gold[i], 1))
    else:
        for (_, _, y), g in zip(claim_set.per_claim(scores), claim_set.n_gold):
            out.append(y[:k].sum() / max(g, 1))
    return float(np.mean(out)) if out else 0.0
