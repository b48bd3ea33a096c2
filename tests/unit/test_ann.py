"""The passage vectors' nearest-neighbour index: built beside them from a size on, searched
through with exact re-scoring, checked against its recorded sha256 before faiss reads it.

The threshold is lowered so a few thousand passages get an index; exact search is the reference.
"""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from helpers import assert_one_line_error, in_process, needs_open
from factcheck.errors import InputError, IntegrityError

faiss = pytest.importorskip("faiss")


def unit_vectors(n: int, dim: int = 64, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float16)


def clustered_vectors(n: int, dim: int = 64, centres: int = 40, spread: float = 0.5, seed: int = 0) -> np.ndarray:
    """Unit vectors around ``centres`` random directions: text embeddings cluster, uniform
    random vectors (no structure for an inverted file's lists to follow) do not."""
    rng = np.random.default_rng(seed)
    c = rng.standard_normal((centres, dim))
    v = c[rng.integers(0, centres, n)] + spread * rng.standard_normal((n, dim))
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float16)


def test_default_settings_recall_exact_top_100(tmp_path):
    from factcheck.scoring.topk import top_k
    from factcheck.tagging import ann
    both = clustered_vectors(4100)
    vectors, queries = both[:4000], both[4000:].astype(np.float32)
    entry = ann.build_ann(tmp_path, vectors)
    assert (entry["spec"], entry["search_depth"], entry["candidates"]) == ("IVF64,PQ32x4fsr", 24, ann.CANDIDATES)
    loaded = ann.AnnIndex(faiss.read_index(str(tmp_path / ann.ANN_FILE)), entry)
    wide = vectors.astype(np.float32)
    found = 0
    for q in queries:
        exact = set(top_k(wide @ q, 100)[0].tolist())
        rows = loaded.search(q, 100)
        assert np.all(np.diff(rows) > 0)  # distinct, ascending
        approx = set(top_k(wide[rows] @ q, 100, rows)[0].tolist())
        found += len(exact & approx)
    # A guard, not the figure: the default's recall on real vectors is the benchmark's
    # (0.987 at 1.2M, reports/bench-ann-recall.md); a quarter of 64 lists holds too few here.
    assert found / (100 * len(queries)) >= 0.95


def test_the_default_setting_is_the_one_measured_at_1_2m_and_scales_its_lists_down():
    from factcheck.tagging import ann
    assert ann.default_setting(1_208_827, 256) == (ann.SPEC, ann.SEARCH_DEPTH, ann.CANDIDATES)
    assert ann.default_setting(25_000_000, 256)[0] == ann.SPEC  # no more lists than measured
    assert ann.default_setting(ann.MIN_PASSAGES, 256)[:2] == ("IVF256,PQ128x4fsr", 96)
    assert ann.default_setting(ann.MIN_PASSAGES, 385)[0] == "IVF256,PQ385x4fsr"  # odd: a code a value


@pytest.mark.parametrize("settings", [{}, {"spec": "IVF64,SQ8", "candidates": 400}], ids=["default", "sq8"])
def test_same_bytes_built_twice_whatever_the_thread_setting(tmp_path, settings):
    from factcheck.tagging import ann
    vectors = unit_vectors(3000)
    before = faiss.omp_get_max_threads()
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    faiss.omp_set_num_threads(2)
    try:
        first = ann.build_ann(a, vectors, **settings)
        faiss.omp_set_num_threads(1)
        second = ann.build_ann(b, vectors, **settings)
    finally:
        faiss.omp_set_num_threads(before)
    assert first == second
    assert (a / ann.ANN_FILE).read_bytes() == (b / ann.ANN_FILE).read_bytes()
    assert faiss.omp_get_max_threads() == before  # the build restores the thread setting


