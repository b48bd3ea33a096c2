import json

import numpy as np
import pytest

from helpers import DEMO, shared_file, sklearn_tag_vectorizer
from factcheck.formats.claims import read_claims
from factcheck.formats.evidence import source_spec
from factcheck.retrieval.base import without_cache
from factcheck.retrieval.bm25 import BM25Retriever
from factcheck.retrieval.chunking import ChunkedRetriever, chunk_passages
from factcheck.retrieval.tag_rule import TagRuleRetriever
from factcheck.tagging.index import TagIndex
from factcheck.tagging.job import TagJob
from factcheck.text.analyzer import analyze


# ---------------------------------------------------------------- slow reference tag rule

def passage_tag_weights(index):
    """Each passage's tag vector, transformed one passage at a time."""
    tv = sklearn_tag_vectorizer(index)
    out = []
    for row in range(len(index)):
        p = tv.transform([" ".join(index.tags(row))])
        out.append(dict(zip(p.indices.tolist(), p.data.tolist())))
    return out


def reference_tag_rule(index, weights, claim, t_sim, t_overlap, top_n):
    """Per-passage, obviously correct: the 2024 rule spelled out with Python loops."""
    claim_tags = sorted(analyze(claim))
    distinct = set(claim_tags)
    q = sklearn_tag_vectorizer(index).transform([" ".join(claim_tags)])
    q_weights = dict(zip(q.indices.tolist(), q.data.tolist()))
    scored = []
    for row in range(len(index)):
        tags = index.tags(row)
        p_weights = weights[row]
        cosine = 0.0
        for term in sorted(set(q_weights) & set(p_weights)):
            cosine += p_weights[term] * q_weights[term]
        shared = len(distinct & set(tags))
        overlap = shared / min(len(distinct), len(tags)) if shared else 0.0
        scored.append((row, cosine, overlap, cosine + overlap, shared))
    kept = [s for s in scored if s[1] > t_sim and s[2] > t_overlap]
    if kept:
        kept.sort(key=lambda s: (-s[3], s[0]))
        best = max(s[4] for s in kept)
        return [s[0] for s in kept if s[4] == best][:top_n], "filtered"
    scored = sorted((s for s in scored if s[4] > 0), key=lambda s: (-s[3], s[0]))  # none scoring 0
    return [s[0] for s in scored[:top_n]], "fallback"


@pytest.fixture(scope="module")
def sample_3k_index(tmp_path_factory, proxy_corpus):
    items = list(proxy_corpus.items())
    dev = read_claims(shared_file("dev-claims.json"))
    gold = {e for c in dev for e in c.evidences}
    chosen = [(k, v) for k, v in items if k in gold] + items[::150][:2500]
    path = tmp_path_factory.mktemp("s3k") / "sample.json"
    path.write_text(json.dumps(dict(chosen)), encoding="utf-8")
    out = path.parent / "index"
    TagJob(progress=False, jobs=1).run(source_spec(path), out)
    index = TagIndex.load(out)
    return index, dev, passage_tag_weights(index)


@pytest.mark.slow
@pytest.mark.parametrize("params", [(0.55, 0.5, 6), (0.2, 0.3, 4), (0.0, 0.0, 10)])
def test_vectorised_tag_rule_equals_reference(sample_3k_index, params):
    index, dev, weights = sample_3k_index
    retriever = TagRuleRetriever(*params).fit(index)
    claims = [c.text for c in dev[:40]] + ["", "the of and", "Glaciers glaciers glaciers melt"]
    paths = set()
    for claim, sel in zip(claims, retriever.retrieve(claims)):
        rows, path = reference_tag_rule(index, weights, claim, *params)
        assert [h.row for h in sel.hits] == rows, claim
        assert sel.path == path
        paths.add(path)
    if params == (0.55, 0.5, 6):
        assert paths == {"filtered", "fallback"}  # both branches exercised


