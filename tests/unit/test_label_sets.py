"""Any label set from two labels up: cross-validation's folds and classes, the binary
model's decision values, the per-label figures, and the checks ``evaluate`` gives
predictions from Python, which are a predictions file's (one implementation)."""

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from scipy.special import softmax
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import f1_score

import factcheck
from helpers import DEMO, assert_one_line_error, in_process
from factcheck.classification.cv import check_training_labels, cv_splits, in_label_order
from factcheck.errors import InputError
from factcheck.evaluation.ablation import ablation
from factcheck.formats.claims import accepted_labels, check_predictions, read_claims, read_predictions


# ---------------------------------------------------------------- cross-validation

def test_a_binary_models_decision_values_take_their_columns():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(40, 3)), np.array(["SUPPORTS", "REFUTES"] * 20)
    model = LogisticRegression().fit(X, y)
    labels = ("SUPPORTS", "REFUTES")
    d = in_label_order(model.decision_function(X), model.classes_, labels, -np.inf)
    p = in_label_order(model.predict_proba(X), model.classes_, labels, 0.0)
    assert d.shape == p.shape == (40, 2)
    # The softmax of the two columns is the model's own probability (temperature scaling reads them).
    assert np.allclose(softmax(d, axis=1), p)
    assert (np.array(labels)[d.argmax(axis=1)] == model.predict(X)).all()


@pytest.mark.parametrize("counts, folds", [({"SUPPORTS": 5, "REFUTES": 4}, 4), ({"a": 9, "b": 7, "c": 8}, 5),
                                           ({"a": 2, "b": 30, "c": 3, "d": 4, "e": 5}, 2)])
def test_folds_are_at_most_the_rarest_labels_claims(counts, folds):
    labels = [label for label, n in counts.items() for _ in range(n)]
    assert check_training_labels(labels) == folds
    splits = cv_splits(labels)
    assert {s.fold for s in splits} == set(range(folds))
    y = np.array(labels)
    for s in splits:  # every label is trained on and tested in every fold
        assert set(y[s.train]) == set(counts) == set(y[s.test])


@pytest.mark.parametrize("labels, says", [(["SUPPORTS"] * 6, "every claim is labelled 'SUPPORTS'; a classifier "
                                                              "needs training claims of at least two labels"),
                                          (["a", "a", "b", "b", "c"], "1 label with a single training claim ('c'); "
                                                                      "cross-validation needs at least 2 claims")])
def test_too_few_labels_or_claims_per_label_is_one_line(labels, says):
    with pytest.raises(InputError) as err:
        check_training_labels(labels, "train.json")
    assert err.value.one_line().startswith(f"train.json: {says}")


def test_make_classifier_refuses_a_single_label_naming_y():
    X = [("Sea levels are rising.", ["Sea level rose."]), ("Glaciers grow.", ["Glaciers retreat."])]
    with pytest.raises(InputError, match="^y: every claim is labelled 'SUPPORTS'; a classifier needs"):
        factcheck.make_classifier().fit(X, ["SUPPORTS", "SUPPORTS"])


@pytest.mark.parametrize("labels", [("yes", "no"), ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO"),
                                    ("a", "b", "c", "d", "e")])
def test_make_classifier_fits_and_predicts_any_label_set(demo_index, labels):
    index = factcheck.TagIndex.load(demo_index)
    train = read_claims(DEMO / "train-claims.json", require_labels=True)
    X = [(c.text, index.texts_of(c.evidences)) for c in train]
    y = [labels[i % len(labels)] for i in range(len(train))]
    model = factcheck.make_classifier().fit(X, y)
    bm25 = factcheck.BM25Retriever(k=2).fit(index)
    verdicts = factcheck.FactChecker(index, bm25, model).check([c.text for c in train])
    assert set(verdicts.labels) <= set(labels)
    for v in verdicts:
        probabilities = v.explanation.probabilities
        assert sorted(probabilities) == sorted(labels) and sum(probabilities.values()) == pytest.approx(1.0)


# ---------------------------------------------------------------- per-label figures

def test_ablation_takes_the_labels_present_as_scikit_learn_does():
    # Two labels of the course's four: macro-F1 over those two, not four (two zeros for the absent).
    y = ["SUPPORTS", "REFUTES", "SUPPORTS", "REFUTES", "SUPPORTS"]
    pred = ["SUPPORTS", "SUPPORTS", "SUPPORTS", "REFUTES", "REFUTES"]
    out = ablation(y, pred, pred)
    assert out["retrieved"]["confusion"]["labels"] == ["SUPPORTS", "REFUTES"]
    assert list(out["retrieved"]["per_label"]) == ["SUPPORTS", "REFUTES"]
    assert out["retrieved"]["macro_f1"].value == pytest.approx(f1_score(y, pred, average="macro"))


def _dev(relabel=None):
    dev = read_claims(DEMO / "dev-claims.json", require_labels=True)
    for c in dev:
        c.label = (relabel or {}).get(c.label, c.label)
    return dev


def test_evaluate_reports_the_labels_the_ground_truth_has():
    dev = [c for c in _dev() if c.label in ("SUPPORTS", "REFUTES")]
    result = factcheck.evaluate({c.id: {"evidences": c.evidences, "claim_label": c.label} for c in dev}, dev)
    assert list(result.per_label) == ["SUPPORTS", "REFUTES"] and result.metrics["accuracy"].value == 1.0


