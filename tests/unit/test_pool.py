"""The open mode's two stages (factcheck.retrieval.pool) and the second stage's vector cache
(factcheck.tagging.pool_vectors): the pool, determinism cold and warm, whatever the claims'
order or split across processes, cache reuse, and a damaged cache refused in one line
(its structure on every read, its checksums by verify)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from helpers import DEMO, DEMO_PASSAGES, assert_one_line_error, in_process, needs_onnx, needs_open
from tiny_onnx import make_model
from factcheck.errors import IntegrityError

pytestmark = [needs_open, needs_onnx]

CLAIMS = [c["claim_text"] for c in json.loads((DEMO / "dev-claims.json").read_text("utf-8")).values()]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The demo index with its static passage vectors (the first stage), and a tiny ONNX model."""
    from factcheck.formats.evidence import source_spec
    from factcheck.tagging.job import TagJob
    from factcheck.tagging.vectors import PassageVectorJob
    base = tmp_path_factory.mktemp("pool")
    TagJob(progress=False).run(source_spec(DEMO / "evidence.json"), base / "index")
    PassageVectorJob(progress=False).run(base / "index")
    model = make_model(base / "tiny", list(DEMO_PASSAGES.values()) + CLAIMS)
    return base / "index", model


@pytest.fixture()
def index(built, tmp_path):
    """A copy of the built index, with an empty cache."""
    shutil.copytree(built[0], tmp_path / "index")
    return tmp_path / "index"


def retriever(index, model, **params):
    from factcheck.retrieval.pool import PoolRetriever
    from factcheck.tagging.index import TagIndex
    params.setdefault("pool_size", 4)  # 40 demo passages: pools of different claims differ
    return PoolRetriever(model=str(model), **params).fit(TagIndex.load(index))


def results(r, claims) -> bytes:
    """Every claim's evidence and ranking, ids and scores, as bytes."""
    found = r.retrieve(claims, depth=100)
    return json.dumps([[s.ids, [h.to_json() for h in s.hits], s.ranking.ids, s.ranking.scores] for s in found]).encode()


def test_the_pool_is_both_first_stages_top_and_its_order_the_second_stages_cosine(index, built):
    from factcheck.retrieval.bm25 import BM25Retriever
    from factcheck.retrieval.dense import DenseRetriever
    from factcheck.scoring.topk import top_k
    from factcheck.text.embedding import load_embedder
    r = retriever(index, built[1], pool_size=5, k=3)
    claim = CLAIMS[0]
    bm25, static = BM25Retriever().fit(r.index_).scores(claim), DenseRetriever().fit(r.index_).scores(claim)
    lexical = [row for row in top_k(bm25, 5)[0].tolist() if bm25[row] > 0]
    rows, _, _ = r.pool(claim)
    assert rows.tolist() == sorted(set(lexical) | set(top_k(static, 5)[0].tolist()))
    model = load_embedder(str(built[1]))
    cos = model.embed(list(r.index_.texts.take(rows))).astype(np.float64) @ model.embed([claim])[0].astype(np.float64)
    ranking = r.rank(claim, k=100)
    assert ranking.rows == top_k(cos, len(rows), rows)[0].tolist()  # every pool member, and only them
    assert np.allclose(ranking.scores, np.sort(cos)[::-1], atol=1e-6)


def test_a_warm_run_embeds_nothing_and_gives_the_same_bytes_whatever_the_claims_order(index, built):
    cold = retriever(index, built[1])
    first = results(cold, CLAIMS)
    assert cold.cache_.embedded > 0
    warm = retriever(index, built[1])
    assert results(warm, CLAIMS) == first and warm.cache_.embedded == 0
    reverse = retriever(index, built[1])
    found = json.loads(results(reverse, CLAIMS[::-1]))[::-1]
    assert json.dumps(found).encode() == first


def test_a_cache_holding_part_of_the_pools_gives_the_same_bytes(index, built, tmp_path):
    first = results(retriever(index, built[1]), CLAIMS)
    shutil.copytree(built[0], tmp_path / "partial")
    part = retriever(tmp_path / "partial", built[1])
    results(part, CLAIMS[:3])  # an earlier run on a few claims
    again = retriever(tmp_path / "partial", built[1])
    assert results(again, CLAIMS) == first
    assert 0 < again.cache_.embedded < part.cache_.embedded + again.cache_.embedded


def _half(index, model, claims, params=None):
    return results(retriever(index, model, **(params or {})), claims)


