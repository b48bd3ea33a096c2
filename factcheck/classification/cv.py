"""Choose the classifier by repeated stratified k-fold cross-validation over all training
claims: the simplest configuration within one standard error of the best mean accuracy wins
(docs/decisions.md). Folds run in single-threaded workers, so results do not depend on ``jobs``.
"""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import asdict, dataclass

import numpy as np
import scipy.sparse as sp
from joblib import effective_n_jobs
from joblib.executor import get_memmapping_executor
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import f1_score
from sklearn.model_selection import RepeatedStratifiedKFold

from factcheck.classification.features import (ALL_GROUPS, SCALED, ClaimEvidenceFeatures, concat_views,
                                               require_two_labels, take_views)
from factcheck.errors import InputError
from factcheck.formats.claims import ordered_labels
from factcheck.progress import progress as progress_bar
from factcheck.tagging.backends import NATIVE_THREAD_VARS, sigint_for_this_process_only

FOLDS, REPEATS, CV_SEED = 5, 3, 90042
# Everything, and without the claim-stem bags (which duplicate much of the claim TF-IDF).
FEATURE_SETS = (ALL_GROUPS, ("claim", "evidence", "stats"))
# augment and class_weight are fixed by the full grid's measurement (docs/decisions.md).
GRID = {"C": (0.25, 0.5, 2.0), "class_weight": (None,), "stats_weight": (0.3,),
        "augment": (True,), "groups": FEATURE_SETS}
CLAIM_ONLY_GRID = {"C": (0.25, 0.5, 2.0), "class_weight": (None, "balanced"), "stats_weight": (0.3,),
                   "augment": (False,), "groups": (("claim",),)}


@dataclass(frozen=True)
class ClassifierConfig:
    """One classifier candidate of the cross-validation grid."""

    C: float = 2.0
    class_weight: str | None = None
    stats_weight: float = 0.3
    augment: bool = True
    groups: tuple = ALL_GROUPS

    def build(self, embedding: dict | None = None):
        """The unfitted classifier (:func:`~factcheck.make_classifier`)."""
        from factcheck.classification.model import make_classifier
        return make_classifier(self.C, self.class_weight, self.stats_weight, self.groups, embedding)

    def complexity(self) -> tuple:
        """Smaller is simpler (groups, augmentation, C)."""
        return (len(self.groups), self.augment, self.C)


def configs(grid: dict) -> list[ClassifierConfig]:
    """Every configuration of ``grid`` (one ``stats_weight`` without the stats group: it has no effect)."""
    every = [ClassifierConfig(**dict(zip(grid, values))) for values in itertools.product(*grid.values())]
    return [c for c in every if "stats" in c.groups or c.stats_weight == grid["stats_weight"][0]]


def config_json(config: ClassifierConfig) -> dict:
    """A classifier configuration as JSON (``groups`` as a list)."""
    return {**asdict(config), "groups": list(config.groups)}


@dataclass(frozen=True)
class Split:
    """One fold of one repeat: train and test positions."""

    repeat: int
    fold: int
    train: np.ndarray
    test: np.ndarray


def check_training_labels(labels, path=None, folds: int = FOLDS) -> int:
    """The number of cross-validation folds for training claims with these labels: ``folds``,
    or fewer when the rarest label has fewer claims (scikit-learn's rule for stratified folds:
    no more folds than the claims of each label). Fewer than two labels, or a label with one
    claim (it could not be both trained on and tested in any fold), is an InputError naming ``path``.
    """
    counts = Counter(str(v) for v in labels)
    place = None if path is not None else "training claims"
    require_two_labels(list(counts), path, place)
    rare = sorted(label for label, n in counts.items() if n < 2)
    if rare:
        raise InputError(path, place, f"{len(rare)} label{'s' if len(rare) > 1 else ''} with a single training claim "
                         f"({', '.join(map(repr, rare[:5]))}); cross-validation needs at least 2 claims of each "
                         "label (stratified folds: each label in the training and the test part)")
    return min(folds, min(counts.values()))