def test_a_subset_of_both_known_sets_accepts_either_spelling_of_not_enough_info():
    dev = [c for c in _dev() if c.label in ("SUPPORTS", "REFUTES")]
    predictions = {c.id: {"evidences": c.evidences, "claim_label": "NOT ENOUGH INFO"} for c in dev}
    assert factcheck.evaluate(predictions, dev).metrics["accuracy"].value == 0.0
    assert "NOT_ENOUGH_INFO" in accepted_labels(["SUPPORTS", "REFUTES"])
    # The course's four (DISPUTED is not FEVER's): FEVER's spelling is a typo there.
    assert "NOT ENOUGH INFO" not in accepted_labels(["SUPPORTS", "DISPUTED"])


# ---------------------------------------------------------------- predictions from Python

BAD = {
    "a label of no known spelling": ({"claim_label": "TRUE"}, "unknown label 'TRUE'; expected one of SUPPORTS"),
    "a label in lower case": ({"claim_label": "supports"}, "unknown label 'supports'"),
    "FEVER's spelling against the course's four": ({"claim_label": "NOT ENOUGH INFO"},
                                                    "unknown label 'NOT ENOUGH INFO'"),
    "a string for the evidence list": ({"evidences": "evidence-3"},
                                       "'evidences' must be a list of passage ids (strings), got a string"),
    "a number for the label": ({"claim_label": 1}, "'claim_label' must be a non-empty string, got a number"),
    "no evidence list": ({"evidences": None}, "missing 'evidences'"),
}


@pytest.mark.parametrize("case", BAD)
def test_evaluate_refuses_what_a_predictions_file_may_not_hold_naming_predictions(case, tmp_path):
    change, says = BAD[case]
    dev = _dev()
    predictions = {c.id: {"evidences": c.evidences, "claim_label": c.label} for c in dev}
    predictions["claim-d3"] = {k: v for k, v in {**predictions["claim-d3"], **change}.items() if v is not None}
    with pytest.raises(InputError) as err:
        factcheck.evaluate(predictions, dev)
    assert err.value.param == "predictions"
    assert err.value.one_line() == f"predictions claim 'claim-d3': {err.value.message}" and says in err.value.message
    # The command refuses the same file with the same words (one check, read_predictions').
    path = tmp_path / "predictions.json"
    path.write_text(json.dumps(predictions), "utf-8")
    line = assert_one_line_error(in_process("evaluate", "--predictions", path, "--groundtruth",
                                            DEMO / "dev-claims.json"), str(path))
    assert line.endswith(f"claim 'claim-d3': {err.value.message}")


def test_check_predictions_is_read_predictions_on_what_a_file_holds(tmp_path):
    dev = _dev()
    predictions = {c.id: {"evidences": c.evidences, "claim_label": c.label} for c in dev}
    path = tmp_path / "p.json"
    path.write_text(json.dumps(predictions), "utf-8")
    assert check_predictions(predictions, accepted_labels(c.label for c in dev)) == read_predictions(path)
    as_tuples = {cid: {**p, "evidences": tuple(p["evidences"])} for cid, p in predictions.items()}
    assert check_predictions(as_tuples) == read_predictions(path)  # a Python sequence of ids, not a string
    with pytest.raises(InputError, match="^predictions: expected a dict"):
        check_predictions([("claim-d1", {})])


def test_evaluate_takes_custom_labels_and_refuses_another():
    dev = _dev({"SUPPORTS": "true", "REFUTES": "false", "NOT_ENOUGH_INFO": "unknown", "DISPUTED": "mixed"})
    predictions = {c.id: {"evidences": c.evidences, "claim_label": "true"} for c in dev}
    result = factcheck.evaluate(predictions, dev)
    assert list(result.per_label) == ["false", "mixed", "true", "unknown"]
    assert result.metrics["accuracy"].value == pytest.approx(4 / 8)
    predictions["claim-d1"]["claim_label"] = "TRUE"
    with pytest.raises(InputError, match="unknown label 'TRUE'; expected one of false, mixed, true, unknown"):
        factcheck.evaluate(predictions, dev)


_ids = st.text(min_size=0, max_size=6)
_value = st.one_of(st.none(), st.integers(), st.booleans(), _ids, st.lists(st.one_of(_ids, st.integers()), max_size=3))
_entry = st.one_of(_value, st.fixed_dictionaries({}, optional={
    "evidences": st.one_of(_value, st.lists(_ids, max_size=3)),
    "claim_label": st.one_of(_value, st.sampled_from(["SUPPORTS", "REFUTES", "supports", "NOT ENOUGH INFO"]))}))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.text(min_size=1, max_size=4), _entry, min_size=1, max_size=3))
def test_python_predictions_and_a_file_of_them_get_the_same_answer(tmp_path, predictions):
    labels = accepted_labels(["SUPPORTS", "REFUTES", "NOT_ENOUGH_INFO", "DISPUTED"])
    path = tmp_path / "p.json"
    path.write_text(json.dumps(predictions), "utf-8")
    outcomes = []
    for attempt in (lambda: read_predictions(path, labels=labels), lambda: check_predictions(predictions, labels)):
        try:
            outcomes.append(attempt())
        except InputError as exc:
            outcomes.append(exc.message)
    assert outcomes[0] == outcomes[1]
