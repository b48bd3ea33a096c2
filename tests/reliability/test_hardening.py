"""Hardening: no silent loss, no code from a crafted directory, one-line errors everywhere.

One test (or a few) per numbered finding of the hardening review; the table in
reports/reliability.md ("Hardening") lists them.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil

import joblib
import numpy as np
import pytest
from fastapi.testclient import TestClient

from helpers import DEMO, ROOT, assert_one_line_error, in_process, reseal_index, run_cli, usage_error
from harness.crashpoints import crash_env

from factcheck.formats.evidence import read_passages, source_spec

class Untrusted:
    """An ordinary class no allow-list names."""


class Payload:
    """A pickle whose loading creates ``marker`` (a stand-in for any code)."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.fixture()
def index(demo_index, tmp_path):
    """A private copy of the demo index (tests here damage it)."""
    dest = tmp_path / "index"
    shutil.copytree(demo_index, dest, ignore=shutil.ignore_patterns("bm25", "rerank"))
    return dest


# ---------------------------------------------------------------------- 1. concurrent runs

@pytest.mark.slow
def test_second_run_into_a_locked_directory_fails_at_once_naming_the_holder(tmp_path):
    from factcheck.tagging.outdir import DirectoryLock
    out = tmp_path / "out"
    with DirectoryLock(out):
        proc = run_cli("tag", DEMO / "evidence.json", "--out", out, "--jobs", "1")
    assert_one_line_error(proc, str(out), "in use by another factcheck run", f"pid {os.getpid()}")
    assert not (out / "manifest.json").exists() and not (out / "work").exists()
    assert run_cli("tag", DEMO / "evidence.json", "--out", out, "--jobs", "1").returncode == 0
    assert not (out / ".factcheck-lock").exists()  # a finished index holds no trace of the lock


@pytest.mark.slow
def test_unfinished_run_with_other_settings_is_never_replaced_without_force(tmp_path):
    out = tmp_path / "out"
    src = DEMO / "evidence.json"
    killed = run_cli("tag", src, "--out", out, "--jobs", "1", env=crash_env("before-rename:split.json"))
    assert killed.returncode == -9
    other = run_cli("tag", src, "--out", out, "--jobs", "1", "--top-k", "5")
    assert_one_line_error(other, "unfinished run", "--force")
    assert (out / "work" / "plan.json").is_file()
    assert run_cli("tag", src, "--out", out, "--jobs", "1", "--top-k", "5", "--force").returncode == 0


@pytest.mark.slow
def test_two_concurrent_runs_never_leave_a_verified_wrong_index(tmp_path, real_sample_20k):
    """2 races (the 50-trial version: python -m scripts.concurrent_runs)."""
    import random
    from scripts import concurrent_runs as cr
    items = list(json.loads(real_sample_20k.read_text("utf-8")).items())[:2000]
    src = tmp_path / "s.json"
    src.write_text(json.dumps(dict(items), ensure_ascii=False), encoding="utf-8")
    ids = [pid for pid, _ in items]
    refs = {"A": (tmp_path / "ref-a", cr.reference(src, tmp_path / "ref-a", 250)),
            "B": (tmp_path / "ref-b", cr.reference(src, tmp_path / "ref-b", 250, cr.OTHER))}
    for delay in (0.2, random.Random(15).uniform(0.5, 1.5)):
        problems, outcomes = cr.trial(src, tmp_path / "out", 250, delay, refs, ids)
        assert problems == [], (delay, outcomes)
        assert "TRACEBACK" not in outcomes


# ---------------------------------------------------------------------- 2. strict readers

def _read(tmp_path, name, data: bytes):
    path = tmp_path / name
    path.write_bytes(data)
    return read_passages(source_spec(path))


