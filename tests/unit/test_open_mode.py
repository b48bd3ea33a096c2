"""The open mode's library pieces: the bundled embedder, passage vectors, dense/hybrid retrieval.

Tests that need the optional extra skip with a reason when ``wordllama`` is not
installed; the course-mode purity test runs everywhere.
"""

from __future__ import annotations

import json
import shutil
import sys

import numpy as np
import pytest

from helpers import DEMO, needs_open, run_python
from factcheck.errors import InputError, IntegrityError



# ---------------------------------------------------------------- course mode stays pure

@pytest.mark.slow
def test_course_mode_never_imports_the_embedding_package(demo_index):
    proc = run_python(f"""
        import sys
        import factcheck.cli, factcheck.pipeline.run, factcheck.retrieval.registry, factcheck.serve.app
        import factcheck.text.embedding, factcheck.tagging.vectors, factcheck.retrieval.dense  # lazy by design
        from factcheck.retrieval.base import without_cache
        from factcheck.retrieval.bm25 import BM25Retriever
        from factcheck.tagging.index import TagIndex
        without_cache(BM25Retriever(k=3)).fit(TagIndex.load({str(demo_index)!r})).retrieve(["sea levels rise"])
        print(sorted(m for m in sys.modules if m.split(".")[0] in ("wordllama", "tokenizers", "safetensors")))
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


@pytest.mark.slow
def test_course_mode_cli_run_never_imports_the_embedding_package(tmp_path):
    # The whole pipeline through the CLI, as `factcheck run --mode course` (the default).
    proc = run_python(f"""
        import sys
        from factcheck.cli import main
        assert main(["run", "--data-dir", {str(DEMO)!r}, "--out", {str(tmp_path / "run")!r},
                     "--mode", "course", "--jobs", "1", "--quiet"]) == 0
        print(sorted(m for m in sys.modules if m.split(".")[0] in ("wordllama", "tokenizers", "safetensors")))
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]"


def test_missing_extra_is_one_line_naming_the_install(monkeypatch):
    from factcheck.text import embedding
    monkeypatch.setattr(embedding, "_LOADED", None)
    monkeypatch.setitem(sys.modules, "wordllama", None)  # import wordllama -> ImportError
    with pytest.raises(InputError) as err:
        embedding.load_embedder()
    assert err.value.param == "mode"
    assert err.value.one_line({"mode": "--mode"}) == (
        "--mode: the open mode needs the optional extra: pip install -e '.[open]'")


# ---------------------------------------------------------------- the embedder

