"""The learned reranker on the demo data: training, persistence, the retriever contract,
determinism, self-retrieval, and the guard that no feature can see a passage's style."""

from __future__ import annotations

import json

import numpy as np
import scipy.sparse as sp
import pytest

from helpers import DEMO, assert_one_line_error, run_cli, sklearn_tag_vectorizer
from factcheck.formats.claims import read_claims
from factcheck.formats.splits import train_holdout_split
from factcheck.training.rerank import train_reranker, tune_cutoff
from factcheck.retrieval.rerank import features as F
from factcheck.retrieval.rerank.candidates import CandidateConfig, CandidateGenerator
from factcheck.retrieval.rerank.cutoff import Cutoff
from factcheck.retrieval.rerank.memory import ClaimMemory
from factcheck.retrieval.rerank.model import ModelConfig
from factcheck.retrieval.rerank.retriever import RerankRetriever
from factcheck.retrieval.rerank.terms import TermIndex
from factcheck.text.analyzer import split_letter_digit_runs, split_stems as stems
from factcheck.tagging.index import TagIndex

FAST_GRID = (ModelConfig(learning_rate=0.1, max_iter=40, max_leaf_nodes=7, min_samples_leaf=5, negative_rate=1.0),)


def _train(index):
    fit, holdout = train_holdout_split(read_claims(DEMO / "train-claims.json"))
    return train_reranker(index, fit, holdout, configs=(CandidateConfig(memory_k=5),), grid=FAST_GRID)


@pytest.fixture(scope="module")
def index(demo_index):
    return TagIndex.load(demo_index)


@pytest.fixture(scope="module")
def trained(index):
    return _train(index)


@pytest.fixture(scope="module")
def dev_texts():
    return [c.text for c in read_claims(DEMO / "dev-claims.json")]


def _snapshot(retriever, texts):
    sel = retriever.retrieve(texts)
    ranks = retriever.rank(texts, 20)
    return ([[(h.id, round(h.score, 12)) for h in s.hits] for s in sel],
            [(r.rows, [round(x, 12) for x in r.scores]) for r in ranks])


def test_save_load_round_trip(trained, index, dev_texts, tmp_path):
    path = tmp_path / "rerank.joblib"
    trained.save(path)
    loaded = RerankRetriever.load(path).fit(index)
    assert _snapshot(loaded, dev_texts) == _snapshot(trained, dev_texts)
    assert loaded.params() == trained.params()
    json.dumps(loaded.params())  # goes into the explanations sidecar


def test_a_reranker_saved_with_its_memory_as_lists_still_loads(trained, index, dev_texts, tmp_path, monkeypatch):
    """Format /2 held the memory's strings as lists and analysed its texts at load."""
    import zipfile
    from factcheck.retrieval.rerank import retriever as module
    monkeypatch.setattr(module, "FORMAT", "factcheck-rerank/2")
    monkeypatch.setattr(module, "_packed_memory", lambda mem: {"claim_ids": mem.claim_ids, "texts": mem.texts,
                                                               "evidences": mem.evidences})
    trained.save(tmp_path / "old.skops")
    monkeypatch.undo()
    assert b"stem_offsets" not in zipfile.ZipFile(tmp_path / "old.skops").read("schema.json")
    loaded = RerankRetriever.load(tmp_path / "old.skops").fit(index)
    assert _snapshot(loaded, dev_texts) == _snapshot(trained, dev_texts)
    trained.save(tmp_path / "new.skops")
    assert RerankRetriever.load(tmp_path / "new.skops").memory.stems == loaded.memory.stems


