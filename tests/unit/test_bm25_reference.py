"""Our Lucene BM25 (the core's, :mod:`factcheck.scoring.bm25`) against bm25s's, the reference.

Every passage's score for every claim agrees with bm25s's ``lucene`` index built from the
same stems to a relative 1e-6 (|ours - bm25s| <= 1e-6 * |bm25s|, so a zero is a zero on
both sides): the weights are computed as bm25s computes them, and a claim's weights are
added in term order where bm25s adds them in the claim's order (float32 sums, ~2e-7
apart at most on the course data). ``scripts/bm25s_versions.py`` runs this file against
several bm25s releases, each in a throwaway environment.
"""

from __future__ import annotations

import json

import bm25s
import numpy as np
import pytest

from helpers import DEMO, shared_file
from factcheck.retrieval.base import without_cache
from factcheck.retrieval.bm25 import BM25Retriever
from factcheck.retrieval.rerank.terms import TermIndex
from factcheck.tagging.index import TagIndex
from factcheck.text.analyzer import analyze
from factcheck.text.analyzer import split_stems

SETTINGS = [(1.2, 0.75), (0.9, 0.4), (1.5, 0.4), (0.0, 0.0), (2.0, 1.0)]
RTOL = 1e-6


def reference(token_lists, k1, b):
    """bm25s's lucene index of the given token lists, and its scores for a query's tokens."""
    ref = bm25s.BM25(k1=k1, b=b, method="lucene")
    ref.index(token_lists, show_progress=False)

    def scores(tokens):
        ids = ref.get_tokens_ids(tokens)
        return ref.get_scores_from_ids(ids) if ids else np.zeros(len(token_lists), dtype=np.float32)
    return scores


def assert_close(ours, theirs):
    np.testing.assert_allclose(ours, theirs, rtol=RTOL, atol=0)


def _claims(path, limit=None):
    return [c["claim_text"] for c in json.loads(path.read_text("utf-8")).values()][:limit]


@pytest.mark.parametrize("k1,b", SETTINGS)
def test_bm25_scores_are_bm25s_on_the_demo(demo_index, k1, b):
    index = TagIndex.load(demo_index)
    ours = without_cache(BM25Retriever(k1=k1, b=b)).fit(index)
    theirs = reference([analyze(t) for t in index.texts], k1, b)
    claims = _claims(DEMO / "dev-claims.json") + _claims(DEMO / "train-claims.json") + ["", "zzz qqq", "CO2 CO2 co2"]
    for claim in claims:
        assert_close(ours.scores(claim), theirs(analyze(claim)))


@pytest.mark.parametrize("k1,b", [(0.9, 0.4), (1.2, 0.75)])
def test_the_rerankers_bm25_is_bm25s_over_its_own_analysis(demo_index, k1, b):
    index = TagIndex.load(demo_index)
    terms = TermIndex.for_index(index, cache=False)
    theirs = reference([split_stems(t) for t in index.texts], k1, b)
    weights = terms.bm25(k1, b)
    for claim in _claims(DEMO / "dev-claims.json") + _claims(DEMO / "train-claims.json"):
        ids, counts = terms.query_weights(split_stems(claim))
        (rows, scores), = weights.products(terms.query(ids, counts))
        assert_close(weights.full(rows, scores), theirs(split_stems(claim)))


@pytest.fixture(scope="module")
def real_passages(proxy_corpus, tmp_path_factory):
    """8,000 real passages (every 40th of the proxy corpus), tagged, and 300 training claims."""
    from factcheck.formats.evidence import source_spec
    from factcheck.tagging.job import TagJob
    path = tmp_path_factory.mktemp("bm25ref") / "passages.json"
    path.write_text(json.dumps(dict(list(proxy_corpus.items())[::40][:8000])), encoding="utf-8")
    TagJob(progress=False).run(source_spec(path), path.parent / "index")
    return TagIndex.load(path.parent / "index"), _claims(shared_file("train-claims.json"), 300)


@pytest.mark.shared
@pytest.mark.parametrize("k1,b", SETTINGS)
def test_bm25_scores_are_bm25s_on_real_passages(real_passages, k1, b):
    index, claims = real_passages
    ours = without_cache(BM25Retriever(k1=k1, b=b)).fit(index)
    theirs = reference([analyze(t) for t in index.texts], k1, b)
    compared = 0
    for claim, ranking in zip(claims, ours.rank(claims, 10)):
        want = theirs(analyze(claim))
        assert_close(ours.scores(claim), want)
        compared += bool(want.any())
        # the same top 10, up to ties that float32 rounding may order either way
        assert np.allclose(np.sort(want)[::-1][:len(ranking)], ranking.scores, rtol=RTOL, atol=0)
    assert compared > 250
