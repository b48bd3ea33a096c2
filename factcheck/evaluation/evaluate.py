"""``factcheck evaluate``: the course metric and retrieval metrics, each with its interval."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from factcheck.errors import InputError
from factcheck.evaluation.course_metric import course_score
from factcheck.evaluation.intervals import Metric, Result, bootstrap_mean, bootstrap_means, describe, to_json, wilson
from factcheck.evaluation.ir_metrics import recall_at, reciprocal_rank
from factcheck.formats.claims import (Claim, accepted_labels, check_predictions, prefixed_params, read_claims,
                                      read_predictions)
from factcheck.formats.claims import explanations_path
from factcheck.formats.rundir import refuse_unfinished

COURSE_METRICS = ("evidence_f", "accuracy", "harmonic_mean")
DEFAULT_KS = (1, 5, 10, 20, 50, 100)
FALLBACK_CAPABLE = {"filtered", "reranked", "fallback"}


@dataclass
class Evaluation(Result):
    """:func:`evaluate`'s result; ``to_json()`` is ``metrics.json``'s layout."""

    claims: int
    missing: list[str]
    metrics: dict[str, Metric]
    retrieval: dict
    per_label: dict[str, dict[str, Metric]]
    without_gold: dict | None = None

    def to_json(self) -> dict:
        course = {k: m for k, m in self.metrics.items() if k in COURSE_METRICS}
        retrieval = {k: v for k, v in self.retrieval.items() if k != "mean_selected"}
        for name, m in self.metrics.items():
            if name not in COURSE_METRICS:
                retrieval[name] = m.to_json()
            if name == "selected_recall":
                retrieval["mean_selected"] = self.retrieval["mean_selected"]
        out = {"claims": self.claims, "missing": self.missing,
               **{k: course[k].value if k in course else None for k in COURSE_METRICS},
               "intervals": {k: m.to_json() for k, m in course.items()}, "retrieval": retrieval,
               "per_label": {label: {"n": e["evidence_f"].n, **{k: m.to_json() for k, m in e.items()}}
                             for label, e in self.per_label.items()}}
        if self.without_gold is not None:
            out["without_gold"] = {k: to_json(v) for k, v in self.without_gold.items()}
        return out


def evaluate(predictions: dict, groundtruth: list, explanations: dict | None = None,
             source: str | None = None, labels=None) -> Evaluation:
    """The course metric and retrieval metrics, each with a 95% interval, per label too.

    Parameters
    ----------
    predictions : dict of str to dict
        Claim id -> ``{"evidences": [...], "claim_label": ...}`` (the label optional).
    groundtruth : list of Claim
        Labelled claims; those without a prediction are listed in ``missing``.
    explanations : dict or None
        Claim id -> :class:`~factcheck.Explanation`; with a ranking for each, also recall@k and MRR.
    source : str or None
        The predictions' file, named in errors.
    labels : sequence of str or None
        The labels of ``per_label`` (default: the labels the ground truth has, in their
        label set's order).

    Raises
    ------
    InputError
        Naming ``predictions`` (or ``source``) for a prediction a predictions file could not
        hold: not an object, ``evidences`` not a list of ids (a string too), a label that is
        not a string or not one of the ground truth's label set (:func:`~factcheck.formats.claims.accepted_labels`).

    Returns
    -------
    Evaluation
        ``metrics``: name -> :class:`~factcheck.evaluation.intervals.Metric`.

    Example
    -------
    >>> import factcheck
    >>> dev = factcheck.read_claims("data/demo/dev-claims.json", require_labels=True)
    >>> predictions = {c.id: {"evidences": c.evidences[:1], "claim_label": "SUPPORTS"} for c in dev}
    >>> result = evaluate(predictions, dev)
    >>> result.claims, round(result.metrics["evidence_f"].value, 3), result.metrics["accuracy"].value
    (8, 0.958, 0.5)
    >>> result.metrics["accuracy"].low, result.metrics["accuracy"].high
    (0.125, 0.875)
    """
    # Read once: a generator of claims was used up by the argument check, and every
    # prediction then reported as "not in the ground truth".
    groundtruth = groundtruth if isinstance(groundtruth, (str, dict)) else list(groundtruth)
    _check_arguments(predictions, groundtruth)
    if isinstance(labels, str):  # its letters would be the labels of per_label
        raise TypeError(f"labels: expected a sequence of labels, got a string ({labels!r}: write [{labels!r}])")
    if explanations is not None and not isinstance(explanations, dict):
        raise TypeError(f"explanations: expected a dict of claim id -> Explanation, got {type(explanations).__name__}")
    labels = None if labels is None else [str(label) for label in labels]
    gold_labels = {c.label for c in groundtruth}
    allowed = accepted_labels(gold_labels)
    # The checks a predictions file gets (read_predictions): a typo'd label or a string for
    # the evidence list would otherwise score as wrong, silently.
    predictions = check_predictions(predictions, allowed + tuple(labels or ()), source)
    known = {c.id for c in groundtruth}  # once, not once per prediction
    unknown = [cid for cid in predictions if cid not in known]
    if unknown:
        raise InputError(source, f"claim {unknown[0]!r}", f"predicted claim not in the ground truth ({len(unknown)} "
                         f"of {len(predictions)} predicted claims are unknown)",
                         param=None if source else "predictions")
    score = course_score(predictions, groundtruth)
    selected = {cid: p["evidences"] for cid, p in predictions.items()}
    ranked = paths = None
    if explanations:
        # Explanation objects (FactChecker's, run_retrieval's) or their sidecar records
        explanations = {cid: _path_and_ranking(e) if hasattr(e, "to_json") else e for cid, e in explanations.items()}
        wrong = next((cid for cid, e in explanations.items() if not isinstance(e, dict)), None)
        if wrong is not None:
            raise TypeError(f"explanations: claim {wrong!r}: expected an Explanation (or its JSON record), "
                            f"got {type(explanations[wrong]).__name__}")
        ranked = {cid: e["ranking"] for cid, e in explanations.items() if "ranking" in e}
        ranked = ranked if set(ranked) == set(selected) else None
        paths = {cid: e.get("path") for cid, e in explanations.items()}
    retrieval, counts = retrieval_metrics(groundtruth, ranked, selected, paths)
    f_of = dict(zip(score.claim_ids, score.f.tolist()))
    per_label = {}
    for label in labels if labels is not None else [label for label in allowed if label in gold_labels]:
        claims = [c for c in groundtruth if c.label == label and c.id in f_of]
        per_label[label] = {"evidence_f": bootstrap_mean([f_of[c.id] for c in claims])}
        if score.correct is not None:
            per_label[label]["recall"] = wilson(sum(predictions[c.id].get("claim_label") == label for c in claims),
                                                len(claims))
    result = Evaluation(len(score.claim_ids), score.missing, {**score.metrics, **retrieval}, counts, per_label)
    judged = [c.id for c in groundtruth if c.evidences and c.id in predictions]
    if len(judged) < len(score.claim_ids):
        # FEVER's NOT ENOUGH INFO claims have no gold sentence: the course metric counts their
        # evidence F as 0 (as the course scorer would); FEVER scores evidence over the others.
        result.without_gold = {"claims": len(score.claim_ids) - len(judged),
                               "evidence_f_others": bootstrap_mean([f_of[cid] for cid in judged])}
    return result


def _check_arguments(predictions, groundtruth) -> None:
    if isinstance(predictions, (list, tuple)) and isinstance(groundtruth, dict):
        raise SwappedInputs(None, None, "a list of claims, and groundtruth a dict of predictions", param="predictions")
    if not isinstance(predictions, dict):
        raise TypeError(f"predictions: expected a dict of claim id -> prediction, got {type(predictions).__name__}")
    if isinstance(groundtruth, (str, dict)) or not all(isinstance(c, Claim) for c in groundtruth):
        raise TypeError("groundtruth: expected a list of Claim (factcheck.read_claims(..., require_labels=True))")
    unlabelled = next((c for c in groundtruth if c.label is None), None)
    if unlabelled is not None:
        raise InputError(None, f"claim {unlabelled.id!r}", "no gold label: the ground truth must be labelled "
                         "claims (read with require_labels=True)", param="groundtruth")


class SwappedInputs(InputError):
    """The predictions and the ground truth look swapped: the line ends with a hint naming both."""

    def one_line(self, flags: dict[str, str] | None = None) -> str:
        name = {"predictions": "predictions", "groundtruth": "groundtruth", **(flags or {})}
        return f"{super().one_line(flags)}: did you swap {name['predictions']} and {name['groundtruth']}?"


def retrieval_metrics(claims, ranked: dict[str, list[str]] | None, selected: dict[str, list[str]],
                      paths: dict[str, str] | None = None, ks=DEFAULT_KS) -> tuple[dict[str, Metric], dict]:
    """``(metrics, counts)`` over the claims in ``selected`` with gold evidence (``recall@k``
    and ``mrr`` only given ``ranked``, ``fallback_share`` only for a retriever that can fall back)."""
    present = [c for c in claims if c.id in selected and c.evidences]
    counts: dict = {"claims": len(present)}
    skipped = sum(1 for c in claims if c.id in selected and not c.evidences)
    if skipped:
        counts["without_gold"] = skipped
    metrics: dict[str, Metric] = {}
    if ranked is not None:
        # A ranking holds only what was scored: the deepest shows the depth ranked to.
        depth = counts["ranking_depth"] = max((len(ranked[c.id]) for c in present), default=0)
        columns = {f"recall@{k}": [recall_at(ranked[c.id], c.evidences, k) for c in present] for k in ks if k <= depth}
        columns["mrr"] = [reciprocal_rank(ranked[c.id], c.evidences) for c in present]
        metrics.update(bootstrap_means(columns))
    metrics["any_gold"] = wilson(sum(bool(set(selected[c.id]) & set(c.evidences)) for c in present), len(present))
    metrics["selected_recall"] = bootstrap_mean([recall_at(selected[c.id], c.evidences, len(selected[c.id]))
                                                 for c in present])
    counts["mean_selected"] = float(np.mean([len(selected[c.id]) for c in present])) if present else 0.0
    # For a retriever that never falls back (BM25: always "ranked") the share would be a meaningless 0.
    if paths and any(p in FALLBACK_CAPABLE for p in paths.values()):
        metrics["fallback_share"] = wilson(sum(paths.get(c.id) == "fallback" for c in present), len(present))
    return metrics, counts


def format_report(result: Evaluation) -> str:
    """An :class:`Evaluation` as the text ``factcheck evaluate`` prints."""
    est = describe
    result = result.to_json()
    iv = result["intervals"]
    lines = [f"claims scored: {result['claims']}", f"evidence F:     {est(iv['evidence_f'])}"]
    if "without_gold" in result:
        w = result["without_gold"]
        lines.append(f"  ({w['claims']} claims have no gold evidence and count 0; over the others: "
                     f"{est(w['evidence_f_others'])})")
    if result["accuracy"] is not None:
        lines += [f"label accuracy: {est(iv['accuracy'])}", f"harmonic mean:  {est(iv['harmonic_mean'])}"]
    else:
        lines.append("label accuracy: n/a (predictions carry no labels)")
    for key, value in result["retrieval"].items():
        if key != "claims":
            lines.append(f"{key + ':':15} {est(value) if isinstance(value, dict) else value}")
    lines.append("per gold label (n, evidence F, label recall):")
    for label, e in result["per_label"].items():
        rec = f"  recall {est(e['recall'])}" if "recall" in e else ""
        lines.append(f"  {label:16} n={e['n']:4d}  F {est(e['evidence_f'])}{rec}")
    return "\n".join(lines)


def evaluate_files(predictions, groundtruth, explanations=None, *, claims_format: str | None = None,
                   claims_id_column: str | None = None, claims_text_column: str | None = None,
                   claims_label_column: str | None = None, claims_evidence_column: str | None = None) -> Evaluation:
    """:func:`evaluate` on files (``factcheck evaluate``).

    Parameters
    ----------
    predictions : str or Path
        The leaderboard format or FEVER's predictions JSONL (detected).
    groundtruth : str or Path
        Labelled claims (any claims format).
    explanations : str or Path or None
        The explanations sidecar; default: the one beside the predictions, if present.
    claims_format, claims_id_column, claims_text_column, claims_label_column, claims_evidence_column
        How to read the ground truth (``read_claims``'s options, ``claims_`` in front).

    Returns
    -------
    Evaluation
        As :func:`evaluate`; files that look swapped are an InputError naming ``groundtruth``.

    Example
    -------
    >>> result = evaluate_files("out/demo/dev-claims-predictions.json", "data/demo/dev-claims.json")  # doctest: +SKIP
    >>> result.metrics["recall@100"].value                                                           # doctest: +SKIP
    """
    claims, _, predicted = read_scoring_inputs(predictions, groundtruth, format=claims_format,
                                               id_column=claims_id_column, text_column=claims_text_column,
                                               label_column=claims_label_column,
                                               evidence_column=claims_evidence_column)
    sidecar = Path(explanations) if explanations else explanations_path(Path(predictions))
    expl = None
    if sidecar.is_file():
        try:
            expl = json.loads(sidecar.read_text("utf-8"))["claims"]
        except (ValueError, KeyError, TypeError):
            raise InputError(sidecar, None, "not a factcheck explanations file") from None
    elif explanations:
        raise InputError(explanations, None, "no such file", param="explanations")
    return evaluate(predicted, claims, expl, source=str(predictions))


def read_scoring_inputs(predictions, groundtruth, **options) -> tuple[list, list, dict]:
    """The labelled claims, their label set and the predictions; refuses files that look swapped."""
    predictions, groundtruth = Path(predictions), Path(groundtruth)
    refuse_unfinished(predictions)
    if explanations_path(groundtruth).is_file():
        raise SwappedInputs(groundtruth, None, f"a factcheck predictions file (its explanations, "
                            f"{explanations_path(groundtruth).name}, are beside it), not labelled claims",
                            param="groundtruth")
    # A name alone is no proof: only a ground truth that also reads as predictions is refused for it.
    if ("prediction" in groundtruth.name.lower() and "prediction" not in predictions.name.lower()
            and _reads(lambda: read_predictions(groundtruth))):
        raise SwappedInputs(groundtruth, None, f"named as predictions, while the predictions are {predictions.name}",
                            param="groundtruth")
    try:
        with prefixed_params("claims_"):
            claims = read_claims(groundtruth, require_labels=True, **options)
    except InputError:
        if _reads(lambda: (read_predictions(groundtruth), read_claims(predictions, require_labels=True, **options))):
            raise SwappedInputs(groundtruth, None, f"not labelled claims, but {predictions} is",
                                param="groundtruth") from None
        if _reads(lambda: all(c.label is None for c in read_claims(groundtruth, **options))):
            raise InputError(groundtruth, None, "no claim has a gold label: the ground truth must be labelled claims "
                             "with gold evidence", param="groundtruth") from None
        raise
    labels = accepted_labels(c.label for c in claims)
    return claims, labels, read_predictions(predictions, labels=labels)


def _reads(attempt) -> bool:
    try:
        return bool(attempt())
    except InputError:
        return False


def _path_and_ranking(explanation) -> dict:
    """What the metrics read of an explanation, as its sidecar record holds it (no record made)."""
    ranking = explanation.ranking
    return {"path": explanation.path, **({"ranking": ranking} if ranking is not None else {})}