def test_tag_rule_explanations_and_no_division_by_zero(demo_index):
    index = TagIndex.load(demo_index)
    r = TagRuleRetriever().fit(index)
    empty, stop_only, real = r.retrieve(["", "the and of", "Volcanoes emit carbon dioxide"])
    for sel in (empty, stop_only):  # nothing shares a tag: no evidence (not 6 passages scoring 0)
        assert sel.path == "fallback" and sel.hits == []
    few = TagRuleRetriever(t_sim=1.0, t_overlap=1.0, k=40).fit(index).retrieve("Volcanoes emit carbon dioxide")
    assert few.path == "fallback" and 0 < len(few.hits) < 40
    assert all(h.score > 0 and h.explanation["shared_tags"] for h in few.hits)
    for h in real.hits:
        e = h.explanation
        assert set(e) >= {"cosine", "overlap", "combined", "shared_tags", "passage_tags"}
        assert e["combined"] == pytest.approx(e["cosine"] + e["overlap"])
        assert set(e["shared_tags"]) <= set(analyze("Volcanoes emit carbon dioxide"))
    assert real.details["thresholds"] == {"t_sim": 0.55, "t_overlap": 0.5, "k": 6}


# ---------------------------------------------------------------- self-retrieval smoke tests

def _distinct_passages(index, min_stems=6):
    seen, rows = set(), []
    for row, text in enumerate(index.texts):
        key = " ".join(sorted(set(analyze(text))))
        if len(set(analyze(text))) >= min_stems and key not in seen:
            seen.add(key)
            rows.append(row)
    return rows


@pytest.mark.parametrize("make", [lambda: without_cache(BM25Retriever()), lambda: TagRuleRetriever()],
                         ids=["bm25", "tags"])
def test_self_retrieval_ranks_own_passage_first(demo_index, make):
    index = TagIndex.load(demo_index)
    r = make().fit(index)
    rows = _distinct_passages(index)
    assert len(rows) > 20
    ranked = r.rank([index.text(row) for row in rows], k=3)
    assert [rk.rows[0] for rk in ranked] == rows


def test_self_retrieval_on_real_sample(sample_3k_index):
    """On real text a passage can lose to a shorter one holding its rarest words (BM25
    length normalisation) or to one with the same tags; the smoke test allows 2%."""
    index, _, _ = sample_3k_index
    rows = _distinct_passages(index, min_stems=8)[:300]
    for make in (lambda: without_cache(BM25Retriever()), lambda: TagRuleRetriever()):
        r = make().fit(index)
        ranked = r.rank([index.text(row) for row in rows], k=1)
        firsts = [rk.rows[0] for rk in ranked]
        assert np.mean([a == b for a, b in zip(firsts, rows)]) >= 0.98


# ---------------------------------------------------------------- ties, BM25, chunking

def test_bm25_index_is_cached_next_to_tags_and_reused(tmp_path, demo_index):
    index = TagIndex.load(demo_index)
    a = BM25Retriever(k1=0.9, b=0.4).fit(index)
    for entry in ("counts", "lucene-k1_0.9-b_0.4"):
        assert (demo_index / "bm25" / entry / "factcheck-key.json").is_file()
    b = BM25Retriever(k1=0.9, b=0.4).fit(index)
    claim = "carbon dioxide emissions from burning coal"
    assert np.array_equal(a.scores(claim), b.scores(claim))
    sel = b.retrieve([claim])[0]
    assert len(sel.hits) == 5 and sel.hits[0].id == "evidence-3"
    assert sel.hits[0].explanation["rank"] == 1 and "coal" in sel.hits[0].explanation["shared_terms"]


def test_chunker_windows_cover_each_passage():
    text = " ".join(f"w{i}" for i in range(23))
    ch = chunk_passages([text, "short one"], window=10, overlap=3)
    assert ch.spans.tolist() == [[0, 10], [7, 17], [14, 23], [0, 2]]
    assert ch.owner.tolist() == [0, 0, 0, 1]
    assert ch.texts[1].split()[0] == "w7"


@pytest.mark.parametrize("inner", [lambda: without_cache(BM25Retriever()), lambda: TagRuleRetriever(0.1, 0.1, 6)],
                         ids=["bm25", "tags"])
