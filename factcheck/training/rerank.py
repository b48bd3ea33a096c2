"""Training the reranker (:mod:`factcheck.retrieval.rerank` holds the retriever). A fit
claim's features hide it from the label memory (leave-one-out); every configuration is fitted
on the fit claims, its cut-off tuned on the holdout, and the best holdout evidence F wins.
"""

from __future__ import annotations

import pickle
import time
from dataclasses import dataclass

import numpy as np
from factcheck.progress import progress as progress_bar

from factcheck.evaluation.course_metric import evidence_f_from_counts
from factcheck.retrieval.rerank import features as F
from factcheck.retrieval.rerank.candidates import CandidateConfig, CandidateGenerator
from factcheck.retrieval.rerank.cutoff import Cutoff
from factcheck.retrieval.rerank.memory import ClaimMemory
from factcheck.retrieval.rerank.model import ModelConfig, RelevanceModel
from factcheck.retrieval.rerank.retriever import POOL_CLAIMS, RerankRetriever
from factcheck.scoring.topk import rank_order
from factcheck.retrieval.rerank.semantic import ALL_FEATURES, load_scorer, pool_features
from factcheck.retrieval.rerank.terms import TermIndex

__all__ = ["DEFAULT_CANDIDATES", "DENSE_CANDIDATES", "DENSE_FEATURE_SETS", "DEFAULT_GRID", "TrainingData",
           "train_reranker", "tune_cutoff"]

DEFAULT_CANDIDATES = (CandidateConfig(memory_k=20), CandidateConfig(memory_k=50))
# Open mode: plus the dense scorer's top 100 (docs/decisions.md).
DENSE_CANDIDATES = (CandidateConfig(memory_k=20, dense_depth=100), CandidateConfig(memory_k=50, dense_depth=100))
# Open mode feature sets, chosen on the hold-out (reports/open-rerank.md).
DENSE_FEATURE_SETS = (tuple(ALL_FEATURES),
                      tuple(f for f in ALL_FEATURES if not f.startswith("emem_")),
                      tuple(f for f in ALL_FEATURES if not f.startswith("mem_dense")))
DEFAULT_GRID = (
    ModelConfig(learning_rate=0.1, max_iter=150, max_leaf_nodes=15, min_samples_leaf=100),
    ModelConfig(learning_rate=0.1, max_iter=150, max_leaf_nodes=7, min_samples_leaf=200),
)

