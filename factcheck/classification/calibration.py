"""Temperature scaling (``softmax(z / T)``) fitted on the CV's out-of-fold decision values and
folded into the final logistic regression; :func:`reliability` reports the calibration.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.special import log_softmax, softmax

BINS = 10


def fit_temperature(decision: np.ndarray, y_index: np.ndarray) -> float:
    """The T > 0 minimising the log-loss of ``softmax(decision / T)`` (``y_index``: each row's true column)."""
    z = np.asarray(decision, dtype=np.float64)
    y_index = np.asarray(y_index)
    if len(z) == 0:
        return 1.0
    z = np.where(np.isfinite(z), z, -1e9)  # a label absent from a fold: probability 0
    rows = np.arange(len(z))

    def loss(log_t):
        return -float(log_softmax(z / np.exp(log_t), axis=1)[rows, y_index].mean())

    res = minimize_scalar(loss, bounds=(np.log(0.05), np.log(20.0)), method="bounded",
                          options={"xatol": 1e-6})
    return float(np.exp(res.x))


def scale(decision: np.ndarray, temperature: float) -> np.ndarray:
    """``softmax(decision / temperature)`` per row (a non-finite value: probability 0)."""
    z = np.where(np.isfinite(decision), decision, -1e9)
    return softmax(z / temperature, axis=1)


def apply_temperature(pipeline, temperature: float):
    """Fold T into the pipeline's final logistic regression (in place); returns it."""
    model = pipeline.steps[-1][1]
    model.coef_ = model.coef_ / temperature
    model.intercept_ = model.intercept_ / temperature
    return pipeline


def reliability(y_true, proba: np.ndarray, labels, bins: int = BINS) -> dict:
    """``{"n", "bins": [{"low", "high", "count", "confidence", "accuracy"}] * bins, "ece"}``;
    ``ece = sum_b n_b / n * |accuracy_b - confidence_b|``."""
    proba = np.asarray(proba, dtype=np.float64)
    labels = list(labels)
    y = np.array([labels.index(v) for v in y_true])
    conf = proba.max(axis=1) if len(proba) else np.zeros(0)
    right = (proba.argmax(axis=1) == y) if len(proba) else np.zeros(0, bool)
    edges = np.linspace(0.0, 1.0, bins + 1)
    # Same binning as sklearn.calibration.calibration_curve(strategy="uniform").
    which = np.searchsorted(edges[1:-1], conf, side="right")
    out, ece = [], 0.0
    for b in range(bins):
        mask = which == b
        n = int(mask.sum())
        c = float(conf[mask].mean()) if n else None
        a = float(right[mask].mean()) if n else None
        if n:
            ece += n / len(conf) * abs(a - c)
        out.append({"low": float(edges[b]), "high": float(edges[b + 1]), "count": n, "confidence": c,
                    "accuracy": a})
    return {"n": int(len(conf)), "bins": out, "ece": float(ece) if len(conf) else None}

