"""The open mode through the system: ``--mode`` on the commands, an open run of the demo
end to end (run, verify, predict, check, the app), its one-line errors, and ``--force``.

Tests that need the optional extra skip with a reason when ``wordllama`` is not
installed; the missing extra is simulated (``sys.modules["wordllama"] = None``) for the
one-line errors, so those run everywhere.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
import warnings

import pytest

from helpers import DEMO, ROOT, assert_one_line_error, run_cli
from helpers import needs_open  # skips with a reason; under FACTCHECK_REQUIRE_OPEN=1 (CI) fails

CLAIM = "Sea levels are rising because ice sheets melt."
INSTALL = "pip install -e '.[open]'"


def cli_without_extra(*args) -> subprocess.CompletedProcess:
    """``factcheck ARGS`` in a process where ``import wordllama`` fails (the extra missing)."""
    code = textwrap.dedent(f"""
        import sys
        sys.modules["wordllama"] = None
        from factcheck.cli import main
        sys.exit(main({[str(a) for a in args]!r}))
    """)
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


# ---------------------------------------------------------------- without the extra

@pytest.mark.slow
@pytest.mark.parametrize("command", ["run", "tag", "train", "retrieve"])
def test_open_mode_without_the_extra_is_one_line_saying_what_to_install(command, tmp_path, demo_index):
    args = {"run": ["--data-dir", DEMO, "--out", tmp_path / "run"],
            "tag": [DEMO / "evidence.json", "--out", tmp_path / "index"],
            "train": ["--index", demo_index, "--claims", DEMO / "train-claims.json", "--model", tmp_path / "m"],
            "retrieve": ["--index", demo_index, "--claims", DEMO / "dev-claims.json", "--out", tmp_path / "p.json",
                         "--method", "hybrid"]}[command]
    proc = cli_without_extra(command, *args, "--mode", "open")
    line = assert_one_line_error(proc, "--mode", INSTALL)
    assert line.startswith(f"factcheck {command}: error:")
    assert not (tmp_path / "run").exists() and not (tmp_path / "index").exists()  # refused before any work


@pytest.mark.slow
def test_course_mode_does_not_offer_the_open_retrievers(tmp_path, demo_index):
    proc = run_cli("retrieve", "--index", demo_index, "--claims", DEMO / "dev-claims.json",
                   "--out", tmp_path / "p.json", "--method", "dense")
    assert_one_line_error(proc, "--method", "'dense' is an open-mode retriever", "use --mode open")
    proc = run_cli("run", "--data-dir", DEMO, "--out", tmp_path / "run", "--method", "hybrid")
    assert_one_line_error(proc, "--method", "'hybrid' is an open-mode retriever")
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
@needs_open
def test_open_model_where_the_extra_is_missing_is_one_line_naming_the_model(open_demo_run, tmp_path):
    proc = cli_without_extra("predict", "--claims", DEMO / "dev-claims.json", "--index", open_demo_run / "index",
                             "--model", open_demo_run / "model", "--out", tmp_path / "p.json")
    assert_one_line_error(proc, str(open_demo_run / "model"), "was trained in the open mode", INSTALL)


# ---------------------------------------------------------------- an open run end to end

@pytest.mark.slow
@needs_open
def test_open_run_records_the_mode_vectors_and_the_hybrid_retriever(open_demo_run):
    from factcheck.classification.model import load_classifier
    metrics = json.loads((open_demo_run / "metrics.json").read_text("utf-8"))
    assert metrics["run"]["mode"] == "open"
    assert "passage vectors (open mode)" in metrics["run"]["timings"]
    assert {"tags", "bm25", "hybrid", "rerank"} <= set(metrics["run"]["retrievers_on_dev"])
    _, meta = load_classifier(open_demo_run / "model")
    assert meta["mode"] == "open"
    vectors = json.loads((open_demo_run / "index" / "vectors" / "manifest.json").read_text("utf-8"))
    hybrid = meta["retrievers"]["hybrid"]
    assert hybrid["vectors_sha256"] == vectors["content_sha256"]
    assert hybrid["params"]["fusion"] == "max" and 0 < hybrid["params"]["alpha"] < 1
    assert (open_demo_run / "tuning" / "hybrid-sweep.csv").is_file()
    proc = run_cli("verify", open_demo_run / "index")
    assert proc.returncode == 0, proc.stderr
    assert f"content sha256 {vectors['content_sha256']}" in proc.stdout.splitlines()[-1]


@pytest.mark.slow
@needs_open
def test_predict_reproduces_the_open_run_and_refuses_another_mode(open_demo_run, tmp_path):
    args = ["--claims", DEMO / "dev-claims.json", "--index", open_demo_run / "index", "--model", open_demo_run / "model"]
    proc = run_cli("predict", *args, "--out", tmp_path / "p.json")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "p.json").read_bytes() == (open_demo_run / "dev-claims-predictions.json").read_bytes()
    proc = run_cli("predict", *args, "--out", tmp_path / "q.json", "--mode", "course")
    assert_one_line_error(proc, "--mode", "was trained in the open mode, not the course mode")


@pytest.mark.slow
@needs_open
def test_check_shows_the_dense_score_beside_bm25(open_demo_run):
    proc = run_cli("check", CLAIM, "--run", open_demo_run, "--method", "hybrid", "--json")
    assert proc.returncode == 0, proc.stderr
    view = json.loads(proc.stdout)
    assert view["hits"] and view["path"] == "ranked"
    for hit in view["hits"]:
        assert list(hit["scores"])[:3] == ["fused", "bm25", "dense"]
    proc = run_cli("check", CLAIM, "--run", open_demo_run, "--method", "hybrid", "--width", "100")
    assert proc.returncode == 0, proc.stderr
    assert "dense (embedding cosine)" in proc.stdout and "fused ranking" in proc.stdout


@needs_open
def test_app_serves_the_open_retrievers(open_demo_run):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient
    from factcheck.serve.app import create_app
    client = TestClient(create_app(open_demo_run, mode="open"))
    methods = client.get("/api/methods").json()
    assert "hybrid" in methods["methods"] and not methods["unavailable"]
    r = client.get("/api/check", params={"claim": CLAIM, "method": "hybrid"})
    assert r.status_code == 200, r.text
    assert {"bm25", "dense", "fused"} <= set(r.json()["hits"][0]["scores"])
    page = client.get("/", params={"claim": CLAIM, "method": "hybrid"})
    assert page.status_code == 200 and "embedding cosine" in page.text


# ---------------------------------------------------------------- --force and the vectors

@pytest.mark.slow
@needs_open
def test_tag_force_replaces_the_vectors_with_the_index(tmp_path):
    out = tmp_path / "index"
    evidence = DEMO / "evidence.json"
    proc = run_cli("tag", evidence, "--out", out, "--mode", "open", "--jobs", "1")
    assert proc.returncode == 0, proc.stderr
    first = json.loads((out / "vectors" / "manifest.json").read_text("utf-8"))
    (out / "vectors" / "mine.txt").write_text("the user's file")  # --force deletes only ours
    proc = run_cli("tag", evidence, "--out", out, "--top-k", "5", "--force", "--jobs", "1")
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (out / "vectors").iterdir()) == ["mine.txt"]
    proc = run_cli("tag", evidence, "--out", out, "--top-k", "5", "--mode", "open", "--jobs", "1")
    assert proc.returncode == 0, proc.stderr
    second = json.loads((out / "vectors" / "manifest.json").read_text("utf-8"))
    assert second["index"]["plan_key"] != first["index"]["plan_key"]
    assert second["content_sha256"] == first["content_sha256"]  # same passages, same vectors
    shutil.rmtree(out)


@pytest.mark.slow
@needs_open
def test_open_training_on_an_index_without_vectors_says_how_to_build_them(demo_index, tmp_path):
    proc = run_cli("train", "--index", demo_index, "--claims", DEMO / "train-claims.json", "--model", tmp_path / "m",
                   "--mode", "open")
    assert_one_line_error(proc, "has no passage vectors", "factcheck tag --mode open")
    assert not (tmp_path / "m").exists()
