"""Label sets other than the course's four, end to end: the demo data relabelled to two
labels (FEVER's without NOT ENOUGH INFO), three and five labels of our own naming. Each
trains through ``run`` and ``train``, predicts, scores and is checked the same way from the
command line and from Python; one label, or a label with a single claim, is one line."""

import json
import shutil
import warnings

import numpy as np
import pytest

import factcheck
from helpers import DEMO, assert_one_line_error, in_process, make_run, tasks_in_this_process
from factcheck.classification.model import load_classifier

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

FILES = {"train": "train-claims.json", "dev": "dev-claims.json"}

# name -> claim id or gold label -> the label it gets (None: the claim is left out)
LABEL_SETS = {
    "two": {"NOT_ENOUGH_INFO": None, "DISPUTED": None},
    "three": {"SUPPORTS": "true", "REFUTES": "false", "NOT_ENOUGH_INFO": "unproven", "DISPUTED": None},
    "five": {"claim-t1": "mostly true", "claim-t2": "mostly true", "claim-d1": "mostly true",
             "SUPPORTS": "true", "REFUTES": "false", "NOT_ENOUGH_INFO": "unproven", "DISPUTED": "mixed"},
}
EXPECTED = {  # the labels (in their order) and cross-validation's folds: at most the rarest label's claims
    "two": (["SUPPORTS", "REFUTES"], 4),
    "three": (["false", "true", "unproven"], 4),
    "five": (["false", "mixed", "mostly true", "true", "unproven"], 2),
}


def relabelled_demo(out, relabel: dict):
    """data/demo with its labelled claims relabelled (``relabel`` by claim id, then by label)."""
    out.mkdir(parents=True)
    shutil.copy(DEMO / "evidence.json", out)
    shutil.copy(DEMO / "test-claims-unlabelled.json", out)
    for name in FILES.values():
        claims = json.loads((DEMO / name).read_text("utf-8"))
        kept = {}
        for cid, c in claims.items():
            label = relabel.get(cid, relabel.get(c["claim_label"], c["claim_label"]))
            if label is not None:
                kept[cid] = {**c, "claim_label": label}
        (out / name).write_text(json.dumps(kept, indent=1), "utf-8")
    return out


@pytest.fixture(scope="module", params=list(LABEL_SETS))
def labelled_run(request, tmp_path_factory):
    base = tmp_path_factory.mktemp(f"labels-{request.param}")
    data = relabelled_demo(base / "data", LABEL_SETS[request.param])
    make_run(base / "run", data=data)
    return request.param, data, base / "run"


def test_run_trains_on_the_labels_found_with_fewer_folds_for_a_rare_label(labelled_run):
    name, data, run = labelled_run
    labels, folds = EXPECTED[name]
    metrics = json.loads((run / "metrics.json").read_text("utf-8"))["run"]
    model, record = load_classifier(run / "model")
    assert list(model.classes_) == record["labels"] == sorted(labels)  # scikit-learn's order
    assert metrics["classifier_cv"]["folds"] == folds
    report = (run / "report.md").read_text("utf-8")
    assert f"({folds} folds x 3 repeats" in report
    assert f"fewer than 5 folds: the rarest training label has {folds} claims" in report
    assert metrics["classifier_cv"]["cv"]["confusion"]["labels"] == labels
    assert set(metrics["ablation"]["retrieved"]["confusion"]["labels"]) <= set(labels)
    predicted = factcheck.read_predictions(run / "dev-claims-predictions.json")
    assert {p["claim_label"] for p in predicted.values()} <= set(labels)
    # The report's per-label table holds these labels and no other of the course's.
    for label in {"SUPPORTS", "REFUTES", "NOT_ENOUGH_INFO", "DISPUTED", *labels}:
        assert (f"| {label} |" in report) == (label in labels), label


