"""The memory-lean paths of the online half against the straightforward ones they replace.

Each structure that used to cover the whole corpus -- Python lists of ids and texts, the
id -> row dict, corpus-sized score vectors, the reranker's normalised passage matrix and
tag matrices -- now covers only what a claim touches or is computed a shard at a time.
Predictions must not move by a bit, so every replacement is compared here with the
reference it replaces: same values, same dtypes, same order, on real passages and on
adversarial ones (ties, empty texts, non-ASCII, NUL, digits glued to letters).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import DEMO
from factcheck.errors import InputError
from factcheck.formats.claims import read_claims
from factcheck.retrieval.base import without_cache
from factcheck.retrieval.bm25 import BM25Retriever
from factcheck.retrieval.rerank import features as F
from factcheck.retrieval.rerank.terms import TermIndex
from factcheck.scoring.bm25 import bm25_weight, length_norm
from factcheck.scoring.counting import count_corpus
from factcheck.scoring.tfidf import tfidf_rows
from factcheck.scoring.topk import top_k
from factcheck.tagging.index import IdRows, PackedStrings, TagIndex
from factcheck.tagging.job import TagJob
from factcheck.tagging.packing import pack_strings
from factcheck.text.analyzer import analyze
from factcheck.text.analyzer import split_stems, standalone_numbers
from factcheck.formats.evidence import source_spec

TRICKY = ["", "CO2 levels rose 1,000 ppm in the 1990s", "naïve café at 3.5°C in İstanbul x2y",
          "a\0b 12 c3", "1990s", "ÀB12cd", "H2O h2o 2h", "x" * 3 + "1" * 3, "the and of", "ﬁre ＦＵＬＬ ２０"]


@pytest.fixture(scope="module")
def sample_index(tmp_path_factory, real_sample_20k):
    """The real 20K sample, tagged in shards of 3,000 (so batch and shard edges are crossed)."""
    out = tmp_path_factory.mktemp("sparse") / "index"
    TagJob(progress=False, shard_size=3000).run(source_spec(real_sample_20k), out)
    return TagIndex.load(out)


@pytest.fixture(scope="module")
def claims():
    from helpers import shared_file
    train = read_claims(shared_file("train-claims.json"))
    return [c.text for c in train[:150]] + ["zzzz qqqq", "", "CO2", "the of and"]


# ---------------------------------------------------------------------- passages


@given(st.lists(st.text(max_size=12), max_size=60), st.integers(1, 7))
@settings(max_examples=60, deadline=None)
def test_packed_strings_and_id_rows_equal_a_list_and_a_dict(strings, parts):
    unique = list(dict.fromkeys(strings))
    cuts = np.linspace(0, len(unique), parts + 1).astype(int)
    packed = PackedStrings([pack_strings(unique[a:b]) for a, b in zip(cuts[:-1], cuts[1:])])
    assert packed == unique and list(packed) == unique and len(packed) == len(unique)
    assert [packed[i] for i in range(len(unique))] == unique
    rows = IdRows(packed)
    reference = {s: i for i, s in enumerate(unique)}
    for s in unique + ["not-an-id", "\0"]:
        assert (s in rows) == (s in reference)
        assert rows.get(s) == reference.get(s)
    asked = unique[::-1] + ["missing"]
    assert rows.rows(asked).tolist() == [reference.get(s, -1) for s in asked]


def test_id_rows_survive_hash_collisions(monkeypatch):
    """A collision costs a comparison, never a wrong row: force every id onto one hash."""
    from factcheck.tagging import index as index_module
    from factcheck.tagging import store
    for module in (store, index_module):
        monkeypatch.setattr(module, "hash_packed", lambda buf, off: np.zeros(len(off) - 1, dtype=np.uint64))
    ids = [f"evidence-{i}" for i in range(50)]
    rows = IdRows(PackedStrings([pack_strings(ids[:20]), pack_strings(ids[20:])]))
    assert [rows[i] for i in ids] == list(range(50)) and "evidence-50" not in rows


def test_index_ids_texts_and_lookups_match_the_shards(sample_index, real_sample_20k):
    corpus = json.loads(real_sample_20k.read_text("utf-8"))
    ids, texts = list(corpus), list(corpus.values())
    assert sample_index.ids == ids and sample_index.texts == texts
    probe = ids[::997] + ["nope"]
    assert sample_index.rows_of(probe).tolist() == [ids.index(i) if i in corpus else -1 for i in probe]
    assert sample_index.texts_of(probe[:-1]) == [corpus[i] for i in probe[:-1]]
    with pytest.raises(InputError, match="1 id \\('nope'\\) is not in this index"):
        sample_index.texts_of(probe)
    assert [t for _, batch in sample_index.text_batches() for t in batch] == texts


# ---------------------------------------------------------------------- sparse scores


def test_bm25_rank_is_the_top_of_the_full_score_vector(sample_index, claims):
    for k1, b in ((0.9, 0.4), (1.5, 0.75)):
        bm25 = without_cache(BM25Retriever(k1=k1, b=b)).fit(sample_index)
        for claim, got in zip(claims, bm25.rank(claims, 50)):
            full = bm25.scores(claim)
            rows, scores = top_k(full[full > 0], 50, np.flatnonzero(full > 0))
            assert got.rows == rows.tolist() and got.scores == scores.tolist()


def test_corpus_counts_by_shard_equal_the_per_passage_counts(sample_index):
    """Counted a shard at a time, terms sorted: each passage's counts and length are its stems'."""
    from collections import Counter
    counts = count_corpus(sample_index.text_batches())
    assert counts.terms == sorted(counts.terms) and counts.counts.n_units == len(sample_index)
    units = counts.counts.csr.T.tocsr()
    for row in range(0, len(sample_index), 37):
        stems = analyze(sample_index.text(row))
        a, b = units.indptr[row], units.indptr[row + 1]
        got = {counts.terms[j]: int(v) for j, v in zip(units.indices[a:b], units.data[a:b])}
        assert got == Counter(stems) and counts.lengths[row] == len(stems)


# ---------------------------------------------------------------------- the reranker's term index


def _reference_term_index(texts):
    """The per-passage build the batch build replaced (stems, numbers, bigrams, first-seen ids)."""
    vocab, number_vocab, cols, num_cols, indptr, num_ptr = {}, {}, [], [], [0], [0]
    for text in texts:
        cols.extend(vocab.setdefault(s, len(vocab)) for s in split_stems(text))
        indptr.append(len(cols))
        num_cols.extend(number_vocab.setdefault(x, len(number_vocab)) for x in standalone_numbers(text))
        num_ptr.append(len(num_cols))
    seq, ptr = np.asarray(cols, dtype=np.int64), np.asarray(indptr, dtype=np.int64)
    forward = sp.csr_matrix((np.ones(len(seq), dtype=np.float32), seq.astype(np.int32), ptr),
                            shape=(len(texts), len(vocab)))
    forward.sum_duplicates()
    forward.sort_indices()
    nums = sp.csr_matrix((np.ones(len(num_cols), dtype=np.float32), np.asarray(num_cols, dtype=np.int32),
                          np.asarray(num_ptr, dtype=np.int64)), shape=(len(texts), len(number_vocab)))
    return vocab, number_vocab, forward, nums, _bigrams(seq, ptr, len(vocab))


def _bigrams(seq: np.ndarray, ptr: np.ndarray, v: int) -> tuple[np.ndarray, np.ndarray]:
    """(The previous build's bigrams.) Per passage, the sorted distinct codes ``a * v + b`` of consecutive stem pairs."""
    n = len(ptr) - 1
    doc = np.repeat(np.arange(n, dtype=np.int64), np.diff(ptr))
    same = doc[:-1] == doc[1:] if len(doc) > 1 else np.zeros(0, bool)
    codes = seq[:-1][same] * v + seq[1:][same] if len(doc) > 1 else np.zeros(0, np.int64)
    owners = doc[:-1][same] if len(doc) > 1 else np.zeros(0, np.int64)
    order = np.lexsort((codes, owners))
    codes, owners = codes[order], owners[order]
    keep = np.ones(len(codes), bool)
    keep[1:] = (codes[1:] != codes[:-1]) | (owners[1:] != owners[:-1])
    codes, owners = codes[keep], owners[keep]
    bptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(owners, minlength=n), out=bptr[1:])
    return bptr, codes


