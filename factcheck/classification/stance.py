"""Per-passage stance (SUPPORTS / REFUTES / IRRELEVANT of one claim-passage pair) aggregated
over a claim's passages and appended to the direct features: a candidate of the classifier
CV, off by default. Training aggregates are cross-fitted over ``INNER_FOLDS`` folds, so the
claim model never learns from stance probabilities of a model that saw the claim.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from factcheck.classification import cv
from factcheck.classification.features import ClaimEvidenceFeatures, concat_views, take_views, views_of
from factcheck.formats.claims import ordered_labels

STANCES = ("SUPPORTS", "REFUTES", "IRRELEVANT")
PAIR_GROUPS = ("evidence", "shared", "unshared", "stats")
INNER_FOLDS, INNER_SEED = 5, 7
N_AGGREGATES = 11


class PairSet:
    """Every (claim, passage) pair of ``(claim, passages)`` items, analysed once."""

    def __init__(self, X, ids=None, gold=None):
        claim_of, rank, is_gold, pairs = [], [], [], []
        for i, (claim, passages) in enumerate(X):
            gold_i = set(gold[i]) if gold is not None else set()
            for r, passage in enumerate(passages):
                pairs.append((claim, [passage]))
                claim_of.append(i)
                rank.append(r)
                is_gold.append(ids is not None and r < len(ids[i]) and ids[i][r] in gold_i)
        self.claim_of = np.asarray(claim_of, dtype=np.int64)
        self.rank = np.asarray(rank, dtype=np.int64)
        self.is_gold = np.asarray(is_gold, dtype=bool)
        self.n_claims = len(X)
        self.views = views_of(pairs, PAIR_GROUPS)

    def rows_of(self, claims) -> np.ndarray:
        """The pairs of the given claim positions."""
        return np.flatnonzero(np.isin(self.claim_of, np.asarray(claims, dtype=np.int64)))


def fit_stance(views: dict, stances, C: float = 1.0):
    """``(features, model)`` fitted on pair views and their stances."""
    if len(set(stances)) < 2:  # tiny training data (the demo): no stance model, aggregates 0
        return None, None
    features = ClaimEvidenceFeatures(groups=PAIR_GROUPS, min_df=1).fit_views(views)
    model = LogisticRegression(C=C, class_weight="balanced", max_iter=5000)
    return features, model.fit(features.transform_views(views), list(stances))


def stance_proba(stance, views: dict) -> np.ndarray:
    """(pairs, 3) in ``STANCES`` order."""
    features, model = stance
    if model is None or not len(views["claim"]):
        return np.zeros((0, len(STANCES)))
    return cv.in_label_order(model.predict_proba(features.transform_views(views)), model.classes_, STANCES, 0.0)


def aggregate(proba: np.ndarray, claim_of: np.ndarray, rank: np.ndarray, n_claims: int) -> np.ndarray:
    """``(n_claims, N_AGGREGATES)``: each claim's aggregates over its pairs."""
    out = np.zeros((n_claims, N_AGGREGATES))
    for i in range(n_claims):
        rows = np.flatnonzero(claim_of == i)
        if not len(rows):
            continue
        p = proba[rows]
        s, r, rel = p[:, 0], p[:, 1], 1.0 - p[:, 2]
        w = 1.0 / (1.0 + rank[rows])
        w = w / w.sum()
        out[i] = [s.max(), r.max(), rel.max(), s.mean(), r.mean(), rel.mean(), w @ s, w @ r, w @ rel,
                  min(s.max(), r.max()), float(len(rows))]
    return out


def training_pairs(pairs_gold: PairSet, pairs_read: PairSet, labels: np.ndarray, claims):
    """The stance training set of the given claim positions: (views, stances)."""
    claims = np.asarray(claims, dtype=np.int64)
    g = pairs_gold.rows_of(claims)
    g = g[np.isin(labels[pairs_gold.claim_of[g]], ("SUPPORTS", "REFUTES"))]
    r = pairs_read.rows_of(claims)
    r = r[~pairs_read.is_gold[r]]
    views = concat_views(take_views(pairs_gold.views, g), take_views(pairs_read.views, r))
    return views, list(labels[pairs_gold.claim_of[g]]) + ["IRRELEVANT"] * len(r)


def _aggregates_for(stance, ps: PairSet, claims) -> np.ndarray:
    rows = ps.rows_of(claims)
    return aggregate(stance_proba(stance, take_views(ps.views, rows)), ps.claim_of[rows], ps.rank[rows],
                     ps.n_claims)[np.asarray(claims, dtype=np.int64)]


