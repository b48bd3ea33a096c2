import json
import math

import numpy as np
import pytest

from helpers import assert_one_line_error, run_cli, shared_file
from factcheck.evaluation.ablation import ablation, bootstrap_macro_f1
from factcheck.evaluation.course_metric import course_score, evidence_f, evidence_f_from_counts
from factcheck.evaluation.intervals import (bootstrap_mean, format_interval, mcnemar_exact, paired_bootstrap_diff,
                                           wilson)
from factcheck.evaluation.retrieval_metrics import recall_at, reciprocal_rank
from factcheck.formats.claims import Claim, read_claims, read_predictions


def test_course_scorer_parity_with_the_course_file():
    dev = read_claims(shared_file("dev-claims.json"), require_labels=True)
    pred = read_predictions(shared_file("dev-claims-baseline.json"))
    s = course_score(pred, dev)
    assert abs(s.evidence_f - 0.3377705627705628) < 1e-12
    assert abs(s.accuracy - 0.35064935064935066) < 1e-12
    assert abs(s.harmonic_mean - 0.3440894901357093) < 1e-12


def test_evidence_f_hand_computed():
    assert evidence_f(["a", "b", "a"], ["a", "c"]) == pytest.approx(2 * 0.5 * 0.5 / 1.0)  # set semantics
    assert evidence_f(["x"], ["a"]) == 0.0
    assert evidence_f([], ["a"]) == 0.0
    assert evidence_f(["a"], ["a", "b", "c"]) == pytest.approx(2 * 1 * (1 / 3) / (1 + 1 / 3))


def test_evidence_f_from_counts_agrees_with_the_course_formula():
    # the reranker's cut-off tuning scores claims from counts; it must be the same F
    rng = np.random.default_rng(0)
    pool = [f"p{i}" for i in range(12)]
    for _ in range(500):
        predicted = list(rng.choice(pool, size=rng.integers(0, 8), replace=False))
        gold = list(rng.choice(pool, size=rng.integers(1, 6), replace=False))
        correct = len(set(predicted) & set(gold))
        counts = evidence_f_from_counts(np.array([float(correct)]), np.array([len(predicted)]),
                                        np.array([float(len(gold))]))
        assert abs(counts[0] - evidence_f(predicted, gold)) < 1e-12


def test_one_interval_format():
    e = bootstrap_mean([0.1, 0.2, 0.4])
    assert format_interval(e) == e.fmt() == format_interval(e.to_json())
    assert format_interval({"value": 0.18349, "ci95": [0.1509, 0.2172]}) == "0.183 [0.151, 0.217]"
    assert format_interval({"value": 0.5, "ci95": [0.25, 0.75]}, digits=2) == "0.50 [0.25, 0.75]"
    assert format_interval(bootstrap_mean([])) == "n/a" and format_interval(None, missing="—") == "—"


def test_missing_claims_are_left_out_and_labels_optional():
    gt = [Claim("c1", "t", "SUPPORTS", ["a"]), Claim("c2", "t", "REFUTES", ["b"])]
    s = course_score({"c1": {"evidences": ["a"], "claim_label": "REFUTES"}}, gt)
    assert s.missing == ["c2"] and s.evidence_f == 1.0 and s.accuracy == 0.0 and s.harmonic_mean == 0.0
    s2 = course_score({"c1": {"evidences": ["a"]}, "c2": {"evidences": ["b"]}}, gt)
    assert s2.accuracy is None and s2.harmonic_mean is None


def test_wilson_hand_computed():
    e = wilson(8, 10)
    # z = 1.959964: centre = (0.8 + z^2/20) / (1 + z^2/10)
    z = 1.959963984540054
    centre = (0.8 + z * z / 20) / (1 + z * z / 10)
    half = z * math.sqrt(0.8 * 0.2 / 10 + z * z / 400) / (1 + z * z / 10)
    assert e.low == pytest.approx(centre - half) and e.high == pytest.approx(centre + half)
    assert e.low == pytest.approx(0.4902, abs=1e-4) and e.high == pytest.approx(0.9433, abs=1e-4)
    assert wilson(0, 5).low == 0.0 and wilson(5, 5).high == 1.0