# The cut-off grid (see :class:`~factcheck.retrieval.rerank.cutoff.Cutoff`).
THRESHOLDS = (0.0, 0.02, 0.04, 0.06, 0.08, 0.1, 0.12, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6)
RELATIVES = (0.0, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
MIN_KS = (1, 2, 3)
MAX_KS = (1, 2, 3, 4, 5, 6, 8)


class TrainingData:
    """The fit/holdout features of one (index, split, candidate settings), computed once."""

    def __init__(self, index, fit_claims, holdout_claims, config: CandidateConfig = CandidateConfig(),
                 terms: TermIndex | None = None, context: F.FeatureContext | None = None,
                 progress: bool | None = None, dense=None):
        self.__dict__.update(vars(training_data(index, fit_claims, holdout_claims, [config], terms, context,
                                                progress, dense)[0]))

    @classmethod
    def _of(cls, **fields) -> "TrainingData":
        out = cls.__new__(cls)
        out.__dict__.update(fields)
        return out


def training_data(index, fit_claims, holdout_claims, configs, terms: TermIndex | None = None,
                  context: F.FeatureContext | None = None, progress: bool | None = None,
                  dense=None) -> list[TrainingData]:
    """One :class:`TrainingData` per candidate setting of ``configs``, from one pass over the
    claims: each claim's BM25 product is computed once for the settings sharing (k1, b) (the
    same features as each setting built alone); ``dense``: the scorer, when loaded already."""
    t0 = time.perf_counter()
    fit_claims, holdout_claims = list(fit_claims), list(holdout_claims)
    terms = terms or TermIndex.for_index(index)
    context = context or F.FeatureContext(index, terms)
    if dense is None and any(c.dense_depth > 0 for c in configs):
        dense = load_scorer(index)
    t1 = time.perf_counter()
    memory = ClaimMemory.from_claims(fit_claims).bind(index.row_of, len(index))
    gens = [CandidateGenerator(terms, memory, c, dense) for c in configs]
    tag = "; ".join(f"memory_k={c.memory_k}" + (f", dense_depth={c.dense_depth}" if c.dense_depth > 0 else "")
                    for c in configs)
    fit_sets = build_claim_sets(gens, context, fit_claims, index.row_of, True, progress,
                                f"reranker features (fit, {tag})")
    holdout_sets = build_claim_sets(gens, context, holdout_claims, index.row_of, False, progress,
                                    f"reranker features (hold-out, {tag})")
    features_s = (time.perf_counter() - t1) / len(configs)  # shared: the sum over the settings is the pass's
    return [TrainingData._of(index=index, config=c, fit_claims=fit_claims, holdout_claims=holdout_claims,
                             terms=terms, context=context, dense=g.dense, fit_set=f, holdout_set=h,
                             timings={"corpus_structures_s": t1 - t0, "features_s": features_s})
            for c, g, f, h in zip(configs, gens, fit_sets, holdout_sets)]


def train_reranker(index, fit_claims, holdout_claims, *, dense: bool = False, configs=None, grid=DEFAULT_GRID,
                   features: list[str] | None = None, memory_claims=None,
                   data: TrainingData | None = None, progress: bool | None = None, jobs: int = 1) -> RerankRetriever:
    """Train a reranker on ``fit_claims``; choose the candidate settings, the model and the
    cut-off on ``holdout_claims`` (best mean evidence F; ties: the first).

    Parameters
    ----------
    index : TagIndex
        The knowledge source's index.
    fit_claims, holdout_claims : list of Claim
        Labelled training claims: fitted on the first, choices made on the second.
    dense : bool, default False
        The open mode: dense candidates and features from the index's passage vectors.
    configs : list of CandidateConfig or None
        Candidate settings to try (default :data:`DEFAULT_CANDIDATES`).
    grid : list of ModelConfig
        Relevance-model settings to try.
    features : list of str or None
        A subset of :data:`~factcheck.retrieval.rerank.semantic.ALL_FEATURES`.
    memory_claims : list of Claim or None
        The returned retriever's label memory (default: fit + holdout).
    data : TrainingData or None
        Reuse precomputed features (then ``configs`` is ignored).
    progress : bool or None
        Progress bars: None automatic, False never.
    jobs : int, default 1
        Worker processes fitting the models (-1: all cores); the same retriever whatever it is.

    Returns
    -------
    RerankRetriever
        Fitted to ``index``; its ``report`` records what was tried and chosen.

    Example
    -------
    >>> import factcheck
    >>> index = factcheck.build_index("data/demo/evidence.json", "out/demo-index", progress=False)
    >>> train = factcheck.read_claims("data/demo/train-claims.json", require_labels=True)
    >>> reranker = train_reranker(index, train[:12], train[12:], progress=False)
    >>> selection = reranker.retrieve("Sea levels are rising.")
    >>> selection.path, selection.ids
    ('reranked', ['evidence-8'])
    >>> reranker.save("out/rerank.skops")
    >>> factcheck.RerankRetriever.load("out/rerank.skops").fit(index).retrieve("Sea levels are rising.").ids
    ['evidence-8']
    """
    t0 = time.perf_counter()
    if configs is None:
        configs = DENSE_CANDIDATES if dense else DEFAULT_CANDIDATES
    grid = list(grid)
    datas = [data] if data is not None else training_data(index, fit_claims, holdout_claims, list(configs),
                                                          progress=progress)
    uses_dense = all(d.dense is not None for d in datas)
    feature_sets = [list(features)] if features else [list(f) for f in DENSE_FEATURE_SETS] if uses_dense \
        else [list(F.FEATURES)]
    best = best_data = None
    log = []
    trials = [(d, feats) for d in datas for feats in feature_sets]
    fitted = fit_trials([(d.fit_set, d.holdout_set, feats, config) for d, feats in trials for config in grid],
                        jobs, progress)
    for n, (d, feats) in enumerate(trials):
        trial, trial_log = fit_and_tune(d.fit_set, d.holdout_set, feats, list(grid),
                                        fitted=fitted[n * len(grid):(n + 1) * len(grid)])
        tag = {"features_left_out": [f for f in ALL_FEATURES if f not in feats]} if uses_dense else {}
        log += [{"candidates": d.config.to_json(), **tag, **entry} for entry in trial_log]
        if best is None or trial.holdout_f > best.holdout_f + 1e-12:
            best, best_data = trial, d
    features = best.features
    d = best_data
    hold_scores = best.model.predict(d.holdout_set.X)
    memory_claims = list(memory_claims) if memory_claims is not None else d.fit_claims + d.holdout_claims
    report = {
        "fit_claims": len(d.fit_claims), "holdout_claims": len(d.holdout_claims),
        "memory_claims": len(memory_claims), "features": features, "grid": log,
        "chosen": {"candidates": d.config.to_json(), "model": best.config.to_json(),
                   "cutoff": best.cutoff.to_json()},
        "holdout": {"evidence_f": best.holdout_f,
                    "candidate_recall@100": recall_at(d.holdout_set, None, 100),
                    "candidate_pool_recall": recall_at(d.holdout_set, None, 10 ** 9),
                    "rerank_recall@100": recall_at(d.holdout_set, hold_scores, 100),
                    "mean_pool": float(np.mean([len(r) for r in d.holdout_set.rows]))},
        "timings": {"features_s": sum(x.timings["features_s"] for x in datas),
                    "total_s": time.perf_counter() - t0},
    }
    retriever = RerankRetriever(d.config, best.model, best.cutoff, ClaimMemory.from_claims(memory_claims), report)
    return retriever.fit(index, terms=d.terms, context=d.context, dense=d.dense)


@dataclass
class ClaimSet:
    """Candidates, features and labels of a list of claims, stacked."""

    rows: list[np.ndarray]   # per claim: pool rows (candidate-stage order)
    X: np.ndarray            # all pools' features, stacked
    y: np.ndarray            # 1 = gold
    n_gold: list[int]        # distinct gold passages per claim (also those outside the pool)

    def per_claim(self, scores: np.ndarray):
        """Per claim: (rows, scores, is-gold) in the retriever's order (score, then BM25, then row)."""
        bm25 = self.split(self.X[:, F.FEATURES.index("bm25")])
        for rows, s, y, b in zip(self.rows, self.split(scores), self.split(self.y), bm25):
            order = rank_order(rows, s, b)
            yield rows[order], s[order], y[order]

    def split(self, values: np.ndarray) -> list[np.ndarray]:
        """``values`` (one per stacked row) cut into the claims' pools."""
        return np.split(values, np.cumsum([len(r) for r in self.rows])[:-1])


def build_claim_set(generator: CandidateGenerator, ctx, claims, row_of: dict, leave_one_out: bool,
                    progress: bool | None = None, desc: str = "reranker features") -> ClaimSet:
    """The candidates, features and labels of ``claims`` (``leave_one_out``: hidden from the memory)."""
    return build_claim_sets([generator], ctx, claims, row_of, leave_one_out, progress, desc)[0]


def build_claim_sets(generators: list[CandidateGenerator], ctx, claims, row_of: dict, leave_one_out: bool,
                     progress: bool | None = None, desc: str = "reranker features") -> list[ClaimSet]:
    """:func:`build_claim_set` for each generator, in one pass over ``claims``: the BM25 first
    stage (the corpus-sized part of a pool) ranks :data:`POOL_CLAIMS` claims at a time, once
    for the generators that share it, at the deepest of their depths (each takes its prefix);
    a claim's dense scores (the other corpus-sized part) are computed once for the generators
    sharing a scorer."""
    claims = list(claims)
    sharing = [next(j for j in range(g + 1) if generators[j].shares_scores(generator))
               for g, generator in enumerate(generators)]
    depth = {j: max(x.config.depth for x, s in zip(generators, sharing) if s == j) for j in set(sharing)}
    parts = [([], [], [], []) for _ in generators]
    firsts = {}
    for i, claim in enumerate(progress_bar(claims, desc=desc, unit="claims", enabled=progress)):
        if i % POOL_CLAIMS == 0:  # the next batch's first stage, once per sharing group
            texts = [c.text for c in claims[i:i + POOL_CLAIMS]]
            firsts = {j: generators[j].first_stage(texts, depth[j]) for j in depth}
        gold = np.array(sorted({row_of[e] for e in claim.evidences if e in row_of}), dtype=np.int64)
        dense = {}  # id(scorer) -> the claim's scores
        for g, generator in enumerate(generators):
            q, rows, scores = firsts[sharing[g]][i % POOL_CLAIMS]
            d = generator.config.depth
            if generator.dense is not None and id(generator.dense) not in dense:
                dense[id(generator.dense)] = generator.dense.scores(claim.text)
            cands = generator.generate(claim.text, exclude_memory=i if leave_one_out else None,
                                       first=(q, rows[:d], scores[:d]),
                                       dense_scores=dense.get(id(generator.dense)))
            rows, Xs, ys, n_gold = parts[g]
            rows.append(cands.rows)
            Xs.append(pool_features(ctx, cands, generator.config.k1, generator.config.b, generator.dense))
            ys.append(np.isin(cands.rows, gold).astype(np.int64))
            n_gold.append(len(set(claim.evidences)))
    out = []
    for generator, (rows, Xs, ys, n_gold) in zip(generators, parts):
        width = len(ALL_FEATURES if generator.dense is not None else F.FEATURES)
        X = np.vstack(Xs) if Xs else np.zeros((0, width))
        out.append(ClaimSet(rows, X, np.concatenate(ys) if ys else np.zeros(0, np.int64), n_gold))
    return out


@dataclass
class Trial:
    config: ModelConfig
    features: list[str]
    model: RelevanceModel
    cutoff: Cutoff
    holdout_f: float


def fit_trial(fit_set: ClaimSet, holdout_set: ClaimSet, features: list[str],
              config: ModelConfig) -> tuple[RelevanceModel, Cutoff, float]:
    """One configuration fitted on ``fit_set``, its cut-off tuned on ``holdout_set``, and that cut-off's F."""
    model = RelevanceModel(features, config).fit(fit_set.X, fit_set.y)
    return (model, *tune_holdout_cutoff(model, holdout_set))


def fit_trials(args: list[tuple], jobs: int = 1, progress: bool | None = None) -> list[tuple]:
    """:func:`fit_trial` of each argument tuple, in order: in ``jobs`` worker processes when
    more than one (a fit's bits do not depend on its threads), so the same models whatever ``jobs``."""
    from joblib import effective_n_jobs
    if effective_n_jobs(jobs) > 1 and len(args) > 1:
        from factcheck.classification.cv import run_folds
        return run_folds(fit_trial, args, jobs, desc="reranker models", unit="models")
    fitted = [fit_trial(*a) for a in progress_bar(args, desc="reranker models", unit="models", enabled=progress)]
    # A worker's result arrives pickled, sharing no object with the arguments: the same here, or
    # the saved model's object graph (skops numbers shared objects), so its bytes, would follow jobs.
    return [pickle.loads(pickle.dumps(f)) for f in fitted]


def fit_and_tune(fit_set: ClaimSet, holdout_set: ClaimSet, features: list[str], grid: list[ModelConfig],
                 progress: bool | None = None, fitted: list[tuple] | None = None) -> tuple[Trial, list[dict]]:
    """Fit each configuration, tune its cut-off on the holdout, keep the best (``fitted``:
    :func:`fit_trial`'s result of each configuration, already at hand)."""
    best, log = None, []
    fitted = fitted if fitted is not None else fit_trials([(fit_set, holdout_set, features, c) for c in grid],
                                                          progress=progress)
    for config, (model, cutoff, f) in zip(grid, fitted, strict=True):
        log.append({"model": config.to_json(), "cutoff": cutoff.to_json(), "holdout_f": f})
        if best is None or f > best.holdout_f + 1e-12:
            best = Trial(config, list(features), model, cutoff, f)
    return best, log


def tune_holdout_cutoff(model: RelevanceModel, holdout_set: ClaimSet) -> tuple[Cutoff, float]:
    pools = list(holdout_set.per_claim(model.predict(holdout_set.X)))
    return tune_cutoff([s for _, s, _ in pools], [y for _, _, y in pools], holdout_set.n_gold)


def recall_at(claim_set: ClaimSet, scores: np.ndarray | None, k: int) -> float:
    """Mean recall@k of the pools in candidate order (``scores=None``) or by ``scores``."""
    pools = claim_set.split(claim_set.y) if scores is None else [y for _, _, y in claim_set.per_claim(scores)]
    out = [y[:k].sum() / max(g, 1) for y, g in zip(pools, claim_set.n_gold)]
    return float(np.mean(out)) if out else 0.0


def tune_cutoff(probs: list[np.ndarray], correct: list[np.ndarray], n_gold: list[int]) -> tuple[Cutoff, float]:
    """The grid's cut-off rule with the best mean evidence F (ties: the first), and that F;
    ``probs[i]``/``correct[i]``: claim i's candidates best first, ``n_gold[i]`` its gold count."""
    k_max = max(MAX_KS)
    n = len(probs)
    P = np.full((n, k_max), -1.0)
    C = np.zeros((n, k_max + 1))  # C[i, k] = gold among the first k
    avail = np.zeros(n, dtype=np.int64)
    for i, (p, c) in enumerate(zip(probs, correct)):
        m = min(len(p), k_max)
        P[i, :m] = p[:m]
        C[i, 1:m + 1] = np.cumsum(c[:m])
        C[i, m + 1:] = C[i, m]
        avail[i] = len(p)
    g = np.asarray(n_gold, dtype=np.float64)
    top = P[:, :1]
    best, best_f = Cutoff(), -1.0
    for t in THRESHOLDS:
        above_t = P >= t
        for r in RELATIVES:
            keep = (above_t & (P >= r * top)).sum(axis=1)
            for lo in MIN_KS:
                for hi in MAX_KS:
                    if hi < lo:
                        continue
                    k = np.minimum(np.minimum(np.maximum(keep, lo), hi), avail)
                    hits = C[np.arange(n), k]
                    f = evidence_f_from_counts(hits, k, g).mean() if n else 0.0
                    if f > best_f + 1e-12:
                        best, best_f = Cutoff(t, r, lo, hi), float(f)
    return best, best_f