def test_missing_faiss_is_one_line_naming_the_install(monkeypatch):
    from factcheck.tagging import ann
    monkeypatch.setitem(sys.modules, "faiss", None)  # import faiss -> ImportError
    with pytest.raises(InputError) as err:
        ann.require_faiss()
    line = err.value.one_line({"mode": "--mode"})
    assert "\n" not in line and "pip install -e '.[open]'" in line, line


# ------------------------------------------------------------ through the vectors' job

def every_list_scanned(mp) -> None:
    """The default's codes and candidates, over 8 lists all scanned: at a test's 2,000 passages
    a quarter of the lists is no sample of the default's recall (the benchmark's figure), and
    these tests check the search's path and exact re-scoring, not the lists' coverage."""
    from factcheck.tagging import ann
    default = ann.default_setting

    def setting(passages, dim):
        spec, _, candidates = default(passages, dim)
        return "IVF8," + spec.split(",")[1], 8, candidates
    mp.setattr(ann, "default_setting", setting)


@pytest.fixture(scope="module")
def ann_index(tmp_path_factory):
    """An index of 2,000 made-up passages whose vectors got a nearest-neighbour index."""
    from factcheck.formats.evidence import source_spec
    from factcheck.tagging import ann
    from factcheck.tagging.job import TagJob
    from factcheck.tagging.vectors import PassageVectorJob
    from helpers import DEMO, OPEN_INSTALLED
    if not OPEN_INSTALLED:
        pytest.skip("needs the open extra (pip install -e '.[open]')")
    words = " ".join(json.loads((DEMO / "evidence.json").read_text("utf-8")).values()).split()
    rng = np.random.default_rng(0)
    root = tmp_path_factory.mktemp("ann")
    (root / "evidence.json").write_text(json.dumps({f"p-{i}": " ".join(rng.choice(words, 12)) for i in range(2000)}))
    TagJob(progress=False).run(source_spec(root / "evidence.json"), root / "index")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ann, "MIN_PASSAGES", 1000)
        every_list_scanned(mp)
        manifest = PassageVectorJob(progress=False).run(root / "index")
    assert manifest["ann"]["sha256"] and (root / "index" / "vectors" / ann.ANN_FILE).is_file()
    claims = [" ".join(rng.choice(words, 8)) for _ in range(100)]
    return root / "index", claims


@pytest.fixture()
def ann_copy(ann_index, tmp_path):
    import shutil
    return shutil.copytree(ann_index[0], tmp_path / "index")


@needs_open
def test_dense_search_through_the_index_matches_exact_search(ann_index):
    from factcheck.retrieval.dense import DenseRetriever
    from factcheck.tagging.index import TagIndex
    root, claims = ann_index
    index = TagIndex.load(root)
    approx, exact = DenseRetriever(k=10).fit(index), DenseRetriever(k=10, exact=True).fit(index)
    assert approx.ann_ is not None and exact.ann_ is None
    a, e = approx.rank(claims, 100), exact.rank(claims, 100)
    assert np.mean([len(set(x.rows) & set(y.rows)) / 100 for x, y in zip(a, e)]) >= 0.99
    # The same rows score the same: candidates are re-scored from the stored vectors.
    for x, y in zip(a, e):
        mine = dict(zip(y.rows, y.scores))
        assert all(s == pytest.approx(mine[r], abs=1e-6) for r, s in zip(x.rows, x.scores) if r in mine)
    assert [h.id for h in approx.retrieve(claims[0]).hits] == [h.id for h in exact.retrieve(claims[0]).hits]


@needs_open
def test_pool_first_stage_takes_the_index_candidates(ann_index, monkeypatch):
    from factcheck.retrieval.dense import DenseRetriever
    from factcheck.scoring.topk import top_k
    from factcheck.tagging.index import TagIndex
    root, claims = ann_index
    dense = DenseRetriever().fit(TagIndex.load(root))
    scored = dense.search_scores(claims[0], 50)
    assert scored.rows is not None and len(scored.rows) >= 2 * 50
    full = dense.scores(claims[0])
    assert np.allclose(dense.row_scores(scored.state, scored.rows), full[scored.rows], atol=1e-6)
    top = top_k(scored.scores, 50, scored.rows)[0]
    assert len(set(top.tolist()) & set(top_k(full, 50)[0].tolist())) >= 49