def test_contract(trained, index, dev_texts):
    cut = trained.cutoff
    selections = trained.retrieve(dev_texts)
    rankings = trained.rank(dev_texts, 25)
    known = set(index.ids)
    for text, sel, ranking in zip(dev_texts, selections, rankings):
        assert sel.path == "reranked"
        assert cut.min_k <= len(sel.hits) <= cut.max_k
        assert len(set(sel.ids)) == len(sel.ids) and set(sel.ids) <= known
        for h in sel.hits:
            assert index.ids[h.row] == h.id
            assert set(h.explanation["features"]) == set(F.FEATURES)
            assert "shared_terms" in h.explanation and "rank" in h.explanation
        assert [h.score for h in sel.hits] == sorted((h.score for h in sel.hits), reverse=True)
        # the pool, best first (no passage it did not score)
        pool = trained.generator_.generate(text).rows
        assert len(ranking.rows) == min(25, len(pool)) and set(ranking.rows) <= set(pool.tolist())
        assert len(set(ranking.rows)) == len(ranking.rows) and ranking.scores == sorted(ranking.scores, reverse=True)
        assert ranking.rows[:len(sel.hits)] == [h.row for h in sel.hits]
        json.dumps(sel.to_json())


def test_claim_without_known_terms_still_gets_evidence(trained, index):
    sel = trained.retrieve(["!!! ??? 123", "It is what it is."])
    for s in sel:
        assert s.path == "fallback" and len(s.hits) == max(trained.cutoff.min_k, 1)
        assert all(h.id in index.row_of and "reason" in h.explanation for h in s.hits)


def test_deterministic(trained, index, dev_texts):
    again = _train(index)
    assert _snapshot(again, dev_texts) == _snapshot(trained, dev_texts)


@pytest.mark.slow
def test_the_models_fitted_in_worker_processes_are_the_models_fitted_here(index, dev_texts):
    """jobs > 1 fits the grid's models in workers: the same trials, choice and rankings as one
    process (each fit is deterministic on its one thread)."""
    fit, holdout = train_holdout_split(read_claims(DEMO / "train-claims.json"))
    grid = (FAST_GRID[0], ModelConfig(learning_rate=0.2, max_iter=30, max_leaf_nodes=5, min_samples_leaf=3))
    configs = (CandidateConfig(memory_k=5), CandidateConfig(memory_k=10))
    here, workers = (train_reranker(index, fit, holdout, configs=configs, grid=grid, jobs=jobs, progress=False)
                     for jobs in (1, 2))
    assert len(here.report["grid"]) == 4 and here.report["grid"] == workers.report["grid"]
    from factcheck.training.rerank import fit_and_tune, training_data
    each = [{"candidates": d.config.to_json(), **entry} for d in training_data(index, fit, holdout, list(configs))
            for entry in fit_and_tune(d.fit_set, d.holdout_set, list(F.FEATURES), list(grid))[1]]
    assert here.report["grid"] == each  # each candidate setting's models, in their order
    assert here.report["chosen"] == workers.report["chosen"]
    assert _snapshot(workers, dev_texts) == _snapshot(here, dev_texts)


def test_self_retrieval(trained, index):
    rows = [r for r in range(len(index)) if len(stems(index.text(r))) >= 4]
    texts = [index.text(r) for r in rows]
    firsts = [r.rows[0] for r in trained.rank(texts, 5)]
    assert firsts == rows


@pytest.mark.slow
def test_untrained_rerank_is_a_one_line_error(demo_index, tmp_path):
    proc = run_cli("retrieve", "--index", demo_index, "--claims", DEMO / "dev-claims.json",
                   "--method", "rerank", "--out", tmp_path / "x.json")
    assert_one_line_error(proc, "--rerank-model")
    assert not (tmp_path / "x.json").exists()


@pytest.mark.slow
def test_cli_train_then_retrieve(demo_index, tmp_path):
    model = tmp_path / "m.joblib"
    proc = run_cli("train-rerank", "--index", demo_index, "--claims", DEMO / "train-claims.json", "--out", model)
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "dev.json"
    proc = run_cli("retrieve", "--index", demo_index, "--claims", DEMO / "dev-claims.json",
                   "--method", "rerank", "--rerank-model", model, "--out", out)
    assert proc.returncode == 0, proc.stderr
    preds = json.loads(out.read_text())
    assert len(preds) == 8 and all(p["evidences"] for p in preds.values())
    bad = tmp_path / "bad.joblib"
    bad.write_bytes(b"not a model")
    proc = run_cli("retrieve", "--index", demo_index, "--claims", DEMO / "dev-claims.json",
                   "--method", "rerank", "--rerank-model", bad, "--out", tmp_path / "y.json")
    assert_one_line_error(proc, "bad.joblib")


