"""Classifier selection by cross-validation: out-of-fold evidence, the one-SE rule,
calibration output."""

import json

import numpy as np
import pytest
from sklearn.calibration import calibration_curve

from helpers import DEMO
from factcheck.classification.calibration import apply_temperature, fit_temperature, reliability, scale
from factcheck.classification.cv import CVResult, ClassifierConfig, choose_one_se, cv_splits
from factcheck.formats.claims import LABELS, Claim
from factcheck.training.cv_evidence import out_of_fold_evidence
from factcheck.retrieval.base import Hit, Selection


class _Index:
    def __init__(self, ids):
        self.ids = ids


class MemorisingReader:
    """A label memory at its leakiest: for any query it returns the gold ids of every
    claim it was built from, so a claim's own gold reaches its evidence exactly when the
    claim was in the memory."""

    name = "memory"

    def __init__(self, claims, all_ids):
        self.gold = sorted({e for c in claims for e in c.evidences})
        self.index = _Index(all_ids)
        self.row = {e: i for i, e in enumerate(all_ids)}

    def retrieve(self, texts):
        return [Selection([Hit(self.row[e], e, 1.0) for e in self.gold], "ranked") for _ in texts]


def _claims(n=40):
    return [Claim(f"claim-{i}", f"claim text {i}", LABELS[i % 4], [f"evidence-{i}a", f"evidence-{i}b"])
            for i in range(n)]


def test_out_of_fold_evidence_never_contains_a_claims_own_gold():
    claims = _claims()
    all_ids = sorted(e for c in claims for e in c.evidences)
    splits = cv_splits([c.label for c in claims], folds=5, repeats=1)
    folds = [s.test for s in splits]
    oof = out_of_fold_evidence(claims, folds, fit_reader=lambda train: MemorisingReader(train, all_ids))
    assert list(oof) == [c.id for c in claims]
    for fold in folds:
        held = set(fold.tolist())
        other_gold = {e for i, d in enumerate(claims) if i not in held for e in d.evidences}
        for i in held:
            assert not set(claims[i].evidences) & set(oof[claims[i].id]), claims[i].id
            # ... while the other folds' gold does come through (the reader is really used).
            assert set(oof[claims[i].id]) == other_gold
    # The same reader fitted on all claims (in-fold) leaks: the check above would fail.
    leaky = out_of_fold_evidence(claims, folds, reader=MemorisingReader(claims, all_ids))
    assert all(set(c.evidences) <= set(leaky[c.id]) for c in claims)


def test_out_of_fold_evidence_rejects_folds_that_do_not_cover_every_claim():
    claims = _claims(10)
    all_ids = sorted(e for c in claims for e in c.evidences)
    with pytest.raises(ValueError):
        out_of_fold_evidence(claims, [np.arange(5)], fit_reader=lambda train: MemorisingReader(train, all_ids))


def test_cv_splits_are_stratified_repeated_partitions():
    labels = [LABELS[i % 4] for i in range(103)]
    splits = cv_splits(labels, folds=5, repeats=3, seed=1)
    assert len(splits) == 15
    for r in range(3):
        tests = np.concatenate([s.test for s in splits if s.repeat == r])
        assert sorted(tests.tolist()) == list(range(103))
    for s in splits:
        assert not set(s.train.tolist()) & set(s.test.tolist())
        counts = {lab: sum(labels[i] == lab for i in s.test) for lab in LABELS}
        assert max(counts.values()) - min(counts.values()) <= 2
    assert cv_splits(labels, folds=5, repeats=3, seed=1)[4].test.tolist() == splits[4].test.tolist()
    assert len(cv_splits(["A"] * 3 + ["B"] * 9, folds=5, repeats=1)) == 3  # fewer folds for a rare label


def _result(acc, cfg):
    acc = np.array(acc, float)
    z = np.zeros((1, 1, 4))
    return CVResult("r", cfg, acc, acc, acc, z, z)


