"""``factcheck run`` on claims and knowledge sources in other formats: JSONL and CSV claims,
a FEVER-format dataset end to end, and the course data written in FEVER's layout."""

import hashlib
import json
import re
from pathlib import Path

import pytest

from helpers import DEMO, ROOT, in_process, make_run, run_cli
from factcheck.formats.claims import FEVER_LABELS, read_claims, write_claims
from factcheck.formats.evidence import read_passages, source_spec
from factcheck.tagging.index import TagIndex

FEVER = ROOT / "tests" / "data" / "fever"
SPLITS = {"train": "train-claims.json", "dev": "dev-claims.json", "test": "test-claims-unlabelled.json"}
OUTPUTS = ("dev-claims-predictions.json", "dev-claims-predictions.explain.json", "test-claims-predictions.json",
           "test-claims-predictions.explain.json")


def run(*args):
    """``factcheck run ARGS --quiet --jobs 1`` in a child process."""
    proc = run_cli("run", *args, "--quiet", "--jobs", "1")
    assert proc.returncode == 0, proc.stderr
    return proc


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.slow
def test_jsonl_and_csv_claims_give_the_course_predictions_byte_for_byte(demo_run, tmp_path):
    # One run reads all three kinds: training claims as JSONL, dev as CSV, test as JSONL.
    files = {"train": tmp_path / "train.jsonl", "dev": tmp_path / "dev.csv", "test": tmp_path / "test.jsonl"}
    for split, path in files.items():
        write_claims(path, read_claims(DEMO / SPLITS[split]), "jsonl" if path.suffix == ".jsonl" else "csv")
    assert "claim_text" not in files["dev"].read_text() + files["train"].read_text()  # really other formats
    out = tmp_path / "out"
    run("--train", files["train"], "--dev", files["dev"], "--test", files["test"],
        "--evidence", DEMO / "evidence.json", "--out", out)
    for name in OUTPUTS:
        assert (out / name).read_bytes() == (demo_run / name).read_bytes(), name


def test_predict_reads_csv_and_jsonl_claims_like_course_json(demo_run, tmp_path):
    for name in ("test.csv", "test.jsonl"):
        claims = tmp_path / name
        write_claims(claims, read_claims(DEMO / SPLITS["test"]), name.rpartition(".")[2])
        out = tmp_path / "pred.json"
        proc = in_process("predict", "--claims", claims, "--index", demo_run / "index", "--model",
                          demo_run / "model", "--out", out)
        assert proc.returncode == 0, proc.stderr
        assert out.read_bytes() == (demo_run / "test-claims-predictions.json").read_bytes(), name


# ---------------------------------------------------------------- a FEVER-format dataset

@pytest.fixture(scope="module")
def fever_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("fever") / "out"
    make_run(out, data=FEVER)
    return out


def test_fever_run_end_to_end(fever_run):
    wiki = set(read_passages(source_spec(FEVER / "wiki-pages"))[0])
    for split, claims_file in (("dev", "shared_task_dev.jsonl"), ("test", "shared_task_test.jsonl")):
        lines = (fever_run / f"{split}-claims-predictions.jsonl").read_text(encoding="utf-8").splitlines()
        records = [json.loads(line) for line in lines]
        claims = [json.loads(line) for line in (FEVER / claims_file).read_text(encoding="utf-8").splitlines()]
        assert [r["id"] for r in records] == [c["id"] for c in claims]  # integers, in the claims' order
        for r in records:
            assert set(r) == {"id", "predicted_label", "predicted_evidence"}
            assert r["predicted_label"] in FEVER_LABELS
            assert r["predicted_evidence"] and all(f"{p}:{n}" in wiki for p, n in r["predicted_evidence"])
        course = json.loads((fever_run / f"{split}-claims-predictions.json").read_text(encoding="utf-8"))
        assert [c["claim_label"] for c in course.values()] == [r["predicted_label"] for r in records]
    metrics = json.loads((fever_run / "metrics.json").read_text())
    assert list(metrics["per_label"]) == list(FEVER_LABELS)
    assert metrics["run"]["ablation"]["gold"]["confusion"]["labels"] == list(FEVER_LABELS)
    assert metrics["run"]["classifier_cv"]["cv"]["confusion"]["labels"] == list(FEVER_LABELS)
    assert metrics["without_gold"]["claims"] == 2  # the NOT ENOUGH INFO dev claims
    assert metrics["retrieval"]["claims"] == 4 and metrics["retrieval"]["without_gold"] == 2
    assert "NOT ENOUGH INFO" in (fever_run / "report.md").read_text(encoding="utf-8")


def test_fever_run_keeps_page_titles_for_the_reader(fever_run):
    index = TagIndex.load(fever_run / "index")
    assert index.has_titles and index.title(index.row_of["Savages_-LRB-2012_film-RRB-:0"]) == "Savages (2012 film)"
    explain = json.loads((fever_run / "dev-claims-predictions.explain.json").read_text(encoding="utf-8"))
    hits = [h for c in explain["claims"].values() for h in c["hits"]]
    assert hits and all(h["title"] == index.title(index.row_of[h["id"]]) for h in hits)
    proc = in_process("check", "--run", fever_run, "--json", "Strong El Niño years set temperature records.")
    assert proc.returncode == 0, proc.stderr
    view = json.loads(proc.stdout)
    assert view["hits"][0]["title"] == "El Niño" and set(view["probabilities"]) == set(FEVER_LABELS)


