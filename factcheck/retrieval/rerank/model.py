"""The relevance model: P(gold | claim, candidate), deterministic boosted trees (docs/decisions.md,
"The reranker's trees")."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from sklearn.ensemble import HistGradientBoostingClassifier
from threadpoolctl import ThreadpoolController

from factcheck.errors import Interval, validate_params
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

    _parameter_constraints = {"learning_rate": Interval(float, 0), "max_iter": Interval(int, 1),
                              "max_leaf_nodes": Interval(int, 2), "min_samples_leaf": Interval(int, 1),
                              "l2_regularization": Interval(float, 0), "negative_rate": Interval(float, 0, 1)}
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
    """P(gold | claim, candidate) from the candidate features. Its attributes are part of
    the ``rerank.skops`` format: renaming one makes older models unreadable."""

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
        """Fit on ``X`` (every column of ``ALL_FEATURES``), a fixed-seed sample of the negatives weighted back up."""
        c = self.config
        validate_params(c, "config.")
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
