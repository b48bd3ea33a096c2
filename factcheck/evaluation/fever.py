"""The FEVER shared task's score as the official scorer defines it, per claim so each figure
has a 95% interval (docs/fever-score.md states every rule and corner case)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from factcheck.errors import InputError, check_number
from factcheck.evaluation.evaluate import read_scoring_inputs
from factcheck.evaluation.intervals import Metric, Result, bootstrap_harmonic, bootstrap_mean, describe, wilson

__all__ = ["FeverScore", "MAX_EVIDENCE", "NEI_LABELS", "claims_fever_score", "fever_score", "fever_score_files",
           "format_fever_report"]

MAX_EVIDENCE = 5  # the shared task's rule: only the first five predicted sentences count
#: Gold labels whose claims need no evidence, upper-cased: FEVER's spelling and the course's.
NEI_LABELS = frozenset({"NOT ENOUGH INFO", "NOT_ENOUGH_INFO"})
FIGURES = ("fever_score", "label_accuracy", "evidence_precision", "evidence_recall", "evidence_f1")


@dataclass
class FeverScore(Result):
    """The five figures as ``metrics`` and the per-claim outcomes behind them, in gold order."""

    claim_ids: list[str]
    strict: np.ndarray
    correct: np.ndarray
    verifiable: np.ndarray
    precision: np.ndarray
    recall: np.ndarray
    missing: list[str]
    max_evidence: int = MAX_EVIDENCE

    @cached_property
    def metrics(self) -> dict[str, Metric]:
        n, v = len(self.strict), len(self.precision)
        out = {"fever_score": wilson(int(self.strict.sum()), n), "label_accuracy": wilson(int(self.correct.sum()), n)}
        if n == 0:
            out = {key: Metric(0.0, None, None, 0, "none (no claim)") for key in out}
        if v:
            out["evidence_precision"] = bootstrap_mean(self.precision)
            out["evidence_recall"] = wilson(int(self.recall.sum()), v)
            out["evidence_f1"] = bootstrap_harmonic(self.precision, self.recall)
        else:
            out.update({k: Metric(value, None, None, 0, "none (no verifiable claim)")
                        for k, value in zip(FIGURES[2:], (1.0, 0.0, 0.0))})
        return out

    def to_json(self) -> dict:
        return {"metric": "fever", "max_evidence": self.max_evidence, "claims": len(self.claim_ids),
                "verifiable_claims": int(self.verifiable.sum()), "missing": self.missing,
                **{k: self.metrics[k].value for k in FIGURES},
                "intervals": {k: self.metrics[k].to_json() for k in FIGURES}}


def fever_score(predictions: dict, gold: dict, max_evidence: int = MAX_EVIDENCE,
                source: str | None = None) -> FeverScore:
    """Score FEVER predictions against gold claims (docs/fever-score.md has the rules).

    Parameters
    ----------
    predictions : dict
        Claim id -> ``{"predicted_label": str, "predicted_evidence": [(page, line), ...]}``.
    gold : dict
        Claim id -> ``{"label": str, "evidence": [evidence set, ...]}``, each set a list of
        ``(page, line)`` pairs (or FEVER's ``[annotation_id, evidence_id, page, line]``).
    max_evidence : int, default 5
        Predicted sentences that count, from the first.
    source : str, optional
        The predictions' file, named in errors.

    Returns
    -------
    FeverScore

    Example
    -------
    >>> gold = {"c": {"label": "REFUTES", "evidence": [[("Page1", 1), ("Page2", 2)]]}}
    >>> s = fever_score({"c": {"predicted_label": "REFUTES", "predicted_evidence": [("Page1", 1)]}}, gold)
    >>> s.metrics["fever_score"].value, s.metrics["label_accuracy"].value
    (0.0, 1.0)
    """
    check_number(max_evidence, "max_evidence", integer=True, low=1)
    unknown = [cid for cid in predictions if cid not in gold]
    if unknown:
        raise InputError(source, f"claim {unknown[0]!r}", f"predicted claim not in the ground truth "
                         f"({len(unknown)} of {len(predictions)} predicted claims are unknown)")
    ids, strict, correct, verifiable, precision, recall, missing = [], [], [], [], [], [], []
    for cid, g in gold.items():
        if cid not in predictions:
            missing.append(cid)
            continue
        label, sets = _gold(cid, g)
        predicted_label, predicted = _prediction(source, cid, predictions[cid])
        top = predicted[:max_evidence]
        label_right = predicted_label.upper() == label.upper()
        needs_evidence = label.upper() not in NEI_LABELS
        # An empty gold set is trivially complete, as in the official scorer.
        found = any(all(sentence in top for sentence in s) for s in sets)
        ids.append(cid)
        correct.append(float(label_right))
        strict.append(float(label_right and (found or not needs_evidence)))
        verifiable.append(needs_evidence)
        if needs_evidence:
            pool = {sentence for s in sets for sentence in s}
            precision.append(sum(p in pool for p in top) / len(top) if top else 1.0)
            # The official scorer counts a verifiable claim with no gold set as recalled.
            recall.append(1.0 if not sets or found else 0.0)
    return FeverScore(ids, np.array(strict), np.array(correct), np.array(verifiable, dtype=bool),
                      np.array(precision), np.array(recall), missing, max_evidence)


def _sentence(value):
    """``(page, line)`` from a pair or a FEVER 4-entry item, a passage id as it is; None if malformed."""
    if isinstance(value, str) and value:
        return value
    if isinstance(value, (list, tuple)) and len(value) in (2, 4):
        page, line = value[-2], value[-1]
        if isinstance(page, str) and isinstance(line, int) and not isinstance(line, bool):
            return page, line
        if len(value) == 4 and line is None:  # an NEI annotation's [id, None, None, None]
            return page, None
    return None


def _gold(cid: str, g) -> tuple[str, list[list[tuple]]]:
    if not isinstance(g, dict) or not isinstance(g.get("label"), str):
        raise InputError(None, f"claim {cid!r}", "gold claim needs a 'label' string", param="gold")
    if g.get("evidence") is not None and not isinstance(g["evidence"], list):
        raise InputError(None, f"claim {cid!r}", "gold 'evidence' must be a list of evidence sets", param="gold")
    sets = [[_sentence(e) for e in s] if isinstance(s, (list, tuple)) else [None] for s in g.get("evidence") or []]
    if any(p is None for pairs in sets for p in pairs):
        raise InputError(None, f"claim {cid!r}", "gold 'evidence' must be a list of evidence sets, each a "
                         "list of [page, line] pairs", param="gold")
    return g["label"], sets


def _prediction(source, cid: str, p) -> tuple[str, list[tuple]]:
    where, param = f"claim {cid!r}", None if source else "predictions"
    if not isinstance(p, dict) or not isinstance(p.get("predicted_label"), str):
        raise InputError(source, where, "prediction needs a 'predicted_label' string", param=param)
    items = p.get("predicted_evidence")
    pairs = [_sentence(e) if isinstance(e, str) or (isinstance(e, (list, tuple)) and len(e) == 2) else None
             for e in (items if isinstance(items, (list, tuple)) else [None])]
    if any(x is None or (isinstance(x, tuple) and x[1] is None) for x in pairs):
        raise InputError(source, where, "'predicted_evidence' must be a list of [page, line] pairs "
                         "(page a string, line an integer) or of passage ids", param=param)
    return p["predicted_label"], pairs


def fever_score_files(predictions, groundtruth, max_evidence: int = MAX_EVIDENCE, *,
                      claims_format: str | None = None, claims_id_column: str | None = None,
                      claims_text_column: str | None = None, claims_label_column: str | None = None,
                      claims_evidence_column: str | None = None) -> FeverScore:
    """:func:`fever_score` on files; without FEVER evidence sets each gold passage is a set."""
    claims, _, predicted = read_scoring_inputs(predictions, groundtruth, format=claims_format,
                                               id_column=claims_id_column, text_column=claims_text_column,
                                               label_column=claims_label_column, evidence_column=claims_evidence_column)
    unlabelled = next((cid for cid, p in predicted.items() if p.get("claim_label") is None), None)
    if unlabelled is not None:
        raise InputError(predictions, f"claim {unlabelled!r}", "no predicted label: the FEVER score "
                         "needs labelled predictions (from predict or run)")
    return claims_fever_score(predicted, claims, max_evidence, str(predictions))


def claims_fever_score(predicted: dict, claims, max_evidence: int = MAX_EVIDENCE, source=None) -> FeverScore:
    """:func:`fever_score` of predictions as :func:`~factcheck.formats.claims.read_predictions`
    returns them (labelled), against labelled claims: their FEVER evidence sets, or without
    them (the course's claims) each gold passage a set of its own."""
    gold = {}
    for c in claims:
        sets = getattr(c, "evidence_sets", None)
        gold[c.id] = {"label": c.label, "evidence": sets if sets is not None else [[e] for e in c.evidences]}
    return fever_score({cid: {"predicted_label": p["claim_label"], "predicted_evidence": p["evidences"]}
                        for cid, p in predicted.items()}, gold, max_evidence, source=source)


def format_fever_report(result: FeverScore) -> str:
    """A :class:`FeverScore` as the text ``factcheck evaluate --metric fever`` prints."""
    names = ("FEVER score", "label accuracy", "evidence precision", "evidence recall", "evidence F1")
    return "\n".join([f"claims scored: {len(result.claim_ids)} ({int(result.verifiable.sum())} verifiable); "
                      f"evidence: the first {result.max_evidence} predicted sentences",
                      *(f"{name + ':':19} {describe(result.metrics[key])}" for name, key in zip(names, FIGURES))])
