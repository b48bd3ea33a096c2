"""``factcheck evaluate``: the course metric plus retrieval metrics, all with intervals.

The same function produces ``metrics.json`` in ``factcheck run``, so evaluating a run's
dev predictions from the command line reproduces that file's numbers.
"""

from __future__ import annotations

import json
from pathlib import Path

from factcheck.errors import InputError
from factcheck.evaluation.course_metric import course_score
from factcheck.evaluation.intervals import Estimate, bootstrap_mean, wilson
from factcheck.evaluation.retrieval_metrics import retrieval_metrics
from factcheck.formats.claims import label_set, prefixed_params, read_claims, read_predictions
from factcheck.formats.rundir import refuse_unfinished
from factcheck.formats.explanations import explanations_path


def evaluate(predictions: dict, groundtruth: list, explanations: dict | None = None,
             source: str | None = None, labels=None) -> dict:
    """The course metric (evidence F, label accuracy, their harmonic mean) and retrieval
    metrics, each with a 95% interval, per label too (what ``metrics.json`` holds).

    Parameters
    ----------
    predictions : dict of str to dict
        Claim id -> ``{"evidences": [...], "claim_label": ...}`` (the leaderboard format;
        without labels, only the retrieval side is scored).
    groundtruth : list of Claim
        Labelled claims (:func:`factcheck.read_claims` with ``require_labels=True``).
        Claims without a prediction are listed in ``result["missing"]``.
    explanations : dict or None
        Claim id -> explanation record; with a ``"ranking"`` for every claim, also
        recall@k and MRR.
    source : str or None
        The predictions' file, named in errors.
    labels : sequence of str or None
        The label set of ``per_label`` (default: the ground truth's,
        :func:`~factcheck.formats.claims.label_set`).

    Returns
    -------
    dict
        ``claims``, ``missing``, ``evidence_f``, ``accuracy``, ``harmonic_mean``,
        ``intervals`` (value, ci95, method, n), ``retrieval``, ``per_label``; and
        ``without_gold`` when some claims have no gold evidence (FEVER's NOT ENOUGH INFO).

    Example
    -------
    >>> import factcheck
    >>> dev = factcheck.read_claims("data/demo/dev-claims.json", require_labels=True)
    >>> predictions = {c.id: {"evidences": c.evidences[:1], "claim_label": "SUPPORTS"} for c in dev}
    >>> result = evaluate(predictions, dev)
    >>> result["claims"], round(result["evidence_f"], 3), result["accuracy"]
    (8, 0.958, 0.5)
    >>> result["intervals"]["accuracy"]["ci95"]
    [0.125, 0.875]
    """
    known = {c.id for c in groundtruth}
    unknown = [cid for cid in predictions if cid not in known]
    if unknown:
        raise InputError(source, f"claim {unknown[0]!r}",
                         f"predicted claim not in the ground truth ({len(unknown)} of {len(predictions)} "
                         "predicted claims are unknown)")
    score = course_score(predictions, groundtruth)
    iv = score.intervals()
    selected = {cid: p["evidences"] for cid, p in predictions.items()}
    ranked = paths = None
    if explanations:
        ranked = {cid: e["ranking"] for cid, e in explanations.items() if "ranking" in e}
        if set(ranked) != set(selected):
            ranked = None
        paths = {cid: e.get("path") for cid, e in explanations.items()}
    retrieval = retrieval_metrics(groundtruth, ranked, selected, paths)
    out = {
        "claims": len(score.claim_ids),
        "missing": score.missing,
        "evidence_f": score.evidence_f,
        "accuracy": score.accuracy,
        "harmonic_mean": score.harmonic_mean,
        "intervals": {k: v.to_json() for k, v in iv.items()},
        "retrieval": {k: (v.to_json() if isinstance(v, Estimate) else v) for k, v in retrieval.items()},
        "per_label": per_label(score, groundtruth, predictions, labels),
    }
    judged = [c.id for c in groundtruth if c.evidences and c.id in predictions]
    if len(judged) < len(score.claim_ids):
        # FEVER's NOT ENOUGH INFO claims have no gold sentence: the course metric counts their
        # evidence F as 0 (as the course scorer would); FEVER scores evidence over the others.
        f_of = dict(zip(score.claim_ids, score.f.tolist()))
        out["without_gold"] = {"claims": len(score.claim_ids) - len(judged),
                               "evidence_f_others": bootstrap_mean([f_of[cid] for cid in judged]).to_json()}
    return out


