"""How much retrieval costs the classifier: the same model on gold vs retrieved evidence,
compared pairwise (paired bootstrap of the accuracy difference, McNemar's exact test)."""

from __future__ import annotations

import numpy as np
from sklearn.metrics import confusion_matrix, f1_score

from factcheck.evaluation.intervals import (Metric, bootstrap_interval, bootstrap_mean, mcnemar_exact,
                                            paired_bootstrap_diff, wilson)
from factcheck.formats.claims import ordered_labels


def bootstrap_macro_f1(y_true, y_pred, labels=None) -> Metric:
    """Macro-F1 over ``labels``, its interval from per-resample confusion counts."""
    labels = list(labels if labels is not None else ordered_labels({*y_true, *y_pred}))
    t = np.array([labels.index(v) for v in y_true])
    p = np.array([labels.index(v) for v in y_pred])

    def macro_f1(T, P, axis=-1):  # per resample, from confusion counts
        f1s = []
        for k in range(len(labels)):
            tp = np.sum((T == k) & (P == k), axis=axis)
            fp = np.sum((T != k) & (P == k), axis=axis)
            fn = np.sum((T == k) & (P != k), axis=axis)
            denom = 2 * tp + fp + fn
            f1s.append(np.where(denom > 0, 2 * tp / np.maximum(denom, 1), 0.0))
        return np.mean(f1s, axis=0)

    lo, hi = bootstrap_interval(len(t), lambda i: macro_f1(t[i], p[i]))
    value = f1_score(y_true, y_pred, labels=list(labels), average="macro", zero_division=0)
    return Metric(value, lo, hi, len(t), "bootstrap")


def condition_summary(y_true, y_pred, labels=None) -> dict:
    """Accuracy, macro-F1, per-label recall and the confusion matrix over ``labels``."""
    labels = list(labels if labels is not None else ordered_labels({*y_true, *y_pred}))
    correct = np.array([a == b for a, b in zip(y_true, y_pred)], dtype=float)
    gold = np.array(y_true, dtype=object)
    per_label = {label: {"recall": wilson(int(correct[gold == label].sum()), int((gold == label).sum())),
                         "predicted": int(sum(p == label for p in y_pred))} for label in labels}
    return {
        "accuracy": bootstrap_mean(correct),
        "macro_f1": bootstrap_macro_f1(y_true, y_pred, labels),
        "per_label": per_label,
        "confusion": {"labels": labels,
                      "matrix": confusion_matrix(y_true, y_pred, labels=labels).tolist()},
    }


def compare(y_true, pred_a, pred_b, name_a: str, name_b: str) -> dict:
    ca = np.array([a == b for a, b in zip(y_true, pred_a)], dtype=float)
    cb = np.array([a == b for a, b in zip(y_true, pred_b)], dtype=float)
    return {
        "difference": f"accuracy({name_a}) - accuracy({name_b})",
        "accuracy_difference": paired_bootstrap_diff(ca, cb),
        "mcnemar": mcnemar_exact(ca.astype(bool), cb.astype(bool)),
    }


def ablation(y_true, pred_gold, pred_retrieved, baselines: dict | None = None, labels=None) -> dict:
    """Gold versus retrieved evidence (and baselines) over ``labels`` (default: every label seen,
    as scikit-learn's metrics take them: a label of the set that no claim has and no model
    predicts would only add a zero to macro-F1)."""
    if labels is None:
        every = {*y_true, *pred_gold, *pred_retrieved, *(p for ps in (baselines or {}).values() for p in ps)}
        labels = ordered_labels(every)
    out = {
        "claims": len(y_true),
        "gold": condition_summary(y_true, pred_gold, labels),
        "retrieved": condition_summary(y_true, pred_retrieved, labels),
        "gold_vs_retrieved": compare(y_true, pred_gold, pred_retrieved, "gold", "retrieved"),
    }
    for name, preds in (baselines or {}).items():
        out.setdefault("baselines", {})[name] = {
            **condition_summary(y_true, preds, labels),
            "retrieved_vs_baseline": compare(y_true, pred_retrieved, preds, "retrieved", name),
        }
    return out
