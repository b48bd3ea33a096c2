"""The FEVER score: each rule of the official scorer as a hand-built case with every figure
checked, then random cases against a slow reference that follows the official scorer's
arithmetic instance by instance (lists, ``in`` on lists, running sums)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from factcheck.errors import InputError
from factcheck.evaluation.fever import FIGURES, fever_score, format_fever_report
from factcheck.evaluation.intervals import bootstrap_harmonic, bootstrap_mean, wilson

S, R, N = "SUPPORTS", "REFUTES", "NOT ENOUGH INFO"


def gold_of(*claims):
    """``(label, [[(page, line), ...], ...])`` per claim -> gold dict keyed "0", "1", ..."""
    return {str(i): {"label": label, "evidence": sets} for i, (label, sets) in enumerate(claims)}


def pred_of(*claims):
    return {str(i): {"predicted_label": label, "predicted_evidence": ev} for i, (label, ev) in enumerate(claims)}


def figures(score):
    return tuple(score.metrics[name].value for name in FIGURES)


def test_perfect_predictions_score_one_everywhere():
    gold = gold_of((S, [[("A", 0)]]), (R, [[("B", 1), ("C", 2)]]), (N, []))
    pred = pred_of((S, [("A", 0)]), (R, [("C", 2), ("B", 1)]), (N, []))
    assert figures(fever_score(pred, gold)) == (1.0, 1.0, 1.0, 1.0, 1.0)


def test_a_partial_set_is_worth_nothing_the_official_readme_example():
    # the official scorer's README: the first claim misses (page2, 2) of its only set
    gold = gold_of((R, [[("page1", 1), ("page2", 2)]]), (R, [[("page1", 1), ("page2", 2)]]))
    pred = pred_of((R, [("page1", 1)]), (R, [("page1", 1), ("page2", 2), ("page3", 3)]))
    s = fever_score(pred, gold)
    assert s.metrics["fever_score"].value == 0.5 and s.metrics["label_accuracy"].value == 1.0
    assert s.metrics["evidence_precision"].value == pytest.approx((1 + 2 / 3) / 2)
    assert s.metrics["evidence_recall"].value == 0.5
    assert s.metrics["evidence_f1"].value == pytest.approx(2 * (5 / 6) * 0.5 / (5 / 6 + 0.5))
    assert s.strict.tolist() == [0.0, 1.0] and s.recall.tolist() == [0.0, 1.0]


def test_wrong_label_with_the_right_evidence_scores_the_evidence_but_not_the_claim():
    s = fever_score(pred_of((R, [("A", 0)])), gold_of((S, [[("A", 0)]])))
    assert figures(s) == (0.0, 0.0, 1.0, 1.0, 1.0)


def test_not_enough_info_needs_only_its_label_and_stays_out_of_the_evidence_figures():
    gold = gold_of((N, []), (N, [[("X", 9)]]), (S, [[("A", 0)]]))
    pred = pred_of((N, [("Z", 3), ("Y", 1)]),   # evidence ignored: strictly right
                   (S, [("X", 9)]),             # wrong label: wrong, whatever its evidence
                   (S, [("A", 0), ("B", 1)]))
    s = fever_score(pred, gold)
    assert s.strict.tolist() == [1.0, 0.0, 1.0] and s.correct.tolist() == [1.0, 0.0, 1.0]
    assert s.verifiable.tolist() == [False, False, True]
    assert figures(s) == pytest.approx((2 / 3, 2 / 3, 0.5, 1.0, 2 * 0.5 / 1.5))
    # the course's spelling of the class is the same class
    course = fever_score(pred_of(("NOT_ENOUGH_INFO", [("Q", 1)])), gold_of(("NOT_ENOUGH_INFO", [[("A", 0)]])))
    assert figures(course) == (1.0, 1.0, 1.0, 0.0, 0.0) and course.verifiable.tolist() == [False]


def test_only_the_first_five_predicted_sentences_count():
    gold = gold_of((S, [[("A", 0), ("A", 5)]]))
    ranked = [("A", 0), ("B", 1), ("B", 2), ("B", 3), ("B", 4), ("A", 5)]  # the set completes at rank 6
    s = fever_score(pred_of((S, ranked)), gold)
    assert figures(s) == pytest.approx((0.0, 1.0, 0.2, 0.0, 0.0))
    s6 = fever_score(pred_of((S, ranked)), gold, max_evidence=6)
    assert figures(s6) == pytest.approx((1.0, 1.0, 2 / 6, 1.0, 2 * (1 / 3) / (4 / 3)))


def test_the_official_max_evidence_cases():
    # the official scorer's own max_evidence tests, restated
    gold = gold_of((S, [[("page", 0), ("page", 1)]]))
    pred = pred_of((S, [("page", 0), ("page", 1)]))
    assert fever_score(pred, gold, max_evidence=1).metrics["evidence_recall"].value == 0
    assert fever_score(pred, gold, max_evidence=2).metrics["evidence_recall"].value == 1
    assert fever_score(pred, gold, max_evidence=1).metrics["fever_score"].value == 0
    assert fever_score(pred, gold, max_evidence=2).metrics["fever_score"].value == 1
    gold2 = gold_of((S, [[("page", 0), ("page", 2)]]))
    assert fever_score(pred, gold2, max_evidence=1).metrics["evidence_precision"].value == 1
    assert fever_score(pred, gold2, max_evidence=2).metrics["evidence_precision"].value == 0.5


def test_any_one_complete_set_among_several_is_enough():
    gold = gold_of((S, [[("A", 0), ("B", 0)], [("C", 7)]]))
    s = fever_score(pred_of((S, [("Z", 1), ("C", 7), ("A", 0)])), gold)  # set 2 complete, set 1 half
    assert figures(s) == pytest.approx((1.0, 1.0, 2 / 3, 1.0, 0.8))
    # precision counts a sentence of any set, complete or not
    s2 = fever_score(pred_of((S, [("A", 0), ("Z", 1)])), gold)
    assert figures(s2) == pytest.approx((0.0, 1.0, 0.5, 0.0, 0.0))


def test_duplicate_predictions_count_twice_and_take_a_slot_each():
    gold = gold_of((S, [[("A", 1)]]))
    s = fever_score(pred_of((S, [("A", 1), ("A", 1), ("B", 2)])), gold)
    assert s.metrics["evidence_precision"].value == pytest.approx(2 / 3) and s.metrics["fever_score"].value == 1.0
    crowded = [("B", 2)] * 5 + [("A", 1)]  # five copies of a wrong sentence push the gold one out
    s = fever_score(pred_of((S, crowded)), gold)
    assert figures(s) == (0.0, 1.0, 0.0, 0.0, 0.0)


def test_official_corner_cases():
    # no predicted sentence: precision 1 (nothing wrong was said), recall 0
    s = fever_score(pred_of((S, [])), gold_of((S, [[("A", 0)]])))
    assert figures(s) == (0.0, 1.0, 1.0, 0.0, 0.0)
    # a verifiable claim without any gold set is recalled but never strictly right
    s = fever_score(pred_of((S, [("A", 0)])), gold_of((S, [])))
    assert figures(s) == pytest.approx((0.0, 1.0, 0.0, 1.0, 0.0))
    # no verifiable claim at all: the official 1 and 0, and no interval to give
    s = fever_score(pred_of((N, [])), gold_of((N, [])))
    assert figures(s) == (1.0, 1.0, 1.0, 0.0, 0.0)
    assert s.metrics["evidence_precision"].low is None and s.metrics["evidence_recall"].n == 0
    # labels compare case-insensitively, as in the official scorer
    lower = fever_score(pred_of(("supports", [("A", 0)])), gold_of((S, [[("A", 0)]])))
    assert lower.metrics["fever_score"].value == 1.0


def test_fever_four_entry_gold_items_are_read_as_their_page_and_line():
    gold = {"1": {"label": S, "evidence": [[[92206, 104971, "Nikolaj", 7], [92206, 104971, "Game", 0]]]},
            "2": {"label": N, "evidence": [[[111897, None, None, None]]]}}
    pred = {"1": {"predicted_label": S, "predicted_evidence": [["Nikolaj", 7], ["Game", 0]]},
            "2": {"predicted_label": N, "predicted_evidence": []}}
    assert figures(fever_score(pred, gold)) == (1.0, 1.0, 1.0, 1.0, 1.0)


def test_missing_and_unknown_claims():
    gold = gold_of((S, [[("A", 0)]]), (R, [[("B", 0)]]))
    s = fever_score({"0": {"predicted_label": S, "predicted_evidence": [["A", 0]]}}, gold)
    assert s.missing == ["1"] and s.claim_ids == ["0"] and s.metrics["fever_score"].value == 1.0
    with pytest.raises(InputError, match="predicted claim not in the ground truth"):
        fever_score({"zz": {"predicted_label": S, "predicted_evidence": []}}, gold, source="p.jsonl")


@pytest.mark.parametrize("bad", [
    {"predicted_label": S},                                        # no evidence list
    {"predicted_label": S, "predicted_evidence": [["A", "0"]]},    # line not an int
    {"predicted_label": S, "predicted_evidence": [["A", True]]},   # a bool is not a line
    {"predicted_label": S, "predicted_evidence": [["A", 0, 1]]},   # not a pair
    {"predicted_label": S, "predicted_evidence": "A 0"},
    {"predicted_evidence": []},                                    # no label
])
def test_malformed_predictions_are_one_line_errors_naming_the_claim(bad):
    with pytest.raises(InputError) as err:
        fever_score({"0": bad}, gold_of((S, [[("A", 0)]])), source="p.jsonl")
    line = err.value.one_line()
    assert line.startswith("p.jsonl: claim '0':") and "\n" not in line


def test_max_evidence_must_be_a_positive_integer():
    for bad in (0, -1, 2.5, True):
        with pytest.raises(InputError, match="max_evidence"):
            fever_score({}, {}, max_evidence=bad)


def test_intervals_are_wilson_for_proportions_and_bootstrap_for_means():
    rng = np.random.default_rng(3)
    claims = [(rng.choice([S, R, N]), [[("P", int(rng.integers(0, 4)))]]) for _ in range(60)]
    preds = [(rng.choice([S, R, N]), [("P", int(x)) for x in rng.integers(0, 4, size=rng.integers(0, 4))])
             for _ in range(60)]
    s = fever_score(pred_of(*preds), gold_of(*claims))
    iv = s.metrics
    assert iv["fever_score"] == wilson(int(s.strict.sum()), 60)
    assert iv["label_accuracy"] == wilson(int(s.correct.sum()), 60)
    assert iv["evidence_recall"] == wilson(int(s.recall.sum()), len(s.recall))
    assert iv["evidence_precision"] == bootstrap_mean(s.precision)
    assert iv["evidence_f1"] == bootstrap_harmonic(s.precision, s.recall)
    for key, e in iv.items():
        assert e.low <= e.value <= e.high, key
    js = s.to_json()
    assert js["claims"] == 60 and js["verifiable_claims"] == int(s.verifiable.sum())
    assert js["intervals"] == {k: m.to_json() for k, m in iv.items()} and js["fever_score"] == iv["fever_score"].value
    text = format_fever_report(s)
    assert f"FEVER score:        {iv['fever_score'].value:.4f}" in text and "Wilson" in text and "bootstrap" in text


# ----------------------------------------------------------- against a slow reference

def official_arithmetic(instances, max_evidence=5):
    """The official scorer's five figures, computed its way: one instance (a FEVER JSONL
    record with the gold fields copied in) at a time, sentences as [page, line] lists,
    membership by ``in`` on lists, precision and recall as running sums over the claims
    whose gold label is not NOT ENOUGH INFO."""
    strict = correct = 0.0
    p_sum = p_claims = r_sum = r_claims = 0.0
    for inst in instances:
        top = inst["predicted_evidence"][:max_evidence]
        gold_label = inst["label"].upper()
        right = gold_label == inst["predicted_label"].upper()
        if right:
            correct += 1
            if gold_label == "NOT ENOUGH INFO":
                strict += 1
            else:
                for group in inst["evidence"]:
                    if all([item[2], item[3]] in top for item in group):
                        strict += 1
                        break
        if gold_label != "NOT ENOUGH INFO":
            every = [[item[2], item[3]] for group in inst["evidence"] for item in group if item[3] is not None]
            hits = sum(1.0 for p in top if p in every)
            p_sum += hits / len(top) if len(top) else 1.0
            p_claims += 1
            r_claims += 1
            if len(inst["evidence"]) == 0:
                r_sum += 1
            else:
                for group in inst["evidence"]:
                    if all([item[2], item[3]] in top for item in group):
                        r_sum += 1
                        break
    total = len(instances)
    precision = p_sum / p_claims if p_claims else 1.0
    recall = r_sum / r_claims if r_claims else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return strict / total, correct / total, precision, recall, f1


def random_case(rng, n):
    pages = ["Alpha", "Beta", "Gamma"]
    sentence = lambda: [str(rng.choice(pages)), int(rng.integers(0, 4))]  # noqa: E731
    instances = []
    for i in range(n):
        label = str(rng.choice([S, R, N]))
        if label == N:
            evidence = [[[i, None, None, None]]]
        else:
            evidence = [[[i, j, *sentence()] for _ in range(rng.integers(1, 4))] for j in range(rng.integers(0, 4))]
        predicted = [sentence() for _ in range(rng.integers(0, 9))]
        if predicted and rng.random() < 0.3:
            predicted.insert(int(rng.integers(0, len(predicted))), predicted[0])  # a duplicate
        guess = str(rng.choice([S, R, N, label, label.lower()]))
        instances.append({"id": i, "label": label, "evidence": evidence,
                          "predicted_label": guess, "predicted_evidence": predicted})
    return instances


@pytest.mark.parametrize("seed", range(40))
def test_agrees_with_the_official_arithmetic_on_random_cases(seed):
    rng = np.random.default_rng(seed)
    instances = random_case(rng, int(rng.integers(1, 40)))
    max_evidence = int(rng.choice([1, 2, 5, 5, 5, 8]))
    gold = {str(x["id"]): {"label": x["label"], "evidence": x["evidence"]} for x in instances}
    pred = {str(x["id"]): {"predicted_label": x["predicted_label"], "predicted_evidence": x["predicted_evidence"]}
            for x in instances}
    ours = figures(fever_score(pred, gold, max_evidence=max_evidence))
    assert ours == pytest.approx(official_arithmetic(instances, max_evidence), abs=1e-12)


def test_passage_id_strings_score_as_their_pairs():
    gold = {"0": {"label": S, "evidence": [[("A_b", 1), ("C:d", 2)]]}, "1": {"label": R, "evidence": [[("E", 0)]]}}
    pred = {"0": {"predicted_label": S, "predicted_evidence": [("C:d", 2), ("Z", 9), ("A_b", 1)]},
            "1": {"predicted_label": S, "predicted_evidence": [("E", 0)]}}
    as_ids = lambda pairs: [f"{p}:{l}" for p, l in pairs]  # noqa: E731
    gold_ids = {k: {"label": v["label"], "evidence": [as_ids(s) for s in v["evidence"]]} for k, v in gold.items()}
    pred_ids = {k: {**v, "predicted_evidence": as_ids(v["predicted_evidence"])} for k, v in pred.items()}
    assert figures(fever_score(pred_ids, gold_ids)) == figures(fever_score(pred, gold))


# ----------------------------------------------------------- evaluate --metric fever

@pytest.mark.slow
def test_evaluate_metric_fever_gives_the_course_metrics_label_accuracy(tmp_path):
    from helpers import run_cli, shared_file
    args = ["evaluate", "--predictions", shared_file("dev-claims-baseline.json"),
            "--groundtruth", shared_file("dev-claims.json"), "--json"]
    course = json.loads(run_cli(*args).stdout)
    proc = run_cli(*args, "--metric", "fever")
    assert proc.returncode == 0, proc.stderr
    fever = json.loads(proc.stdout)
    assert fever["label_accuracy"] == course["accuracy"] == pytest.approx(0.35064935064935066, abs=1e-15)
    assert fever["claims"] == course["claims"] == 154 and fever["max_evidence"] == 5
    assert set(fever["intervals"]) == {"fever_score", "label_accuracy", "evidence_precision", "evidence_recall",
                                       "evidence_f1"}
    text = run_cli(*args[:-1], "--metric", "fever", "--max-evidence", "3").stdout
    assert "the first 3 predicted sentences" in text and "FEVER score:" in text


@pytest.mark.slow
def test_evaluate_metric_fever_refuses_unlabelled_predictions_and_stray_options(tmp_path):
    from helpers import DEMO, assert_one_line_error, run_cli
    unlabelled = tmp_path / "p.json"
    unlabelled.write_text(json.dumps({"claim-d1": {"evidences": ["evidence-1"]}}))
    proc = run_cli("evaluate", "--predictions", unlabelled, "--groundtruth", DEMO / "dev-claims.json", "--metric", "fever")
    assert_one_line_error(proc, str(unlabelled), "no predicted label")
    proc = run_cli("evaluate", "--predictions", unlabelled, "--groundtruth", DEMO / "dev-claims.json",
                   "--max-evidence", "3")
    assert_one_line_error(proc, "--max-evidence: only with --metric fever")