@pytest.mark.slow
@pytest.mark.parametrize("params", [{}, {"combine": "rrf"}])
def test_two_processes_sharing_one_cold_cache_give_one_processs_bytes(index, built, tmp_path, params):
    """As ``--jobs 2`` splits the claims: two workers fill one cache at the same time."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    shutil.copytree(built[0], tmp_path / "alone")
    alone = json.loads(_half(tmp_path / "alone", built[1], CLAIMS, params))
    halves = (CLAIMS[::2], CLAIMS[1::2])
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        got = [json.loads(b) for b in pool.map(_half, [index] * 2, [built[1]] * 2, halves, [params] * 2)]
    merged = [None] * len(CLAIMS)
    merged[::2], merged[1::2] = got
    assert merged == alone
    warm = retriever(index, built[1], **params)
    assert json.loads(results(warm, CLAIMS)) == alone and warm.cache_.embedded == 0


def _tamper(index, pattern: str):
    from factcheck.tagging.pool_vectors import POOL_VECTORS_DIR
    path = next((index / POOL_VECTORS_DIR).glob(f"*/{pattern}"))
    data = bytearray(path.read_bytes())
    data[-3] ^= 1
    path.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize("pattern", ["vectors-*.npy", "segment-*.json"])
def test_a_tampered_cache_file_is_found_by_verify_not_hashed_on_every_read(index, built, pattern):
    results(retriever(index, built[1]), CLAIMS[:2])
    if pattern == "vectors-*.npy":
        path = _tamper(index, pattern)
    else:  # a well-formed segment whose bytes are not its name's
        path = next((index / "pool-vectors").glob(f"*/{pattern}"))
        segment = json.loads(path.read_text("utf-8"))
        path.write_text(json.dumps({**segment, "texts": ["0" * 64] + segment["texts"][1:]}), "utf-8")
    results(retriever(index, built[1]), CLAIMS)  # its structure holds: read as it is, as index arrays are
    assert_one_line_error(in_process("verify", index), str(path), "checksum mismatch")


def test_a_cut_short_vectors_file_is_refused_on_read_in_one_line(index, built):
    from factcheck.tagging.pool_vectors import POOL_VECTORS_DIR
    results(retriever(index, built[1]), CLAIMS[:2])
    path = next((index / POOL_VECTORS_DIR).glob("*/vectors-*.npy"))
    path.write_bytes(path.read_bytes()[:-4])
    with pytest.raises(IntegrityError) as err:
        results(retriever(index, built[1]), CLAIMS)
    assert err.value.one_line().startswith(f"{path}: truncated or damaged") and "\n" not in err.value.one_line()


def test_a_file_in_place_of_the_pool_vectors_folder_fails_verify(index, built):
    from factcheck.tagging.pool_vectors import POOL_VECTORS_DIR
    (index / POOL_VECTORS_DIR).write_text("not a folder", "utf-8")
    assert_one_line_error(in_process("verify", index), str(index / POOL_VECTORS_DIR), "is not a directory")


def test_verify_reports_the_pool_vectors_and_a_foreign_model_record_is_refused(index, built):
    from factcheck.tagging.pool_vectors import POOL_VECTORS_DIR
    results(retriever(index, built[1]), CLAIMS[:2])
    proc = in_process("verify", index)
    assert proc.returncode == 0 and f"{POOL_VECTORS_DIR}: OK (" in proc.stdout, proc.stdout
    record = next((index / POOL_VECTORS_DIR).glob("*/model.json"))
    record.write_text(json.dumps({**json.loads(record.read_text("utf-8")), "max_length": 7}), "utf-8")
    with pytest.raises(IntegrityError, match="does not record the model its folder is named after"):
        results(retriever(index, built[1]), CLAIMS)
    assert_one_line_error(in_process("verify", index), str(record))


def test_a_read_only_index_still_scores_with_nothing_saved(index, built, monkeypatch):
    first = results(retriever(index, built[1]), CLAIMS)
    shutil.rmtree(index / "pool-vectors")
    from factcheck.tagging import pool_vectors

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(pool_vectors.Path, "mkdir", refuse)
    r = retriever(index, built[1])
    assert results(r, CLAIMS) == first and not (index / "pool-vectors").exists()


def test_bad_parameters_name_themselves(index, built):
    from factcheck.errors import InputError
    with pytest.raises(InputError, match="pool_size"):
        retriever(index, built[1], pool_size=0)


# ---------------------------------------------------------------- through the commands

def test_retrieve_with_a_tampered_cache_is_one_line_exit_2_and_writes_nothing(index, built, tmp_path):
    def retrieve(out):
        return in_process("retrieve", "--index", index, "--claims", DEMO / "dev-claims.json", "--out", out,
                          "--mode", "open", "--method", "pool", "--pool-model", built[1], "--pool-size", "4")
    assert retrieve(tmp_path / "a.json").returncode == 0
    explained = json.loads((tmp_path / "a.explain.json").read_text("utf-8"))
    assert explained["method"] == "pool" and explained["params"]["model"] == str(built[1].resolve())
    path = next((index / "pool-vectors").glob("*/vectors-*.npy"))
    path.write_bytes(path.read_bytes()[:-4])
    assert_one_line_error(retrieve(tmp_path / "b.json"), str(path), "truncated or damaged")
    assert not (tmp_path / "b.json").exists()


def test_pool_settings_without_the_pool_retriever_are_refused_naming_the_flag(built, tmp_path):
    proc = in_process("run", "--data-dir", DEMO, "--out", tmp_path / "run", "--mode", "open", "--pool-size", "5")
    assert_one_line_error(proc, "--pool-size", "only with --method pool or --embedding-model")
    proc = in_process("run", "--data-dir", DEMO, "--out", tmp_path / "run", "--mode", "open", "--embed-corpus")
    assert_one_line_error(proc, "--embed-corpus", "only with a transformer (--embedding-model)")
    proc = in_process("run", "--data-dir", DEMO, "--out", tmp_path / "run", "--mode", "open", "--embedding-model",
                      built[1], "--embed-corpus", "--method", "pool")
    assert_one_line_error(proc, "--embed-corpus", "the pool's second stage is --embedding-model")
    proc = in_process("retrieve", "--index", built[0], "--claims", DEMO / "dev-claims.json", "--out",
                      tmp_path / "p.json", "--mode", "open", "--method", "hybrid", "--pool-model", "minilm")
    assert_one_line_error(proc, "--pool-model", "is not read by --method hybrid")
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_a_pool_run_gives_the_same_bytes_cold_with_one_job_and_warm_with_two(built, tmp_path):
    from helpers import run_cli
    names = ("dev-claims-predictions.json", "dev-claims-predictions.explain.json", "test-claims-predictions.json")
    # A transformer given to run orders the pools; the passage vectors are the static model's.
    model = tmp_path / "model"
    shutil.copytree(built[1], model)
    # Nothing but the method named: the pool's size and order are tuned, then used.
    common = ("--data-dir", DEMO, "--mode", "open", "--embedding-model", model, "--method", "pool", "--quiet")
    cold = run_cli("run", "--out", tmp_path / "cold", "--jobs", "1", *common)
    assert cold.returncode == 0, cold.stderr
    vectors = json.loads((tmp_path / "cold" / "index" / "vectors" / "manifest.json").read_text("utf-8"))
    assert vectors["model"]["name"].startswith("wordllama/")
    sweep = (tmp_path / "cold" / "tuning" / "pool-sweep.csv").read_bytes()
    cache = tmp_path / "cold" / "index" / "pool-vectors"
    before = sorted(p.name for p in cache.rglob("*"))
    warm = run_cli("run", "--out", tmp_path / "warm", "--jobs", "2", "--index", tmp_path / "cold" / "index", *common)
    assert warm.returncode == 0, warm.stderr
    assert sorted(p.name for p in cache.rglob("*")) == before  # nothing new embedded
    for name in names:
        assert (tmp_path / "warm" / name).read_bytes() == (tmp_path / "cold" / name).read_bytes(), name
    assert (tmp_path / "warm" / "tuning" / "pool-sweep.csv").read_bytes() == sweep
    proc = in_process("predict", "--claims", DEMO / "dev-claims.json", "--index", tmp_path / "cold" / "index",
                      "--model", tmp_path / "cold" / "model", "--out", tmp_path / "p.json")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "p.json").read_bytes() == (tmp_path / "cold" / names[0]).read_bytes()
    proc = in_process("check", "--run", tmp_path / "cold", "Sea levels are rising.")
    assert proc.returncode == 0 and "ordered by the contextual model's" in proc.stdout, proc.stdout
    assert "contextual cosine" in proc.stdout and "in the pool by BM25" in proc.stdout
    shutil.rmtree(model)
    make_model(model, list(DEMO_PASSAGES.values()) + CLAIMS, seed=1)  # other weights where the model was
    proc = in_process("predict", "--claims", DEMO / "dev-claims.json", "--index", tmp_path / "cold" / "index",
                      "--model", tmp_path / "cold" / "model", "--out", tmp_path / "q.json")
    assert_one_line_error(proc, "the pool retriever was tuned with another contextual model", "train again")
    assert not (tmp_path / "q.json").exists()


# ---------------------------------------------------------------- how the pool is ordered

COMBINED = [{"combine": "weighted", "bm25_weight": 0.25, "dense_weight": 0.5}, {"combine": "rrf"}]


@pytest.mark.parametrize("params", COMBINED)
def test_a_combined_order_is_combine_scores_over_the_pool_and_explains_the_cosine(index, built, params):
    from factcheck.retrieval.pool import combine_scores
    from factcheck.scoring.topk import top_k
    from factcheck.text.embedding import load_embedder
    r = retriever(index, built[1], pool_size=5, k=3, **params)
    model = load_embedder(str(built[1]))
    differs = 0
    for claim in CLAIMS:
        rows, bm25, static = r.pool(claim)
        cos = (model.embed(list(r.index_.texts.take(rows))).astype(np.float64)
               @ model.embed([claim])[0].astype(np.float64))
        expected = combine_scores(params["combine"], rows, cos, bm25, static, params.get("bm25_weight", 0.0),
                                  params.get("dense_weight", 0.0))
        ranking = r.rank(claim, k=100)
        assert ranking.rows == top_k(expected, len(rows), rows)[0].tolist()
        differs += ranking.rows != top_k(cos, len(rows), rows)[0].tolist()
        hit = r.retrieve(claim).hits[0]
        assert np.isclose(hit.explanation["dense"], cos[rows.tolist().index(hit.row)], atol=1e-6)
    assert differs  # the combination changes some claim's order
    assert r.params()["combine"] == params["combine"]


@pytest.mark.parametrize("params", COMBINED)
def test_a_combined_order_gives_the_same_bytes_warm_and_whatever_the_claims_order(index, built, params):
    cold = retriever(index, built[1], **params)
    first = results(cold, CLAIMS)
    warm = retriever(index, built[1], **params)
    assert results(warm, CLAIMS) == first and warm.cache_.embedded == 0
    found = json.loads(results(retriever(index, built[1], **params), CLAIMS[::-1]))[::-1]
    assert json.dumps(found).encode() == first


def test_the_default_order_records_the_parameters_it_recorded_before_the_combinations(index, built):
    r = retriever(index, built[1])
    assert list(r.params()) == ["model", "k", "pool_size", "k1", "b"]
    assert results(r, CLAIMS) == results(retriever(index, built[1], combine="cosine"), CLAIMS)


@pytest.mark.parametrize("params, name", [({"combine": "sum"}, "combine"), ({"bm25_weight": 0.5}, "bm25_weight"),
                                          ({"combine": "weighted", "dense_weight": -1.0}, "dense_weight")])
def test_bad_combination_parameters_name_themselves(index, built, params, name):
    from factcheck.errors import InputError
    with pytest.raises(InputError) as err:
        retriever(index, built[1], **params)
    assert err.value.param == name


# ---------------------------------------------------------------- the combination from the command line

FLAGS = ("--combine", "weighted", "--bm25-weight", "0.25", "--dense-weight", "0.5")  # COMBINED[0]


def test_the_combination_flags_reach_the_retriever_and_its_record(index, built, tmp_path):
    out = tmp_path / "a.json"
    proc = in_process("retrieve", "--index", index, "--claims", DEMO / "dev-claims.json", "--out", out,
                      "--mode", "open", "--method", "pool", "--pool-model", built[1], "--pool-size", "4", *FLAGS)
    assert proc.returncode == 0, proc.stderr
    recorded = json.loads(out.with_suffix(".explain.json").read_text("utf-8"))["params"]
    assert {k: recorded[k] for k in COMBINED[0]} == COMBINED[0]
    predicted = json.loads(out.read_text("utf-8"))
    assert [p["evidences"] for p in predicted.values()] == [s.ids for s in retriever(index, built[1], **COMBINED[0])
                                                           .retrieve(CLAIMS)]
    proc = in_process("search", "--index", index, "--mode", "open", "--method", "pool", "--pool-model", built[1],
                      "--combine", "rrf", "Sea levels are rising.")
    assert proc.returncode == 0, proc.stderr


# (flags, the flag the error names, what it says): argparse's refusals, then the class's own.
BAD_COMBINATIONS = [(("--combine", "sum"), "--combine", "invalid choice: 'sum'"),
                    (("--combine", "weighte"), "--combine", "did you mean 'weighted'?"),
                    (("--bm25-weight", "-1"), "--bm25-weight", "must be finite and at least 0, got -1.0"),
                    (("--dense-weight", "nan"), "--dense-weight", "must be finite"),
                    (("--bm25-weight", "0.5"), "--bm25-weight", "is read only with --combine weighted, not cosine"),
                    (("--combine", "rrf", "--dense-weight", "0.5"), "--dense-weight",
                     "is read only with --combine weighted, not rrf")]


@pytest.mark.parametrize("command", ["retrieve", "train", "run"])
@pytest.mark.parametrize("flags, flag, says", BAD_COMBINATIONS)
def test_a_bad_combination_is_one_line_exit_2_naming_the_flag_before_any_work(index, built, tmp_path, command,
                                                                                flags, flag, says):
    out = tmp_path / "out"
    args = {"retrieve": ("--index", index, "--claims", DEMO / "dev-claims.json", "--out", out / "a.json",
                         "--method", "pool", "--pool-model", built[1]),
            "train": ("--index", index, "--claims", DEMO / "train-claims.json", "--model", out, "--method", "pool",
                      "--pool-model", built[1]),
            "run": ("--data-dir", DEMO, "--out", out, "--embedding-model", built[1])}[command]
    assert_one_line_error(in_process(command, *args, "--mode", "open", *flags), f"{flag}: ", says)
    assert not out.exists()


@pytest.mark.parametrize("args, says", [
    (("retrieve", "--method", "bm25"), "--combine: is not read by --method bm25"),
    (("train", "--method", "bm25"), "--combine: only with --method pool"),
    (("run", "--mode", "open"), "--combine: only with --method pool or --embedding-model"),
    (("run", "--method", "bm25"), "--combine: is for the open mode: add --mode open")])
def test_the_combination_without_the_pool_retriever_is_refused_naming_the_flag(index, tmp_path, args, says):
    where = {"retrieve": ("--index", index, "--claims", DEMO / "dev-claims.json", "--out", tmp_path / "a.json"),
             "train": ("--index", index, "--claims", DEMO / "train-claims.json", "--model", tmp_path / "m"),
             "run": ("--data-dir", DEMO, "--out", tmp_path / "run")}[args[0]]
    assert_one_line_error(in_process(*args, *where, "--combine", "rrf"), says)


def test_a_run_records_the_combination_and_predict_and_check_order_by_it(built, tmp_path, monkeypatch):
    """The run's flags reach the pool retriever; metrics.json and the model directory record
    them, and what reads the run (predict, check, and the app through the same loader) uses them."""
    from helpers import make_run
    from factcheck.classification.cv import FEATURE_SETS
    from factcheck.retrieval.pool import PoolRetriever
    from factcheck.system.checker import FactChecker
    from factcheck.tagging.index import TagIndex
    from factcheck.training import classifier_cv
    # One classifier candidate: the classifier's choice is not what this test is about.
    one = {"C": (0.5,), "class_weight": (None,), "stats_weight": (0.3,), "augment": (True,), "groups": FEATURE_SETS[:1]}
    select = classifier_cv.select_classifier
    monkeypatch.setattr(classifier_cv, "select_classifier", lambda *a, **kw: select(*a, **{**kw, "grid": one}))
    run = tmp_path / "run"
    make_run(run, "--mode", "open", "--embedding-model", built[1], "--method", "pool", "--pool-size", "5", *FLAGS)
    params = json.loads((run / "metrics.json").read_text("utf-8"))["run"]["retriever"]["params"]
    assert {k: params[k] for k in COMBINED[0]} == COMBINED[0] and params["pool_size"] == 5
    loaded = FactChecker.load(run / "index", run / "model").retriever
    assert loaded.params() == params
    again = PoolRetriever(**params).fit(TagIndex.load(run / "index"))
    claim = "Sea levels are rising."
    proc = in_process("check", "--run", run, claim)
    assert proc.returncode == 0, proc.stderr
    import re
    assert re.findall(r"^ *\d+\. (\S+)$", proc.stdout, re.M) == again.retrieve(claim).ids
    proc = in_process("predict", "--claims", DEMO / "dev-claims.json", "--index", run / "index", "--model",
                      run / "model", "--out", tmp_path / "p.json")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "p.json").read_bytes() == (run / "dev-claims-predictions.json").read_bytes()


# ---------------------------------------------------------------- the tuning: pool size and combination

def _claims():
    import factcheck
    return factcheck.read_claims(DEMO / "train-claims.json"), factcheck.read_claims(DEMO / "dev-claims.json")


def test_a_claims_pools_at_several_sizes_are_each_sizes_own_pool(index, built):
    sizes = (2, 4, 7, 40, 60)
    derived = retriever(index, built[1], pool_size=60)
    own = {n: retriever(index, built[1], pool_size=n) for n in sizes}
    for claim in CLAIMS:
        pools = derived.pools(claim, sizes[::-1])
        assert sorted(pools) == list(sizes)
        for n in sizes:
            for a, b in zip(pools[n], own[n].pool(claim)):
                assert a.dtype == b.dtype and np.array_equal(a, b), n
    assert len(own[2].pool(CLAIMS[0])[0]) < len(own[7].pool(CLAIMS[0])[0])  # the sizes do differ


def test_the_pool_sweep_gives_the_same_rows_cold_and_warm_whatever_claims_are_embedded_together(index, built,
                                                                                               monkeypatch):
    from factcheck.tagging.index import TagIndex
    from factcheck.training import tuning
    fit, holdout = _claims()
    grid = {**tuning.POOL_GRID, "pool_size": (3, 6)}

    def sweep():
        return tuning.sweep_pool(TagIndex.load(index), fit, holdout, 0.9, 0.4, {"model": str(built[1])}, grid=grid,
                                 progress=False)
    monkeypatch.setattr(tuning, "POOL_SWEEP_BATCH", 3)
    cold = sweep()
    assert len(list((index / "pool-vectors").rglob("segment-*.json"))) > 1  # embedded a batch at a time
    monkeypatch.undo()
    warm = sweep()
    assert warm.rows == cold.rows and warm.chosen == cold.chosen
    fit, holdout = fit[::-1], holdout[::-1]  # each part's F a mean over the same claims: the same choice
    other = sweep()
    assert other.chosen == cold.chosen
    assert [r["f_fit"] for r in other.rows] == pytest.approx([r["f_fit"] for r in cold.rows], abs=1e-12)


def test_the_pool_sweep_scores_each_claims_first_stage_once_and_embeds_its_pools_once(index, built, monkeypatch):
    from factcheck.retrieval.bm25 import BM25Retriever
    from factcheck.retrieval.pool import PoolRetriever
    from factcheck.tagging.index import TagIndex
    from factcheck.tagging.pool_vectors import PoolVectorCache
    from factcheck.training import tuning
    fit, holdout = _claims()
    calls = {"fit": 0, "bm25": 0, "vectors": 0, "embedded": set()}
    for cls, name, key in ((PoolRetriever, "_fit", "fit"), (BM25Retriever, "scores", "bm25")):
        def counted(self, *a, _f=getattr(cls, name), _k=key, **kw):
            calls[_k] += 1
            return _f(self, *a, **kw)
        monkeypatch.setattr(cls, name, counted)
    vectors = PoolVectorCache.vectors

    def counted_vectors(self, texts, embed=None):
        calls["vectors"] += 1
        before = self.embedded
        out = vectors(self, texts, embed)
        assert self.embedded - before == len(set(texts) - calls["embedded"])  # nothing embedded twice
        calls["embedded"] |= set(texts)
        return out
    monkeypatch.setattr(PoolVectorCache, "vectors", counted_vectors)
    monkeypatch.setattr(tuning, "POOL_SWEEP_BATCH", 10)
    s = tuning.sweep_pool(TagIndex.load(index), fit, holdout, 0.9, 0.4, {"model": str(built[1])},
                          grid={**tuning.POOL_GRID, "pool_size": (3, 6, 12)}, progress=False)
    assert len(s.rows) == 3 * 17 * len(tuning.POOL_GRID["k"])
    assert calls["fit"] == 1 and calls["bm25"] == len(fit) + len(holdout)
    assert calls["vectors"] == 2 + 1  # 16 fit claims in two batches, 8 hold-out claims in one


def test_the_fit_rule_takes_the_first_row_of_the_best_fit_f_whatever_the_holdout():
    from factcheck.training.tuning import Sweep
    rows = [{"pool_size": 50, "k": 1, "f_fit": 0.2, "f_holdout": 0.9},
            {"pool_size": 50, "k": 2, "f_fit": 0.4, "f_holdout": 0.1},
            {"pool_size": 100, "k": 1, "f_fit": 0.4, "f_holdout": 0.5}]
    s = Sweep("pool", ("pool_size", "k"), rows, rule="fit")
    s.choose()
    assert s.chosen == {"pool_size": 50, "k": 2}  # a tie on fit F: the first row, the hold-out unread
    s = Sweep("pool", ("pool_size", "k"), rows)
    s.choose()
    assert s.chosen == {"pool_size": 50, "k": 1}  # the other sweeps' rule: the hold-out chooses


def test_the_pool_sweep_is_the_pre_registered_grid_and_each_row_a_retrievers_f(index, built):
    from factcheck.retrieval.base import evidence_of, run_retrieval
    from factcheck.retrieval.pool import PoolRetriever
    from factcheck.tagging.index import TagIndex
    from factcheck.training.tuning import POOL_GRID, mean_f, pool_orders, sweep_pool
    fit, holdout = _claims()
    idx = TagIndex.load(index)
    s = sweep_pool(idx, fit, holdout, 0.9, 0.4, {"model": str(built[1])}, progress=False)
    ks = POOL_GRID["k"]
    assert len(pool_orders()) == 17 and POOL_GRID["pool_size"] == (50, 100, 200) and len(s.rows) == 51 * len(ks)
    assert [(r["pool_size"], r["combine"], r["bm25_weight"], r["dense_weight"], r["k"]) for r in s.rows] == [
        (n, o["combine"], o["bm25_weight"], o["dense_weight"], k) for n in (50, 100, 200) for o in pool_orders()
        for k in ks]
    # 40 passages: every size's pool is all the first stages find, so the sizes tie and the smallest is chosen
    f = {n: [r["f_fit"] for r in s.rows if r["pool_size"] == n] for n in (50, 100, 200)}
    assert f[50] == f[100] == f[200]
    best = max(r["f_fit"] for r in s.rows)
    assert s.chosen == {k: next(r for r in s.rows if r["f_fit"] == best)[k] for k in s.param_names}
    assert s.chosen["pool_size"] == 50
    # Smaller sizes, where they differ: each row's F is what a retriever of its setting finds
    grid = {**POOL_GRID, "pool_size": (3, 6)}
    s = sweep_pool(idx, fit, holdout, 0.9, 0.4, {"model": str(built[1])}, grid=grid, progress=False)
    assert len(s.rows) == 2 * 17 * len(ks)
    for row in s.rows[::37]:
        r = PoolRetriever(**{k: row[k] for k in s.param_names}).fit(idx)
        for part, claims in (("fit", fit), ("holdout", holdout)):
            found = evidence_of(run_retrieval(r, claims, depth=0))
            assert mean_f([found[c.id] for c in claims], claims) == row[f"f_{part}"], (row, part)


@pytest.mark.parametrize("given, orders", [
    ({"pool_size": 5}, 17),
    ({"combine": "weighted"}, 15),
    ({"combine": "weighted", "bm25_weight": 0.25}, 4),  # (0.25, 0) counts: one weight is not 0
    ({"combine": "weighted", "bm25_weight": 0.0}, 3),
    ({"pool_size": 100, "combine": "rrf"}, 1),
    ({"pool_size": 7, "combine": "weighted", "bm25_weight": 0.3, "dense_weight": 0.0}, 1),  # off the grid
    ({"bm25_weight": 0.0}, 5),  # cosine, weighted (0, w) for w in 0.1, 0.25, 0.5, rrf
])
def test_a_given_pool_setting_stays_fixed_and_the_others_are_swept(index, built, given, orders):
    from factcheck.tagging.index import TagIndex
    from factcheck.training.tuning import POOL_GRID, sweep_pool
    fit, holdout = _claims()
    grid = {**POOL_GRID, "pool_size": (3, 6)}
    s = sweep_pool(TagIndex.load(index), fit, holdout, 0.9, 0.4, {"model": str(built[1]), **given}, grid=grid,
                   progress=False)
    sizes = 1 if "pool_size" in given else 2
    assert len(s.rows) == sizes * orders * len(POOL_GRID["k"])
    assert all(r[k] == v for r in s.rows for k, v in given.items())
    assert {r["pool_size"] for r in s.rows} == ({given["pool_size"]} if "pool_size" in given else {3, 6})
    assert all(s.chosen[k] == v for k, v in given.items())


def _one_classifier(monkeypatch):
    """One classifier candidate: the classifier's choice is not what these tests are about."""
    from factcheck.classification.cv import FEATURE_SETS
    from factcheck.training import classifier_cv
    one = {"C": (0.5,), "class_weight": (None,), "stats_weight": (0.3,), "augment": (True,), "groups": FEATURE_SETS[:1]}
    select = classifier_cv.select_classifier
    monkeypatch.setattr(classifier_cv, "select_classifier", lambda *a, **kw: select(*a, **{**kw, "grid": one}))