def _assert_same_term_index(texts, batches):
    vocab, number_vocab, forward, nums, (bptr, bcodes) = _reference_term_index(texts)
    got = TermIndex.build_batches(batches)
    assert list(got.vocab.items()) == list(vocab.items())  # ids in first-seen order
    assert list(got.number_vocab.items()) == list(number_vocab.items())
    assert np.array_equal(got.num_indptr, nums.indptr) and np.array_equal(got.num_indices, nums.indices)
    for want, have in ((forward, got.forward),):
        assert have.shape == want.shape
        for name in ("indptr", "indices", "data"):
            assert np.array_equal(getattr(have, name), getattr(want, name)), name
    assert got.forward.data.dtype == forward.data.dtype
    assert np.array_equal(got.bigram_ptr, bptr) and np.array_equal(got.bigram_codes, bcodes)
    assert got.bigram_codes.dtype == bcodes.dtype


def test_term_index_batches_equal_the_per_passage_build(sample_index):
    texts = list(sample_index.texts)[:6000] + TRICKY
    _assert_same_term_index(texts, [(0, texts[:2500]), (2500, texts[2500:2501]), (2501, texts[2501:])])


_PIECES = st.sampled_from(list("aB1 ,.\0é_İ2s-") + ["CO2", "the", " 1990s ", "1,000", "x2y", "3.5"])