def test_one_standard_error_rule_prefers_the_simpler_near_tie():
    simple = ClassifierConfig(C=0.25, augment=False, groups=("claim", "evidence", "stats"))
    complex_ = ClassifierConfig(C=2.0, augment=True)
    a = _result([0.52, 0.52, 0.54, 0.50, 0.54], simple)       # mean 0.524
    b = _result([0.52, 0.54, 0.56, 0.50, 0.54], complex_)     # mean 0.532, se ~0.010
    assert choose_one_se([b, a]) is a
    far = _result([0.40, 0.41, 0.42, 0.40, 0.41], simple)
    assert choose_one_se([b, far]) is b


def test_reliability_output_has_the_documented_shape_and_matches_sklearn():
    rng = np.random.default_rng(0)
    proba = rng.dirichlet(np.ones(4), size=300)
    y = [LABELS[i] for i in rng.integers(0, 4, size=300)]
    out = reliability(y, proba, LABELS, bins=10)
    assert set(out) == {"n", "bins", "ece"} and out["n"] == 300
    assert len(out["bins"]) == 10 and sum(b["count"] for b in out["bins"]) == 300
    for b in out["bins"]:
        assert set(b) == {"low", "high", "count", "confidence", "accuracy"}
        if b["count"]:
            assert b["low"] <= b["confidence"] <= b["high"] and 0 <= b["accuracy"] <= 1
        else:
            assert b["confidence"] is None and b["accuracy"] is None
    right = proba.argmax(axis=1) == np.array([LABELS.index(v) for v in y])
    acc, conf = calibration_curve(right, proba.max(axis=1), n_bins=10, strategy="uniform")
    ours = [b for b in out["bins"] if b["count"]]
    assert np.allclose([b["accuracy"] for b in ours], acc) and np.allclose([b["confidence"] for b in ours], conf)
    expected = sum(b["count"] / 300 * abs(b["accuracy"] - b["confidence"]) for b in ours)
    assert out["ece"] == pytest.approx(expected)
    json.dumps(out)  # goes into metrics.json as is


def test_temperature_scaling_fixes_overconfidence_without_changing_labels():
    rng = np.random.default_rng(1)
    n = 2000
    true_logits = rng.normal(size=(n, 4)) * 1.5
    y = np.array([rng.choice(4, p=np.exp(z) / np.exp(z).sum()) for z in true_logits])
    overconfident = true_logits * 4
    t = fit_temperature(overconfident, y)
    assert 3.0 < t < 5.5
    labels = [LABELS[i] for i in y]
    before = reliability(labels, scale(overconfident, 1.0), LABELS)["ece"]
    after = reliability(labels, scale(overconfident, t), LABELS)["ece"]
    assert after < before / 2
    assert (scale(overconfident, t).argmax(1) == overconfident.argmax(1)).all()


def test_temperature_folds_into_the_final_model():
    from factcheck.classification.model import make_classifier
    train = json.loads((DEMO / "train-claims.json").read_text())
    X = [(v["claim_text"], []) for v in train.values()]
    y = [v["claim_label"] for v in train.values()]
    model = make_classifier(C=2.0, groups=("claim",)).fit(X, y)
    before = model.predict_proba(X)
    z = model.decision_function(X)
    apply_temperature(model, 2.0)
    assert np.allclose(model.predict_proba(X), scale(z, 2.0))
    assert (model.predict_proba(X).argmax(1) == before.argmax(1)).all()