@needs_open
def test_tampered_index_is_one_line_exit_2_before_faiss_reads_it(ann_copy, monkeypatch):
    from factcheck.tagging import ann
    path = ann_copy / "vectors" / ann.ANN_FILE
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    monkeypatch.setattr(faiss, "read_index", lambda *a: pytest.fail("faiss read a file that fails its sha256"))
    proc = in_process("search", "--index", ann_copy, "--mode", "open", "--method", "dense", "sea levels")
    assert assert_one_line_error(proc, str(path), "checksum mismatch")
    assert proc.stdout == ""
    verify = in_process("verify", ann_copy)
    assert_one_line_error(verify, str(path), "checksum mismatch")
    # Exact search never opens it.
    exact = in_process("search", "--index", ann_copy, "--mode", "open", "--method", "dense", "--exact", "sea levels")
    assert exact.returncode == 0, exact.stderr


@needs_open
def test_missing_index_file_the_manifest_lists_is_one_line(ann_copy):
    from factcheck.tagging import ann
    (ann_copy / "vectors" / ann.ANN_FILE).unlink()
    proc = in_process("search", "--index", ann_copy, "--mode", "open", "--method", "dense", "sea levels")
    assert_one_line_error(proc, ann.ANN_FILE, "missing nearest-neighbour index")


@needs_open
def test_below_the_threshold_no_index_and_exact_search(ann_copy):
    from factcheck.retrieval.dense import DenseRetriever
    from factcheck.tagging import ann
    from factcheck.tagging.index import TagIndex
    from factcheck.tagging.vectors import PassageVectorJob
    import shutil
    shutil.rmtree(ann_copy / "vectors")
    manifest = PassageVectorJob(progress=False).run(ann_copy)  # the threshold as shipped
    assert "ann" not in manifest and not (ann_copy / "vectors" / ann.ANN_FILE).exists()
    assert DenseRetriever().fit(TagIndex.load(ann_copy)).ann_ is None


def test_exact_must_be_a_bool():
    from factcheck.retrieval.dense import DenseRetriever
    with pytest.raises(InputError) as err:
        DenseRetriever(exact="yes")._check_params()
    assert err.value.param == "exact"


@needs_open
def test_tampered_manifest_entry_is_refused(ann_copy):
    from factcheck.tagging.vectors import load_ann, read_vectors_manifest
    path = ann_copy / "vectors" / "manifest.json"
    data = json.loads(path.read_text("utf-8"))
    data["ann"]["sha256"] = "0" * 64  # without the manifest's own checksum: the manifest is refused
    path.write_text(json.dumps(data))
    with pytest.raises(IntegrityError, match="manifest checksum mismatch"):
        load_ann(ann_copy, read_vectors_manifest(ann_copy))


@needs_open
def test_chunked_dense_ranks_as_deep_through_the_index(ann_copy, monkeypatch):
    from factcheck.retrieval.chunking import ChunkedRetriever
    from factcheck.retrieval.dense import DenseRetriever
    from factcheck.tagging import ann
    from factcheck.tagging.index import TagIndex
    monkeypatch.setattr(ann, "MIN_PASSAGES", 1000)
    every_list_scanned(monkeypatch)
    index = TagIndex.load(ann_copy)
    approx = ChunkedRetriever(DenseRetriever(), window=6, overlap=2).fit(index)
    assert approx.inner_.ann_ is not None  # the windows' vectors got their own index
    exact = ChunkedRetriever(DenseRetriever(exact=True), window=6, overlap=2).fit(index)
    claims = ["sea levels rise as ice melts", "carbon dioxide warms the atmosphere"]
    for a, e in zip(approx.rank(claims, 300), exact.rank(claims, 300)):  # deeper than the search depth
        assert len(a.rows) == len(e.rows) == 300
        assert len(set(a.rows) & set(e.rows)) >= 0.99 * 300


