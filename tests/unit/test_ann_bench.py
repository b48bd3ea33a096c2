"""The nearest-neighbour benchmark's configurations (benchmarks/ann.py), each built small:
it builds, saves, loads and searches, and its recall against exact search is computed right
(1.0 where the candidate search covers every list). No timing is asserted."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import needs_open

pytest.importorskip("faiss")

NEW = ["faiss-ivf-deep", "faiss-hnsw-deep", "faiss-hnsw32", "hnswlib-m32", "ivf-sq8", "ivf-pq64fs", "ivf-pq64fsr",
       "ivf-pq128fs"]
LISTS = 16  # the code-storing configurations' lists, shrunk to what 3,000 vectors can train


def unit_vectors(n: int, dim: int = 256, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float16)


def small(params: dict, n: int) -> dict:
    """``params`` with an IVF description's lists shrunk (the searched nprobe then covers them
    all) and every one of the ``n`` vectors a candidate: the search is exhaustive, whatever the codes."""
    if "spec" not in params:
        return params
    ivf, codes = params["spec"].split(",")
    return {**params, "spec": f"IVF{LISTS},{codes}", "candidates": n}


@pytest.fixture(scope="module")
def data():
    from benchmarks.ann import exact_top
    vectors = unit_vectors(3000)
    queries = {"dev": unit_vectors(20, seed=1).astype(np.float32), "train": unit_vectors(10, seed=2).astype(np.float32)}
    return vectors, queries, {part: exact_top(vectors, q) for part, q in queries.items()}


def test_exact_top_merges_its_chunks_into_the_exact_top(data, monkeypatch):
    import benchmarks.ann as bench
    from factcheck.scoring.topk import top_k
    vectors, queries, _ = data
    monkeypatch.setattr(bench, "CHUNK", 700)  # five chunks, the last one short
    wide = vectors.astype(np.float32)
    got = bench.exact_top(vectors, queries["dev"])
    assert [g.tolist() for g in got] == [top_k(wide @ q, bench.DEPTH)[0].tolist() for q in queries["dev"]]


def test_the_new_configurations_are_known_and_sweep_one_setting():
    from benchmarks.ann import CONFIGS
    for name in NEW:
        library, params = CONFIGS[name]
        assert sum(isinstance(v, list) for v in params.values()) == 1, name
        if "spec" in params:  # code-storing: asked for more candidates than the top it re-scores
            assert library == "product" and params["candidates"] > 100


@pytest.mark.parametrize("name", NEW)
def test_each_new_configuration_builds_searches_and_recalls_the_exact_top(name, data, tmp_path, monkeypatch):
    import benchmarks.ann as bench
    monkeypatch.setattr(bench, "ROOT", tmp_path)  # the product's build directory
    vectors, queries, truth = data
    library, params = bench.CONFIGS[name]
    if library in ("hnswlib", "usearch"):  # the measured candidates, not dependencies: a benchmark-only install
        pytest.importorskip(library)
    params = small(params, len(vectors))
    index = bench.build(library, params, vectors, threads=1)
    path = tmp_path / f"{name}.idx"
    bench.save(library, index, path)
    assert path.stat().st_size > 0
    loaded = bench.load(library, params, path, vectors.shape[1])
    rows = bench.search_rows(library, params, loaded, vectors, queries, truth)
    assert [r["knob"].split("=")[1] for r in rows] == [str(v) for v in next(
        v for v in params.values() if isinstance(v, list))]
    for r in rows:
        assert r["candidates"] >= bench.DEPTH and r["p50"] >= 0 and r["p99"] >= r["p50"]
        if library == "hnswlib" or "hnsw" in name:
            # a graph is searched, not every vector: ef >= 512 of 3,000 finds nearly all
            assert r["recall_dev"] >= 0.97 and r["recall_train"] >= 0.97, r
        else:  # every list scanned (nprobe >= the lists): exact, whatever the codes
            assert r["recall_dev"] == r["recall_train"] == 1.0, r
    if "candidates" in params:
        assert rows[0]["candidates"] == len(vectors)


def test_recall_counts_the_exact_top_found_and_float16_vectors_re_score_alike(data, tmp_path, monkeypatch):
    import benchmarks.ann as bench
    vectors, queries, truth = data
    want = truth["dev"][0]
    assert bench.recall(want[::-1], want) == 1.0
    assert bench.recall(np.concatenate([want[:90], np.arange(10) + 10**6]), want) == 0.9
    q = queries["dev"][0]
    everything = np.arange(len(vectors))
    assert bench.rescored(vectors, q, everything).tolist() == want.tolist()  # float16, widened by rows
    assert bench.rescored(vectors.astype(np.float32), q, everything[::-1]).tolist() == want.tolist()


@needs_open
def test_the_vectors_are_one_flat_copy_memory_mapped_made_once(tmp_path, monkeypatch):
    import factcheck
    import benchmarks.ann as bench
    from factcheck.tagging.vectors import PassageVectorJob, load_vectors
    from helpers import DEMO
    monkeypatch.setattr(bench, "ROOT", tmp_path)
    index = tmp_path / "index"
    factcheck.build_index(str(DEMO / "evidence.json"), str(index), progress=False)
    PassageVectorJob(progress=False).run(index)
    want = load_vectors(index)
    got = bench.load_vectors(index)
    assert isinstance(got.base, np.memmap) or isinstance(got, np.memmap)
    assert got.dtype == np.float16 and np.array_equal(got, want)
    copy, = (tmp_path / "bench").glob("ann-vectors-*.npy")
    mtime = copy.stat().st_mtime_ns
    assert np.array_equal(bench.resident(bench.load_vectors(index, 7)), want[:7])
    assert copy.stat().st_mtime_ns == mtime and len(list((tmp_path / "bench").iterdir())) == 1  # made once
