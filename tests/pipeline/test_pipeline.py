"""The main job and the classification commands, end to end on the demo data (the session's
demo run, conftest.py)."""

import json

import numpy as np
import pytest

from helpers import DEMO, assert_one_line_error, run_cli
from factcheck.classification.features import ClaimEvidenceFeatures
from factcheck.formats.claims import LABELS


def check_leaderboard(path, claims_path):
    pred = json.loads(path.read_text())
    claims = json.loads(claims_path.read_text())
    assert list(pred) == list(claims)  # every claim, input order
    for cid, entry in pred.items():
        assert set(entry) == {"claim_text", "claim_label", "evidences"}
        assert entry["claim_text"] == claims[cid]["claim_text"]
        assert entry["claim_label"] in LABELS
        assert len(entry["evidences"]) >= 1 and all(isinstance(e, str) for e in entry["evidences"])


def test_run_writes_leaderboard_predictions_for_dev_and_test(demo_run):
    check_leaderboard(demo_run / "dev-claims-predictions.json", DEMO / "dev-claims.json")
    check_leaderboard(demo_run / "test-claims-predictions.json", DEMO / "test-claims-unlabelled.json")
    passages = json.loads((DEMO / "evidence.json").read_text())
    for name in ("dev-claims-predictions.json", "test-claims-predictions.json"):
        for entry in json.loads((demo_run / name).read_text()).values():
            assert set(entry["evidences"]) <= set(passages)


@pytest.mark.slow
def test_evaluate_reproduces_metrics_json(demo_run):
    proc = run_cli("evaluate", "--predictions", demo_run / "dev-claims-predictions.json",
                   "--groundtruth", DEMO / "dev-claims.json", "--json")
    assert proc.returncode == 0, proc.stderr
    evaluated = json.loads(proc.stdout)
    metrics = json.loads((demo_run / "metrics.json").read_text())
    for key, value in evaluated.items():
        assert metrics[key] == value, key
    assert {"evidence_f", "accuracy", "harmonic_mean"} <= set(evaluated)


def test_run_report_plots_and_ablation(demo_run):
    report = (demo_run / "report.md").read_text()
    for needle in ("evidence F", "gold evidence", "retrieved evidence", "McNemar", "always-majority",
                   "claim-only", "plots/confusion.png"):
        assert needle in report
    for png in ("sweep-tags", "sweep-bm25", "confusion", "intervals"):
        assert (demo_run / "plots" / f"{png}.png").stat().st_size > 1000
    abl = json.loads((demo_run / "metrics.json").read_text())["run"]["ablation"]
    assert abl["claims"] == 8
    assert set(abl["baselines"]) == {"always-majority", "claim-only"}
    for cond in ("gold", "retrieved"):
        assert np.array(abl[cond]["confusion"]["matrix"]).sum() == 8
        lo, hi = abl[cond]["accuracy"]["ci95"]
        assert lo <= abl[cond]["accuracy"]["value"] <= hi


@pytest.mark.slow
def test_predict_and_ablation_commands_from_the_model_dir(demo_run, tmp_path):
    out = tmp_path / "pred.json"
    proc = run_cli("predict", "--claims", DEMO / "test-claims-unlabelled.json", "--index", demo_run / "index",
                   "--model", demo_run / "model", "--out", out)
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == (demo_run / "test-claims-predictions.json").read_bytes()
    proc = run_cli("ablation", "--claims", DEMO / "dev-claims.json", "--index", demo_run / "index",
                   "--model", demo_run / "model", "--json")
    assert proc.returncode == 0, proc.stderr
    abl = json.loads(proc.stdout)
    run_abl = json.loads((demo_run / "metrics.json").read_text())["run"]["ablation"]
    assert abl["gold"] == run_abl["gold"] and abl["retrieved"] == run_abl["retrieved"]


def test_classifier_reads_the_evidence():
    X = [("Sea levels are rising.", ["Sea level rose by twenty centimetres."]),
         ("Sea levels are rising.", ["An orchard is land planted with fruit trees."])]
    f = ClaimEvidenceFeatures(min_df=1).fit(X)
    a, b = f.transform(X).toarray()
    assert not np.array_equal(a, b)
    claim_only = ClaimEvidenceFeatures(groups=("claim",), min_df=1).fit(X)
    a, b = claim_only.transform(X).toarray()
    assert np.array_equal(a, b)


@pytest.mark.slow
def test_run_rejects_a_data_dir_without_course_files(tmp_path):
    (tmp_path / "train-claims.json").write_text("{}")
    proc = run_cli("run", "--data-dir", tmp_path, "--out", tmp_path / "out")
    assert_one_line_error(proc, "dev-claims.json", "missing")
    assert not (tmp_path / "out" / "metrics.json").exists()


def test_run_records_cross_validated_selection_and_calibration(demo_run):
    cv = json.loads((demo_run / "metrics.json").read_text())["run"]["classifier_cv"]
    assert cv["claims"] == 16 and cv["repeats"] == 3 and cv["folds"] >= 2
    assert len(cv["cv"]["paired_tests"]) == 3
    assert np.array(cv["cv"]["confusion"]["matrix"]).sum() == 16 * 3
    cal = cv["calibration"]
    assert cal["temperature"] > 0
    for key, n in (("cv_uncalibrated", 48), ("cv_calibrated", 48), ("dev", 8)):
        assert cal[key]["n"] == n and len(cal[key]["bins"]) == 10
        assert sum(b["count"] for b in cal[key]["bins"]) == n and 0 <= cal[key]["ece"] <= 1
    rows = (demo_run / "tuning" / "classifier-cv.csv").read_text().splitlines()
    assert sum(line.endswith(",True") for line in rows[1:]) == 2  # the classifier and the claim-only baseline