@needs_open
def test_pool_first_stage_goes_through_the_index_with_exact_scores(ann_index, tmp_path):
    from helpers import ONNX_INSTALLED
    if not ONNX_INSTALLED:
        pytest.skip("needs the onnx extra")
    from tiny_onnx import make_model
    from factcheck.retrieval.pool import PoolRetriever
    from factcheck.tagging.index import TagIndex
    import shutil
    root, claims = ann_index
    shutil.copytree(root, tmp_path / "index")  # the pool keeps its vector cache in the index
    index = TagIndex.load(tmp_path / "index")
    model = make_model(tmp_path / "tiny", list(index.texts.take(np.arange(200))) + claims)
    r = PoolRetriever(model=str(model), pool_size=50).fit(index)
    assert r.first_.ann_ is not None
    matched = 0
    for claim in claims[:20]:
        rows, _, first = r.pool(claim)
        full = r.first_.scores(claim)
        assert np.allclose(first, full[rows], atol=1e-6)  # the first-stage scores are exact
        exact_top = set(np.argsort(-full, kind="stable")[:50].tolist())
        matched += len(exact_top & set(rows.tolist()))
    assert matched >= 0.99 * 50 * 20


@needs_open
def test_vectors_built_before_the_index_get_it_added_the_same_bytes(ann_copy, monkeypatch):
    from factcheck.formats.files import dumps_json, record_digest
    from factcheck.tagging import ann
    from factcheck.tagging.vectors import PassageVectorJob
    path, file = ann_copy / "vectors" / "manifest.json", ann_copy / "vectors" / ann.ANN_FILE
    before, built = json.loads(path.read_text("utf-8")), file.read_bytes()
    data = {k: v for k, v in before.items() if k not in ("ann", "manifest_sha256")}
    path.write_text(dumps_json({**data, "manifest_sha256": record_digest(data)}))
    file.unlink()
    shard = ann_copy / "vectors" / before["shards"][0]["file"]
    mtime = shard.stat().st_mtime_ns
    monkeypatch.setattr(ann, "MIN_PASSAGES", 1000)
    every_list_scanned(monkeypatch)
    again = PassageVectorJob(progress=False).run(ann_copy)
    assert again["ann"] == before["ann"] and file.read_bytes() == built
    assert shard.stat().st_mtime_ns == mtime  # the vectors were kept, not embedded again
    assert json.loads(path.read_text("utf-8")) == before


@needs_open
@pytest.mark.slow
def test_same_index_bytes_with_two_jobs(ann_index, tmp_path, monkeypatch):
    import shutil
    from factcheck.tagging import ann
    from factcheck.tagging.vectors import PassageVectorJob
    root, _ = ann_index
    shutil.copytree(root, tmp_path / "index", ignore=shutil.ignore_patterns("vectors"))
    monkeypatch.setattr(ann, "MIN_PASSAGES", 1000)
    every_list_scanned(monkeypatch)
    manifest = PassageVectorJob(jobs=2, shard_size=500, progress=False).run(tmp_path / "index")
    assert manifest["ann"] == json.loads((root / "vectors" / "manifest.json").read_text("utf-8"))["ann"]
    assert (tmp_path / "index/vectors" / ann.ANN_FILE).read_bytes() == (root / "vectors" / ann.ANN_FILE).read_bytes()


def test_an_ivf_description_takes_the_same_path_with_nprobe(tmp_path):
    from factcheck.tagging import ann
    vectors = unit_vectors(3000)
    entry = ann.build_ann(tmp_path, vectors, spec="IVF16,Flat")
    assert entry["spec"] == "IVF16,Flat" and entry["ef_construction"] is None
    loaded = ann.AnnIndex(faiss.read_index(str(tmp_path / ann.ANN_FILE)), entry)
    q = vectors[7].astype(np.float32)
    rows = loaded.search(q, 10)  # nprobe = search_depth >= the 16 lists: every list is searched
    assert 7 in rows.tolist() and len(rows) == ann.SEARCH_DEPTH


