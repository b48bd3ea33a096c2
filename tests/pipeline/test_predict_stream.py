"""``predict`` writes each batch as it is done, under temporary names renamed at the end:
the same bytes as one batch (and as the run's own predictions), no verdict kept, and a
failed predict leaves nothing that looks complete."""

from __future__ import annotations

import json

import pytest

from helpers import DEMO, in_process, needs_smaps, resident_kb

DEV = DEMO / "dev-claims.json"


def predict(run, out, *extra):
    return in_process("predict", "--claims", DEV, "--index", run / "index", "--model", run / "model",
                      "--out", out, *extra)


def sidecar(path):
    return path.with_name(path.stem + ".explain.json")


def test_batches_give_the_run_s_bytes(demo_run, tmp_path):
    assert len(json.loads(DEV.read_text("utf-8"))) > 2
    for size in ("1", "2", "1000"):
        out = tmp_path / f"pred-{size}.json"
        proc = predict(demo_run, out, "--batch-size", size)
        assert proc.returncode == 0, proc.stderr
        assert out.read_bytes() == (demo_run / "dev-claims-predictions.json").read_bytes(), size
        assert sidecar(out).read_bytes() == (demo_run / "dev-claims-predictions.explain.json").read_bytes(), size


def test_each_batch_is_written_before_the_next_is_checked(demo_run, tmp_path, monkeypatch):
    from factcheck.system.checker import FactChecker
    check, seen = FactChecker.check, []

    def watching(self, claims):
        # what the predictions' temporary holds when this batch starts
        seen.append("".join(p.read_text("utf-8") for p in tmp_path.glob(".tmp-pred.json.*")))
        return check(self, claims)

    monkeypatch.setattr(FactChecker, "check", watching)
    out = tmp_path / "pred.json"
    assert predict(demo_run, out, "--batch-size", "1").returncode == 0
    ids = list(json.loads(out.read_text("utf-8")))
    assert len(seen) == len(ids)
    for n, text in enumerate(seen):  # batch n starts after the n claims before it are on disk
        assert [cid for cid in ids if f'"{cid}":' in text] == ids[:n]


@pytest.mark.parametrize("suffix", [".json", ".jsonl"])
def test_a_failed_predict_leaves_no_file_that_looks_complete(demo_run, tmp_path, monkeypatch, suffix):
    from factcheck.system.checker import FactChecker
    check, calls = FactChecker.check, []

    def failing(self, claims):
        calls.append(1)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        return check(self, claims)

    out = tmp_path / f"pred{suffix}"
    out.write_text("older\n")
    sidecar(out).write_text("older explanations\n")
    monkeypatch.setattr(FactChecker, "check", failing)
    proc = predict(demo_run, out, "--batch-size", "1", "--predictions-format", "course")
    assert proc.returncode != 0 and "No space left on device" in proc.stderr and len(calls) == 3
    assert out.read_text() == "older\n" and sidecar(out).read_text() == "older explanations\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([out.name, sidecar(out).name])


def test_worker_batches_come_back_as_verdicts(demo_run):
    """A worker's batch comes back as typed verdicts (its hits keep their index rows, which no
    file carries), the same as this process's check of the same claims."""
    from factcheck.formats.claims import read_claims
    from factcheck.pipeline.claim_batches import stream_batches
    from factcheck.retrieval.base import Hit
    from factcheck.system.checker import FactChecker
    got = []
    # jobs=2 with one batch: the worker pool's own path, run in this process
    stream_batches(demo_run / "index", demo_run / "model", DEV, None, lambda c, v, spec: got.extend(v), jobs=2,
                   batch_size=1000)
    here = FactChecker.load(demo_run / "index", demo_run / "model").check(read_claims(DEV))
    assert [v.explanation for v in got] == [v.explanation for v in here]
    hits = [h for v in got for h in v.explanation.hits]
    assert hits and all(isinstance(h, Hit) and h.row is not None for h in hits)


def test_the_driver_returns_its_freed_heap_before_the_workers_and_the_bytes_stay(demo_run, tmp_path, monkeypatch):
    """``--jobs 2``: the heap the index check freed goes back before the pool starts (one
    batch: the pool's own path, in this process), and the files are the run's bytes."""
    from factcheck.pipeline import claim_batches
    from factcheck.system.checker import FactChecker
    events = []
    monkeypatch.setattr(claim_batches, "return_freed_memory", lambda: events.append("trim"))
    monkeypatch.setattr(claim_batches, "_SYSTEMS", {})  # no system an earlier test's "worker" (this process) kept
    load = FactChecker.load.__func__
    monkeypatch.setattr(FactChecker, "load", classmethod(lambda cls, *a, **k: events.append("load") or load(cls, *a, **k)))
    out = tmp_path / "pred.json"
    proc = predict(demo_run, out, "--jobs", "2", "--batch-size", "1000")
    assert proc.returncode == 0, proc.stderr
    assert events == ["trim", "load"]  # the worker's load comes after the driver's trim
    assert out.read_bytes() == (demo_run / "dev-claims-predictions.json").read_bytes()
    assert sidecar(out).read_bytes() == (demo_run / "dev-claims-predictions.explain.json").read_bytes()


@needs_smaps
def test_a_workers_batch_leaves_no_index_page_resident(demo_run, monkeypatch):
    """A worker's batch drops the index pages it read from its resident set (loky restarts a
    worker whose RSS grew by 300 MB, mapped pages included), and a later batch reads the
    same passages again."""
    from factcheck.pipeline import claim_batches
    from factcheck.pipeline.claim_batches import stream_batches
    monkeypatch.setattr(claim_batches, "_SYSTEMS", {})
    runs = []
    for _ in range(2):
        got = []
        stream_batches(demo_run / "index", demo_run / "model", DEV, None, lambda c, v, spec: got.extend(v), jobs=2,
                       batch_size=1000)
        (system,) = claim_batches._SYSTEMS.values()
        shard = system.index._arrays.passages[0]
        assert resident_kb(shard["texts"]) == resident_kb(shard["text_offsets"]) == 0
        runs.append([v.explanation for v in got])
    assert runs[0] == runs[1] and any(v.explanation.hits for v in got)