def _sweep_csv(run):
    import csv
    with open(run / "tuning" / "pool-sweep.csv", encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def test_a_tuned_run_records_the_chosen_pool_setting_and_what_reads_the_run_uses_it(built, tmp_path, monkeypatch):
    from helpers import make_run
    from factcheck.retrieval.pool import DEFAULT_COMBINATION
    from factcheck.system.checker import FactChecker
    from factcheck.training.tuning import POOL_GRID
    _one_classifier(monkeypatch)
    run = tmp_path / "run"
    make_run(run, "--mode", "open", "--embedding-model", built[1], "--method", "pool")
    rows = _sweep_csv(run)
    assert len(rows) == 51 * len(POOL_GRID["k"]) and {r["pool_size"] for r in rows} == {"50", "100", "200"}
    chosen = [r for r in rows if r["chosen"] == "True"]
    assert len(chosen) == 1
    params = json.loads((run / "metrics.json").read_text("utf-8"))["run"]["retriever"]["params"]
    # 40 passages: the sizes tie, and a tie goes to the smaller pool (not the class's default, 100)
    assert params["pool_size"] == int(chosen[0]["pool_size"]) == 50 and params["k"] == int(chosen[0]["k"])
    combination = {"combine": chosen[0]["combine"], "bm25_weight": float(chosen[0]["bm25_weight"]),
                   "dense_weight": float(chosen[0]["dense_weight"])}
    assert {k: params.get(k, v) for k, v in DEFAULT_COMBINATION.items()} == combination
    loaded = FactChecker.load(run / "index", run / "model").retriever
    assert loaded.params() == params and loaded.pool_size == 50
    report = (run / "report.md").read_text("utf-8")
    assert "| pool_size | 50 |" in report and f"| combine | {combination['combine']} |" in report
    proc = in_process("predict", "--claims", DEMO / "dev-claims.json", "--index", run / "index", "--model",
                      run / "model", "--out", tmp_path / "p.json")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "p.json").read_bytes() == (run / "dev-claims-predictions.json").read_bytes()