def test_chunked_retriever_collapses_to_best_chunk(tmp_path, inner):
    filler = " ".join(["lantern orchard harbour thermometer"] * 40)
    passages = {"long": filler + " glaciers retreat quickly across alpine valleys " + filler,
                "other": "Glaciers are large masses of ice.", "third": "Orchards grow fruit trees."}
    src = tmp_path / "e.json"
    src.write_text(json.dumps(passages))
    TagJob(progress=False).run(source_spec(src), tmp_path / "idx")
    index = TagIndex.load(tmp_path / "idx")
    r = ChunkedRetriever(inner(), window=12, overlap=4).fit(index)
    ranking = r.rank(["glaciers retreat quickly across alpine valleys"], k=3)[0]
    assert ranking.rows[0] == 0 and len(set(ranking.rows)) == len(ranking.rows)
    sel = r.retrieve(["glaciers retreat quickly across alpine valleys"])[0]
    assert sel.hits[0].id == "long" and len({h.id for h in sel.hits}) == len(sel.hits)
    start, end = sel.hits[0].explanation["chunk_words"]
    assert "retreat" in " ".join(index.text(0).split()[start:end])


def test_a_chunked_fit_on_a_cached_index_cuts_no_passage(tmp_path, monkeypatch):
    """The passages are cut once per index: a later fit maps each chunk's passage and words
    from the cache (cutting every text at each fit held every chunk in Python objects)."""
    from factcheck.retrieval import chunking
    TagJob(progress=False).run(source_spec(DEMO / "evidence.json"), tmp_path / "idx")
    claims = [c.text for c in read_claims(DEMO / "dev-claims.json")]
    first = ChunkedRetriever(BM25Retriever(k=3), window=8, overlap=2).fit(TagIndex.load(tmp_path / "idx"))

    def cut(*args):
        raise AssertionError("a fit on a cached index cut the passages again")
    monkeypatch.setattr(chunking, "chunk_passages", cut)
    again = ChunkedRetriever(BM25Retriever(k=3), window=8, overlap=2).fit(TagIndex.load(tmp_path / "idx"))
    want = chunk_passages(again.index_.texts, 8, 2)
    assert np.array_equal(again.chunks_.owner, want.owner) and np.array_equal(again.chunks_.spans, want.spans)
    assert list(again.chunks_.texts) == want.texts
    assert [[(h.id, h.explanation["chunk"], h.explanation["chunk_words"]) for h in s.hits] for s in again.retrieve(claims)] \
        == [[(h.id, h.explanation["chunk"], h.explanation["chunk_words"]) for h in s.hits] for s in first.retrieve(claims)]


@pytest.mark.slow
def test_retrieve_cli_writes_predictions_and_explanations(tmp_path, demo_index):
    from helpers import run_cli
    out = tmp_path / "pred.json"
    proc = run_cli("retrieve", "--index", demo_index, "--claims", DEMO / "dev-claims.json",
                   "--method", "tags", "--out", out)
    assert proc.returncode == 0, proc.stderr
    pred = json.loads(out.read_text())
    expl = json.loads((tmp_path / "pred.explain.json").read_text())
    dev = json.loads((DEMO / "dev-claims.json").read_text())
    assert list(pred) == list(dev)
    for cid, entry in pred.items():
        assert entry["claim_text"] == dev[cid]["claim_text"] and 1 <= len(entry["evidences"]) <= 6
        assert expl["claims"][cid]["path"] in ("filtered", "fallback")
        assert [h["id"] for h in expl["claims"][cid]["hits"]] == entry["evidences"]


def _rule_by_definition(scored, t_sim, t_overlap, k):
    """The 2024 rule as written: rank every passing candidate, keep those sharing the most tags."""
    from factcheck.scoring.topk import rank_order, top_k
    _, cand, shared, cosine, overlap, combined = scored
    passed = np.flatnonzero((cosine > t_sim) & (overlap > t_overlap))
    if len(passed):
        order = passed[rank_order(cand[passed], combined[passed])]
        return cand[order[shared[order] == shared[order].max()][:k]].tolist(), "filtered", len(passed)
    return top_k(combined, k, cand)[0].tolist(), "fallback", 0