def test_the_app_shows_the_fever_page_titles_of_the_real_index(fever_run):
    # The app's titles come from the index itself (not a stand-in): each passage shown, the
    # ones the verdict read included, carries its FEVER page's title beside its id and text.
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient
    from html import escape
    from factcheck.serve.app import create_app
    index = TagIndex.load(fever_run / "index")
    client = TestClient(create_app(fever_run, warm_up=False))
    claim = "Strong El Niño years set temperature records."
    data = client.get("/api/check", params={"claim": claim}).json()
    html = client.get("/", params={"claim": claim}).text
    ids = [h["id"] for h in data["hits"]] + data["classifier_read"]["ids"]
    assert ids
    for pid in ids:
        row = index.row_of[pid]
        card = html.split(f'data-id="{pid}"', 1)[1]
        assert f'<span class="title">{escape(index.title(row))}</span>' in card
        assert escape(index.text(row), quote=False) in re.sub(r"<[^>]+>", "", card)  # highlights marked inside
    # the dev page finds the run's FEVER dev claims (shared_task_dev.jsonl) and shows titles too
    dev = client.get("/dev").text
    assert "gold dev file not found" not in dev and '<span class="title">' in dev


def test_fever_predictions_evaluate_and_convert_back(fever_run, tmp_path):
    proc = in_process("evaluate", "--predictions", fever_run / "dev-claims-predictions.jsonl",
                      "--groundtruth", FEVER / "shared_task_dev.jsonl", "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    metrics = json.loads((fever_run / "metrics.json").read_text())
    assert result["accuracy"] == metrics["accuracy"] and result["evidence_f"] == metrics["evidence_f"]
    back = tmp_path / "dev.json"
    proc = in_process("convert", "predictions", fever_run / "dev-claims-predictions.jsonl", "--to", "course",
                      "--claims", FEVER / "shared_task_dev.jsonl", "--out", back)
    assert proc.returncode == 0, proc.stderr
    assert back.read_bytes() == (fever_run / "dev-claims-predictions.json").read_bytes()


def test_a_predicted_label_the_ground_truth_lacks_is_an_error(fever_run, tmp_path):
    bad = tmp_path / "pred.jsonl"
    bad.write_text('{"id": 201, "predicted_label": "DISPUTED", "predicted_evidence": [["El_Niño", 2]]}\n')
    proc = in_process("evaluate", "--predictions", bad, "--groundtruth", FEVER / "shared_task_dev.jsonl")
    assert proc.returncode == 2 and "unknown label 'DISPUTED'; expected one of SUPPORTS, REFUTES, NOT ENOUGH INFO" \
        in proc.stderr


def test_run_names_what_it_cannot_find_or_choose(tmp_path):
    (tmp_path / "train.jsonl").write_text((FEVER / "train.jsonl").read_text())
    for name in ("shared_task_dev.jsonl", "paper_dev.jsonl"):
        (tmp_path / name).write_text((FEVER / "shared_task_dev.jsonl").read_text())
    proc = in_process("run", "--data-dir", tmp_path, "--out", tmp_path / "out")
    assert proc.returncode == 2
    assert "--dev" in proc.stderr and "shared_task_dev.jsonl and paper_dev.jsonl" in proc.stderr
    proc = in_process("run", "--out", tmp_path / "out", "--train", FEVER / "train.jsonl")
    assert proc.returncode == 2 and "--dev: no dev file" in proc.stderr


# ---------------------------------------------------------------- the course data in FEVER's layout

@pytest.mark.slow
def test_course_data_in_fever_layout_gives_the_course_predictions_in_five_slots(demo_run, tmp_path):
    layout = tmp_path / "fever-layout"
    for split, name in (("train", "train"), ("dev", "shared_task_dev"), ("test", "shared_task_test")):
        proc = run_cli("convert", "claims", DEMO / SPLITS[split], "--to", "fever", "--one-line-pages",
                       "--out", layout / f"{name}.jsonl")
        assert proc.returncode == 0, proc.stderr
    proc = run_cli("convert", "evidence", DEMO / "evidence.json", "--to", "fever", "--one-line-pages",
                   "--out", layout / "wiki-pages" / "wiki-001.jsonl")
    assert proc.returncode == 0 and "1 passage with an empty text" in proc.stderr  # listed, not hidden
    labels = {json.loads(line)["label"] for line in (layout / "train.jsonl").read_text().splitlines()}
    assert labels == {"SUPPORTS", "REFUTES", "NOT_ENOUGH_INFO", "DISPUTED"}  # the course's four, as they are
    out = tmp_path / "out"
    run("--data-dir", layout, "--out", out)
    for split in ("dev", "test"):
        back = tmp_path / f"{split}.json"
        proc = run_cli("convert", "predictions", out / f"{split}-claims-predictions.jsonl", "--to", "course",
                       "--one-line-pages", "--claims", DEMO / SPLITS[split], "--out", back)
        assert proc.returncode == 0, proc.stderr
        # FEVER-format claims fill FEVER's five evidence slots: the course run's evidence first,
        # then its ranking's next; the labels and claims are the course run's
        ours = json.loads(back.read_text(encoding="utf-8"))
        course = json.loads((demo_run / f"{split}-claims-predictions.json").read_text(encoding="utf-8"))
        assert list(ours) == list(course)
        for cid, p in course.items():
            assert {k: v for k, v in ours[cid].items() if k != "evidences"} == \
                {k: v for k, v in p.items() if k != "evidences"}
            assert ours[cid]["evidences"][:len(p["evidences"])] == p["evidences"]
            assert len(p["evidences"]) <= len(ours[cid]["evidences"]) <= 5
        assert any(len(ours[cid]["evidences"]) > len(p["evidences"]) for cid, p in course.items())


# ---------------------------------------------------------------- FEVER's evidence slots and score

def test_fever_run_fills_five_evidence_slots_and_reports_the_fever_score(fever_run):
    ranked = json.loads((fever_run / "dev-claims-predictions.explain.json").read_text(encoding="utf-8"))["claims"]
    records = [json.loads(line) for line in
               (fever_run / "dev-claims-predictions.jsonl").read_text(encoding="utf-8").splitlines()]
    course = json.loads((fever_run / "dev-claims-predictions.json").read_text(encoding="utf-8"))
    filled = 0
    for r, (cid, why) in zip(records, ranked.items()):
        ids = [f"{p}:{n}" for p, n in r["predicted_evidence"]]
        hits = [h["id"] for h in why["hits"]]
        # the retriever's, then its ranking's next (the ranking: passages that score at all)
        assert ids == (hits + [pid for pid in why["ranking"] if pid not in hits])[:5]
        filled += len(ids) > len(hits)
        assert course[cid]["evidences"] == ids  # both files: the same predictions
    assert filled and max(len(r["predicted_evidence"]) for r in records) == 5
    metrics = json.loads((fever_run / "metrics.json").read_text())
    fever = metrics["fever"]
    assert fever["max_evidence"] == 5 and fever["claims"] == 6 and fever["verifiable_claims"] == 4
    proc = in_process("evaluate", "--predictions", fever_run / "dev-claims-predictions.jsonl", "--groundtruth",
                      FEVER / "shared_task_dev.jsonl", "--metric", "fever", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == fever  # `evaluate --metric fever` reproduces it
    assert fever["label_accuracy"] == metrics["accuracy"]
    report = (fever_run / "report.md").read_text(encoding="utf-8")
    from factcheck.evaluation.intervals import format_interval
    for name, key in (("FEVER score", "fever_score"), ("label accuracy", "label_accuracy")):
        assert f"| {name} | {format_interval(fever['intervals'][key])} |" in report


def test_max_evidence_sets_the_slots_of_run_and_predict(tmp_path, fever_run):
    out = tmp_path / "run"
    proc = make_run(out, "--max-evidence", "2", data=FEVER)
    assert "dev FEVER score " in proc.stdout and "the first 2 predicted sentences" in proc.stdout
    assert json.loads((out / "metrics.json").read_text())["fever"]["max_evidence"] == 2
    lines = (out / "dev-claims-predictions.jsonl").read_text(encoding="utf-8").splitlines()
    assert all(len(json.loads(line)["predicted_evidence"]) == 2 for line in lines)
    # predict: FEVER's 5 by default for FEVER claims, the run's bytes; --max-evidence N otherwise
    for extra, name, reference in (((), "dev.jsonl", fever_run / "dev-claims-predictions.jsonl"),
                                   (("--max-evidence", "2"), "dev2.jsonl", out / "dev-claims-predictions.jsonl")):
        dest = tmp_path / name
        proc = in_process("predict", "--claims", FEVER / "shared_task_dev.jsonl", "--index", fever_run / "index",
                          "--model", fever_run / "model", "--out", dest, *extra)
        assert proc.returncode == 0, proc.stderr
        if not extra:
            assert dest.read_bytes() == reference.read_bytes()
        else:
            assert [len(json.loads(line)["predicted_evidence"]) for line in dest.read_text().splitlines()] == [2] * 6
    proc = in_process("run", "--data-dir", FEVER, "--out", tmp_path / "bad", "--max-evidence", "0")
    assert proc.returncode == 2 and "--max-evidence" in proc.stderr


def test_course_claims_keep_the_retriever_s_own_evidence(demo_run):
    metrics = json.loads((demo_run / "metrics.json").read_text())
    assert "fever" not in metrics
    explain = json.loads((demo_run / "dev-claims-predictions.explain.json").read_text())["claims"]
    predictions = json.loads((demo_run / "dev-claims-predictions.json").read_text())
    assert all(predictions[cid]["evidences"] == [h["id"] for h in why["hits"]] for cid, why in explain.items())
