"""The COMP90042 2024 scorer, reproduced exactly: per predicted claim, label accuracy and
evidence F, averaged; the headline is the harmonic mean of the two averages."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from factcheck.evaluation.intervals import Metric, bootstrap_harmonic, bootstrap_mean


def evidence_f(predicted: list[str], gold: list[str]) -> float:
    """Evidence F of one claim, in the course scorer's arithmetic."""
    retrieved = set(predicted)
    correct = len(retrieved & set(gold))
    if correct == 0:
        return 0.0
    precision, recall = correct / len(retrieved), correct / len(gold)
    return 2 * precision * recall / (precision + recall)


def evidence_f_from_counts(correct, retrieved, gold):
    """Evidence F of many claims at once from counts: 2PR / (P + R) = 2c / (r + g)."""
    return np.where(correct > 0, 2 * correct / np.maximum(retrieved + gold, 1), 0.0)


@dataclass
class CourseScore:
    """Per-claim course scores (:func:`course_score`) and their ``metrics``."""

    claim_ids: list[str]
    f: np.ndarray            # per claim
    correct: np.ndarray | None  # per claim, None when predictions carry no labels
    missing: list[str]

    @cached_property
    def metrics(self) -> dict[str, Metric]:
        out = {"evidence_f": bootstrap_mean(self.f)}
        if self.correct is not None:
            out["accuracy"] = bootstrap_mean(self.correct)
            out["harmonic_mean"] = bootstrap_harmonic(self.f, self.correct)
        return out


def course_score(predictions: dict[str, dict], groundtruth: list) -> CourseScore:
    """The course metric's per-claim scores: evidence F and label correctness.

    Parameters
    ----------
    predictions : dict of str to dict
        Claim id -> ``{"evidences": [...], "claim_label": ...}`` (label optional).
    groundtruth : list of Claim
        Labelled claims; those without a prediction are listed in ``missing``.

    Returns
    -------
    CourseScore
        ``metrics``: ``evidence_f``, and with labels ``accuracy`` and ``harmonic_mean``.

    Example
    -------
    >>> from factcheck.formats.claims import Claim
    >>> gold = [Claim("c1", "Sea levels are rising.", "SUPPORTS", ["e1", "e2"])]
    >>> score = course_score({"c1": {"evidences": ["e1"], "claim_label": "SUPPORTS"}}, gold)
    >>> m = score.metrics
    >>> round(m["evidence_f"].value, 4), m["accuracy"].value, round(m["harmonic_mean"].value, 4)
    (0.6667, 1.0, 0.8)
    """
    ids, fs, correct, missing = [], [], [], []
    labelled = any(p.get("claim_label") is not None for p in predictions.values())
    for claim in groundtruth:
        pred = predictions.get(claim.id)
        if pred is None:
            missing.append(claim.id)
            continue
        ids.append(claim.id)
        fs.append(evidence_f(pred["evidences"], claim.evidences))
        correct.append(1.0 if pred.get("claim_label") == claim.label else 0.0)
    return CourseScore(ids, np.array(fs), np.array(correct) if labelled else None, missing)