def test_threshold_sweep_and_choose_follow_the_rule_as_written_at_every_point(sample_3k_index):
    index, dev, _ = sample_3k_index
    r = TagRuleRetriever().fit(index)
    claims = [c.text for c in dev[:30]] + [""]
    grid = ((0.0, 0.3, 0.55), (0.1, 0.5), (1, 3, 6))
    swept = r.sweep(claims, *grid)
    for (a, b, n), (rows, paths) in swept.items():
        for claim, got_rows, got_path in zip(claims, rows, paths):
            want_rows, want_path, want_passed = _rule_by_definition(r._score(claim), a, b, n)
            assert got_rows.tolist() == want_rows and got_path == want_path
            chosen = r.choose(r._score(claim), a, b, n)
            assert (chosen[0].tolist(), chosen[1], chosen[2]) == (want_rows, want_path, want_passed)


def test_the_grid_of_settings_follows_the_rule_with_ties_and_empty_groups():
    # Few distinct values: ties in the combined score, in shared counts and at the thresholds.
    from hypothesis import given, settings
    from hypothesis import strategies as st

    grid = ((0.0, 0.25, 0.5, 0.75), (0.0, 0.25, 0.5))

    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.tuples(st.integers(1, 4), st.sampled_from([0.0, 0.25, 0.3, 0.5, 0.8]),
                              st.sampled_from([0.1, 0.25, 0.5, 1.0])), max_size=40),
           st.integers(1, 6), st.randoms(use_true_random=False))
    def check(cands, k, rnd):
        rows = np.array(sorted(rnd.sample(range(1000), len(cands))), dtype=np.int64)
        shared = np.array([c[0] for c in cands], dtype=np.int64)
        cosine = np.array([c[1] for c in cands])
        overlap = np.array([c[2] for c in cands])
        scored = ([], rows, shared, cosine, overlap, cosine + overlap)
        got = TagRuleRetriever().choose_grid(scored, *grid, k)
        assert list(got) == [(a, b) for a in grid[0] for b in grid[1]]
        for (a, b), (got_rows, path) in got.items():
            assert (got_rows.tolist(), path) == _rule_by_definition(scored, a, b, k)[:2]

    check()


def test_the_tag_rule_maps_its_matrices_from_the_index_cache_with_the_same_answers(tmp_path):
    # Built once per index (a join of every shard's tags), then mapped by each process that
    # fits the rule: serve's start-up holds no tag matrix of its own.
    import factcheck
    TagJob(progress=False, shard_size=7).run(source_spec(DEMO / "evidence.json"), tmp_path / "index")
    claims = ["Sea levels are rising.", "Arctic sea ice is shrinking fast.", "Glaciers melt.", "zzz"]

    def answers(index):
        rule = TagRuleRetriever(t_sim=0.1, t_overlap=0.1).fit(index)
        return rule, [(s.path, s.ids, [h.score for h in s.hits], [h.explanation for h in s.hits])
                      for s in map(rule.retrieve, claims)]

    built, first = answers(TagIndex.load(tmp_path / "index"))
    assert (tmp_path / "index" / "tag-rule" / "matrices" / "tags-indices.npy").is_file()
    mapped, again = answers(TagIndex.load(tmp_path / "index"))
    in_memory, held = answers(factcheck.build_index(DEMO / "evidence.json"))
    assert first == again == held and any(a[1] for a in first)
    assert mapped._tags.indices.flags.owndata is False and mapped._space.data.flags.owndata is False
    assert in_memory._tags.data.dtype == mapped._tags.data.dtype == np.int16


def _joined_rule_matrices(index, folder) -> None:
    """The tag rule's cache as it was built (the reference): every shard's tag rows joined,
    each matrix transposed whole in memory (``from_units``), then saved."""
    import scipy.sparse as sp
    from factcheck.scoring.matrix import TermMatrix, save_arrays
    indptr, terms = index.tag_rows()
    tags = sp.csr_matrix((np.ones(len(terms), dtype=np.int16), terms, indptr),
                         shape=(len(index), len(index.vocabulary)))
    TermMatrix.from_units(tags).save(folder, "tags-")
    TermMatrix.from_units(index.tag_space_rows()).save(folder, "space-")
    save_arrays(folder, {"n_tags": np.diff(indptr)})


