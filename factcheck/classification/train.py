"""Choose the classifier's hyper-parameters on the training split, then train it.

Selection: each grid point is trained on the 80% part (gold evidence, plus -- when
``augment`` -- the same claims again with the retriever's evidence, so the model also
learns what retrieved evidence looks like) and scored on the 20% part *with retrieved
evidence*, because that is what it will read at prediction time. Ties go to the higher
macro-F1. The chosen configuration is then refitted on all training claims. Dev is
never used here.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass

import numpy as np
from sklearn.metrics import accuracy_score, f1_score
from tqdm.auto import tqdm

from factcheck.classification.features import ALL_GROUPS
from factcheck.classification.model import MajorityClassifier, make_classifier
from factcheck.formats.claims import LABELS
from factcheck.pipeline.splits import train_holdout_split

GRID = {"C": (0.5, 2.0, 8.0), "class_weight": (None, "balanced"), "stats_weight": (0.3, 1.0),
        "augment": (False, True)}
CLAIM_ONLY_GRID = {"C": (0.5, 2.0, 8.0), "class_weight": (None, "balanced")}


@dataclass(frozen=True)
class ClassifierConfig:
    C: float = 2.0
    class_weight: str | None = None
    stats_weight: float = 0.3
    augment: bool = True
    groups: tuple = ALL_GROUPS

    def build(self):
        return make_classifier(self.C, self.class_weight, self.stats_weight, self.groups)


def pairs(claims, evidence_ids: dict[str, list[str]], texts_of) -> list[tuple[str, list[str]]]:
    """(claim text, evidence texts) for each claim, evidence looked up by id."""
    return [(c.text, texts_of(evidence_ids[c.id])) for c in claims]


def _training_set(claims, gold, retrieved, texts_of, augment: bool):
    X = pairs(claims, gold, texts_of)
    y = [c.label for c in claims]
    if augment:
        X += pairs(claims, retrieved, texts_of)
        y += y
    return X, y


def select_and_train(train_claims, retrieved: dict[str, list[str]], texts_of, grid=GRID,
                     groups=ALL_GROUPS, progress=None):
    """Returns (fitted model on all training claims, chosen config, selection rows).

    Features depend only on (augment, stats_weight), so they are built once per such
    pair and every (C, class_weight) is fitted on the same matrices.
    """
    from sklearn.base import clone

    fit, holdout = train_holdout_split(train_claims)
    gold = {c.id: c.evidences for c in train_claims}
    X_ho_ret = pairs(holdout, retrieved, texts_of)
    X_ho_gold = pairs(holdout, gold, texts_of)
    y_ho = [c.label for c in holdout]
    keys = list(grid)
    points = [ClassifierConfig(**dict(zip(keys, v)), groups=groups)
              for v in itertools.product(*(grid[k] for k in keys))]
    rows, by_features = [None] * len(points), {}
    for i, cfg in enumerate(points):
        by_features.setdefault((cfg.augment, cfg.stats_weight), []).append(i)
    bar = tqdm(total=len(points), desc="classifier selection", disable=progress is False)
    for (augment, _), members in by_features.items():
        template = points[members[0]].build()
        X, y = _training_set(fit, gold, retrieved, texts_of, augment)
        features = clone(template.named_steps["features"])
        M = features.fit_transform(X)
        M_ret, M_gold = features.transform(X_ho_ret), features.transform(X_ho_gold)
        for i in members:
            model = clone(points[i].build().named_steps["model"]).fit(M, y)
            p_ret, p_gold = model.predict(M_ret), model.predict(M_gold)
            rows[i] = {**{k: v for k, v in asdict(points[i]).items() if k != "groups"},
                       "acc_retrieved": accuracy_score(y_ho, p_ret),
                       "macro_f1_retrieved": f1_score(y_ho, p_ret, average="macro", labels=list(LABELS)),
                       "acc_gold": accuracy_score(y_ho, p_gold),
                       "labels_predicted": len(set(p_ret))}
            bar.update(1)
    bar.close()
    best = max(range(len(rows)), key=lambda i: (rows[i]["acc_retrieved"], rows[i]["macro_f1_retrieved"], -i))
    chosen = points[best]
    X, y = _training_set(train_claims, gold, retrieved, texts_of, chosen.augment)
    return chosen.build().fit(X, y), chosen, rows


def train_baselines(train_claims, retrieved, texts_of, progress=None) -> dict:
    """Always-majority and claim-only models, selected the same way."""
    majority = MajorityClassifier().fit(None, [c.label for c in train_claims])
    claim_only, cfg, _ = select_and_train(train_claims, retrieved, texts_of,
                                          grid={**CLAIM_ONLY_GRID, "augment": (False,)},
                                          groups=("claim",), progress=progress)
    return {"always-majority": majority, "claim-only": claim_only}


def predicted_label_distribution(labels) -> dict:
    values, counts = np.unique(np.asarray(labels), return_counts=True)
    return {str(v): int(c) for v, c in zip(values, counts)}