def test_a_pool_size_typed_on_the_command_line_is_fixed_even_at_the_default(built, tmp_path, monkeypatch):
    from helpers import make_run
    from factcheck.training.tuning import POOL_GRID
    _one_classifier(monkeypatch)
    run = tmp_path / "run"
    make_run(run, "--mode", "open", "--embedding-model", built[1], "--method", "pool", "--pool-size", "100",
             "--combine", "weighted")
    rows = _sweep_csv(run)
    assert len(rows) == 15 * len(POOL_GRID["k"])
    assert {(r["pool_size"], r["combine"]) for r in rows} == {("100", "weighted")}
    params = json.loads((run / "metrics.json").read_text("utf-8"))["run"]["retriever"]["params"]
    assert params["pool_size"] == 100 and params["combine"] == "weighted"


@pytest.mark.parametrize("given", [{}, {"pool_size": 3, "combine": "cosine"}, {"combine": "rrf"},
                                   {"pool_size": 6, "combine": "weighted", "bm25_weight": 0.5, "dense_weight": 0.1}])
def test_the_pool_sweeps_evidence_is_the_chosen_retrievers(index, built, given):
    """The hold-out score and the classifier's CV read the pool's evidence of the tuning claims
    from its sweep instead of retrieving them again: it must be what the fitted retriever returns."""
    from factcheck.retrieval.base import evidence_of, run_retrieval
    from factcheck.retrieval.pool import PoolRetriever
    from factcheck.tagging.index import TagIndex
    from factcheck.training.tuning import POOL_GRID, sweep_pool
    fit, holdout = _claims()
    idx = TagIndex.load(index)
    s = sweep_pool(idx, fit, holdout, 0.9, 0.4, {"model": str(built[1]), **given},
                   grid={**POOL_GRID, "pool_size": (3, 6)}, progress=False)
    assert all(s.chosen[k] == v for k, v in given.items())
    retrieved = evidence_of(run_retrieval(PoolRetriever(**s.chosen).fit(idx), [*fit, *holdout], depth=0))
    assert s.evidence == retrieved