def cross_fitted_aggregates(pairs_gold: PairSet, pairs_read: PairSet, labels: np.ndarray, claims):
    """Cross-fitted aggregates over the gold and the read passages of ``claims``, and the stance model."""
    claims = np.asarray(claims, dtype=np.int64)
    gold_agg = np.zeros((len(claims), N_AGGREGATES))
    read_agg = np.zeros_like(gold_agg)
    y = labels[claims]
    k = max(2, min(INNER_FOLDS, int(np.unique(y, return_counts=True)[1].min())))
    for tr, te in StratifiedKFold(k, shuffle=True, random_state=INNER_SEED).split(np.zeros(len(y)), y):
        stance = fit_stance(*training_pairs(pairs_gold, pairs_read, labels, claims[tr]))
        gold_agg[te] = _aggregates_for(stance, pairs_gold, claims[te])
        read_agg[te] = _aggregates_for(stance, pairs_read, claims[te])
    return gold_agg, read_agg, fit_stance(*training_pairs(pairs_gold, pairs_read, labels, claims))


class StanceFeatures(BaseEstimator, TransformerMixin):
    """Direct claim+evidence features plus stance aggregates, built from fitted parts."""

    def __init__(self, direct=None, stance_features=None, stance_model=None, scaler=None, weight: float = 1.0):
        self.direct = direct
        self.stance_features = stance_features
        self.stance_model = stance_model
        self.scaler = scaler
        self.weight = weight

    def fit(self, X, y=None):
        """Nothing to fit: the parts are given."""
        return self

    def aggregates(self, X) -> np.ndarray:
        """The stance aggregates of pairs ``X``."""
        ps = PairSet(X)
        p = stance_proba((self.stance_features, self.stance_model), ps.views)
        return aggregate(p, ps.claim_of, ps.rank, ps.n_claims)

    def combine(self, direct_matrix, aggregates):
        """The direct features beside the scaled aggregates."""
        return sp.hstack([direct_matrix, sp.csr_matrix(self.scaler.transform(aggregates) * self.weight)]).tocsr()

    def transform(self, X):
        """The pairs ``X`` as one sparse matrix."""
        return self.combine(self.direct.transform(X), self.aggregates(X))


def _direct_and_aggregates(cfg, gold_views, read_views, pairs_gold, pairs_read, y, train, embedding=None):
    """StanceFeatures fitted on the ``train`` claims, the stance model, the training matrix and labels."""
    train = np.asarray(train, dtype=np.int64)
    gold_agg, read_agg, stance = cross_fitted_aggregates(pairs_gold, pairs_read, y, train)
    views, A, y_train = take_views(gold_views, train), gold_agg, y[train]
    if cfg.augment:
        views = concat_views(views, take_views(read_views, train))
        A, y_train = np.vstack([gold_agg, read_agg]), np.concatenate([y_train, y_train])
    direct = ClaimEvidenceFeatures(groups=cfg.groups, stats_weight=cfg.stats_weight,
                                   embedding=embedding).fit_views(views)
    features = StanceFeatures(direct, stance[0], stance[1], StandardScaler().fit(A))
    return features, stance, features.combine(direct.transform_views(views), A), y_train


def stance_fold_job(split, y, gold_views, read_views, pairs_gold, pairs_read, cfgs, labels):
    """Like ``cv._fold_job`` for configurations with ``stance=True``."""
    out = {}
    te = split.test
    for i, cfg in enumerate(cfgs):
        features, stance, M, y_train = _direct_and_aggregates(cfg, gold_views, read_views, pairs_gold, pairs_read,
                                                              y, split.train)
        M_read = features.combine(features.direct.transform_views(take_views(read_views, te)),
                                  _aggregates_for(stance, pairs_read, te))
        M_gold = features.combine(features.direct.transform_views(take_views(gold_views, te)),
                                  _aggregates_for(stance, pairs_gold, te))
        out[i] = cv.fit_scored(M, y_train, cfg, M_read, M_gold, labels)
    return out


def stance_cross_validate(y, splits, gold_views, read_views, pairs_gold, pairs_read, cfgs, reader, jobs=1,
                          labels=None):
    """Like :func:`~factcheck.classification.cv.cross_validate` for stance configurations."""
    y = np.asarray(y)
    labels = tuple(labels if labels is not None else ordered_labels(set(y.tolist())))
    per_split = cv.run_folds(stance_fold_job, [(s, y, gold_views, read_views, pairs_gold, pairs_read, cfgs, labels)
                                            for s in splits], jobs, desc="stance cross-validation")
    return cv.collect(y, splits, per_split, cfgs, reader, labels)


def fit_stance_final(cfg, gold_views, read_views, pairs_gold, pairs_read, y, embedding=None):
    """The stance configuration refitted on all training claims (StanceFeatures, then the model)."""
    y = np.asarray(y)
    features, _, M, y_train = _direct_and_aggregates(cfg, gold_views, read_views, pairs_gold, pairs_read, y,
                                                     np.arange(len(y)), embedding)
    model = LogisticRegression(C=cfg.C, class_weight=cfg.class_weight, max_iter=5000).fit(M, list(y_train))
    return Pipeline([("features", features), ("model", model)])