def test_a_code_storing_index_is_trained_searched_wide_and_re_scored_to_the_exact_top(tmp_path):
    from factcheck.scoring.topk import top_k
    from factcheck.tagging import ann
    from factcheck.tagging.vectors import VECTORS_DIR
    vectors = unit_vectors(3000)
    out = tmp_path / VECTORS_DIR
    out.mkdir()
    entry = ann.build_ann(out, vectors, spec="IVF64,SQ8", candidates=400, search_depth=64)
    assert entry["spec"] == "IVF64,SQ8" and entry["candidates"] == 400
    assert "candidates" not in ann.build_ann(tmp_path, vectors[:200], spec="Flat")  # as recorded before
    loaded = ann.open_ann(tmp_path, entry, len(vectors), vectors.shape[1], "rebuild")
    assert type(loaded.index).__name__ == "IndexIVFScalarQuantizer"  # codes, not the vectors
    wide = vectors.astype(np.float32)
    for q in unit_vectors(20, seed=1).astype(np.float32):
        rows = loaded.search(q, 100)  # nprobe = search_depth = the 64 lists: every list is scanned
        assert len(rows) == 400 and np.all(np.diff(rows) > 0)
        assert top_k(wide[rows] @ q, 100, rows)[0].tolist() == top_k(wide @ q, 100)[0].tolist()


def test_an_ivf_trains_on_enough_vectors_a_list(tmp_path, monkeypatch):
    from factcheck.tagging import ann
    monkeypatch.setattr(ann, "IVF_TRAIN", 500)
    seen = []
    real = faiss.index_factory

    def spy(*args):
        index = real(*args)
        train = index.train
        index.train = lambda x: (seen.append(len(x)), train(x))[1]
        return index
    monkeypatch.setattr(faiss, "index_factory", spy)
    ann.build_ann(tmp_path, unit_vectors(3000), spec="IVF32,SQ8")
    assert seen == [ann.TRAIN_PER_LIST * 32]  # not the 500 of the fixed sample


def test_asked_for_more_lists_than_it_has_a_pq_fast_scan_index_scans_them_all(tmp_path):
    from factcheck.tagging import ann
    vectors = unit_vectors(3000)
    entry = ann.build_ann(tmp_path, vectors, spec="IVF16,PQ16x4fsr", candidates=500, search_depth=256)
    deep = ann.AnnIndex(faiss.read_index(str(tmp_path / ann.ANN_FILE)), entry)
    every = ann.AnnIndex(faiss.read_index(str(tmp_path / ann.ANN_FILE)), {**entry, "search_depth": 16})
    assert deep.depth > 16
    for q in unit_vectors(5, seed=1).astype(np.float32):
        assert deep.search(q, 100).tolist() == every.search(q, 100).tolist()


# ------------------------------------------------------------ the vectors left as stored

@pytest.fixture(scope="module")
def sharded(ann_index, tmp_path_factory):
    """The made-up passages' index again, its vectors in shards of 300 rows (the dense scorer's
    blocks are made to straddle them), and what its nearest-neighbour index was built from."""
    import shutil
    from factcheck.tagging import ann
    from factcheck.tagging.vectors import PassageVectorJob
    root = tmp_path_factory.mktemp("sharded") / "index"
    shutil.copytree(ann_index[0], root, ignore=shutil.ignore_patterns("vectors"))
    given = []
    build = ann.build_ann

    def recording(out, vectors, *args, **kwargs):
        given.append(vectors)
        return build(out, vectors, *args, **kwargs)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ann, "MIN_PASSAGES", 1000)
        every_list_scanned(mp)
        mp.setattr(ann, "build_ann", recording)
        manifest = PassageVectorJob(shard_size=300, progress=False).run(root)
    assert len(manifest["shards"]) == 7 and manifest["ann"]
    return root, ann_index[1], given