def cv_splits(labels, folds: int = FOLDS, repeats: int = REPEATS, seed: int = CV_SEED) -> list[Split]:
    """Repeated stratified k-fold over positions of ``labels`` (fewer folds for a rare label:
    :func:`check_training_labels`)."""
    k = check_training_labels(labels, folds=folds)
    splitter = RepeatedStratifiedKFold(n_splits=k, n_repeats=repeats, random_state=seed)
    y = np.asarray(labels)
    return [Split(i // k, i % k, np.sort(tr), np.sort(te))
            for i, (tr, te) in enumerate(splitter.split(np.zeros(len(y)), y))]


@dataclass
class CVResult:
    """One (reader, configuration): per-fold scores and out-of-fold predictions."""
    reader: str
    config: ClassifierConfig
    accuracy: np.ndarray           # per split
    macro_f1: np.ndarray           # per split
    gold_accuracy: np.ndarray      # per split, the same model reading gold evidence
    proba: np.ndarray              # (repeats, claims, labels): out-of-fold probabilities
    decision: np.ndarray           # (repeats, claims, labels): out-of-fold decision values
    chosen: bool = False
    labels: tuple = ()             # the columns of proba and decision (the training label set)

    @property
    def mean(self) -> float:
        """Mean fold accuracy."""
        return float(self.accuracy.mean())

    @property
    def se(self) -> float:
        """Standard error of the mean fold accuracy (folds taken as independent)."""
        n = len(self.accuracy)
        return float(self.accuracy.std(ddof=1) / np.sqrt(n)) if n > 1 else 0.0

    def predictions(self, repeat: int) -> np.ndarray:
        """Out-of-fold predicted labels of one repeat."""
        return np.array(self.labels)[self.proba[repeat].argmax(axis=1)]

    def row(self) -> dict:
        """The result as a row of ``tuning/classifier-cv.csv``."""
        cfg = config_json(self.config)
        cfg["groups"] = "+".join(cfg["groups"])
        return {"reader": self.reader, **cfg,
                "cv_accuracy": round(self.mean, 4), "cv_accuracy_sd": round(float(self.accuracy.std(ddof=1)), 4),
                "cv_accuracy_se": round(self.se, 4), "cv_macro_f1": round(float(self.macro_f1.mean()), 4),
                "cv_macro_f1_sd": round(float(self.macro_f1.std(ddof=1)), 4),
                "cv_gold_accuracy": round(float(self.gold_accuracy.mean()), 4), "chosen": self.chosen}


def _fold_job(split: Split, y: np.ndarray, gold_views: dict, read_views: dict, cfgs: list[ClassifierConfig],
              labels: tuple):
    """Every configuration on one split: {config index: :func:`fit_scored`'s triple}."""
    tr, te = split.train, split.test
    out = {}
    test_read, test_gold = take_views(read_views, te), take_views(gold_views, te)
    by_augment: dict[bool, dict[tuple, list[int]]] = {}
    for i, c in enumerate(cfgs):
        by_augment.setdefault(c.augment, {}).setdefault(c.groups, []).append(i)
    for augment, by_groups in by_augment.items():
        train_views = take_views(gold_views, tr)
        y_train = y[tr]
        if augment:
            train_views = concat_views(train_views, take_views(read_views, tr))
            y_train = np.concatenate([y_train, y_train])
        # Each group fitted and transformed once for every feature set holding it: a group's
        # columns do not depend on the others (ClaimEvidenceFeatures.group_matrices).
        every = tuple(dict.fromkeys(g for groups in by_groups for g in groups))
        features = ClaimEvidenceFeatures(groups=every).fit_views(train_views)
        views = (train_views, test_read, test_gold)
        unscaled = [features.group_matrices(v, [g for g in every if g not in SCALED]) for v in views]
        for sw in sorted({cfgs[i].stats_weight for members in by_groups.values() for i in members}):
            features.stats_weight = sw
            parts = [{**u, **features.group_matrices(v, [g for g in every if g in SCALED])}
                     for u, v in zip(unscaled, views)]
            for groups, members in by_groups.items():
                todo = [m for m in members if cfgs[m].stats_weight == sw]
                if todo:
                    M, M_read, M_gold = (sp.hstack([p[g] for g in groups]).tocsr() for p in parts)
                    for i in todo:
                        out[i] = fit_scored(M, y_train, cfgs[i], M_read, M_gold, labels)
    return out


def in_label_order(a: np.ndarray, classes, labels, missing: float) -> np.ndarray:
    """The columns of ``a`` (one per class; a binary model's 1-D decision values too) in ``labels``
    order; ``missing`` for a label not a class."""
    classes = list(classes)
    if a.ndim == 1:  # a binary model's decision values: the second class's logit against the first's 0
        a = np.column_stack([np.zeros_like(a), a])
    out = np.full((a.shape[0], len(labels)), missing)
    for j, label in enumerate(labels):
        if label in classes:
            out[:, j] = a[:, classes.index(label)]
    return out


def cross_validate(y, splits: list[Split], gold_views: dict, read_views: list[dict], grid: dict,
                   reader: str, jobs: int = 1, labels=None) -> list[CVResult]:
    """Every configuration of ``grid``, reading ``read_views[split.repeat]``, on every split."""
    y = np.asarray(y)
    labels = tuple(labels if labels is not None else ordered_labels(set(y.tolist())))
    cfgs = configs(grid)
    per_split = run_folds(_fold_job, [(s, y, gold_views, read_views[s.repeat], cfgs, labels) for s in splits], jobs)
    return collect(y, splits, per_split, cfgs, reader, labels)


_ONE_THREAD = {v: "1" for v in NATIVE_THREAD_VARS}


_workers = None  # the process pool run_folds last used, until release_workers()


def run_folds(fn, arg_tuples: list[tuple], jobs: int, desc: str = "classifier cross-validation",
              unit: str = "folds") -> list:
    """``fn(*args)`` for each tuple, in order, in ``jobs`` single-threaded worker processes,
    with a progress bar ``desc`` (one step a task; :func:`factcheck.progress.progress`)."""
    global _workers
    # joblib's factory, not loky's: joblib's loky backend reuses this process-wide executor.
    n = max(1, min(effective_n_jobs(jobs), len(arg_tuples)))
    with sigint_for_this_process_only():  # Ctrl-C interrupts this process, never the workers (see there)
        executor = _workers = get_memmapping_executor(n, env=_ONE_THREAD, timeout=60)
        results = executor.map(fn, *zip(*arg_tuples))  # submits every task: the workers start here
    # Minutes on a large training set: the bar advances as each fold's results arrive, in order.
    return list(progress_bar(results, desc=desc, total=len(arg_tuples), unit=unit))


def release_workers() -> None:
    """Stop run_folds' worker processes now (idle, they would hold their memory for 60 s)."""
    global _workers
    executor, _workers = _workers, None
    if executor is not None:
        executor.shutdown(wait=True)


def collect(y, splits: list[Split], per_split: list[dict], cfgs: list, reader: str, labels) -> list[CVResult]:
    """Per-split job outputs -> one result per configuration."""
    repeats = 1 + max(s.repeat for s in splits)
    labels = tuple(labels)
    results = []
    for i, cfg in enumerate(cfgs):
        proba = np.zeros((repeats, len(y), len(labels)))
        decision = np.zeros_like(proba)
        acc, f1, gold_acc = [], [], []
        for s, res in zip(splits, per_split):
            p, d, g = res[i]
            proba[s.repeat, s.test], decision[s.repeat, s.test] = p, d
            pred = np.array(labels)[p.argmax(axis=1)]
            acc.append(float(np.mean(pred == y[s.test])))
            f1.append(float(f1_score(y[s.test], pred, labels=list(labels), average="macro", zero_division=0)))
            gold_acc.append(float(np.mean(g == y[s.test])))
        results.append(CVResult(reader, cfg, np.array(acc), np.array(f1), np.array(gold_acc), proba, decision,
                                labels=labels))
    return results


def fit_scored(M, y_train, c: ClassifierConfig, M_read, M_gold, labels):
    """Fit one configuration: (proba, decision) on ``M_read`` in ``labels`` order, predictions on ``M_gold``."""
    model = LogisticRegression(C=c.C, class_weight=c.class_weight, max_iter=5000).fit(M, y_train)
    return (in_label_order(model.predict_proba(M_read), model.classes_, labels, 0.0),
            in_label_order(model.decision_function(M_read), model.classes_, labels, -np.inf), model.predict(M_gold))


def choose_one_se(results: list[CVResult]) -> CVResult:
    """The simplest result within one standard error of the best mean accuracy (ties:
    higher mean accuracy, then macro-F1, then the earlier candidate)."""
    best = max(results, key=lambda r: (r.mean, float(r.macro_f1.mean())))
    eligible = [r for r in results if r.mean >= best.mean - best.se - 1e-12]
    order = {id(r): i for i, r in enumerate(results)}
    chosen = min(eligible, key=lambda r: (r.config.complexity(), -r.mean, -float(r.macro_f1.mean()), order[id(r)]))
    chosen.chosen = True
    return chosen


def fit_final(config: ClassifierConfig, X_gold, X_read, y, embedding: dict | None = None):
    """The chosen configuration refitted on all training claims."""
    X, labels = list(X_gold), list(y)
    if config.augment:
        X += list(X_read)
        labels += list(y)
    return config.build(embedding).fit(X, labels)