def test_predict_evaluate_and_check_agree_with_the_run_and_with_python(labelled_run, tmp_path):
    name, data, run = labelled_run
    labels, _ = EXPECTED[name]
    out = tmp_path / "dev.json"
    proc = in_process("predict", "--claims", data / FILES["dev"], "--index", run / "index", "--model", run / "model",
                      "--out", out)
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == (run / "dev-claims-predictions.json").read_bytes()

    proc = in_process("evaluate", "--predictions", out, "--groundtruth", data / FILES["dev"], "--json")
    assert proc.returncode == 0, proc.stderr
    scored = json.loads(proc.stdout)
    dev = factcheck.read_claims(data / FILES["dev"], require_labels=True)
    result = factcheck.evaluate(factcheck.read_predictions(out), dev)
    assert scored["accuracy"] == result.metrics["accuracy"].value
    assert scored["accuracy"] == json.loads((run / "metrics.json").read_text("utf-8"))["accuracy"]
    assert list(scored["per_label"]) == [label for label in labels if any(c.label == label for c in dev)]

    checker = factcheck.FactChecker.load(run / "index", run / "model")
    verdicts = checker.check(dev)
    assert verdicts.predictions() == {cid: {"evidences": p["evidences"], "claim_label": p["claim_label"]}
                                      for cid, p in factcheck.read_predictions(out).items()}
    for v in verdicts:
        p = v.explanation.probabilities
        assert sorted(p) == sorted(labels) and np.isclose(sum(p.values()), 1.0)

    proc = in_process("check", "--run", run, "--json", dev[0].text)
    assert proc.returncode == 0, proc.stderr
    assert list(json.loads(proc.stdout)["probabilities"]) == labels


def test_the_explain_app_names_the_models_labels(labelled_run):
    from factcheck.serve.app import create_app
    from factcheck.serve.present import label_name
    name, data, run = labelled_run
    labels, _ = EXPECTED[name]
    client = TestClient(create_app(run, warm_up=False))
    assert f"({', '.join(label_name(v) for v in labels)})" in client.get("/").text
    assert f"one of {', '.join(labels)}, and" in client.get("/api").text
    assert list(client.get("/api/check", params={"claim": "Sea levels are rising."}).json()["probabilities"]) == labels


def test_train_on_two_labels_then_predict(demo_index, tmp_path, monkeypatch):
    from factcheck.classification import cv
    monkeypatch.setattr(cv, "run_folds", tasks_in_this_process)  # no workers
    data = relabelled_demo(tmp_path / "data", LABEL_SETS["two"])
    proc = in_process("train", "--index", demo_index, "--claims", data / FILES["train"], "--model", tmp_path / "model")
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "dev.json"
    proc = in_process("predict", "--claims", data / FILES["dev"], "--index", demo_index, "--model", tmp_path / "model",
                      "--out", out)
    assert proc.returncode == 0, proc.stderr
    assert {p["claim_label"] for p in factcheck.read_predictions(out).values()} <= {"SUPPORTS", "REFUTES"}


@pytest.mark.parametrize("relabel, says", [
    ({"REFUTES": "SUPPORTS", "NOT_ENOUGH_INFO": None, "DISPUTED": None},
     "every claim is labelled 'SUPPORTS'; a classifier needs training claims of at least two labels"),
    ({"claim-t3": "odd", "SUPPORTS": "true", "REFUTES": "false", "NOT_ENOUGH_INFO": None, "DISPUTED": None},
     "1 label with a single training claim ('odd'); cross-validation needs at least 2 claims of each label"),
])
def test_one_label_or_one_claim_of_a_label_is_one_line_naming_the_training_file(demo_index, tmp_path, relabel,
                                                                                says):
    data = relabelled_demo(tmp_path / "data", relabel)
    train = data / FILES["train"]
    line = assert_one_line_error(in_process("train", "--index", demo_index, "--claims", train, "--model",
                                            tmp_path / "model"), f"{train}: {says}")
    assert line.startswith("factcheck train: error:")
    assert not (tmp_path / "model" / "classifier.skops").exists()
    assert_one_line_error(in_process("run", "--data-dir", data, "--out", tmp_path / "run", "--quiet", "--jobs", "1"),
                          f"{train}: {says}")
    assert not (tmp_path / "run" / "dev-claims-predictions.json").exists()


def test_a_label_set_with_a_typo_is_one_warning_line(tmp_path):
    # Reading claims, cross-validation, scoring and the ablation each take the label set: one line.
    data = relabelled_demo(tmp_path / "data", {"claim-t1": "SUPORTS", "claim-t2": "SUPORTS"})
    proc = make_run(tmp_path / "run", data=data)
    warned = [line for line in proc.stderr.splitlines() if "SUPORTS" in line]
    assert warned == ["factcheck run: warning: labels SUPORTS are not among the known labels SUPPORTS, REFUTES, "
                      "NOT_ENOUGH_INFO, DISPUTED; using all 5 labels found as the label set (a typo?)"]
