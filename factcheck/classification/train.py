"""Training helpers shared by the commands: (claim, evidence texts) pairs, label counts.

Selection itself is by cross-validation over all training claims:
:mod:`factcheck.classification.cv` (the engine) and
:mod:`factcheck.pipeline.classifier_cv` (readers, out-of-fold evidence, calibration).
"""

from __future__ import annotations

import numpy as np

from factcheck.classification.cv import ClassifierConfig  # noqa: F401  (re-exported)


def pairs(claims, evidence_ids: dict[str, list[str]], texts_of) -> list[tuple[str, list[str]]]:
    """(claim text, evidence texts) for each claim, evidence looked up by id."""
    return [(c.text, texts_of(evidence_ids[c.id])) for c in claims]


def predicted_label_distribution(labels) -> dict:
    values, counts = np.unique(np.asarray(labels), return_counts=True)
    return {str(v): int(c) for v, c in zip(values, counts)}