def test_bootstrap_is_deterministic_and_covers_the_mean():
    v = np.r_[np.ones(30), np.zeros(70)]
    a, b = bootstrap_mean(v), bootstrap_mean(v)
    assert (a.low, a.high) == (b.low, b.high)
    assert a.low < 0.3 < a.high and 0.18 < a.low and a.high < 0.42
    constant = bootstrap_mean(np.full(20, 0.5))
    assert constant.low == constant.high == 0.5


def test_mcnemar_exact_hand_computed():
    # 6 claims right only with A, 1 only with B: p = 2 * P(X <= 1 | n=7, 1/2) = 2 * 8/128.
    a = [True] * 6 + [False] * 1 + [True] * 5 + [False] * 3
    b = [False] * 6 + [True] * 1 + [True] * 5 + [False] * 3
    r = mcnemar_exact(a, b)
    assert (r["only_a_correct"], r["only_b_correct"]) == (6, 1)
    assert r["p_value"] == pytest.approx(16 / 128)
    assert mcnemar_exact([True, False], [True, False])["p_value"] == 1.0


def test_paired_bootstrap_difference_sign_and_interval():
    a = np.r_[np.ones(60), np.zeros(40)]
    b = np.r_[np.ones(40), np.zeros(60)]
    d = paired_bootstrap_diff(a, b)
    assert d.value == pytest.approx(0.2) and 0.1 < d.low < 0.2 < d.high < 0.3


def test_macro_f1_bootstrap_point_matches_sklearn():
    from sklearn.metrics import f1_score
    rng = np.random.default_rng(0)
    labels = ["SUPPORTS", "REFUTES", "NOT_ENOUGH_INFO", "DISPUTED"]
    y = list(rng.choice(labels, 80))
    p = [t if rng.random() < 0.6 else rng.choice(labels) for t in y]
    e = bootstrap_macro_f1(y, p)
    assert e.value == pytest.approx(f1_score(y, p, average="macro", labels=labels))
    assert e.low < e.value < e.high


def test_ablation_structure_on_a_small_case():
    y = ["SUPPORTS", "REFUTES", "DISPUTED", "NOT_ENOUGH_INFO"] * 5
    gold = list(y)
    retrieved = ["SUPPORTS"] * 20
    r = ablation(y, gold, retrieved, {"always-majority": ["SUPPORTS"] * 20})
    assert r["gold"]["accuracy"]["value"] == 1.0 and r["retrieved"]["accuracy"]["value"] == 0.25
    assert r["gold_vs_retrieved"]["mcnemar"]["only_a_correct"] == 15
    assert r["gold"]["confusion"]["matrix"][1][1] == 5
    assert r["retrieved"]["per_label"]["REFUTES"]["recall"]["value"] == 0.0
    assert r["baselines"]["always-majority"]["retrieved_vs_baseline"]["accuracy_difference"]["value"] == 0.0


def test_recall_and_mrr():
    assert recall_at(["x", "a", "b"], ["a", "b", "c", "d"], 2) == 0.25
    assert reciprocal_rank(["x", "y", "a"], ["a"]) == pytest.approx(1 / 3)
    assert reciprocal_rank(["x"], ["a"]) == 0.0


@pytest.mark.slow
def test_evaluate_cli_json_and_warnings(tmp_path):
    gt = tmp_path / "gt.json"
    gt.write_text(json.dumps({
        "c1": {"claim_text": "x", "claim_label": "SUPPORTS", "evidences": ["a", "b"]},
        "c2": {"claim_text": "y", "claim_label": "REFUTES", "evidences": ["c"]}}))
    pred = tmp_path / "pred.json"
    pred.write_text(json.dumps({"c1": {"claim_label": "SUPPORTS", "evidences": ["a"]}}))
    proc = run_cli("evaluate", "--predictions", pred, "--groundtruth", gt, "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["evidence_f"] == pytest.approx(2 / 3) and out["accuracy"] == 1.0
    assert out["harmonic_mean"] == pytest.approx(0.8)
    assert "c2" in proc.stderr and out["missing"] == ["c2"]
    pred.write_text(json.dumps({"c9": {"evidences": ["a"]}}))
    bad = run_cli("evaluate", "--predictions", pred, "--groundtruth", gt)
    assert_one_line_error(bad, str(pred), "c9", "not in the ground truth")
