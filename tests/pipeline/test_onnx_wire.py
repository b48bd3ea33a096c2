"""A local ONNX embedding model through the commands: ``--embedding-model DIR`` on run and
tag, its identity in the vectors and the model directory, predict/check reproducing the run,
a moved model found again, and the one-line errors.

The model is made at test time (``tests/tiny_onnx.py``); the missing extras are simulated
in a child process (``sys.modules[name] = None``)."""

from __future__ import annotations

import json
import shutil

import pytest

from helpers import DEMO, assert_one_line_error, cli_without, needs_onnx, run_cli
from tiny_onnx import make_model

pytestmark = [needs_onnx, pytest.mark.slow]
CLAIM = "Sea levels are rising because ice sheets melt."


@pytest.fixture(scope="module")
def onnx_run(tmp_path_factory):
    """An open run of the demo with a local model whose directory is then moved away."""
    base = tmp_path_factory.mktemp("onnx-run")
    texts = json.loads((DEMO / "evidence.json").read_text("utf-8")).values()
    model = make_model(base / "model-here", texts)
    out = base / "run"
    proc = run_cli("run", "--data-dir", DEMO, "--out", out, "--mode", "open", "--embedding-model", model,
                   "--embed-corpus", "--query-prefix", "query: ", "--jobs", "1", "--quiet")
    assert proc.returncode == 0, proc.stderr
    return out, model


def test_the_run_records_the_model_in_the_vectors_and_the_model_directory(onnx_run):
    from factcheck.classification.model import load_classifier
    from factcheck.text.embedding import same_model
    from factcheck.hashing import sha256_file
    out, model = onnx_run
    vectors = json.loads((out / "index" / "vectors" / "manifest.json").read_text("utf-8"))
    ident = vectors["model"]
    assert ident["kind"] == "onnx" and ident["model_sha256"] == sha256_file(model / "model.onnx")
    assert ident["tokenizer_sha256"] == sha256_file(model / "tokenizer.json")
    assert (ident["query_prefix"], ident["passage_prefix"], ident["pooling"], ident["max_length"]) == \
        ("query: ", "", "mean", 512)
    assert vectors["dim"] == 8 and vectors["shard_size"] == 10_000
    classifier, meta = load_classifier(out / "model")
    assert meta["mode"] == "open" and same_model(meta["embedding_model"], ident)
    assert same_model(classifier.named_steps["features"].embedding, ident)
    proc = run_cli("verify", out / "index")
    assert proc.returncode == 0 and "onnx/model-here (model.onnx sha256 " in proc.stdout


def test_predict_and_check_reproduce_the_run_and_find_a_moved_model(onnx_run, tmp_path):
    out, model = onnx_run
    args = ["predict", "--claims", DEMO / "dev-claims.json", "--index", out / "index", "--model", out / "model"]
    proc = run_cli(*args, "--out", tmp_path / "p.json")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "p.json").read_bytes() == (out / "dev-claims-predictions.json").read_bytes()
    view = json.loads(run_cli("check", CLAIM, "--run", out, "--method", "hybrid", "--json").stdout)
    assert view["hits"] and {"bm25", "dense", "fused"} <= set(view["hits"][0]["scores"])

    moved = tmp_path / "moved"
    shutil.move(model, moved)
    try:
        proc = run_cli(*args, "--out", tmp_path / "q.json")
        line = assert_one_line_error(proc, "--embedding-model", "the local embedding model recorded",
                                     "give the directory it is in now")
        assert str(model) in line and not (tmp_path / "q.json").exists()
        proc = run_cli(*args, "--out", tmp_path / "q.json", "--embedding-model", moved)
        assert proc.returncode == 0, proc.stderr
        assert (tmp_path / "q.json").read_bytes() == (out / "dev-claims-predictions.json").read_bytes()
        # worker processes find the moved model too (each relocates it before loading the system)
        proc = run_cli(*args, "--out", tmp_path / "w.json", "--embedding-model", moved, "--jobs", "2",
                       "--batch-size", "2")
        assert proc.returncode == 0, proc.stderr
        assert (tmp_path / "w.json").read_bytes() == (out / "dev-claims-predictions.json").read_bytes()
        proc = run_cli("check", CLAIM, "--run", out, "--method", "hybrid", "--json", "--embedding-model", moved)
        assert proc.returncode == 0 and json.loads(proc.stdout) == view
        other = make_model(tmp_path / "other", ["another vocabulary entirely"], seed=5)
        proc = run_cli(*args, "--out", tmp_path / "r.json", "--embedding-model", other)
        assert_one_line_error(proc, "--embedding-model", "is not the embedding model recorded")
    finally:
        shutil.move(moved, model)


def test_a_local_model_needs_neither_the_bundled_model_nor_the_network(onnx_run, tmp_path):
    out, model = onnx_run
    proc = cli_without(("wordllama",), "predict", "--claims", DEMO / "dev-claims.json", "--index", out / "index",
                       "--model", out / "model", "--out", tmp_path / "p.json")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "p.json").read_bytes() == (out / "dev-claims-predictions.json").read_bytes()
    proc = cli_without(("wordllama",), "tag", DEMO / "evidence.json", "--out", tmp_path / "index", "--mode", "open",
                       "--embedding-model", model)
    assert proc.returncode == 0, proc.stderr
    tagged = json.loads((tmp_path / "index" / "vectors" / "manifest.json").read_text("utf-8"))
    assert tagged["content_sha256"] == json.loads((out / "index" / "vectors" / "manifest.json").read_text())[
        "content_sha256"]  # the query prefix does not touch passages


@pytest.mark.parametrize("case", ["without the extra", "course mode", "setting without a model", "not a model"])
def test_one_line_errors_before_any_work(case, onnx_run, tmp_path):
    _, model = onnx_run
    out = tmp_path / "run"
    base = ["run", "--data-dir", DEMO, "--out", out, "--quiet"]
    if case == "without the extra":
        proc = cli_without(("onnxruntime",), *base, "--mode", "open", "--embedding-model", model)
        assert_one_line_error(proc, "--embedding-model", "pip install -e '.[onnx]'")
    elif case == "course mode":
        assert_one_line_error(run_cli(*base, "--embedding-model", model), "--embedding-model", "add --mode open")
    elif case == "setting without a model":
        assert_one_line_error(run_cli(*base, "--mode", "open", "--query-prefix", "query: "),
                              "--query-prefix", "only with a transformer embedding model")
    else:
        assert_one_line_error(run_cli(*base, "--mode", "open", "--embedding-model", tmp_path),
                              "--embedding-model", "no model.onnx here")
    assert not out.exists()
