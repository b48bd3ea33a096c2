"""Select, calibrate and train the claim classifier by repeated stratified k-fold CV (readers'
passages out-of-fold): the simplest (reader, configuration) within one standard error of the
best is kept; the same CV gives the baselines, the paired tests and the temperature.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from sklearn.dummy import DummyClassifier
from sklearn.metrics import confusion_matrix

from factcheck.classification.calibration import apply_temperature, fit_temperature, reliability, scale
from factcheck.classification.cv import (CLAIM_ONLY_GRID, GRID, CVResult, choose_one_se, config_json,
                                         cross_validate, cv_splits, fit_final, release_workers)
from factcheck.classification.features import ALL_GROUPS, OPEN_GROUPS, views_of
from factcheck.evaluation.intervals import bootstrap_mean, mcnemar_exact, paired_bootstrap_diff
from factcheck.formats.claims import ordered_labels
from factcheck.training.cv_evidence import fold_memory_reranker, out_of_fold_evidence


@dataclass
class ClassifierSelection:
    """:func:`select_classifier`'s result (``summary``: for ``metrics.json``)."""

    model: object
    config: object
    reader: str
    claim_only: object
    majority: object
    evidence: dict               # reader -> {claim id: out-of-fold evidence ids}
    summary: dict = field(default_factory=dict)


def _majority(y) -> DummyClassifier:
    """Always the most frequent label of ``y`` (ties: the first in sorted order)."""
    return DummyClassifier(strategy="most_frequent").fit(np.zeros((len(y), 1)), y)


def _majority_oof(y: np.ndarray, splits) -> np.ndarray:
    repeats = 1 + max(s.repeat for s in splits)
    out = np.empty((repeats, len(y)), dtype=object)
    for s in splits:
        out[s.repeat, s.test] = _majority(y[s.train]).predict(np.zeros((len(s.test), 1)))
    return out


def open_grid(grid: dict) -> dict:
    """The open mode's grid: every feature set of ``grid`` also with the ``dense`` group."""
    return {**grid, "groups": tuple(grid["groups"]) + tuple(g + ("dense",) for g in grid["groups"])}


def select_classifier(train, readers: dict, index, jobs: int = 1, grid: dict = GRID,
                      progress=None, dense: bool = False, evidence: dict | None = None) -> ClassifierSelection:
    """The classifier and its reader chosen by CV over ``readers`` (name -> fitted retriever);
    ``progress``: the cross-validation's bars (None: on a terminal, or as the caller's setting);
    ``evidence``: reader name -> claim id -> the evidence ids that reader retrieves, where already
    known (the tuning sweeps'), used for a reader holding every claim of ``train``, not retrieved again."""
    from factcheck.progress import progress_setting
    with progress_setting(progress):
        return _select_classifier(train, readers, index, jobs, grid, dense, evidence or {})