GAPS = ["Alpine glaciers retreat; glaciers retreat faster in summer.", "the of and",
        "Glaciers retreat and sea ice shrinks; glaciers retreat.",  # tagged as the first, in its shard
        "and the", "of it", "it is the",  # a shard of passages without a tag
        "Coral reefs bleach when oceans warm; reefs recover slowly.",
        "Carbon dioxide traps heat; carbon dioxide emissions rise.", "the",
        "Forests store carbon, and burning forests releases it.",
        "Glaciers feed rivers; rivers flood when glaciers melt fast."]


@pytest.mark.parametrize("corpus", ["demo", "gaps"])
def test_the_tag_rule_cache_built_shard_by_shard_is_the_bytes_of_the_joined_build(tmp_path, corpus):
    # The cache is filled one shard at a time through its files' maps: every file is what the
    # joined build wrote, and the build in memory (an index without a directory) gives the same arrays.
    from factcheck.retrieval.tag_rule import _rule_matrices
    from factcheck.tagging.derived import RECORD
    source, params = DEMO / "evidence.json", {"shard_size": 7}
    if corpus == "gaps":
        source, params = tmp_path / "gaps.json", {"shard_size": 3, "top_k": 2, "tag_features": 4}
        source.write_text(json.dumps({f"p-{i:02d}": t for i, t in enumerate(GAPS)}))
    TagJob(progress=False, **params).run(source_spec(source), tmp_path / "index")
    index = TagIndex.load(tmp_path / "index")
    assert len(index.manifest.shards) >= 4
    if corpus == "gaps":  # passages and a whole shard without tags, terms no passage is tagged with
        n_tags = index.tag_counts()
        assert n_tags[1] == 0 and not n_tags[3:6].any() and n_tags.any()
        assert len(set(index.tag_rows()[1].tolist())) < len(index.vocabulary)
        assert 0 < index.tag_space_rows().nnz < n_tags.sum()  # some tags are not tag-space terms
    ref = tmp_path / "ref"
    ref.mkdir()
    _joined_rule_matrices(index, ref)
    TagRuleRetriever().fit(index)
    built = tmp_path / "index" / "tag-rule" / "matrices"
    names = sorted(p.name for p in ref.iterdir())
    assert sorted(p.name for p in built.iterdir() if p.name != RECORD) == names
    for name in names:
        assert (built / name).read_bytes() == (ref / name).read_bytes(), name
    tags, space, n_tags = _rule_matrices(index)
    arrays = {f"{prefix}{name}": getattr(m, name) for prefix, m in (("tags-", tags), ("space-", space))
              for name in ("indptr", "indices", "data")}
    for name, got in {**arrays, "n_tags": n_tags}.items():
        want = np.load(ref / f"{name}.npy")
        assert type(got) is np.ndarray and got.dtype == want.dtype and got.tobytes() == want.tobytes(), name