@pytest.mark.slow
def test_the_pool_sweep_embeds_in_worker_processes_the_vectors_and_rows_of_one_process(built, tmp_path, monkeypatch):
    """With jobs > 1 a batch's new passages are embedded in worker processes (a task of a few
    here): the same cached vectors, rows, choice and evidence as one process embedding them."""
    from factcheck.classification import cv
    from factcheck.tagging.index import TagIndex
    from factcheck.tagging.pool_vectors import PoolVectorCache
    from factcheck.text.embedding import load_embedder
    from factcheck.training import tuning
    fit, holdout = _claims()
    grid = {**tuning.POOL_GRID, "pool_size": (3, 6)}
    tasks = []
    run_folds = cv.run_folds
    monkeypatch.setattr(cv, "run_folds", lambda fn, args, *a, **kw: tasks.extend(args) or run_folds(fn, args, *a, **kw))
    monkeypatch.setattr(tuning, "PARALLEL_PASSAGES", 2)
    monkeypatch.setattr(tuning, "PASSAGES_A_TASK", 5)
    sweeps, caches = {}, {}
    for jobs in (1, 2):
        shutil.copytree(built[0], tmp_path / f"index-{jobs}")
        index = TagIndex.load(tmp_path / f"index-{jobs}")
        sweeps[jobs] = tuning.sweep_pool(index, fit, holdout, 0.9, 0.4, {"model": str(built[1])}, grid=grid,
                                         progress=False, jobs=jobs)
        caches[jobs] = PoolVectorCache(index.root, load_embedder(str(built[1])))
        if jobs == 1:
            assert not tasks
    assert len(tasks) > 2 and all(len(texts) <= 5 for _, texts in tasks)
    assert sweeps[2].rows == sweeps[1].rows and sweeps[2].chosen == sweeps[1].chosen
    assert sweeps[2].evidence == sweeps[1].evidence
    texts = list(DEMO_PASSAGES.values())
    cached = caches[2].vectors(texts)
    assert caches[2].embedded < len(texts)  # most came from the workers
    assert np.array_equal(cached, caches[1].vectors(texts))
