"""BM25 weights derived from one term-count matrix equal bm25s's own build, bit for bit."""

from __future__ import annotations

import json

import bm25s
import numpy as np
import pytest

from helpers import DEMO, shared_file
from factcheck.retrieval.bm25 import BM25Retriever
from factcheck.retrieval.bm25_weights import TermCounts
from factcheck.tagging.index import TagIndex
from factcheck.text.analyzer import analyze

SETTINGS = [(0.9, 0.4), (1.2, 0.75), (1.5, 0.4), (0.0, 0.0), (2.0, 1.0)]


def _reference(token_ids, vocab, k1, b):
    ref = bm25s.BM25(k1=k1, b=b, method="lucene")
    ref.index((token_ids, dict(vocab)), show_progress=False)
    return ref


def _scores(model, claim):
    ids = model.get_tokens_ids(analyze(claim))
    return model.get_scores_from_ids(ids) if ids else None


@pytest.fixture(scope="module")
def real_passages(proxy_corpus):
    """8,000 real passages (every 40th of the proxy corpus) and 200 training claims."""
    texts = list(proxy_corpus.values())[::40][:8000]
    stems = [analyze(t) for t in texts]
    vocab: dict[str, int] = {}
    token_ids = [[vocab.setdefault(s, len(vocab)) for s in doc] for doc in stems]
    with open(shared_file("train-claims.json"), encoding="utf-8") as fh:
        claims = [c["claim_text"] for c in json.load(fh).values()][:200]
    return token_ids, vocab, claims


@pytest.mark.shared
@pytest.mark.parametrize("k1,b", SETTINGS)
def test_weights_identical_to_bm25s_on_real_passages(real_passages, k1, b):
    token_ids, vocab, claims = real_passages
    ref = _reference(token_ids, vocab, k1, b)
    ours = TermCounts.from_token_ids(token_ids, vocab).bm25(k1, b)
    assert ours.vocab_dict == ref.vocab_dict
    for key in ("indptr", "indices", "data"):
        assert np.array_equal(ours.scores[key], ref.scores[key]), key
        assert ours.scores[key].dtype == ref.scores[key].dtype, key
    compared = 0
    for claim in claims:
        a, r = _scores(ours, claim), _scores(ref, claim)
        assert (a is None) == (r is None)
        if a is not None:
            assert np.array_equal(a, r)
            compared += 1
    assert compared > 150


def test_duplicates_empty_passages_and_unused_terms():
    token_ids = [[0, 0, 1], [], [2, 1, 2, 2], [1]]
    vocab = {"a": 0, "b": 1, "c": 2}
    for k1, b in SETTINGS:
        ref, ours = _reference(token_ids, vocab, k1, b), TermCounts.from_token_ids(token_ids, vocab).bm25(k1, b)
        for key in ("indptr", "indices", "data"):
            assert np.array_equal(ours.scores[key], ref.scores[key]), (k1, b, key)
        for query in ([0], [1, 1], [2, 0, 1]):
            assert np.array_equal(ours.get_scores_from_ids(query), ref.get_scores_from_ids(query))


def test_from_texts_equals_from_token_ids(demo_index):
    index = TagIndex.load(demo_index)
    stems = [analyze(t) for t in index.texts]
    vocab: dict[str, int] = {}
    token_ids = [[vocab.setdefault(s, len(vocab)) for s in doc] for doc in stems]
    a, b = TermCounts.from_token_ids(token_ids, vocab), TermCounts.from_index(index)
    # from_index numbers terms in sorted order (shard by shard); each term's column is the same
    assert sorted(a.vocab) == sorted(b.vocab) and list(b.vocab) == sorted(b.vocab)
    wa, wb = a.weights(1.2, 0.75), b.weights(1.2, 0.75)
    for term, i in a.vocab.items():
        j = b.vocab[term]
        sa, sb = slice(a.indptr[i], a.indptr[i + 1]), slice(b.indptr[j], b.indptr[j + 1])
        assert np.array_equal(a.indices[sa], b.indices[sb]) and np.array_equal(wa[sa], wb[sb])
        assert a.idf[i] == b.idf[j]


def test_retriever_saved_and_reloaded_gives_same_scores(demo_index, tmp_path):
    index = TagIndex.load(demo_index)
    fresh = BM25Retriever(k1=1.3, b=0.6, cache=False).fit(index)
    saved = BM25Retriever(k1=1.3, b=0.6).fit(index)        # derives, then writes the cache
    loaded = BM25Retriever(k1=1.3, b=0.6).fit(TagIndex.load(demo_index))  # reads the cache
    assert (demo_index / "bm25" / "lucene-k1_1.3-b_0.6" / "factcheck-key.json").is_file()
    for claim in ("carbon dioxide emissions from burning coal", "sea level rise", "zzz"):
        assert np.array_equal(fresh.scores(claim), saved.scores(claim))
        assert np.array_equal(fresh.scores(claim), loaded.scores(claim))


def test_reranker_bm25_is_bm25s_lucene_up_to_float32(demo_index):
    """The reranker's BM25 (:meth:`TermIndex.bm25`, float64, weighted queries) is bm25s's
    lucene formula times ``k1 + 1``: the same scores to float32 precision, not bit for bit
    (float64 vs float32 weights, ``b * (dl / avgdl)`` vs ``(b * dl) / avgdl``). Switching
    the reranker to bm25s's float32 weights would move its features in the 7th digit, so
    the two stay separate implementations of one formula, pinned together here."""
    from factcheck.retrieval.rerank.terms import TermIndex
    from factcheck.text.tokens import split_stems
    index = TagIndex.load(demo_index)
    terms = TermIndex.for_index(index, cache=False)
    counts = TermCounts.from_texts(index.texts, split_stems)
    assert counts.vocab == terms.vocab
    claims = [c["claim_text"] for c in json.loads((DEMO / "dev-claims.json").read_text("utf-8")).values()]
    for k1, b in SETTINGS:
        model = counts.bm25(k1, b)
        for claim in claims:
            ids, weights = terms.query_weights(split_stems(claim))
            bag = [int(t) for t, n in zip(ids, weights) for _ in range(int(n))]
            ours = terms.bm25(ids, weights, k1, b)
            theirs = model.get_scores_from_ids(bag).astype(np.float64) * (k1 + 1.0)
            np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-9)
