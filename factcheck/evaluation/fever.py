"""The FEVER shared task's score, on plain dicts, as the official scorer defines it.

The official scorer (``fever-scorer``, ``fever_score(predictions, actual, max_evidence=5)``)
reports five figures; this module computes the same five, per claim, so each gets a 95%
interval:

``fever_score`` (the "strict" score)
    Share of claims whose label is right *and*, for a verifiable claim, one complete gold
    evidence set lies within the first ``max_evidence`` predicted sentences. A claim whose
    gold label is NOT ENOUGH INFO needs only its label.
``label_accuracy``
    Share of claims whose predicted label equals the gold one (compared case-insensitively).
``evidence_precision``
    Over verifiable claims (gold label not NOT ENOUGH INFO), whatever label was predicted:
    the mean, per claim, of the share of its first ``max_evidence`` predicted sentences that
    belong to any of its gold sets. A prediction listed twice counts twice; a claim with no
    predicted sentence has precision 1.
``evidence_recall``
    Over verifiable claims: the share whose first ``max_evidence`` predicted sentences hold
    one complete gold set (a partial set counts nothing). A verifiable claim without any
    gold set counts as found.
``evidence_f1``
    2PR / (P + R) of those two means (0 when both are 0, where the official scorer
    divides by zero).

With no verifiable claim the official scorer reports precision 1 and recall 0; so does
this module, without an interval. Sentences are ``(page, line)`` pairs (``line`` an int),
or passage id strings (``"page:line"``, or any id of a knowledge source without pages); the
gold and the predictions must name them the same way.
Labels are compared as the official scorer compares them (upper-cased); the course's
``NOT_ENOUGH_INFO`` is the same class as FEVER's ``NOT ENOUGH INFO`` (see :data:`NEI_LABELS`).

Intervals (:mod:`factcheck.evaluation.intervals`): the strict score, label accuracy and
recall are proportions of independent yes/no outcomes (Wilson); precision is a mean of
per-claim values (percentile bootstrap over claims) and F1 the harmonic mean of two means
(the same bootstrap, resampling verifiable claims jointly).

Example
-------
>>> gold = {"1": {"label": "SUPPORTS", "evidence": [[("Paris", 0), ("France", 3)]]},
...         "2": {"label": "NOT ENOUGH INFO", "evidence": []}}
>>> predictions = {"1": {"predicted_label": "SUPPORTS", "predicted_evidence": [("Paris", 0), ("France", 3)]},
...                "2": {"predicted_label": "NOT ENOUGH INFO", "predicted_evidence": [("Rome", 1)]}}
>>> s = fever_score(predictions, gold)
>>> s.fever_score, s.label_accuracy, s.evidence_precision, s.evidence_recall, s.evidence_f1
(1.0, 1.0, 1.0, 1.0, 1.0)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from factcheck.errors import InputError
from factcheck.evaluation.intervals import Estimate, bootstrap_harmonic, bootstrap_mean, wilson

__all__ = ["FeverScore", "MAX_EVIDENCE", "NEI_LABELS", "fever_score", "fever_score_files", "format_fever_report"]

MAX_EVIDENCE = 5  # the shared task's rule: only the first five predicted sentences count
#: Gold labels whose claims need no evidence, upper-cased: FEVER's spelling and the course's.
NEI_LABELS = frozenset({"NOT ENOUGH INFO", "NOT_ENOUGH_INFO"})
FIGURES = ("fever_score", "label_accuracy", "evidence_precision", "evidence_recall", "evidence_f1")


@dataclass
class FeverScore:
    """Per-claim outcomes behind the five figures (claims in the gold order, predicted ones only).

    Attributes
    ----------
    claim_ids : list of str
        The scored claims.
    strict, correct : ndarray of float (0 or 1), one per scored claim
        FEVER-score and label correctness.
    verifiable : ndarray of bool, one per scored claim
        Gold label not NOT ENOUGH INFO: the claims the evidence figures are taken over.
    precision, recall : ndarray of float, one per verifiable claim
        Evidence precision (within the first ``max_evidence``) and complete-set recall (0 or 1).
    missing : list of str
        Gold claims without a prediction (left out of every figure).
    max_evidence : int
    """

    claim_ids: list[str]
    strict: np.ndarray
    correct: np.ndarray
    verifiable: np.ndarray
    precision: np.ndarray
    recall: np.ndarray
    missing: list[str]
    max_evidence: int = MAX_EVIDENCE

    @property
    def fever_score(self) -> float:
        return _mean(self.strict, 0.0)

    @property
    def label_accuracy(self) -> float:
        return _mean(self.correct, 0.0)

    @property
    def evidence_precision(self) -> float:
        return _mean(self.precision, 1.0)  # the official scorer's value with no verifiable claim

    @property
    def evidence_recall(self) -> float:
        return _mean(self.recall, 0.0)

    @property
    def evidence_f1(self) -> float:
        p, r = self.evidence_precision, self.evidence_recall
        return 2.0 * p * r / (p + r) if p + r > 0 else 0.0

    def intervals(self) -> dict[str, Estimate]:
        """The five figures, each an :class:`~factcheck.evaluation.intervals.Estimate` with its
        95% interval (no interval for the evidence figures when no claim is verifiable)."""
        n, v = len(self.strict), len(self.precision)
        out = {"fever_score": wilson(int(self.strict.sum()), n),
               "label_accuracy": wilson(int(self.correct.sum()), n)}
        if v:
            out["evidence_precision"] = bootstrap_mean(self.precision)
            out["evidence_recall"] = wilson(int(self.recall.sum()), v)
            out["evidence_f1"] = bootstrap_harmonic(self.precision, self.recall)
        else:
            out.update({k: Estimate(getattr(self, k), None, None, "none (no verifiable claim)", 0)
                        for k in FIGURES[2:]})
        for key in ("fever_score", "label_accuracy"):
            if n == 0:
                out[key] = Estimate(0.0, None, None, "none (no claim)", 0)
        return out

    def to_json(self) -> dict:
        """Plain figures, their intervals and counts (what ``evaluate --metric fever --json`` prints)."""
        iv = self.intervals()
        return {"metric": "fever", "max_evidence": self.max_evidence, "claims": len(self.claim_ids),
                "verifiable_claims": int(self.verifiable.sum()), "missing": self.missing,
                **{k: getattr(self, k) for k in FIGURES},
                "intervals": {k: iv[k].to_json() for k in FIGURES}}


def _mean(values: np.ndarray, empty: float) -> float:
    return float(values.mean()) if len(values) else empty


def fever_score(predictions: dict, gold: dict, max_evidence: int = MAX_EVIDENCE,
                source: str | None = None) -> FeverScore:
    """Score FEVER predictions against gold claims (see the module docstring for the rules).

    Parameters
    ----------
    predictions : dict
        Claim id -> ``{"predicted_label": str, "predicted_evidence": [(page, line), ...]}``,
        the evidence in rank order.
    gold : dict
        Claim id -> ``{"label": str, "evidence": [evidence set, ...]}``, each set a list of
        ``(page, line)`` pairs (or FEVER's ``[annotation_id, evidence_id, page, line]``
        entries, of which the last two count). Its order is the order of the per-claim arrays.
    max_evidence : int, default 5
        Predicted sentences that count, from the first (the shared task's five).
    source : str, optional
        The predictions' file, named in errors.

    Returns
    -------
    FeverScore
        Gold claims with no prediction are listed in ``missing`` and left out; a predicted
        claim that is not in ``gold`` is an :class:`~factcheck.errors.InputError`.

    Example
    -------
    >>> gold = {"c": {"label": "REFUTES", "evidence": [[("Page1", 1), ("Page2", 2)]]}}
    >>> fever_score({"c": {"predicted_label": "REFUTES", "predicted_evidence": [("Page1", 1)]}}, gold).fever_score
    0.0
    """
    if isinstance(max_evidence, bool) or not isinstance(max_evidence, int) or max_evidence < 1:
        raise InputError(None, None, f"must be a positive integer, got {max_evidence!r}", param="max_evidence")
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
        # One complete gold set among the first max_evidence sentences (an empty set is
        # trivially complete, as in the official scorer).
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
    """``(page, line)`` from a pair or a FEVER 4-entry evidence item, or a passage id
    string as it is; None if malformed."""
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
    sets = g.get("evidence") or []
    out = []
    for s in sets if isinstance(sets, list) else [None]:
        pairs = [_sentence(e) for e in s] if isinstance(s, (list, tuple)) else [None]
        if any(p is None for p in pairs):
            raise InputError(None, f"claim {cid!r}", "gold 'evidence' must be a list of evidence sets, each a "
                             "list of [page, line] pairs", param="gold")
        out.append(pairs)
    return g["label"], out


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


def fever_score_files(predictions_path, groundtruth_path, max_evidence: int = MAX_EVIDENCE, *,
                      claims_format: str | None = None, claims_id_column: str | None = None,
                      claims_text_column: str | None = None, claims_label_column: str | None = None,
                      claims_evidence_column: str | None = None) -> FeverScore:
    """:func:`fever_score` on files: predictions (with labels) and labelled claims, each in any
    format their readers take (:func:`~factcheck.formats.claims.read_predictions`,
    :func:`~factcheck.formats.claims.read_claims`).

    A claim's gold sets are its FEVER evidence sets when the file has them; otherwise (the
    course's claims, Climate-FEVER's) each gold passage is a set of its own. Sentences are
    compared by passage id (``page:line`` for FEVER's). ``claims_*``: how to read the ground
    truth (``read_claims``'s options, as ``evaluate_files`` takes them); a predicted label
    outside its label set is an error.
    """
    from factcheck.formats.claims import label_set, prefixed_params, read_claims, read_predictions
    with prefixed_params("claims_"):
        groundtruth = read_claims(groundtruth_path, require_labels=True, format=claims_format,
                                  id_column=claims_id_column, text_column=claims_text_column,
                                  label_column=claims_label_column, evidence_column=claims_evidence_column)
    predictions = read_predictions(predictions_path, labels=label_set(c.label for c in groundtruth))
    gold = {}
    for c in groundtruth:
        sets = getattr(c, "evidence_sets", None)
        gold[c.id] = {"label": c.label, "evidence": sets if sets is not None else [[e] for e in c.evidences]}
    unlabelled = next((cid for cid, p in predictions.items() if p.get("claim_label") is None), None)
    if unlabelled is not None:
        raise InputError(predictions_path, f"claim {unlabelled!r}", "no predicted label: the FEVER score "
                         "needs labelled predictions (from predict or run)")
    pred = {cid: {"predicted_label": p["claim_label"], "predicted_evidence": p["evidences"]}
            for cid, p in predictions.items()}
    return fever_score(pred, gold, max_evidence, source=str(predictions_path))


def format_fever_report(result: dict) -> str:
    """:meth:`FeverScore.to_json` as the text ``factcheck evaluate --metric fever`` prints."""
    def est(d):
        v, (lo, hi) = d["value"], d["ci95"]
        return f"{v:.4f}" + ("" if lo is None else f"  (95% CI {lo:.4f}-{hi:.4f}, {d['method']})")

    iv = result["intervals"]
    return "\n".join([
        f"claims scored: {result['claims']} ({result['verifiable_claims']} verifiable); "
        f"evidence: the first {result['max_evidence']} predicted sentences",
        f"FEVER score:        {est(iv['fever_score'])}",
        f"label accuracy:     {est(iv['label_accuracy'])}",
        f"evidence precision: {est(iv['evidence_precision'])}",
        f"evidence recall:    {est(iv['evidence_recall'])}",
        f"evidence F1:        {est(iv['evidence_f1'])}",
    ])