def test_csv_with_an_unclosed_quote_is_an_error_not_merged_rows(tmp_path):
    path = tmp_path / "e.csv"
    path.write_bytes(b'id,text\n1,"ice melts\n2,sea rises\n3,heat\n')
    proc = in_process("tag", path, "--out", tmp_path / "out", "--jobs", "1")
    assert_one_line_error(proc, str(path), "line 2", "invalid CSV", "never closed")  # where the quote opened
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_unquoted_form_feed_stays_inside_its_row(tmp_path):
    ids, texts = _read(tmp_path, "e.csv", b"id,text\n1,ice\x0cmelts\n2,sea\n")
    assert ids == ["1", "2"] and texts == ["ice\x0cmelts", "sea"]


def test_line_separators_written_by_json_dumps_and_csv_writer_are_accepted(tmp_path):
    text = "sea\u2028level\x85rise\x1cand\u2029ice"
    lines = [json.dumps({"id": "a", "text": text}, ensure_ascii=False), json.dumps({"id": "b", "text": "x"})]
    ids, texts = _read(tmp_path, "e.jsonl", ("\n".join(lines) + "\n").encode("utf-8"))
    assert ids == ["a", "b"] and texts == [text, "x"]
    buf = io.StringIO(newline="")
    w = csv.writer(buf)
    w.writerows([["id", "text"], ["a", text], ["b", "x"]])
    ids, texts = _read(tmp_path, "e.csv", buf.getvalue().encode("utf-8"))
    assert ids == ["a", "b"] and texts == [text, "x"]


def test_csv_passage_over_128_kib_is_accepted_like_json(tmp_path):
    big = "glacier " * 40_000  # 320 KB
    ids, texts = _read(tmp_path, "e.csv", f'id,text\n1,"{big}"\n2,ice\n'.encode())
    assert ids == ["1", "2"] and texts[0] == big


# ---------------------------------------------------------------------- 3. crafted directories

@pytest.mark.parametrize("target", ["tags/tags-00000/terms.npy", "passages/passages-00000/texts.npy",
                                    "vocabulary/tag_idf.npy"])
def test_payload_index_is_refused_in_one_line_and_runs_nothing(index, tmp_path, target):
    marker = tmp_path / "pwned"
    np.save(index / target, np.array([Payload(marker)], dtype=object), allow_pickle=True)  # a pickle inside
    reseal_index(index)  # checksums alone cannot tell: the manifest matches the crafted files
    for argv in (("verify", index), ("export-tags", index, "--out", tmp_path / "t.jsonl"),
                 ("retrieve", "--index", index, "--claims", DEMO / "dev-claims.json", "--out", tmp_path / "p.json",
                  "--method", "tags")):
        proc = in_process(*argv)
        assert_one_line_error(proc, target, "unreadable array")
        assert not marker.exists(), argv
    assert not (tmp_path / "t.jsonl").exists() and not (tmp_path / "p.json").exists()


def test_an_index_of_the_pickle_format_is_never_unpickled(index, tmp_path):
    """An index of the joblib format (before /3), even one whose shards carry a payload, is
    refused by its manifest's format alone, with the command that rebuilds it."""
    marker = tmp_path / "pwned"
    data = json.loads((index / "manifest.json").read_text("utf-8"))
    data["format"] = "factcheck-tag-index/2"
    (index / "manifest.json").write_text(json.dumps(data), "utf-8")
    joblib.dump({"kind": "passages", "x": Payload(marker)}, index / "passages" / "passages-00000.joblib")
    for argv in (("verify", index), ("export-tags", index, "--out", tmp_path / "t.jsonl")):
        assert_one_line_error(in_process(*argv), "older format", f"factcheck tag evidence.json --out {index} --force")
    (index / "manifest.json").unlink()  # an unfinished index of that format: the same line
    assert_one_line_error(in_process("verify", index), "older format", "--force")
    assert not marker.exists()


@pytest.fixture(scope="module")
def demo_classifier():
    from factcheck.classification.model import make_classifier
    from factcheck.formats.claims import read_claims
    claims = read_claims(DEMO / "train-claims.json", require_labels=True)
    X = [(c.text, [c.text.split()[0]]) for c in claims]
    return make_classifier(class_weight="balanced").fit(X, [c.label for c in claims]), X