def _mapped_base(array):
    """What an array's memory belongs to, through views and the buffer it was made from."""
    while isinstance(array, (np.ndarray, memoryview)):
        array = array.base if isinstance(array, np.ndarray) else array.obj
    return array


@needs_open
def test_the_index_is_built_from_the_mapped_shards_the_same_bytes(sharded, tmp_path, monkeypatch):
    import mmap
    from factcheck.tagging import ann
    from factcheck.tagging.vectors import MappedVectors, load_vectors
    root, _, given = sharded
    # No whole-corpus array at build time: the index reads the shards' maps a chunk at a time.
    assert len(given) == 1 and isinstance(given[0], MappedVectors)
    assert all(isinstance(_mapped_base(part), mmap.mmap) for part in given[0].shards)
    # ... and gets the bytes the whole float16 matrix gives.
    every_list_scanned(monkeypatch)
    ann.build_ann(tmp_path, load_vectors(root))
    assert (tmp_path / ann.ANN_FILE).read_bytes() == (root / "vectors" / ann.ANN_FILE).read_bytes()


@needs_open
def test_vectors_with_an_index_stay_float16_maps_and_score_the_same_bytes(sharded, monkeypatch):
    import mmap
    from factcheck.retrieval.dense import DenseRetriever, HybridRetriever
    from factcheck.retrieval.rerank.semantic import load_scorer
    from factcheck.scoring.topk import top_k
    from factcheck.tagging.index import TagIndex
    from factcheck.tagging.vectors import MappedVectors, load_vectors
    root, claims, _ = sharded
    monkeypatch.setattr(DenseRetriever, "block_rows", 128)  # blocks across the 300-row shards
    index = TagIndex.load(root)
    dense, exact = DenseRetriever(k=10).fit(index), DenseRetriever(k=10, exact=True).fit(index)
    vectors = dense.vectors_
    assert isinstance(vectors, MappedVectors) and not isinstance(vectors, np.ndarray) and vectors.shape == (2000, 256)
    # What scores every passage for every claim multiplies one float32 matrix (widening each
    # claim's blocks would cost more than the products); it never opens the index.
    hybrid, scorer = HybridRetriever(k=10).fit(index), load_scorer(index)
    assert isinstance(exact.vectors_, np.ndarray) and exact.vectors_.dtype == np.float32
    assert hybrid.dense_.vectors_ is scorer.vectors_ is exact.vectors_ and hybrid.dense_.ann_ is scorer.ann_ is None
    for part in vectors.shards:
        assert part.dtype == np.float16 and not part.flags.writeable and isinstance(_mapped_base(part), mmap.mmap)
    # Today's reference: the whole matrix widened to float32, multiplied in the same blocks.
    whole = load_vectors(root).astype(np.float32)
    assert np.array_equal(vectors[5:1234], whole[5:1234]) and np.array_equal(vectors[[1999, 0, 300, 299, 300]],
                                                                               whole[[1999, 0, 300, 299, 300]])
    for claim in claims[:10]:
        query = dense.embedder_.embed([claim], kind="query")[0]
        want = np.empty(len(whole), dtype=np.float32)
        for start in range(0, len(whole), 128):
            np.dot(whole[start:start + 128], query, out=want[start:start + 128])
        assert dense.scores(claim).tobytes() == exact.scores(claim).tobytes() == want.tobytes()
        assert hybrid.component_scores(claim)[1].tobytes() == want.tobytes()
        scored = dense.search_scores(claim, 10)  # the index's candidates, only their rows widened
        assert scored.scores.tobytes() == np.dot(whole[scored.rows], query).astype(np.float32).tobytes()
    # Ranked through the index: its candidates ranked by the exact path's scores.
    for claim, ranked in zip(claims[:10], dense.rank(claims[:10], 10)):
        candidates = dense.search_scores(claim, 10).rows
        rows, scores = top_k(exact.scores(claim)[candidates], 10, candidates)
        assert list(ranked.rows) == rows.tolist() and list(ranked.scores) == scores.tolist()


