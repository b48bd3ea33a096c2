"""The packaged transformer through the commands: ``--embedding-model minilm`` on ``run``,
its identity in the vectors (by name, so later commands find it in the installed packages
again), ``verify``, and ``predict``/``check`` with no flag reproducing the run."""

from __future__ import annotations

import json

import pytest

from helpers import DEMO, needs_minilm, run_cli

pytestmark = [needs_minilm, pytest.mark.slow]


def test_a_minilm_run_records_the_packaged_model_and_predict_reproduces_it(tmp_path):
    from factcheck.text.onnx_embedding import PACKAGED
    out = tmp_path / "run"
    proc = run_cli("run", "--data-dir", DEMO, "--out", out, "--mode", "open", "--embedding-model", "minilm",
                   "--embed-corpus", "--jobs", "1", "--quiet")
    assert proc.returncode == 0, proc.stderr
    ident = json.loads((out / "index" / "vectors" / "manifest.json").read_text("utf-8"))["model"]
    assert (ident["name"], ident["path"], ident["dim"], ident["max_length"]) == ("minilm", "minilm", 384, 256)
    assert ident["model_sha256"] == PACKAGED["minilm"]["model.onnx"].sha256
    proc = run_cli("verify", out / "index")
    assert proc.returncode == 0 and "minilm (model.onnx sha256 8199be6f699a)" in proc.stdout, proc.stdout
    proc = run_cli("predict", "--claims", DEMO / "dev-claims.json", "--index", out / "index", "--model",
                   out / "model", "--out", tmp_path / "p.json")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "p.json").read_bytes() == (out / "dev-claims-predictions.json").read_bytes()
    proc = run_cli("check", "Sea levels are rising.", "--run", out, "--method", "hybrid", "--json")
    assert proc.returncode == 0, proc.stderr
    assert "dense" in json.loads(proc.stdout)["hits"][0]["scores"]


def test_minilm_passage_vectors_are_the_same_bytes_whatever_jobs_and_shard_size(demo_index, tmp_path):
    import shutil

    from factcheck.tagging.vectors import PassageVectorJob
    manifests = {}
    for jobs, size in ((1, 7), (2, 7), (1, 1000)):
        root = shutil.copytree(demo_index, tmp_path / f"j{jobs}-s{size}")
        manifests[jobs, size] = PassageVectorJob(size, jobs, False, embedding_model="minilm").run(root)
    assert manifests[1, 7]["shards"] == manifests[2, 7]["shards"]
    assert len({m["content_sha256"] for m in manifests.values()}) == 1