# ----------------------------------------------------------------------- no style features

TWINS = {
    "evidence-1": "Glacier: a slowly moving mass of ice, 1,000 years old; formed by snow [Geol.]",
    "evidence-2": "glacier a slowly moving mass of ice 1000 years old formed by snow geol",
    "evidence-3": "GLACIER -- A SLOWLY MOVING MASS OF ICE (1000 YEARS OLD), FORMED BY SNOW; GEOL.",
    "evidence-4": "Glaciers in the Alps have lost ice mass over the past century.",
    "evidence-5": "Snow fell on the Alps for 1000 years, forming a glacier.",
    "evidence-6": "The sea level rose by twenty centimetres in the twentieth century.",
    "evidence-7": "Lantern: a case for carrying a light.",
}


@pytest.fixture(scope="module")
def twin_index(tmp_path_factory):
    from factcheck.formats.evidence import source_spec
    from factcheck.tagging.job import TagJob
    root = tmp_path_factory.mktemp("twins")
    (root / "evidence.json").write_text(json.dumps(TWINS))
    TagJob(progress=False).run(source_spec(root / "evidence.json"), root / "index")
    return TagIndex.load(root / "index")


@pytest.mark.parametrize("claim", [
    "A glacier is a mass of ice formed by snow over 1000 years in the Alps.",
    "Glaciers in the Alps are slowly losing ice mass.",
    "IPCC: sea level rose 20 cm, glaciers melted",
])
def test_features_ignore_format(twin_index, claim):
    terms = TermIndex.for_index(twin_index, cache=False)
    ctx = F.FeatureContext(twin_index, terms)
    memory = ClaimMemory(["c1"], ["Alpine glaciers are losing ice."], [["evidence-4"]]).bind(
        twin_index.row_of, len(twin_index))
    cands = CandidateGenerator(terms, memory, CandidateConfig(depth=10)).generate(claim)
    X = F.compute(ctx, cands, 0.9, 0.4)
    at = {int(r): i for i, r in enumerate(cands.rows.tolist())}
    twins = [twin_index.row_of[e] for e in ("evidence-1", "evidence-2", "evidence-3")]
    assert all(r in at for r in twins)
    for r in twins[1:]:
        np.testing.assert_array_equal(X[at[r]], X[at[twins[0]]])


def test_the_memory_binds_every_gold_id_in_one_lookup(twin_index, monkeypatch):
    """One vectorised lookup for all the claims' ids (one an id was most of fitting the
    reranker on a large index); ids the index lacks are dropped, rows sorted per claim."""
    from factcheck.tagging.index import IdRows
    calls = []
    rows = IdRows.rows
    monkeypatch.setattr(IdRows, "rows", lambda self, ids: calls.append(1) or rows(self, ids))
    memory = ClaimMemory(["c1", "c2", "c3"], ["Glaciers are losing ice.", "Sea level rose.", "Nothing."],
                         [["evidence-3", "evidence-1", "no-such-id"], ["evidence-2"], []])
    memory.bind(twin_index.row_of, len(twin_index))
    assert len(calls) == 1
    row_of = {e: rows(twin_index.row_of, [e])[0] for e in ("evidence-1", "evidence-2", "evidence-3")}
    expected = [sorted([row_of["evidence-1"], row_of["evidence-3"]]), [row_of["evidence-2"]], []]
    assert [memory.gold[i].indices.tolist() for i in range(3)] == expected
    assert memory.gold.shape == (3, len(twin_index))