def per_label(score, groundtruth, predictions, labels=None) -> dict:
    by_label = {}
    f_of = dict(zip(score.claim_ids, score.f.tolist()))
    for label in labels if labels is not None else label_set(c.label for c in groundtruth):
        claims = [c for c in groundtruth if c.label == label and c.id in f_of]
        entry = {"n": len(claims), "evidence_f": bootstrap_mean([f_of[c.id] for c in claims]).to_json()}
        if score.correct is not None:
            right = sum(predictions[c.id].get("claim_label") == label for c in claims)
            entry["recall"] = wilson(right, len(claims)).to_json()
        by_label[label] = entry
    return by_label


def format_report(result: dict) -> str:
    def est(d):
        v, (lo, hi) = d["value"], d["ci95"]
        return "n/a" if v is None else f"{v:.4f}  (95% CI {lo:.4f}-{hi:.4f}, {d['method']})"

    iv = result["intervals"]
    lines = [f"claims scored: {result['claims']}"]
    lines.append(f"evidence F:     {est(iv['evidence_f'])}")
    if "without_gold" in result:
        w = result["without_gold"]
        lines.append(f"  ({w['claims']} claims have no gold evidence and count 0; over the others: "
                     f"{est(w['evidence_f_others'])})")
    if result["accuracy"] is not None:
        lines.append(f"label accuracy: {est(iv['accuracy'])}")
        lines.append(f"harmonic mean:  {est(iv['harmonic_mean'])}")
    else:
        lines.append("label accuracy: n/a (predictions carry no labels)")
    r = result["retrieval"]
    for key, value in r.items():
        if isinstance(value, dict):
            lines.append(f"{key + ':':15} {est(value)}")
        elif key not in ("claims",):
            lines.append(f"{key + ':':15} {value}")
    lines.append("per gold label (n, evidence F, label recall):")
    for label, e in result["per_label"].items():
        rec = f"  recall {est(e['recall'])}" if "recall" in e else ""
        lines.append(f"  {label:16} n={e['n']:4d}  F {est(e['evidence_f'])}{rec}")
    return "\n".join(lines)


def evaluate_files(predictions_path: Path, groundtruth_path: Path, explanations: Path | None = None, *,
                   claims_format: str | None = None, claims_id_column: str | None = None,
                   claims_text_column: str | None = None, claims_label_column: str | None = None,
                   claims_evidence_column: str | None = None) -> dict:
    """:func:`evaluate` on files (``factcheck evaluate``); :func:`format_report` renders the
    result as text.

    Parameters
    ----------
    predictions_path : str or Path
        A predictions file: the leaderboard format or FEVER's predictions JSONL (detected).
        A predicted label outside the ground truth's label set is an error.
    groundtruth_path : str or Path
        The labelled claims (any claims format, :func:`~factcheck.formats.claims.read_claims`).
    explanations : Path or None
        The explanations sidecar; default: the one beside the predictions, if present.
    claims_format, claims_id_column, claims_text_column, claims_label_column, claims_evidence_column
        How to read the ground truth (``read_claims``'s options, ``claims_`` in front).

    Returns
    -------
    dict
        As :func:`evaluate`.

    Example
    -------
    >>> result = evaluate_files("out/demo/dev-claims-predictions.json", "data/demo/dev-claims.json")  # doctest: +SKIP
    >>> result["retrieval"]["recall@100"]["value"]                                                   # doctest: +SKIP
    """
    refuse_unfinished(predictions_path)  # predictions of a run that did not finish (formats/rundir.py)
    with prefixed_params("claims_"):
        groundtruth = read_claims(groundtruth_path, require_labels=True, format=claims_format,
                                  id_column=claims_id_column, text_column=claims_text_column,
                                  label_column=claims_label_column, evidence_column=claims_evidence_column)
    labels = label_set(c.label for c in groundtruth)
    predictions = read_predictions(predictions_path, labels=labels)
    sidecar = explanations or explanations_path(predictions_path)
    expl = None
    if sidecar.is_file():
        try:
            expl = json.loads(sidecar.read_text("utf-8"))["claims"]
        except (ValueError, KeyError, TypeError):
            raise InputError(sidecar, None, "not a factcheck explanations file") from None
    elif explanations:
        raise InputError(explanations, None, "no such file")
    return evaluate(predictions, groundtruth, expl, source=str(predictions_path), labels=labels)