@needs_open
def test_fitting_to_vectors_with_an_index_copies_no_matrix(sharded):
    import gc
    import tracemalloc
    from factcheck.retrieval.dense import DenseRetriever
    from factcheck.tagging.index import TagIndex
    root, claims, _ = sharded
    index = TagIndex.load(root)
    first = DenseRetriever().fit(index)
    ann = first.ann_  # the model and the nearest-neighbour index stay loaded, the vectors go
    del first
    gc.collect()
    tracemalloc.start()
    try:
        dense = DenseRetriever().fit(index)
        dense.search_scores(claims[0], 10)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # The old fit held the float16 concatenation and its float32 widening: 6 bytes a value;
    # the search widens its 1,024 candidates' rows only (half of these 2,000 passages).
    assert peak < 2000 * 256 * 3, peak
    assert dense.ann_ is ann


@needs_open
def test_a_mapped_vector_shard_cut_short_is_refused_before_a_search(sharded, tmp_path):
    import os
    import shutil
    from factcheck.retrieval.dense import DenseRetriever
    from factcheck.tagging.index import TagIndex
    root = shutil.copytree(sharded[0], tmp_path / "index")
    index = TagIndex.load(root)
    dense = DenseRetriever().fit(index)  # holds the shards' maps
    index.check_unchanged()
    shard = root / "vectors" / "vectors-00003.npy"
    os.truncate(shard, shard.stat().st_size - 512)  # never read: the check comes first
    with pytest.raises(IntegrityError, match="was cut to"):
        index.check_unchanged()
    assert dense.vectors_.shards


@needs_open
@pytest.mark.parametrize("candidates", [None, 0], ids=["recorded", "none-recorded"])
def test_pools_at_several_sizes_through_the_index_are_each_sizes_own_pool(ann_index, tmp_path, candidates):
    """One search serves every size that asks the index for as many candidates; where the
    count grows with the size (no candidates recorded), each count gets its own search."""
    from helpers import ONNX_INSTALLED
    if not ONNX_INSTALLED:
        pytest.skip("needs the onnx extra")
    import shutil
    from tiny_onnx import make_model
    from factcheck.retrieval.pool import PoolRetriever
    from factcheck.tagging.index import TagIndex
    root, claims = ann_index
    shutil.copytree(root, tmp_path / "index")
    index = TagIndex.load(tmp_path / "index")
    model = make_model(tmp_path / "tiny", list(index.texts.take(np.arange(200))) + claims)
    sizes = (50, 100, 200)
    own = {n: PoolRetriever(model=str(model), pool_size=n).fit(index) for n in sizes}
    for r in own.values():
        if candidates is not None:
            r.first_.ann_ = copy_with_candidates(r.first_.ann_, candidates)
    ann_ = own[200].first_.ann_
    counts = {ann_.count(n) for n in sizes}
    assert len(counts) == (1 if candidates is None else 3)
    searches = []
    search = own[200].first_.search_scores
    own[200].first_.search_scores = lambda claim, depth: searches.append(depth) or search(claim, depth)
    for claim in claims[:10]:
        searches.clear()
        pools = own[200].pools(claim, sizes)
        assert len(searches) == len(counts)
        for n in sizes:
            for a, b in zip(pools[n], own[n].pool(claim)):
                assert np.array_equal(a, b), n


def copy_with_candidates(ann_, candidates: int):
    """The loaded index's object with another recorded ``candidates`` (the index shared, unchanged)."""
    import copy
    other = copy.copy(ann_)
    other.candidates = candidates
    return other