def test_fresh_classifier_round_trips_through_the_safe_format(demo_classifier, tmp_path):
    from factcheck.classification.model import load_classifier, save_classifier
    model, X = demo_classifier
    save_classifier(model, tmp_path, {"retriever": {"method": "bm25"}})
    loaded, meta = load_classifier(tmp_path)
    assert meta == {"retriever": {"method": "bm25"}}
    assert np.array_equal(loaded.predict_proba(X), model.predict_proba(X))


def test_a_trusted_classifier_is_loaded_without_listing_its_untrusted_types(demo_classifier, tmp_path,
                                                                            monkeypatch):
    """skops.io.load audits every type against the allow-list itself: listing the untrusted
    types first built the file's whole tree twice (a large share of loading a big model)."""
    import skops.io as sio

    from factcheck.classification.model import load_classifier, save_classifier
    model, X = demo_classifier
    save_classifier(model, tmp_path, {"retriever": {"method": "bm25"}})

    def listed(*a, **k):
        raise AssertionError("get_untrusted_types called for a trusted file")
    monkeypatch.setattr(sio, "get_untrusted_types", listed)
    loaded, _ = load_classifier(tmp_path)
    assert np.array_equal(loaded.predict_proba(X), model.predict_proba(X))


def test_every_estimator_class_of_ours_is_on_the_model_allow_list():
    """A factcheck estimator class missing from TRUSTED_MODEL_TYPES saves fine and then
    cannot be loaded (found in review: a feature class of a since-removed candidate model)."""
    import importlib
    import inspect
    import pkgutil

    from sklearn.base import BaseEstimator

    import factcheck
    from factcheck.formats.safe_load import TRUSTED_MODEL_TYPES
    from factcheck.retrieval.base import Retriever
    missing, seen = [], 0
    for info in pkgutil.walk_packages(factcheck.__path__, "factcheck."):
        if not info.name.startswith(("factcheck.classification", "factcheck.retrieval")):
            continue
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            # Retrievers are estimators too, but never stored in a model file (the reranker
            # saves its parts, RerankRetriever.save): keep them off the allow-list.
            if inspect.isclass(obj) and obj.__module__ == module.__name__ and issubclass(obj, BaseEstimator) \
                    and not issubclass(obj, Retriever):
                seen += 1
                if f"{obj.__module__}.{obj.__qualname__}" not in TRUSTED_MODEL_TYPES:
                    missing.append(f"{obj.__module__}.{obj.__qualname__}")
    assert seen >= 1 and missing == []  # ClaimEvidenceFeatures at least


def test_payload_model_directory_is_refused_in_one_line_and_runs_nothing(tmp_path, demo_index):
    from factcheck.classification.model import MODEL_FILE
    from factcheck.system.model_dir import RERANK_FILE
    marker = tmp_path / "pwned"
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    joblib.dump({"model": Payload(marker), "meta": {}}, model_dir / MODEL_FILE)  # a pickle
    proc = in_process("predict", "--claims", DEMO / "dev-claims.json", "--index", demo_index,
                      "--model", model_dir, "--out", tmp_path / "p.json")
    assert_one_line_error(proc, MODEL_FILE, "refusing to load", "pickle")
    import skops.io as sio
    sio.dump({"model": Untrusted(), "meta": {}}, model_dir / MODEL_FILE)  # skops, untrusted type
    proc = in_process("predict", "--claims", DEMO / "dev-claims.json", "--index", demo_index,
                      "--model", model_dir, "--out", tmp_path / "p.json")
    assert_one_line_error(proc, MODEL_FILE, "not trusted", "test_hardening.Untrusted")
    joblib.dump({"format": "x", "model": Payload(marker)}, tmp_path / RERANK_FILE)
    proc = in_process("retrieve", "--index", demo_index, "--claims", DEMO / "dev-claims.json", "--out",
                      tmp_path / "p.json", "--method", "rerank", "--rerank-model", tmp_path / RERANK_FILE)
    assert_one_line_error(proc, RERANK_FILE, "refusing to load")
    assert not marker.exists() and not (tmp_path / "p.json").exists()