def _select_classifier(train, readers: dict, index, jobs: int, grid: dict, dense: bool,
                       known: dict) -> ClassifierSelection:
    texts_of = index.texts_of
    embedding = None
    if dense:
        from factcheck.tagging.vectors import read_vectors_manifest
        grid = open_grid(grid)
        embedding = read_vectors_manifest(index.root, index.manifest)["model"]
    groups = OPEN_GROUPS if dense else ALL_GROUPS
    y = np.array([c.label for c in train])
    # The classes: the labels of the training claims (two or more), in their label set's order.
    # Not the whole known set: a label no claim has would be a column never predicted and a
    # zero in macro-F1.
    labels = tuple(ordered_labels(set(y.tolist())))
    splits = cv_splits(list(y))
    repeats = 1 + max(s.repeat for s in splits)
    first_partition = [s.test for s in splits if s.repeat == 0]
    X_gold = [(c.text, texts_of(c.evidences)) for c in train]
    gold_views = views_of(X_gold, groups, embedding)
    results, evidence, X_read, read_views = [], {}, {}, {}
    for name, r in readers.items():
        if name != "rerank" and all(c.id in known.get(name, ()) for c in train):  # a reader with no memory
            ev = {c.id: known[name][c.id] for c in train}
        elif name == "rerank":
            ev = out_of_fold_evidence(train, first_partition, fit_reader=fold_memory_reranker(r, index))
        else:
            ev = out_of_fold_evidence(train, first_partition, reader=r)
        evidence[name] = ev
        X_read[name] = [(c.text, texts_of(ev[c.id])) for c in train]
        read_views[name] = views_of(X_read[name], groups, embedding)
        results += cross_validate(y, splits, gold_views, [read_views[name]] * repeats, grid, name, jobs, labels)
    chosen = choose_one_se(results)
    claim_only_results = cross_validate(y, splits, gold_views, [gold_views] * repeats, CLAIM_ONLY_GRID,
                                        "claim-only", jobs, labels)
    claim_only_chosen = choose_one_se(claim_only_results)
    release_workers()

    # Temperature from every repeat's out-of-fold decision values.
    y_index = np.array([labels.index(v) for v in y])
    decision = chosen.decision.reshape(-1, len(labels))
    temperature = fit_temperature(decision, np.tile(y_index, repeats))
    calibrated = scale(decision, temperature)
    model = fit_final(chosen.config, X_gold, X_read[chosen.reader], y, embedding)
    apply_temperature(model, temperature)
    claim_only = fit_final(claim_only_chosen.config, X_gold, None, y)
    majority = _majority(y)

    majority_oof = _majority_oof(y, splits)
    summary = {
        "folds": len(first_partition), "repeats": repeats, "claims": len(y),
        "rule": "simplest configuration within one standard error of the best mean fold accuracy",
        "chosen": {"reader": chosen.reader, **config_json(chosen.config)},
        "cv": _cv_summary(chosen, y, majority_oof, claim_only_chosen),
        "claim_only": {**config_json(claim_only_chosen.config),
                       "accuracy_mean": claim_only_chosen.mean, "accuracy_sd": _sd(claim_only_chosen.accuracy)},
        "calibration": {"method": "temperature scaling on out-of-fold decision values",
                        "temperature": temperature,
                        "cv_uncalibrated": reliability(np.tile(y, repeats), chosen.proba.reshape(-1, len(labels)),
                                                       labels),
                        "cv_calibrated": reliability(np.tile(y, repeats), calibrated, labels)},
        "variants": [r.row() for r in results + claim_only_results],
        "readers": {name: max((r for r in results if r.reader == name), key=lambda r: r.mean).mean
                    for name in readers},
    }
    return ClassifierSelection(model, chosen.config, chosen.reader, claim_only, majority, evidence, summary)


def _sd(a) -> float:
    return float(np.std(a, ddof=1)) if len(a) > 1 else 0.0


def _cv_summary(chosen: CVResult, y, majority_oof, claim_only: CVResult) -> dict:
    """Accuracy and macro-F1 over folds, the out-of-fold accuracy's interval, and the paired tests."""
    repeats = chosen.proba.shape[0]
    correct = np.array([chosen.predictions(r) == y for r in range(repeats)])
    per_claim = correct.mean(axis=0)

    def versus(r: int, other: np.ndarray, name: str) -> dict:
        return {"difference": paired_bootstrap_diff(correct[r], other).to_json(),
                "mcnemar": mcnemar_exact(correct[r], other), f"{name}_accuracy": float(other.mean())}
    tests = [{"repeat": r, "accuracy": float(correct[r].mean()),
              "vs_majority": versus(r, majority_oof[r] == y, "majority"),
              "vs_claim_only": versus(r, claim_only.predictions(r) == y, "claim_only")} for r in range(repeats)]
    labels = list(chosen.labels)
    recall = {label: float(correct[:, y == label].mean()) if (y == label).any() else None for label in labels}
    preds = np.concatenate([chosen.predictions(r) for r in range(repeats)])
    return {
        "accuracy_mean": chosen.mean, "accuracy_sd": _sd(chosen.accuracy), "accuracy_se": chosen.se,
        "macro_f1_mean": float(chosen.macro_f1.mean()), "macro_f1_sd": _sd(chosen.macro_f1),
        "gold_accuracy_mean": float(chosen.gold_accuracy.mean()), "gold_accuracy_sd": _sd(chosen.gold_accuracy),
        "accuracy_oof": bootstrap_mean(per_claim).to_json(),
        "per_label_recall": recall,
        "confusion": {"labels": labels,
                      "matrix": confusion_matrix(np.tile(y, repeats), preds, labels=labels).tolist(),
                      "note": f"summed over {repeats} repeats"},
        "paired_tests": tests,
    }
