"""Local ONNX embedding models that change or misbehave, through the commands: new weights
in an external data file are another model (``tag`` re-embeds, ``verify`` and ``search``
notice); a model whose vectors cannot be right (NaN, all zeros, dimension 0), and vectors
stored from one, stop ``tag``, ``verify`` and ``search`` in one line, exit status 2.

Before: ``tag`` said the vectors were complete and kept them, ``verify`` said OK, and dense
search printed a lexical "no passage shares a term" for a model giving NaN or zeros.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from helpers import DEMO, assert_one_line_error, in_process, needs_onnx, reseal_vectors
from tiny_onnx import make_model, model_bytes, weights, weights_bytes

pytestmark = needs_onnx

TEXTS = list(json.loads((DEMO / "evidence.json").read_text("utf-8")).values())


def cli(monkeypatch, *args):
    """``factcheck ARGS`` in this process, with no model loaded yet, as in a new process."""
    from factcheck.text import embedding, onnx_embedding
    monkeypatch.setattr(embedding, "_BY_MODEL", {})
    monkeypatch.setattr(onnx_embedding, "_LOADED", {})
    return in_process(*args)


def tag(index, model):
    return ("tag", DEMO / "evidence.json", "--out", index, "--mode", "open", "--embedding-model", model,
            "--jobs", "1")


def search(index, method="dense"):
    return "search", "--index", index, "--mode", "open", "--method", method, "--k", "2", "sea level rise"


def content(index) -> str:
    return json.loads((index / "vectors" / "manifest.json").read_text("utf-8"))["content_sha256"]


def test_new_weights_in_an_external_data_file_are_another_model(tmp_path, monkeypatch):
    model, index = make_model(tmp_path / "model", TEXTS, external="weights.bin"), tmp_path / "index"
    monkeypatch.chdir(tmp_path)  # not the model's folder
    assert cli(monkeypatch, *tag(index, model)).returncode == 0
    before = content(index)
    vocabulary = len(json.loads((model / "tokenizer.json").read_text())["model"]["vocab"])
    (model / "weights.bin").write_bytes(weights_bytes(*weights(vocabulary, seed=9)))  # model.onnx unchanged
    assert_one_line_error(cli(monkeypatch, "verify", index),
                          f"{model.resolve() / 'weights.bin'}: differs from the file the vectors were built with")
    assert_one_line_error(cli(monkeypatch, *search(index)), "is not the embedding model recorded")
    proc = cli(monkeypatch, *tag(index, model))
    assert proc.returncode == 0, proc.stderr
    assert content(index) != before and "weights.bin sha256" in proc.stdout  # re-embedded with the new weights
    assert cli(monkeypatch, "verify", index).returncode == 0
    assert cli(monkeypatch, *search(index)).returncode == 0


def test_a_changed_tokenizer_is_named_when_the_model_is_refused(tmp_path, monkeypatch):
    """model.onnx is the same, so the models' descriptions read the same: the file that
    changed is what tells them apart, as verify says."""
    model, index = make_model(tmp_path / "model", TEXTS), tmp_path / "index"
    assert cli(monkeypatch, *tag(index, model)).returncode == 0
    tokenizer = model / "tokenizer.json"
    tokenizer.write_text(tokenizer.read_text().replace('"[UNK]"', '"[unk]"'))
    proc = cli(monkeypatch, *search(index))
    assert_one_line_error(proc, f"{model.resolve()}: --embedding-model: is not the embedding model recorded "
                          f"(onnx/model (model.onnx sha256 ", "): tokenizer.json differs): give the directory")
    assert "found" not in proc.stderr
    proc = cli(monkeypatch, "retrieve", "--index", index, "--claims", DEMO / "dev-claims.json", "--out",
               tmp_path / "p.json", "--mode", "open", "--method", "dense", "--embedding-model", model)
    assert_one_line_error(proc, "): tokenizer.json differs)")  # relocating to the folder: the same words
    assert_one_line_error(cli(monkeypatch, "verify", index), f"{tokenizer.resolve()}: differs from the file")


@pytest.mark.parametrize("method", ["dense", "hybrid", "bm25"])
def test_vectors_of_a_local_model_need_no_bundled_model(method, tmp_path, monkeypatch):
    """docs/open-mode.md: a local ONNX folder needs only the onnx extra, for every command
    that ranks an index in the open mode."""
    import sys

    from factcheck.text import embedding
    model, index = make_model(tmp_path / "model", TEXTS), tmp_path / "index"
    assert cli(monkeypatch, *tag(index, model)).returncode == 0
    monkeypatch.setitem(sys.modules, "wordllama", None)  # the open extra, not installed
    monkeypatch.setattr(embedding, "_LOADED", None)
    proc = cli(monkeypatch, *search(index, method))
    assert proc.returncode == 0 and " 1. " in proc.stdout, proc.stderr
    queries, qrels = tmp_path / "q.tsv", tmp_path / "qrels.tsv"
    queries.write_text("q1\tsea level rise\n")
    qrels.write_text("q1 0 evidence-1 1\n")
    proc = cli(monkeypatch, "evaluate-retrieval", "--index", index, "--queries", queries, "--qrels", qrels,
               "--mode", "open", "--method", method)
    assert proc.returncode == 0, proc.stderr
    proc = cli(monkeypatch, "retrieve", "--index", index, "--claims", DEMO / "dev-claims.json", "--out",
               tmp_path / "p.json", "--mode", "open", "--method", method)
    assert proc.returncode == 0, proc.stderr


def broken_model(directory, case: str):
    model = make_model(directory, TEXTS)
    vocabulary = json.loads((model / "tokenizer.json").read_text())["model"]["vocab"]
    E, T, W = weights(len(vocabulary))
    if case == "nan-one-word":  # the model loads (its probe is fine); the passages with "ice" are not
        E[vocabulary["ice"]] = np.nan
    else:
        W = {"nan": W * np.nan, "zero": W * 0, "dim0": W[:, :0]}[case]
    (model / "model.onnx").write_bytes(model_bytes(E, T, W.astype(np.float32)))
    return model


@pytest.mark.parametrize("case, needle", [("nan", "NaN or infinite values"),
                                          ("nan-one-word", "NaN or infinite values"),
                                          ("zero", "an all-zero vector"), ("dim0", "vectors of dimension 0")])
def test_a_model_whose_vectors_cannot_be_right_stops_tag_in_one_line(case, needle, tmp_path, monkeypatch):
    model, index = broken_model(tmp_path / case, case), tmp_path / "index"
    proc = cli(monkeypatch, *tag(index, model))
    assert_one_line_error(proc, f"{model.resolve() / 'model.onnx'}: the model gives {needle}")
    assert not (index / "vectors" / "manifest.json").exists()


def test_a_recorded_model_broken_where_it_is_says_what_is_wrong_not_where_to_look(tmp_path, monkeypatch):
    model, index = make_model(tmp_path / "model", TEXTS), tmp_path / "index"
    assert cli(monkeypatch, *tag(index, model)).returncode == 0
    broken_model(tmp_path / "broken", "nan")
    (model / "model.onnx").write_bytes((tmp_path / "broken" / "model.onnx").read_bytes())
    line = assert_one_line_error(cli(monkeypatch, *search(index)),
                                 f"{model.resolve() / 'model.onnx'}: the model gives NaN or infinite values")
    assert "give the directory it is in now" not in line
    assert_one_line_error(cli(monkeypatch, "verify", index), "model.onnx: differs from the file the vectors were built with")


def test_stored_vectors_that_cannot_be_right_are_refused_then_rebuilt(tmp_path, monkeypatch):
    model, index = make_model(tmp_path / "model", TEXTS), tmp_path / "index"
    assert cli(monkeypatch, *tag(index, model)).returncode == 0
    good = content(index)
    vectors = np.load(index / "vectors" / "vectors-00000.npy")
    reseal_vectors(index, vectors * np.float16(np.nan))  # as stored from a model giving NaN
    for args in (("verify", index), search(index), search(index, "hybrid")):
        assert_one_line_error(cli(monkeypatch, *args), "vectors-00000.npy: NaN or infinite values in 40 of 40 vectors")
    reseal_vectors(index, vectors * np.float16(0))
    for args in (("verify", index), search(index), search(index, "hybrid")):
        assert_one_line_error(cli(monkeypatch, *args), "vectors/manifest.json: every passage vector is all zeros")
    assert cli(monkeypatch, *tag(index, model)).returncode == 0 and content(index) == good  # rebuilt
    assert cli(monkeypatch, "verify", index).returncode == 0


def test_dense_search_without_hits_does_not_speak_of_terms(tmp_path, monkeypatch):
    from factcheck.retrieval.dense import DenseRetriever
    model, index = make_model(tmp_path / "model", TEXTS), tmp_path / "index"
    assert cli(monkeypatch, *tag(index, model)).returncode == 0
    # a query whose vector is zero (no token the model knows) scores 0 with every passage
    monkeypatch.setattr(DenseRetriever, "scores", lambda self, claim: np.zeros(len(self.vectors_), np.float32))
    for method in ("dense", "hybrid"):
        proc = cli(monkeypatch, *search(index, method)[:-1], "zzz qqq")
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.splitlines()[1:] == ["  no passage has a non-zero score for this query"], proc.stdout