@pytest.mark.parametrize("many", [False, True])
def test_rankings_read_each_rows_id_whether_rows_are_few_or_many(demo_index, many):
    # many: more ranked rows than passages/8, where the distinct rows are marked, not sorted
    from hypothesis import given, settings
    from hypothesis import strategies as st
    from factcheck.retrieval.base import _distinct_rows

    bm25 = BM25Retriever().fit(demo_index)
    claims = ["Sea levels are rising.", "Arctic ice is melting.", "CO2 warms the planet."] * (20 if many else 1)
    for ranking in bm25.rank(claims, k=100 if many else 2):
        assert ranking.ids == [bm25.index_.ids[r] for r in ranking.rows]

    n = 50

    @settings(max_examples=100, deadline=None)
    @given(st.lists(st.integers(0, n - 1), max_size=3 * n if many else n // 8))
    def same_as_unique(rows):
        rows = np.array(rows, dtype=np.int64)
        got, want = _distinct_rows(rows, n), np.unique(rows, return_inverse=True)
        assert got[0].tolist() == want[0].tolist() and got[1].tolist() == want[1].tolist()

    same_as_unique()


def test_dev_scores_take_the_rankings_at_hand(demo_index):
    """The run's retriever ranked dev while predicting it: dev_scores reads those explanations
    (the same figures) instead of ranking dev again."""
    from factcheck.retrieval.base import run_retrieval
    from factcheck.training.selection import TunedRetrievers, dev_scores
    dev = read_claims(DEMO / "dev-claims.json")
    bm25 = BM25Retriever(k=3).fit(demo_index)
    at_hand = run_retrieval(bm25, dev)
    fresh = dev_scores(TunedRetrievers(retrievers={"bm25": bm25}), dev)

    class Unused(BM25Retriever):
        def retrieve(self, claims, depth=0):
            raise AssertionError("dev ranked again")

    kept = dev_scores(TunedRetrievers(retrievers={"bm25": Unused(k=3).fit(demo_index)}), dev, {"bm25": at_hand})
    assert kept == fresh


def test_dev_scores_beyond_the_cap_score_every_retriever_on_one_sample(demo_index):
    """Beyond ``max_claims`` dev claims every retriever is scored on the same deterministic
    sample (the tuning sample's rule), the one at hand cut to it: the figures of that sample alone."""
    from factcheck.evaluation.evaluate import evaluate
    from factcheck.formats.splits import claims_sample
    from factcheck.retrieval.base import run_retrieval
    from factcheck.training.selection import TunedRetrievers, dev_scores
    dev = read_claims(DEMO / "dev-claims.json")
    assert len(dev) > 3
    bm25, tags = BM25Retriever(k=3).fit(demo_index), TagRuleRetriever(t_sim=0.1, t_overlap=0.1, k=3).fit(demo_index)
    got = dev_scores(TunedRetrievers(retrievers={"bm25": bm25, "tags": tags}), dev, {"bm25": run_retrieval(bm25, dev)},
                     max_claims=3)
    sample = claims_sample(dev, 3)
    assert len(sample) == 3 and sample == claims_sample(list(reversed(dev)), 3)[::-1]
    for name, r in (("bm25", bm25), ("tags", tags)):
        explained = run_retrieval(r, sample)
        want = evaluate({cid: {"evidences": e.ids} for cid, e in explained.items()}, sample, explained).to_json()
        assert got[name]["claims"] == 3 and got[name]["evidence_f"] == want["intervals"]["evidence_f"]
        assert got[name]["retrieval"] == want["retrieval"]
    assert dev_scores(TunedRetrievers(retrievers={"bm25": bm25}), dev)["bm25"]["claims"] == len(dev)


def test_a_ranking_comes_from_the_scoring_alone_cut_to_its_depth(demo_index, monkeypatch):
    # rank wants no selection: no per-claim _search layer, no batch's own sorted terms remapped
    from hypothesis import given, settings
    from hypothesis import strategies as st
    from factcheck.retrieval.base import Retriever, _split_lists
    from factcheck.scoring.counting import ShardCounts

    bm25 = BM25Retriever().fit(demo_index)
    claims = ["Sea levels are rising.", "", "zzyzx qwxv", "Arctic ice ice ice is melting.", "CO2 warms the planet."]
    want = []
    for claim in claims:  # the reference: every scored passage by descending score, ties by row
        scores = bm25.scores(claim)
        rows = sorted(np.flatnonzero(scores).tolist(), key=lambda r: (-scores[r], r))[:4]
        want.append((rows, [float(scores[r]) for r in rows], [bm25.index_.ids[r] for r in rows]))
    monkeypatch.setattr(Retriever, "_search", lambda *a: pytest.fail("rank made selections"))
    monkeypatch.setattr(ShardCounts, "to_columns", lambda *a: pytest.fail("the query's terms were sorted"))
    got = bm25.rank(claims, k=4)
    assert [(r.rows, r.scores, r.ids) for r in got] == want and {len(r) for r in got} > {0}

    class Deeper(BM25Retriever):  # a scoring that returns more than asked: rank still cuts to k
        def _scored_top(self, texts, depth):
            return super()._scored_top(texts, depth + 3)

    assert Deeper().fit(demo_index).rank(claims, k=4) == got

    @settings(max_examples=100, deadline=None)
    @given(st.lists(st.integers(0, 5), min_size=1, max_size=30))
    def lists_as_slices(lengths):
        values = np.arange(sum(lengths))
        ends = np.cumsum(lengths).tolist()
        assert _split_lists(values, np.array(lengths)) == [values.tolist()[e - n:e] for n, e in zip(lengths, ends)]

    lists_as_slices()
