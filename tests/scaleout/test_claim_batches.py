"""Many claims in batches: in process, on 2 local worker processes, on a 2-worker Dask
cluster -- the same predictions and explanations, byte for byte, as one ``predict`` of
every claim at once.

The claims are the demo's training, dev and test claims plus the demo's passages read
as claims (cost-only claims, as the scale benchmark uses), in batches of 7 so that every
run crosses batch edges. The cluster is a ``LocalCluster`` the test starts itself and
``predict`` reaches only through its scheduler address, as it would a remote one.
"""

from __future__ import annotations

import json

import pytest

from helpers import DEMO, run_cli

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def demo_system(tmp_path_factory):
    out = tmp_path_factory.mktemp("batches") / "run"
    proc = run_cli("run", "--data-dir", DEMO, "--out", out, "--quiet", "--jobs", "1")
    assert proc.returncode == 0, proc.stderr
    claims = {}
    for name in ("train-claims.json", "dev-claims.json", "test-claims-unlabelled.json"):
        for cid, c in json.loads((DEMO / name).read_text("utf-8")).items():
            claims[f"{name[:4]}-{cid}"] = {"claim_text": c["claim_text"]}
    for pid, text in json.loads((DEMO / "evidence.json").read_text("utf-8")).items():
        if text.strip():  # a claim must say something
            claims[f"passage-{pid}"] = {"claim_text": text}
    path = out.parent / "claims.json"
    path.write_text(json.dumps(claims), encoding="utf-8")
    return out, path, len(claims)


def _predict(system, dest, *extra):
    run, claims, _ = system
    proc = run_cli("predict", "--index", run / "index", "--model", run / "model", "--claims", claims,
                   "--out", dest, *extra)
    assert proc.returncode == 0, proc.stderr
    return dest.read_bytes(), dest.with_name(dest.stem + ".explain.json").read_bytes()


@pytest.mark.slow
def test_batches_workers_and_dask_give_the_bytes_of_one_batch(demo_system, tmp_path):
    _, _, n = demo_system
    assert n > 30
    whole = _predict(demo_system, tmp_path / "whole.json", "--batch-size", str(10 * n))
    assert _predict(demo_system, tmp_path / "batches.json", "--batch-size", "7") == whole
    assert _predict(demo_system, tmp_path / "loky.json", "--batch-size", "7", "--jobs", "2") == whole
    for method in ("bm25", "tags"):  # another retriever: still the same bytes across backends
        one = _predict(demo_system, tmp_path / f"{method}-1.json", "--method", method, "--batch-size", "7")
        two = _predict(demo_system, tmp_path / f"{method}-2.json", "--method", method, "--batch-size", "5",
                       "--jobs", "2")
        assert one == two
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  scheduler_kwargs={"dashboard_address": "127.0.0.1:0"}) as cluster:
        dask = _predict(demo_system, tmp_path / "dask.json", "--batch-size", "7", "--backend", "dask",
                        "--scheduler", cluster.scheduler_address)
    assert dask == whole
    assert not list(tmp_path.glob(".factcheck-batches-*"))  # the part files are gone