@pytest.mark.slow
def test_cross_validation_gives_the_same_numbers_for_any_jobs():
    from factcheck.classification.cv import GRID, cross_validate
    from factcheck.classification.features import views_of

    rng = np.random.default_rng(5)
    words = "ice sea level rising falling warming cooling carbon record heat cold not".split()
    X = [(" ".join(rng.choice(words, 6)), [" ".join(rng.choice(words, 8)) for _ in range(3)]) for _ in range(60)]
    y = [LABELS[i % 4] for i in range(60)]
    views = views_of(X)
    splits = cv_splits(y, folds=3, repeats=2)
    one = cross_validate(y, splits, views, [views, views], GRID, "r", jobs=1)
    two = cross_validate(y, splits, views, [views, views], GRID, "r", jobs=2)
    for a, b in zip(one, two):
        assert a.config == b.config
        assert np.array_equal(a.proba, b.proba) and np.array_equal(a.accuracy, b.accuracy)


def test_too_few_training_claims_is_a_one_line_input_error():
    from factcheck.errors import InputError
    from factcheck.training.classifier_cv import select_classifier

    class Index:
        def texts_of(self, ids):
            return []

    claims = [Claim(f"c{i}", "text", LABELS[i % 2], []) for i in range(3)]
    with pytest.raises(InputError) as err:
        select_classifier(claims, {}, Index())
    assert "training claims" in err.value.one_line() and "\n" not in err.value.one_line()


def test_the_classifier_reads_only_groups_computed_from_the_pairs_themselves():
    # A saved classifier's scaled groups are these two attributes (classifier.skops' format);
    # the pool's contextual vectors never were a group a run offered, so none is accepted.
    import inspect
    from factcheck.classification.features import OPEN_GROUPS, SCALED, ClaimEvidenceFeatures, views_of
    assert set(SCALED) <= set(OPEN_GROUPS) and set(SCALED) == {"stats", "dense"}
    assert list(inspect.signature(views_of).parameters) == ["X", "groups", "embedding"]
    views = views_of([("sea rises", ["sea level rises"]), ("ice melts", [])], ("stats",))
    with pytest.raises(ValueError, match="groups must be a non-empty subset"):
        ClaimEvidenceFeatures(groups=("stats", "contextual")).fit_views(views)


def test_a_folds_feature_sets_share_each_groups_columns_and_give_what_each_set_alone_gave():
    """The fold job fits and transforms each group once for every feature set holding it: the
    fits must be those of each set's own features (the dense and stats groups scaled per weight)."""
    from factcheck.classification.cv import GRID, _fold_job, configs, fit_scored
    from factcheck.classification.features import ClaimEvidenceFeatures, concat_views, take_views, views_of
    from factcheck.training.classifier_cv import open_grid

    rng = np.random.default_rng(7)
    words = "ice sea level rising falling warming cooling carbon record heat cold not".split()
    X = [(" ".join(rng.choice(words, 6)), [" ".join(rng.choice(words, 8)) for _ in range(3)]) for _ in range(60)]
    y = np.array([LABELS[i % 4] for i in range(60)])
    gold, read = views_of(X), views_of([(c, e[:1]) for c, e in X])
    for views in (gold, read):  # the dense group's numbers, without loading a model
        views["dense"] = rng.random((len(X), 4))
    grid = {**open_grid(GRID), "stats_weight": (0.3, 1.0), "augment": (True, False)}
    cfgs = configs(grid)
    split = cv_splits(list(y), folds=3, repeats=1)[0]
    labels = tuple(sorted(set(y.tolist())))
    shared = _fold_job(split, y, gold, read, cfgs, labels)
    assert sorted(shared) == list(range(len(cfgs)))
    for i, c in enumerate(cfgs):
        train_views, y_train = take_views(gold, split.train), y[split.train]
        if c.augment:
            train_views = concat_views(train_views, take_views(read, split.train))
            y_train = np.concatenate([y_train, y_train])
        features = ClaimEvidenceFeatures(groups=c.groups, stats_weight=c.stats_weight).fit_views(train_views)
        alone = fit_scored(features.transform_views(train_views), y_train, c,
                           features.transform_views(take_views(read, split.test)),
                           features.transform_views(take_views(gold, split.test)), labels)
        for a, b in zip(shared[i], alone, strict=True):
            assert np.array_equal(a, b), c