def test_a_model_trained_on_the_earlier_features_is_refused(trained, tmp_path, monkeypatch):
    from factcheck.errors import InputError
    from factcheck.retrieval.rerank import retriever as module
    monkeypatch.setattr(module, "FORMAT", "factcheck-rerank/1")  # as an earlier version saved it
    trained.save(tmp_path / "old.skops")
    monkeypatch.undo()
    with pytest.raises(InputError, match="trained by an earlier version.*factcheck train-rerank"):
        RerankRetriever.load(tmp_path / "old.skops")


def test_feature_names_are_claim_relative():
    banned = ("length", "len_", "n_words", "caps", "capital_ratio", "semicolon", "bracket", "colon",
              "headword", "is_wiki", "source")
    assert not [f for f in F.FEATURES if any(b in f for b in banned)]
    assert len(F.FEATURES) == len(set(F.FEATURES))


# ----------------------------------------------------------------------- pieces

def test_claim_vectors_are_sklearns_tfidf(index):
    """The memory's claim space and the tag rule's tag space are the core's TF-IDF:
    scikit-learn's vectors, bit for bit."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    train = read_claims(DEMO / "train-claims.json")
    memory = ClaimMemory.from_claims(train)
    ref = TfidfVectorizer(analyzer=stems, sublinear_tf=True).fit([c.text for c in train])
    assert memory.space.terms == ref.get_feature_names_out().tolist()
    assert memory.space.idf_.tobytes() == ref.idf_.tobytes()
    tag_ref = sklearn_tag_vectorizer(index)
    for text in ("Carbon dioxide warms the planet, carbon!", "nothing known here", ""):
        want = ref.transform([text]).toarray()
        assert memory.space.transform([split_letter_digit_runs(text)]).toarray().tobytes() == want.tobytes()
        tags = sorted(stems(text))
        want = tag_ref.transform([" ".join(tags)]).toarray()
        assert index.tag_vectorizer.transform([text]).toarray().tobytes() == want.tobytes()


def test_cutoff_count_and_tuning():
    c = Cutoff(threshold=0.2, relative=0.5, min_k=1, max_k=3)
    assert c.count(np.array([0.9, 0.5, 0.44, 0.3])) == 2
    assert c.count(np.array([0.1, 0.05])) == 1
    assert c.count(np.array([0.9, 0.9, 0.9, 0.9])) == 3
    assert c.count(np.zeros(0)) == 0
    # claim 0: one clear gold; claim 1: two golds with close scores
    probs = [np.array([0.9, 0.1, 0.05]), np.array([0.6, 0.55, 0.1])]
    correct = [np.array([1, 0, 0]), np.array([1, 1, 0])]
    best, f = tune_cutoff(probs, correct, [1, 2])
    assert f == pytest.approx(1.0)
    assert best.count(probs[0]) == 1 and best.count(probs[1]) == 2


def _numbered_corpus(n: int, seed: int = 7) -> list[str]:
    """``n`` short passages over a small vocabulary, a third with standalone numbers."""
    rng = np.random.default_rng(seed)
    syllables = ["ka", "lo", "mi", "tur", "sen", "vax", "pol", "dre", "qui", "bun", "fer", "gho", "zan", "wil", "hep"]
    words = np.array([a + b + c for a in syllables for b in syllables for c in syllables[:2]], dtype=object)
    texts = []
    for i, row in enumerate(rng.integers(0, len(words), size=(n, 6))):
        text = " ".join(words[row].tolist())
        texts.append(f"{text} in {1900 + i % 40} and {i % 7}" if i % 3 == 0 else text)
    return texts


def test_the_cached_term_statistics_are_counted_through_disk_with_the_bytes_counted_in_memory(tmp_path, monkeypatch):
    # The cache's build spills each batch's counts and pairs (BM25's build does the same), which
    # bounds its peak at FEVER's size; what it saves is what counting in memory gives.
    import factcheck
    from factcheck.scoring import counting
    from factcheck.retrieval.bm25 import SPILL
    index = factcheck.build_index(_numbered_corpus(3_000), tmp_path / "index", progress=False, shard_size=700)
    spilled = []
    real = counting.merge_counts

    def watched(shards, spill=None, *args, **kwargs):
        spilled.append(spill)
        return real(shards, spill, *args, **kwargs)
    monkeypatch.setattr(counting, "merge_counts", watched)
    TermIndex.for_index(index)
    assert len(spilled) == 1 and spilled[0] is not None and spilled[0].name == SPILL and not spilled[0].exists()
    monkeypatch.setattr(counting, "merge_counts", real)
    folder = next((tmp_path / "index").rglob("forward_data.npy")).parent
    in_memory = tmp_path / "in-memory"
    in_memory.mkdir()
    TermIndex.for_index(index, cache=False)._save(in_memory)
    for name in sorted(p.name for p in in_memory.iterdir()):
        assert np.array_equal(np.load(in_memory / name), np.load(folder / name)), name


def test_the_rerankers_loaded_statistics_hold_nothing_per_passage(tmp_path):
    """Opening the reranker's term statistics and scoring a pool keeps memory that does not grow
    with the passages: tag counts, length norms and the passages' numbers are read from the mapped
    arrays for the rows asked (every passage's was kept: 8 + 8 + 4 bytes a passage and more)."""
    import tracemalloc
    import factcheck
    n = 60_000
    index = factcheck.build_index(_numbered_corpus(n), tmp_path / "index", progress=False)
    TermIndex.for_index(index)  # builds the cache once, as the first fit on an index does
    index = TagIndex.load(tmp_path / "index")
    rows = np.arange(0, n, n // 50, dtype=np.int64)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        terms = TermIndex.for_index(index)
        ctx = F.FeatureContext(index, terms)
        ids, counts = terms.query_weights(stems("kakaka kaloka lomika in 1901"))
        bm25 = terms.bm25_rows(rows, ids, counts, 1.2, 0.75)
        n_tags, numbers = ctx.n_tags(rows), terms.number_matches(rows, ["1901", "3", "1901"])
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 4 * n, kept  # the vocabularies only (the old state: over 20 bytes a passage)
    assert np.array_equal(n_tags, index.tag_counts()[rows].astype(np.float64))
    assert np.array_equal(bm25, TermIndex.for_index(index, cache=False).bm25_rows(rows, ids, counts, 1.2, 0.75))
    # Each stored number counts once for each time the claim names it: the sum over the slice
    # of a count matrix of the stored ids, as scipy computes it.
    matrix = sp.csr_matrix((np.ones(len(terms.num_indices), dtype=np.float32), terms.num_indices, terms.num_indptr),
                           shape=(n, len(terms.number_vocab)))
    cols = [terms.number_vocab[x] for x in ("1901", "3", "1901")]
    assert numbers.any() and np.array_equal(numbers, np.asarray(matrix[rows][:, cols].sum(axis=1)).ravel())


def test_the_rerankers_terms_are_read_from_their_mapped_array(tmp_path):
    """The cached terms are stored as one fixed-width array (every term as wide as the longest):
    opening them decodes each from the mapping, without first copying the whole array."""
    import tracemalloc
    import factcheck
    syllables = ["ka", "lo", "mi", "tur", "sen", "vax", "pol", "dre", "qui", "bun", "fer", "gho", "zan", "wil", "hep"]
    words = [a + b + c for a in syllables for b in syllables for c in syllables]
    texts = [" ".join(words[i:i + 10]) for i in range(0, len(words), 10)] + ["lo" * 500 + "x and more"]
    factcheck.build_index(texts, tmp_path / "index", progress=False)
    index = TagIndex.load(tmp_path / "index")
    TermIndex.for_index(index)  # the cache, built once
    tracemalloc.start()
    try:
        terms = TermIndex.for_index(index)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    width = max(map(len, terms.vocab)) * 4 * len(terms.vocab)  # bytes of the stored array
    assert width > 4 << 20 and peak < width / 2, (peak, width)
    built = TermIndex.for_index(index, cache=False)
    assert terms.term_of == built.term_of
    ids = np.array([0, len(built.vocab) - 1, 5, 5])
    assert TermIndex.for_index(index).names(ids) == built.names(ids) == [built.term_of[i] for i in ids.tolist()]


@pytest.mark.parametrize("numba", ["0", "1"])
def test_the_batched_first_stage_gives_the_pools_of_the_full_product(trained, dev_texts, monkeypatch, numba):
    # The claims ranked in one call (the compiled loop or not), the pool's other rows scored
    # alone: the same BM25 top and pool scores, bit for bit, as each claim's full product;
    # a deeper first stage's prefix is the shallower one (training ranks once per k1, b).
    from factcheck.scoring import matrix as scoring_matrix
    from factcheck.scoring.topk import top_k
    if numba == "1" and not scoring_matrix.compiled_available():
        pytest.skip("needs numba")
    monkeypatch.setenv(scoring_matrix.VARIABLE, numba)
    gen = trained.generator_
    cfg = gen.config
    weights = gen.terms.bm25(cfg.k1, cfg.b)
    texts = dev_texts + ["zzzz qqqq", ""]  # no known term: empty tops
    deeper = gen.first_stage(texts, depth=cfg.depth + 50)
    for text, first, deep in zip(texts, gen.first_stage(texts), deeper):
        q = first[0]
        (touched, touched_scores), = weights.products(gen.terms.query(q.term_ids, q.counts), sort=True)
        want_rows, want_scores = top_k(touched_scores, cfg.depth, touched)
        assert first[1].tolist() == want_rows.tolist() and first[2].tobytes() == want_scores.tobytes()
        assert deep[1][:cfg.depth].tolist() == want_rows.tolist() and deep[2][:cfg.depth].tobytes() == want_scores.tobytes()
        new = gen.generate(text, first=first)
        at = np.minimum(np.searchsorted(touched, new.rows), max(len(touched) - 1, 0))
        want_pool = np.where(touched[at] == new.rows, touched_scores[at], 0).astype(np.float64) if len(touched) \
            else np.zeros(len(new.rows))
        assert new.bm25.tobytes() == want_pool.tobytes()
        assert new.bm25_list.tolist() == want_rows.tolist()


def test_term_frequencies_are_scipys_slice(trained):
    terms = trained.terms_
    rng = np.random.default_rng(0)
    n, v = terms.forward.shape
    for _ in range(50):
        rows = rng.choice(n, size=int(rng.integers(1, 40)), replace=bool(rng.integers(0, 2)))
        ids = rng.choice(v, size=int(rng.integers(1, 12)), replace=bool(rng.integers(0, 2)))
        # most columns of a random pick are absent: add the rows' own terms, unsorted
        ids = np.concatenate([ids, terms.forward[rows[:3]].indices[::-1]])[:20].astype(np.int64)
        want = terms.forward[rows][:, ids].toarray().astype(np.float64)
        got = terms.tf_matrix(rows, ids)
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


def test_pools_scored_together_are_scored_as_alone(trained, dev_texts, monkeypatch):
    # The model reads several claims' pools in one call: each claim's selection and ranking,
    # explanations included, are the ones it gets alone.
    from factcheck.retrieval.rerank import retriever as rerank_retriever
    monkeypatch.setattr(rerank_retriever, "POOL_CLAIMS", 3)
    texts = dev_texts + ["zzzz qqqq"]
    together = trained.retrieve(texts)
    alone = [trained.retrieve([t])[0] for t in texts]
    assert [s.to_json() for s in together] == [s.to_json() for s in alone]
    assert [(r.rows, r.scores) for r in trained.rank(texts, 20)] == \
        [(r.rows, r.scores) for t in texts for r in trained.rank([t], 20)]


def test_memory_similarities_of_many_claims_are_each_claims_own(trained, dev_texts):
    memory = trained.memory_
    texts = dev_texts + ["zzzz qqqq", ""]
    for text, sims in zip(texts, memory.similarities_of(texts)):
        alone = memory.similarities_of([text])[0]
        assert sims.dtype == alone.dtype and sims.tobytes() == alone.tobytes()