@needs_open
@pytest.mark.slow
def test_loader_never_opens_a_network_connection():
    # A fresh process, so wordllama's own import is covered too; every way to reach the
    # network raises, and loading + embedding must still work.
    proc = run_python("""
        import socket
        def refuse(*a, **k):
            raise AssertionError("network access attempted")
        socket.socket.connect = socket.socket.connect_ex = refuse
        socket.create_connection = socket.getaddrinfo = refuse
        import logging
        from factcheck.text.embedding import load_embedder
        v = load_embedder().embed(["Sea levels are rising.", "CO2 warms the planet"])
        assert logging.getLogger().handlers == [], "wordllama configured the root logger"
        print(v.shape, v.dtype, round(float((v * v).sum(axis=1).min()), 4))
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "(2, 256) float32 1.0"


@needs_open
def test_embedding_is_normalised_and_independent_of_batching():
    from factcheck.text.embedding import embed, load_embedder
    texts = json.loads((DEMO / "evidence.json").read_text("utf-8"))
    texts = list(texts.values()) + ["", "!!!", "the"]
    whole = embed(texts)
    assert whole.dtype == np.float32 and whole.shape == (len(texts), 256)
    for batch in (1, 3, 7):
        assert np.array_equal(load_embedder().embed(texts, batch_size=batch), whole)
    assert np.array_equal(embed(texts[5:6])[0], whole[5])
    norms = np.linalg.norm(whole, axis=1)
    assert np.all((np.abs(norms - 1) < 1e-5) | (norms == 0))
    assert not np.isnan(whole).any()
    assert np.all(whole[texts.index("")] == 0)  # no token: similarity 0 to everything


# ---------------------------------------------------------------- passage vectors

@pytest.fixture()
def index_copy(demo_index, tmp_path):
    """A private copy of the demo index (vectors are written inside an index)."""
    def make(name: str = "index"):
        return shutil.copytree(demo_index, tmp_path / name)
    return make


@needs_open
@pytest.mark.slow
def test_vectors_are_identical_whatever_jobs_and_shard_size(index_copy):
    from factcheck.tagging.vectors import PassageVectorJob, load_vectors
    runs = {}
    for jobs, size in ((1, 7), (2, 7), (1, 1000)):
        root = index_copy(f"j{jobs}-s{size}")
        runs[jobs, size] = (root, PassageVectorJob(shard_size=size, jobs=jobs, progress=False).run(root))
    (a, ma), (b, mb), (c, mc) = runs[1, 7], runs[2, 7], runs[1, 1000]
    assert ma == mb  # same files, same checksums
    assert len(ma["shards"]) == 6 and len(mc["shards"]) == 1
    for s in ma["shards"]:
        assert (a / "vectors" / s["file"]).read_bytes() == (b / "vectors" / s["file"]).read_bytes()
    assert ma["content_sha256"] == mc["content_sha256"]
    vectors = load_vectors(a)
    assert vectors.dtype == np.float16 and vectors.shape == (40, 256)
    assert np.array_equal(vectors, load_vectors(c))
    assert not (a / "vectors" / "work").exists() and not (a / "vectors" / ".factcheck-lock").exists()


@needs_open
def test_vector_job_resumes_keeping_finished_shards(index_copy, monkeypatch):
    from factcheck.tagging import vectors as vec
    fresh = vec.PassageVectorJob(shard_size=7, progress=False).run(index_copy("fresh"))
    root = index_copy("crashed")
    real, calls = vec._embed_task, []

    def crash_at_shard_2(root_, shard, *rest):
        if shard == 2:
            raise RuntimeError("killed")
        return real(root_, shard, *rest)

    monkeypatch.setattr(vec, "_embed_task", crash_at_shard_2)
    with pytest.raises(RuntimeError):
        vec.PassageVectorJob(shard_size=7, progress=False).run(root)
    assert not (root / "vectors" / "manifest.json").exists()

    def counting(root_, shard, *rest):
        calls.append(shard)
        return real(root_, shard, *rest)

    monkeypatch.setattr(vec, "_embed_task", counting)
    assert vec.PassageVectorJob(shard_size=7, progress=False).run(root) == fresh
    assert calls == [2, 3, 4, 5]
    calls.clear()
    vec.PassageVectorJob(shard_size=7, progress=False).run(root)  # complete: nothing to do
    assert calls == []


@needs_open
def test_damaged_vectors_are_refused_in_one_line(index_copy):
    from factcheck.formats.files import dumps_json, sha256_bytes, sha256_file
    from factcheck.tagging.vectors import PassageVectorJob, load_vectors
    root = index_copy()
    manifest = PassageVectorJob(shard_size=7, progress=False).run(root)
    shard = root / "vectors" / manifest["shards"][1]["file"]
    good = shard.read_bytes()

    def refused(needle):
        with pytest.raises(IntegrityError) as err:
            load_vectors(root)
        line = err.value.one_line()
        assert "\n" not in line and needle in line, line
        return line

    shard.write_bytes(good[:-10])
    assert refused("truncated").startswith(str(shard))  # the header and the size: no sha256 read
    shard.unlink()
    refused("missing vector shard")
    shard.write_bytes(good)
    load_vectors(root)

    # A pickled object array whose checksums were recomputed to match: never unpickled.
    with open(shard, "wb") as fh:
        np.save(fh, np.array([{"x": 1}], dtype=object), allow_pickle=True)
    path = root / "vectors" / "manifest.json"
    data = json.loads(path.read_text("utf-8"))
    data.pop("manifest_sha256")
    data["shards"][1]["sha256"] = sha256_file(shard)
    path.write_text(dumps_json({**data, "manifest_sha256": sha256_bytes(dumps_json(data).encode())}))
    refused("unreadable array: an array of Python objects")

    data["passages"] += 1  # edited without its checksum
    path.write_text(dumps_json({**data, "manifest_sha256": "0" * 64}))
    refused("manifest checksum mismatch")

    # Read by the one record reader the index's manifest has: a newer version says so.
    data["format"] = "factcheck-passage-vectors/2"
    path.write_text(dumps_json({**data, "manifest_sha256": sha256_bytes(dumps_json(data).encode())}))
    assert "upgrade factcheck" in refused("manifest of a newer format (factcheck-passage-vectors/2)")


# ---------------------------------------------------------------- dense and hybrid retrieval

@pytest.fixture()
def open_index(index_copy):
    from factcheck.tagging.index import TagIndex
    from factcheck.tagging.vectors import PassageVectorJob
    root = index_copy()
    PassageVectorJob(progress=False).run(root)
    return TagIndex.load(root)


@needs_open
def test_dense_retriever_ranks_by_cosine_one_claim_at_a_time(open_index):
    from factcheck.retrieval.dense import DenseRetriever
    from factcheck.text.embedding import embed
    dense = DenseRetriever(k=3)
    dense.block_rows = 7  # several blocks on the demo
    dense = dense.fit(open_index)
    claims = ["Sea levels are rising because ice sheets melt.", "Carbon dioxide warms the planet."]
    expected = dense.vectors_ @ embed(claims[1:])[0]
    assert np.allclose(dense.scores(claims[1]), expected, atol=1e-6)
    together, alone = dense.rank(claims, 10), dense.rank(claims[1:], 10)
    assert np.array_equal(together[1].rows, alone[0].rows)
    assert np.array_equal(together[1].scores, alone[0].scores)
    assert np.all(np.diff(together[0].scores) <= 0)
    selection = dense.retrieve(claims[:1])[0]
    assert len(selection.hits) == 3 and selection.hits[0].explanation["rank"] == 1
    assert selection.hits[0].explanation["dense"] == pytest.approx(together[0].scores[0])


@needs_open
def test_hybrid_explains_both_scores_and_spans_bm25_to_dense(open_index):
    from factcheck.retrieval.base import without_cache
    from factcheck.retrieval.bm25 import BM25Retriever
    from factcheck.retrieval.dense import DenseRetriever, HybridRetriever
    claim = "Sea levels are rising because ice sheets melt."
    hybrid = HybridRetriever(k=4, alpha=0.5).fit(open_index)
    hit = hybrid.retrieve([claim])[0].hits[0]
    assert {"bm25", "dense", "fused", "rank", "shared_terms"} <= set(hit.explanation)
    assert hit.to_json()["dense"] == hit.explanation["dense"]
    bm25 = without_cache(BM25Retriever(k1=0.9, b=0.4)).fit(open_index).rank([claim], 5)[0]
    dense = DenseRetriever().fit(open_index).rank([claim], 5)[0]
    for alpha, reference in ((0.0, bm25), (1.0, dense)):
        for fusion in ("max", "rrf"):
            ranked = HybridRetriever(alpha=alpha, fusion=fusion).fit(open_index).rank([claim], 5)[0]
            assert ranked.rows == reference.rows, (alpha, fusion)


@needs_open
def test_open_mode_errors_are_one_line(index_copy, open_index):
    from factcheck.retrieval.dense import DenseRetriever, HybridRetriever
    from factcheck.tagging.index import TagIndex
    with pytest.raises(InputError) as err:
        HybridRetriever(fusion="mean").fit(open_index)
    assert err.value.one_line() == "fusion: unknown fusion 'mean'; expected one of max, rrf"
    with pytest.raises(IntegrityError) as err:
        DenseRetriever().fit(TagIndex.load(index_copy("no-vectors")))
    assert "has no passage vectors" in err.value.one_line()


@needs_open
def test_no_dense_or_hybrid_evidence_scores_0(open_index):
    # An empty claim embeds as zeros: every passage scores 0, and none is evidence.
    from factcheck.retrieval.dense import DenseRetriever, HybridRetriever
    for retriever in (DenseRetriever(k=3), HybridRetriever(k=3)):
        empty, real = retriever.fit(open_index).retrieve(["", "Sea levels are rising."])
        assert empty.hits == [] and len(real.hits) == 3 and all(h.score != 0 for h in real.hits)


@needs_open
@pytest.mark.parametrize("alpha", [None, 0.0, 0.5, 1.0])
def test_hybrid_sweeps_evidence_is_the_chosen_retrievers(open_index, alpha):
    """The hold-out score and the classifier's CV read the hybrid's evidence of the tuning claims
    from its sweep instead of retrieving them again: it must be what the fitted retriever returns
    (a one-alpha grid forces each alpha, 1.0 the dense side alone with its negative cosines)."""
    from factcheck.formats.claims import read_claims
    from factcheck.retrieval.base import evidence_of, run_retrieval
    from factcheck.retrieval.dense import HybridRetriever
    from factcheck.training.tuning import HYBRID_GRID, sweep_open
    claims = read_claims(DEMO / "train-claims.json", require_labels=True)
    fit, holdout = claims[:len(claims) * 2 // 3], claims[len(claims) * 2 // 3:]
    grid = HYBRID_GRID if alpha is None else {**HYBRID_GRID, "alpha": (alpha,)}
    hybrid, _ = sweep_open(open_index, fit, holdout, 0.9, 0.4, grid=grid, progress=False)
    retrieved = evidence_of(run_retrieval(HybridRetriever(**hybrid.chosen).fit(open_index), claims, depth=0))
    assert hybrid.evidence == retrieved
