"""The claim classifier (claim + evidence features, then multinomial logistic regression),
saved to and loaded from a model directory as skops."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline

from factcheck.classification.features import ALL_GROUPS, OPEN_GROUPS, ClaimEvidenceFeatures
from factcheck.errors import InputError, check_number
from factcheck.formats.claims import LABELS
from factcheck.formats.files import dump_model_atomic
from factcheck.formats.rundir import refuse_unfinished
from factcheck.formats.safe_load import BadModel, load_model

__all__ = ["MODEL_FILE", "load_classifier", "make_classifier", "save_classifier"]

MODEL_FILE = "classifier.skops"


def make_classifier(C: float = 2.0, class_weight=None, stats_weight: float = 0.3,
                    groups=ALL_GROUPS, embedding: dict | None = None) -> Pipeline:
    """The claim classifier: claim + evidence features, then multinomial logistic regression.

    Parameters
    ----------
    C : float, default 2.0
        Inverse regularisation strength of the logistic regression (positive).
    class_weight : None, "balanced" or dict, default None
        As for :class:`sklearn.linear_model.LogisticRegression`.
    stats_weight : float, default 0.3
        Weight of the standardised agreement statistics against the sparse groups (>= 0).
    groups : sequence of str, default ALL_GROUPS
        Feature groups (:mod:`factcheck.classification.features`); ``("claim",)`` is the claim-only baseline.
    embedding : dict or None, default None
        The ``dense`` group's embedding model as its passage vectors record it (None: the bundled one).

    Returns
    -------
    sklearn.pipeline.Pipeline
        Unfitted; ``fit(X, y)`` with X a list of ``(claim text, [passage texts])`` pairs.

    Example
    -------
    >>> X = [("Sea levels are rising.", ["Sea level rose 20 cm since 1900."]),
    ...      ("Sea levels are falling.", ["Sea level rose 20 cm since 1900."]),
    ...      ("Glaciers are growing.", ["Most glaciers are retreating."]),
    ...      ("Glaciers are shrinking.", ["Most glaciers are retreating."])]
    >>> model = make_classifier(C=10.0).fit(X, ["SUPPORTS", "REFUTES", "REFUTES", "SUPPORTS"])
    >>> model.predict([("Sea levels are rising fast.", ["Sea level rose 20 cm since 1900."])]).tolist()
    ['SUPPORTS']
    """
    check_number(C, "C", low=0.0)
    if C == 0:
        raise InputError(None, None, f"must be positive, got {C!r}", param="C")
    if not (class_weight is None or class_weight == "balanced" or isinstance(class_weight, dict)):
        raise InputError(None, None, f"expected None, 'balanced' or a dict, got {class_weight!r}",
                         param="class_weight")
    check_number(stats_weight, "stats_weight", low=0.0)
    unknown = [g for g in groups if g not in OPEN_GROUPS] if not isinstance(groups, str) else [groups]
    if unknown or not groups:
        raise InputError(None, None, f"expected feature groups among {', '.join(OPEN_GROUPS)}, got {groups!r}",
                         param="groups")
    return Pipeline([
        ("features", ClaimEvidenceFeatures(groups=groups, stats_weight=stats_weight, embedding=embedding)),
        ("model", LogisticRegression(C=C, class_weight=class_weight, max_iter=5000)),
    ])


def save_classifier(model, directory: Path, meta: dict) -> None:
    """Write a fitted classifier and its record to ``DIRECTORY/classifier.skops``.

    Parameters
    ----------
    model : fitted estimator
        Anything with ``predict_proba`` whose types are on the model allow-list.
    directory : str or Path
        The model directory (created if missing; the file is written atomically).
    meta : dict
        The JSON-like record stored beside it.

    Example
    -------
    >>> save_classifier(model, "out/model", {"retriever": {"method": "bm25"}})   # doctest: +SKIP
    >>> load_classifier("out/model")[1]                                          # doctest: +SKIP
    {'retriever': {'method': 'bm25'}}
    """
    dump_model_atomic(Path(directory) / MODEL_FILE, {"model": model, "meta": meta})


def load_classifier(directory: Path):
    """The classifier and record saved by :func:`save_classifier`, read without running code.

    Parameters
    ----------
    directory : str or Path
        A model directory (from ``factcheck train`` or ``factcheck run``: ``OUT/model``).

    Returns
    -------
    model : fitted estimator
        Has ``predict`` and ``predict_proba`` over ``(claim, [passages])`` pairs.
    meta : dict
        The record saved with it.

    Example
    -------
    >>> model, meta = load_classifier("out/demo/model")   # doctest: +SKIP
    >>> meta["retriever"]["method"]                       # doctest: +SKIP
    'bm25'
    """
    refuse_unfinished(directory)
    path = Path(directory) / MODEL_FILE
    if not path.is_file():
        old = path.with_suffix(".joblib")
        if old.is_file():  # the pickle format that preceded skops model files
            raise InputError(old, None, "an old pickle-format classifier, refused (loading a pickle can run "
                             "code); retrain with `factcheck train` or `factcheck run`")
        raise InputError(path, None, "no trained classifier here (run `factcheck train` or `factcheck run`)")
    obj = load_model(path, "classifier", probe=_probe)
    return obj["model"], obj["meta"]


def _probe(obj) -> None:
    """The loaded file is a classifier that predicts one finite distribution over its labels."""
    if not isinstance(obj, dict) or "model" not in obj or not isinstance(obj.get("meta"), dict) \
            or not callable(getattr(obj["model"], "predict_proba", None)):
        raise BadModel("not a classifier file")
    model, meta = obj["model"], obj["meta"]
    classes = [str(c) for c in getattr(model, "classes_", [])]
    recorded = meta.get("labels")
    if (classes != list(recorded)) if isinstance(recorded, list) else not (classes and set(classes) <= set(LABELS)):
        raise BadModel(f"its classes {classes[:5]} are not the labels it was trained on")
    if meta.get("mode") == "open":
        return  # its embedding model may sit elsewhere until relocated: FactChecker.load checks it
    try:
        proba = np.asarray(model.predict_proba([("Sea levels are rising.", ["The sea level rose."])]))
    except ImportError:  # an open-mode model without the open extra: FactChecker.load says so in one line
        return
    if proba.shape != (1, len(classes)) or not np.all(np.isfinite(proba)) or abs(float(proba.sum()) - 1) > 1e-6:
        raise BadModel("its probabilities are not one finite distribution over its classes")
