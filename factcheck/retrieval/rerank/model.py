"""The relevance model: P(gold | claim, candidate) from the candidate features.

A pointwise ``HistGradientBoostingClassifier`` (gold passages of the training claims
positive, every other candidate of the same claim negative). Why boosting rather than
a linear model: the useful interactions are non-linear (a memory hit means little when
the nearest training claim is far; BM25 scores mean different things for short and long
claims), and trees need no scaling. Why pointwise: the cut-off needs probabilities that
are comparable *across* claims (a threshold), which a pairwise ranker does not give.

``features`` names the columns the model uses, so a feature group is ablated by simply
leaving its columns out. Fixed ``random_state`` and no early stopping (no random
validation split) keep training deterministic.

Training and prediction run OpenMP on **one thread** (threadpoolctl, a scikit-learn
dependency). Measured on the shared 2-core machine under load: fitting 9.8 s instead of
90 s, predicting one claim's pool 3 ms instead of 31 ms -- an OpenMP team that has to
wait for busy cores costs far more than it saves, and a web app serves one claim per
request anyway. One thread also makes the float summation order independent of the
machine's core count.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from sklearn.ensemble import HistGradientBoostingClassifier
from threadpoolctl import ThreadpoolController

from factcheck.retrieval.rerank.features import FEATURES
from factcheck.retrieval.rerank.semantic import ALL_FEATURES

SEED = 20240508
_THREADS = None


def one_thread():
    """Context manager: OpenMP (HistGradientBoosting's parallelism) limited to one thread."""
    global _THREADS
    if _THREADS is None:
        _THREADS = ThreadpoolController()
    return _THREADS.limit(limits=1, user_api="openmp")


@dataclass(frozen=True)
class ModelConfig:
    """The boosted trees' settings (one grid point of training)."""

    learning_rate: float = 0.05
    max_iter: int = 300
    max_leaf_nodes: int = 15
    min_samples_leaf: int = 100
    l2_regularization: float = 1.0
    negative_rate: float = 0.3   # share of negatives kept for training (weighted back up)

    def to_json(self) -> dict:
        """The settings as a dict."""
        return asdict(self)


class RelevanceModel:
    """P(gold | claim, candidate) from the candidate features (see the module docstring).

    Stored in ``rerank.skops`` (on the model allow-list): its attributes are part of the
    file format, so renaming one would make older models unreadable.
    """

    def __init__(self, features: list[str] | None = None, config: ModelConfig = ModelConfig()):
        self.features = list(features or FEATURES)
        unknown = [f for f in self.features if f not in ALL_FEATURES]
        if unknown:
            raise ValueError(f"unknown features: {unknown}")
        self.config = config
        self._cols = np.array([ALL_FEATURES.index(f) for f in self.features], dtype=np.int64)

    def __repr__(self) -> str:
        return f"RelevanceModel(features={len(self.features)}, config={self.config!r})"

    def fit(self, X: np.ndarray, y: np.ndarray) -> "RelevanceModel":
        """``X`` has every lexical feature (:data:`FEATURES` order), then the dense ones if
        any is used (:data:`~.semantic.ALL_FEATURES` order); only ``self.features`` are used.

        Negatives outnumber positives ~130:1 and most are easy, so a fixed-seed sample of
        ``negative_rate`` of them is kept with weight ``1 / negative_rate``: probabilities
        stay calibrated and training is ~3x faster (the training budget is minutes).
        """
        c = self.config
        y = np.asarray(y, dtype=np.int64)
        weight = np.ones(len(y))
        if c.negative_rate < 1.0:
            keep = (y == 1) | (np.random.default_rng(SEED).random(len(y)) < c.negative_rate)
            X, y = X[keep], y[keep]
            weight = np.where(y == 1, 1.0, 1.0 / c.negative_rate)
        self.clf = HistGradientBoostingClassifier(
            learning_rate=c.learning_rate, max_iter=c.max_iter, max_leaf_nodes=c.max_leaf_nodes,
            min_samples_leaf=c.min_samples_leaf, l2_regularization=c.l2_regularization,
            early_stopping=False, random_state=SEED)
        with one_thread():
            self.clf.fit(X[:, self._cols], y, sample_weight=weight)
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        """P(gold) per row."""
        if not len(X):
            return np.zeros(0)
        with one_thread():
            return self.clf.predict_proba(X[:, self._cols])[:, 1]