def test_the_docs_state_the_trust_model():
    page = (ROOT / "docs" / "trust-model.md").read_text("utf-8")
    assert "Trust model" in page and "TRUSTED_MODEL_TYPES" in page
    assert "docs/trust-model.md" in (ROOT / "README.md").read_text("utf-8")


# ---------------------------------------------------------------------- 4. caches

def _bm25_evidence(index, tmp_path, name):
    out = tmp_path / f"{name}.json"
    proc = in_process("retrieve", "--index", index, "--claims", DEMO / "dev-claims.json", "--out", out,
                      "--method", "bm25")
    assert proc.returncode == 0, proc.stderr
    return {k: v["evidences"] for k, v in json.loads(out.read_text()).items()}


def test_a_truncated_bm25_cache_is_rebuilt_not_used(index, tmp_path):
    reference = _bm25_evidence(index, tmp_path, "ref")
    (cache,) = [p for p in (index / "bm25").iterdir() if p.name != "counts"]  # the weights (counts: their postings)
    data = cache / "data.npy"
    raw = bytearray(data.read_bytes())
    data.write_bytes(bytes(raw[: len(raw) // 2]))
    assert _bm25_evidence(index, tmp_path, "again") == reference
    assert data.read_bytes() == bytes(raw)  # rebuilt in place


def test_an_edited_bm25_cache_is_refused_by_verify_and_rebuilt_once_deleted(index, tmp_path):
    """Its files are hashed by verify, not before every use (as the index's arrays)."""
    reference = _bm25_evidence(index, tmp_path, "ref")
    (cache,) = [p for p in (index / "bm25").iterdir() if p.name != "counts"]
    data = cache / "data.npy"
    arr = np.load(data)  # scale every score: same shape, other evidence
    np.save(data, (arr * np.random.default_rng(0).random(arr.shape)).astype(arr.dtype))
    assert_one_line_error(in_process("verify", index), str(cache), "does not match its checksums")
    shutil.rmtree(cache)
    assert _bm25_evidence(index, tmp_path, "again") == reference
    assert in_process("verify", index).returncode == 0


def test_damaged_term_cache_is_rebuilt(index, demo_index):
    from factcheck.retrieval.rerank.terms import TermIndex
    from factcheck.tagging.index import TagIndex
    ti = TagIndex.load(index)
    first = TermIndex.for_index(ti)
    forward, vocab = first.forward.copy(), dict(first.vocab)  # in memory: the cache is mapped
    del first
    (npy,) = (index / "rerank").glob("terms-*/forward_data.npy")
    good = npy.read_bytes()
    npy.write_bytes(good[:100])
    again = TermIndex.for_index(ti)
    assert npy.read_bytes() == good
    assert (again.forward != forward).nnz == 0 and again.vocab == vocab


def test_read_only_index_serves_bm25_without_a_cache(index, tmp_path, monkeypatch):
    from factcheck.tagging import derived

    def refuse(*a, **k):
        raise PermissionError(13, "Read-only file system")
    monkeypatch.setattr(derived.tempfile, "mkdtemp", refuse)
    assert _bm25_evidence(index, tmp_path, "ro")
    assert not (index / "bm25").exists() or not any((index / "bm25").rglob("*.npy"))


# ---------------------------------------------------------------------- 5. one line, not a traceback

def test_lone_surrogate_in_evidence_or_claim_is_one_line_and_writes_nothing(tmp_path, demo_index):
    ev = tmp_path / "e.json"
    ev.write_text('{"e1": "sea \\ud800 ice", "e2": "ok"}')
    assert_one_line_error(in_process("tag", ev, "--out", tmp_path / "out", "--jobs", "1"), "passage 1",
                          "lone surrogate")
    assert not (tmp_path / "out" / "manifest.json").exists()
    claims = tmp_path / "c.json"
    claims.write_text('{"c1": {"claim_text": "warming \\udc00 now"}}')
    out = tmp_path / "p.json"
    proc = in_process("retrieve", "--index", demo_index, "--claims", claims, "--out", out, "--method", "tags")
    assert_one_line_error(proc, "claim 'c1'", "lone surrogate")
    assert not out.exists() and not (tmp_path / "p.explain.json").exists()


def test_json_nested_100000_deep_is_one_line(tmp_path, demo_index):
    deep = "[" * 100_000 + "]" * 100_000
    for name, data in (("e.jsonl", '{"id": "a", "text": %s}\n' % deep), ("e.json", '{"a": %s}' % deep)):
        path = tmp_path / name
        path.write_text(data)
        assert_one_line_error(in_process("tag", path, "--out", tmp_path / name.replace(".", "-"), "--jobs", "1"),
                              str(path))
    claims = tmp_path / "c.json"
    claims.write_text('{"c1": %s}' % deep)
    assert_one_line_error(in_process("retrieve", "--index", demo_index, "--claims", claims, "--out",
                                     tmp_path / "p.json"), "nested too deeply")


def test_unreadable_input_is_one_line(tmp_path, monkeypatch):
    from factcheck.formats import files
    src = tmp_path / "e.json"
    src.write_text('{"a": "ice"}')

    def denied(path, *a, **k):
        raise PermissionError(13, "Permission denied", str(path))
    monkeypatch.setattr(files, "sha256_file", denied)  # root reads any file: simulate the EACCES
    assert_one_line_error(in_process("tag", src, "--out", tmp_path / "out", "--jobs", "1"), str(src),
                          "permission denied")


@pytest.mark.slow
def test_fifo_input_is_refused_not_waited_on(tmp_path, demo_index):
    fifo = tmp_path / "e.json"
    os.mkfifo(fifo)
    proc = run_cli("tag", fifo, "--out", tmp_path / "out", timeout=60)
    assert_one_line_error(proc, str(fifo), "FIFO")
    proc = run_cli("retrieve", "--index", demo_index, "--claims", fifo, "--out", tmp_path / "p.json", timeout=60)
    assert_one_line_error(proc, str(fifo), "FIFO")
    assert not (tmp_path / "p.json").exists()


# ---------------------------------------------------------------------- 6. the tool's own data loss

def test_force_never_deletes_the_users_files(tmp_path):
    out = tmp_path / "out"
    for rel in ("manifest.json", "models/mine.pkl", "passages/notes.txt", "tags/t.csv"):
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text("the user's")
    proc = in_process("tag", DEMO / "evidence.json", "--out", out, "--jobs", "1", "--force")
    assert_one_line_error(proc, "manifest.json", "not a factcheck tag index", "refusing to delete")
    assert all((out / rel).read_text() == "the user's"
               for rel in ("manifest.json", "models/mine.pkl", "passages/notes.txt", "tags/t.csv"))


def test_force_replaces_our_index_but_keeps_a_users_file_inside_it(index):
    (index / "passages" / "notes.txt").write_text("mine")
    proc = in_process("tag", DEMO / "evidence.json", "--out", index, "--jobs", "1", "--top-k", "5", "--force")
    assert proc.returncode == 0, proc.stderr
    assert (index / "passages" / "notes.txt").read_text() == "mine"
    assert json.loads((index / "manifest.json").read_text())["params"]["top_k"] == 5
    assert in_process("verify", index).returncode == 0


def test_no_output_may_overwrite_an_input(index, tmp_path):
    manifest = (index / "manifest.json").read_bytes()
    proc = in_process("export-tags", index, "--out", index / "manifest.json")
    assert_one_line_error(proc, "would overwrite the input")
    assert (index / "manifest.json").read_bytes() == manifest
    claims = tmp_path / "claims.json"
    shutil.copy(DEMO / "dev-claims.json", claims)
    before = claims.read_bytes()
    proc = in_process("retrieve", "--index", index, "--claims", claims, "--out", claims, "--method", "tags")
    assert_one_line_error(proc, "would overwrite the input")
    assert claims.read_bytes() == before


# ---------------------------------------------------------------------- 7. odd inputs

def test_empty_claim_id_is_refused_at_the_door(tmp_path, demo_index):
    claims = tmp_path / "c.json"
    claims.write_text('{"": {"claim_text": "Sea levels rise"}}')
    proc = in_process("retrieve", "--index", demo_index, "--claims", claims, "--out", tmp_path / "p.json")
    assert_one_line_error(proc, "empty claim id")
    ev = tmp_path / "e.json"
    ev.write_text('{"": "Sea levels rise"}')
    assert_one_line_error(in_process("tag", ev, "--out", tmp_path / "o", "--jobs", "1"), "passage id is empty")


@pytest.mark.parametrize("argv", [("--k1", "nan"), ("--b", "-3"), ("--t-sim", "nan"), ("--k1", "inf"),
                                  ("--t-overlap", "1.5"), ("--chunk-overlap", "-1")])
def test_meaningless_numbers_are_refused(argv, tmp_path, demo_index):
    proc = usage_error("retrieve", "--index", demo_index, "--claims", DEMO / "dev-claims.json",
                       "--out", tmp_path / "p.json", *argv)
    assert_one_line_error(proc, argv[0])
    assert not (tmp_path / "p.json").exists()


def test_max_claim_chars_must_be_positive():
    assert_one_line_error(usage_error("serve", "--max-claim-chars", "-5"), "--max-claim-chars")


# ---------------------------------------------------------------------- 8. the app, and file modes

@pytest.mark.parametrize("host, url", [("::1", "http://[::1]:8000/"), ("127.0.0.2", "http://127.0.0.2:8000/"),
                                       ("localhost", "http://localhost:8000/")])
def test_every_loopback_address_gets_the_host_check_and_a_correct_url(host, url):
    from factcheck.cli.serve import allowed_hosts_for, url_of
    assert allowed_hosts_for(host) is not None and url_of(host, 8000) == url
    assert allowed_hosts_for("0.0.0.0") is None and allowed_hosts_for("192.168.1.4") is None


@pytest.fixture(scope="module")
def demo_run_app_state(demo_run):
    from factcheck.serve.app import create_app
    return create_app(demo_run).state.explain  # the session's shared demo run


def test_app_host_check_headers_head_and_no_openapi(demo_run_app_state):
    from factcheck.serve.app import build_app
    from factcheck.cli.serve import allowed_hosts_for
    app = TestClient(build_app(demo_run_app_state, allowed_hosts_for("::1")))
    ok = app.get("/healthz", headers={"host": "[::1]:8000"})
    assert ok.status_code == 200
    bad = app.get("/healthz", headers={"host": "evil.example:8000"})
    assert bad.status_code == 400
    assert "default-src 'none'" in bad.headers["content-security-policy"]
    assert bad.headers["x-content-type-options"] == "nosniff"
    assert app.head("/", headers={"host": "[::1]:8000"}).status_code == 200
    assert app.head("/healthz", headers={"host": "localhost"}).status_code == 200
    assert app.get("/openapi.json", headers={"host": "localhost"}).status_code == 404
    debug = TestClient(build_app(demo_run_app_state, None, debug=True))
    assert debug.get("/openapi.json").status_code == 200


def test_outputs_honour_the_umask(tmp_path):
    from factcheck.formats.files import write_text_atomic
    old = os.umask(0o022)
    try:
        write_text_atomic(tmp_path / "a.txt", "x")
    finally:
        os.umask(old)
    assert (tmp_path / "a.txt").stat().st_mode & 0o777 == 0o644


def test_bm25_cache_directory_honours_the_umask(index, tmp_path):
    old = os.umask(0o022)
    try:
        _bm25_evidence(index, tmp_path, "umask")
    finally:
        os.umask(old)
    for cache in (index / "bm25").iterdir():  # the counts and the weights
        assert cache.stat().st_mode & 0o777 == 0o755
        assert all(p.stat().st_mode & 0o777 == 0o644 for p in cache.rglob("*") if p.is_file())


@pytest.mark.slow
def test_serve_on_a_port_in_use_is_one_line_before_loading_anything(tmp_path):
    """Found in review: uvicorn's own error and exit status 3, after a "ready" line."""
    import socket
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        proc = run_cli("serve", "--index", tmp_path / "no-index", "--model", tmp_path / "no-model",
                       "--port", port, timeout=60)
    assert_one_line_error(proc, "--port", "cannot listen", str(port))
