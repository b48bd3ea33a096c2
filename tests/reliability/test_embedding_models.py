"""Local ONNX embedding models that change, through the commands: new weights in an
external data file are another model (``tag`` re-embeds, ``verify`` and ``search`` notice).

Before: ``tag`` said the vectors were complete and kept them, and ``verify`` said OK.
"""

from __future__ import annotations

import json

from helpers import DEMO, assert_one_line_error, in_process, needs_onnx
from tiny_onnx import make_model, weights, weights_bytes

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
