"""The claim classifier: claim+evidence features -> multinomial logistic regression.

A linear model over sparse text features is the right size for 1,228 training claims:
it trains in seconds, its weights can be inspected, and ``class_weight`` lets the rare
labels (DISPUTED: 10% of training claims) be predicted at all -- the 2024 classifier
never predicted REFUTES or DISPUTED.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline

from factcheck.classification.features import ALL_GROUPS, ClaimEvidenceFeatures
from factcheck.errors import InputError
from factcheck.formats.claims import LABELS
from factcheck.formats.files import dump_model_atomic
from factcheck.formats.safe_load import load_model

# skops, not pickle: loading a model directory must not run code (see formats/safe_load.py)
MODEL_FILE = "classifier.skops"


def make_classifier(C: float = 2.0, class_weight=None, stats_weight: float = 0.3,
                    groups=ALL_GROUPS) -> Pipeline:
    return Pipeline([
        ("features", ClaimEvidenceFeatures(groups=groups, stats_weight=stats_weight)),
        ("model", LogisticRegression(C=C, class_weight=class_weight, max_iter=5000)),
    ])


class MajorityClassifier:
    """Always the most frequent training label (the constant baseline)."""

    def fit(self, X, y):
        labels, counts = np.unique(np.asarray(y), return_counts=True)
        self.label_ = labels[np.lexsort((labels, -counts))][0]
        self.classes_ = np.array(LABELS)
        return self

    def predict(self, X):
        return np.array([self.label_] * len(X))

    def predict_proba(self, X):
        p = (self.classes_ == self.label_).astype(float)
        return np.tile(p, (len(X), 1))


def save_classifier(model, directory: Path, meta: dict) -> None:
    dump_model_atomic(Path(directory) / MODEL_FILE, {"model": model, "meta": meta})


def load_classifier(directory: Path):
    path = Path(directory) / MODEL_FILE
    if not path.is_file():
        old = path.with_suffix(".joblib")
        if old.is_file():  # the pickle format that preceded skops model files
            raise InputError(old, None, "an old pickle-format classifier, refused (loading a pickle can run "
                             "code); retrain with `factcheck train` or `factcheck run`")
        raise InputError(path, None, "no trained classifier here (run `factcheck train` or `factcheck run`)")
    obj = load_model(path, "classifier")
    if not isinstance(obj, dict) or "model" not in obj or not isinstance(obj.get("meta"), dict) \
            or not callable(getattr(obj["model"], "predict_proba", None)):
        raise InputError(path, None, "not a classifier file")
    return obj["model"], obj["meta"]