@given(st.lists(st.lists(_PIECES, max_size=20).map("".join), max_size=25), st.integers(1, 4))
@settings(max_examples=80, deadline=None)
def test_term_index_batches_equal_the_per_passage_build_on_odd_text(texts, parts):
    cuts = np.linspace(0, len(texts), parts + 1).astype(int)
    _assert_same_term_index(texts, [(int(a), texts[a:b]) for a, b in zip(cuts[:-1], cuts[1:])])


def test_term_index_bm25_is_the_core_formula_passage_by_passage(sample_index, claims):
    """The reranker's BM25 (one product over the claim's postings) against each passage's
    weights from its own term bag (the RM3 path) and a float64 reference of the formula."""
    terms = TermIndex.for_index(sample_index, cache=False)
    for claim in claims[:60]:
        ids, counts = terms.query_weights(split_stems(claim))
        for k1, b in ((0.9, 0.4), (1.2, 0.75)):
            (rows, scores), = terms.bm25(k1, b).products(terms.query(ids, counts), sort=True)
            assert np.all(np.diff(rows) > 0) and np.all(scores > 0)
            if not len(rows):
                continue
            by_bags = terms.bm25_rows(rows, ids, counts, k1, b)
            np.testing.assert_allclose(scores, by_bags, rtol=1e-6)
            tf = terms.tf_matrix(rows, ids)
            norm = k1 * (1 - b + b * terms.doc_len[rows] / terms.doc_len.mean())
            want = (terms.idf[ids] * tf / (tf + norm[:, None]) * counts).sum(axis=1)
            np.testing.assert_allclose(scores, want, rtol=1e-6)
            assert np.array_equal(bm25_weight(tf, length_norm(terms.doc_len, k1, b)[rows][:, None],
                                              terms.idf[ids]) > 0, tf > 0)


def test_feature_rows_on_demand_equal_the_whole_corpus_matrices(sample_index):
    """Unit rows, tag-space rows and shared-tag counts of a pool are the rows of the
    corpus-wide matrices the features used to slice, bit for bit and entry order included."""
    terms = TermIndex.for_index(sample_index, cache=False)
    ctx = F.FeatureContext(sample_index, terms)
    unit = tfidf_rows(terms.forward, terms.idf)
    space = sample_index.tag_space
    vocab = sample_index.vocabulary
    tags = sp.csr_matrix((np.ones(len(sample_index.tag_terms)), sample_index.tag_terms, sample_index.tag_indptr),
                         shape=(len(sample_index), len(vocab)))
    rng = np.random.default_rng(7)
    for _ in range(10):
        rows = rng.choice(len(sample_index), size=250)
        for want, got in ((unit[rows], ctx.unit[rows]), (space[rows], ctx.tag_space(rows))):
            for name in ("indptr", "indices", "data"):
                assert np.array_equal(getattr(got, name), getattr(want, name)), name
        cols = sorted(set(rng.choice(len(vocab), size=30).tolist()))
        assert np.array_equal(ctx.shared_tags(rows, cols), np.asarray(tags[rows][:, cols].sum(axis=1)).ravel())


def test_reranker_on_the_lean_structures_is_the_demo_reranker(demo_index):
    """End to end on the demo: candidates, features and probabilities of a trained
    reranker equal those computed with corpus-sized vectors and matrices."""
    from factcheck.formats.splits import train_holdout_split
    from factcheck.retrieval.rerank.candidates import CandidateConfig
    from factcheck.retrieval.rerank.model import ModelConfig
    from factcheck.training.rerank import train_reranker
    index = TagIndex.load(demo_index)
    fit, holdout = train_holdout_split(read_claims(DEMO / "train-claims.json"))
    grid = (ModelConfig(learning_rate=0.1, max_iter=20, max_leaf_nodes=7, min_samples_leaf=5, negative_rate=1.0),)
    r = train_reranker(index, fit, holdout, configs=(CandidateConfig(memory_k=5),), grid=grid)
    unit = tfidf_rows(r.terms_.forward, r.terms_.idf)
    for claim in [c.text for c in read_claims(DEMO / "dev-claims.json")]:
        q = r.generator_.query(claim)
        weights = r.terms_.bm25(0.9, 0.4).csr
        full = np.asarray(weights[q.term_ids].T @ q.counts.astype(np.float32)).ravel()
        cands = r.generator_.generate(claim)
        want_rows, want_scores = top_k(full[full > 0], r.candidates_.depth, np.flatnonzero(full > 0))
        assert np.array_equal(cands.bm25_list, want_rows)
        np.testing.assert_allclose(cands.bm25, full[cands.rows], rtol=1e-6)
        vecs = r.context_.unit[cands.rows]
        ctx_rows = unit[cands.rows]
        assert np.array_equal(vecs.data, ctx_rows.data) and np.array_equal(vecs.indices, ctx_rows.indices)
