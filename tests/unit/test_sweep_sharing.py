"""The tuning sweeps' shared work gives what each setting computed alone gave (demo data)."""

import itertools

import numpy as np
import pytest

from helpers import DEMO
from factcheck.formats.claims import read_claims
from factcheck.retrieval.base import without_cache
from factcheck.retrieval.bm25 import BM25Retriever, SweepTerms
from factcheck.tagging.index import TagIndex
from factcheck.training import tuning


@pytest.fixture(scope="module")
def index_and_claims(demo_index):
    claims = read_claims(DEMO / "train-claims.json", require_labels=True)
    return TagIndex.load(demo_index), claims


@pytest.mark.parametrize("k1,b", list(itertools.product(tuning.BM25_GRID["k1"], tuning.BM25_GRID["b"])))
def test_sweep_terms_rank_as_the_whole_index(index_and_claims, k1, b):
    index, claims = index_and_claims
    texts = [c.text for c in claims] + ["", "words the demo never holds"]
    shared = BM25Retriever(k1=k1, b=b).fit(index, terms=SweepTerms(index, texts)).rank(texts, 10)
    alone = without_cache(BM25Retriever(k1=k1, b=b)).fit(index).rank(texts, 10)
    for s, a in zip(shared, alone, strict=True):
        assert s.ids == a.ids
        assert np.array_equal(np.asarray(s.scores, dtype=np.float32), np.asarray(a.scores, dtype=np.float32))


def test_bm25_sweep_rows_are_each_setting_alone(index_and_claims):
    index, claims = index_and_claims
    fit, holdout = claims[:len(claims) * 2 // 3], claims[len(claims) * 2 // 3:]
    sweep = tuning.sweep_bm25(index, fit, holdout)
    settings = [{"k1": k1, "b": b} for k1, b in itertools.product(tuning.BM25_GRID["k1"], tuning.BM25_GRID["b"])]
    alone = tuning._sweep_depths("bm25", settings, lambda **s: without_cache(BM25Retriever(**s)).fit(index),
                                 tuning.BM25_GRID["k"], {"fit": fit, "holdout": holdout}, "BM25 sweep", False)
    assert sweep.rows == alone.rows and sweep.chosen == alone.chosen


def test_take_terms_keeps_each_terms_postings(index_and_claims):
    from factcheck.retrieval.bm25 import corpus_counts
    counts = corpus_counts(index_and_claims[0]).counts
    terms = np.array([0, 3, 4, counts.n_terms - 1])
    sub = counts.take_terms(terms)
    for i, t in enumerate(terms.tolist()):
        a, e = counts.indptr[t], counts.indptr[t + 1]
        assert sub.indices[sub.indptr[i]:sub.indptr[i + 1]].tolist() == counts.indices[a:e].tolist()
        assert sub.data[sub.indptr[i]:sub.indptr[i + 1]].tolist() == counts.data[a:e].tolist()


def test_sweeps_evidence_is_the_chosen_retrievers(index_and_claims):
    """The selection reads the tag rule's and BM25's evidence of the tuning claims from their
    sweeps instead of retrieving them again: it must be what the fitted retriever returns."""
    from factcheck.retrieval.base import evidence_of, run_retrieval
    from factcheck.retrieval.tag_rule import TagRuleRetriever
    index, claims = index_and_claims
    fit, holdout = claims[:len(claims) * 2 // 3], claims[len(claims) * 2 // 3:]
    for sweep, cls in ((tuning.sweep_tags(TagRuleRetriever().fit(index), fit, holdout), TagRuleRetriever),
                       (tuning.sweep_bm25(index, fit, holdout), BM25Retriever)):
        retrieved = evidence_of(run_retrieval(cls(**sweep.chosen).fit(index), claims, depth=0))
        assert sweep.evidence == retrieved


def test_rerankers_settings_in_one_pass_are_each_built_alone(index_and_claims):
    """train_reranker builds every candidate setting's features in one pass over the claims (a
    claim's BM25 scoring shared): the same pools, features and labels as each setting alone."""
    from factcheck.retrieval.rerank import features as F
    from factcheck.retrieval.rerank.candidates import CandidateConfig, CandidateGenerator
    from factcheck.retrieval.rerank.memory import ClaimMemory
    from factcheck.retrieval.rerank.terms import TermIndex
    from factcheck.training.rerank import DEFAULT_CANDIDATES, build_claim_set, training_data
    index, claims = index_and_claims
    fit, holdout = claims[:len(claims) * 2 // 3], claims[len(claims) * 2 // 3:]
    configs = [*DEFAULT_CANDIDATES, CandidateConfig(k1=1.2, b=0.75, depth=20, memory_k=5)]  # one scoring apart
    datas = training_data(index, fit, holdout, configs, progress=False)
    terms = TermIndex.for_index(index)
    context = F.FeatureContext(index, terms)
    for config, data in zip(configs, datas, strict=True):
        gen = CandidateGenerator(terms, ClaimMemory.from_claims(fit).bind(index.row_of, len(index)), config)
        for got, part, loo in ((data.fit_set, fit, True), (data.holdout_set, holdout, False)):
            alone = build_claim_set(gen, context, part, index.row_of, loo, False)
            assert [r.tolist() for r in got.rows] == [r.tolist() for r in alone.rows]
            assert np.array_equal(got.X, alone.X) and np.array_equal(got.y, alone.y) and got.n_gold == alone.n_gold
        assert data.config == config


def test_a_sweeps_counts_are_the_indexs_cache_counted_once(tmp_path, monkeypatch):
    """The BM25 sweep reads the index's ``bm25/counts`` cache, as the fitted retriever does: a
    later process maps it and never counts the corpus again (at 25M a count is minutes)."""
    import factcheck
    from factcheck.retrieval import bm25
    root = tmp_path / "index"
    factcheck.build_index(DEMO / "evidence.json", root, progress=False)
    texts = [c.text for c in read_claims(DEMO / "train-claims.json")]
    first = SweepTerms(TagIndex.load(root), texts)
    assert (root / "bm25" / "counts" / "factcheck-key.json").is_file()

    def counted(*args, **kwargs):
        raise AssertionError("the corpus was counted again")
    monkeypatch.setattr(bm25, "count_corpus", counted)
    monkeypatch.setattr(bm25, "merge_counts", counted)
    again = SweepTerms(TagIndex.load(root), texts)
    assert again.vocabulary == first.vocabulary
    for a, b in ((again.counts.indptr, first.counts.indptr), (again.counts.indices, first.counts.indices),
                 (again.counts.data, first.counts.data), (again.lengths, first.lengths)):
        assert np.array_equal(a, b) and a.dtype == b.dtype
    fitted = BM25Retriever().fit(TagIndex.load(root))  # the retriever's fit reads the same cache
    assert fitted.rank(texts[:3], 5)[0].ids
