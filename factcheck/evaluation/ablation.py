"""How much retrieval costs the classifier: the same model on gold vs retrieved evidence.

Both conditions are predictions for the same claims, so differences are paired: a
paired bootstrap interval for the accuracy difference and McNemar's exact test on the
claims where exactly one condition is right. Macro-F1 gets a bootstrap interval
computed from per-resample confusion counts (vectorised over all resamples at once).
"""

from __future__ import annotations

import numpy as np
from sklearn.metrics import confusion_matrix, f1_score

from factcheck.evaluation.intervals import (Estimate, bootstrap_mean, mcnemar_exact, paired_bootstrap_diff,
                                            resample_indices, wilson)
from factcheck.formats.claims import label_set


def bootstrap_macro_f1(y_true, y_pred, labels=None) -> Estimate:
    """Macro-F1 over ``labels`` (default: the label set of the gold and predicted labels)."""
    labels = list(labels if labels is not None else label_set([*y_true, *y_pred]))
    t = np.array([labels.index(v) for v in y_true])
    p = np.array([labels.index(v) for v in y_pred])
    idx = resample_indices(len(t))
    T, P = t[idx], p[idx]
    f1s = []
    for k in range(len(labels)):
        tp = np.sum((T == k) & (P == k), axis=1)
        fp = np.sum((T != k) & (P == k), axis=1)
        fn = np.sum((T == k) & (P != k), axis=1)
        denom = 2 * tp + fp + fn
        f1s.append(np.where(denom > 0, 2 * tp / np.maximum(denom, 1), 0.0))
    macro = np.mean(f1s, axis=0)
    lo, hi = np.percentile(macro, [2.5, 97.5])
    value = f1_score(y_true, y_pred, labels=list(labels), average="macro", zero_division=0)
    return Estimate(float(value), float(lo), float(hi), "bootstrap", len(t))


def condition_summary(y_true, y_pred, labels=None) -> dict:
    """Accuracy, macro-F1, per-label recall and the confusion matrix over ``labels``."""
    labels = list(labels if labels is not None else label_set([*y_true, *y_pred]))
    correct = np.array([a == b for a, b in zip(y_true, y_pred)], dtype=float)
    per_label = {}
    for label in labels:
        mask = [t == label for t in y_true]
        n = int(sum(mask))
        hits = int(sum(c for c, m in zip(correct, mask) if m))
        per_label[label] = {"recall": wilson(hits, n).to_json(),
                            "predicted": int(sum(p == label for p in y_pred))}
    return {
        "accuracy": bootstrap_mean(correct).to_json(),
        "macro_f1": bootstrap_macro_f1(y_true, y_pred, labels).to_json(),
        "per_label": per_label,
        "confusion": {"labels": labels,
                      "matrix": confusion_matrix(y_true, y_pred, labels=labels).tolist()},
    }


def compare(y_true, pred_a, pred_b, name_a: str, name_b: str) -> dict:
    ca = np.array([a == b for a, b in zip(y_true, pred_a)], dtype=float)
    cb = np.array([a == b for a, b in zip(y_true, pred_b)], dtype=float)
    return {
        "difference": f"accuracy({name_a}) - accuracy({name_b})",
        "accuracy_difference": paired_bootstrap_diff(ca, cb).to_json(),
        "mcnemar": mcnemar_exact(ca.astype(bool), cb.astype(bool)),
    }


def ablation(y_true, pred_gold, pred_retrieved, baselines: dict | None = None, labels=None) -> dict:
    """Gold versus retrieved evidence (and baselines) over ``labels`` (default: the label
    set of every gold and predicted label, :func:`~factcheck.formats.claims.label_set`)."""
    if labels is None:
        every = [*y_true, *pred_gold, *pred_retrieved, *(p for ps in (baselines or {}).values() for p in ps)]
        labels = label_set(every)
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
