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
from factcheck.retrieval.base import stable_top
from factcheck.retrieval.bm25 import BM25Retriever
from factcheck.retrieval.bm25_weights import TermCounts
from factcheck.retrieval.rerank import features as F
from factcheck.retrieval.rerank.terms import TermIndex
from factcheck.retrieval.rerank.vectors import unit_rows
from factcheck.retrieval.sparse_scores import accumulate, postings, scores_at, stable_top_sparse
from factcheck.tagging.index import IdRows, PackedStrings, TagIndex
from factcheck.tagging.job import TagJob
from factcheck.tagging.packing import pack_strings
from factcheck.text.analyzer import analyze
from factcheck.text.tokens import split_stems, standalone_numbers
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
    monkeypatch.setattr(index_module, "hash_packed", lambda buf, off: np.zeros(len(off) - 1, dtype=np.uint64))
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


@given(st.lists(st.sampled_from([0.0, 0.0, 0.0, 0.5, 1.0, 2.0, -1.0]), min_size=1, max_size=80),
       st.integers(1, 100))
@settings(max_examples=200, deadline=None)
def test_stable_top_sparse_equals_stable_top_of_the_full_vector(values, depth):
    full = np.asarray(values, dtype=np.float32)
    touched = np.flatnonzero(np.arange(len(full)) % 3 != 1)  # some zeros touched, some not
    touched = np.union1d(touched, np.flatnonzero(full))
    want, got = stable_top(full, depth), stable_top_sparse(touched, full[touched], len(full), depth)
    assert got.rows.tolist() == want.rows.tolist()
    assert got.scores.dtype == want.scores.dtype and np.array_equal(got.scores, want.scores)


@given(st.integers(0, 10_000), st.sampled_from([np.float32, np.float64]))
@settings(max_examples=40, deadline=None)
def test_accumulate_adds_like_the_full_vector(seed, dtype):
    rng = np.random.default_rng(seed)
    matrix = sp.random(200, 30, density=0.2, random_state=seed, format="csc", dtype=np.float64)
    matrix.data = rng.choice([0.1, 1 / 3, 1e-7, 7.0, 1e8], size=matrix.nnz).astype(dtype)
    terms = rng.integers(0, 30, size=rng.integers(0, 12))  # duplicates kept, any order
    pos, owner = postings(matrix.indptr, terms)
    touched, sums = accumulate(matrix.indices[pos], matrix.data[pos], owner, dtype)
    full = np.zeros(200, dtype=dtype)
    if dtype == np.float64:
        full = np.bincount(matrix.indices[pos], weights=matrix.data[pos], minlength=200).astype(np.float64)
    else:
        for t in terms:
            a, b = matrix.indptr[t], matrix.indptr[t + 1]
            np.add.at(full, matrix.indices[a:b], matrix.data[a:b])
    assert np.array_equal(touched, np.unique(matrix.indices[pos]))
    assert sums.dtype == full.dtype and np.array_equal(sums, full[touched])
    rows = rng.integers(0, 200, size=40)
    assert np.array_equal(scores_at(touched, sums, rows), full[rows])


def test_bm25_rank_equals_the_full_score_vector(sample_index, claims):
    for k1, b in ((0.9, 0.4), (1.5, 0.75)):
        bm25 = BM25Retriever(k1=k1, b=b, cache=False).fit(sample_index)
        for claim in claims:
            got = bm25.rank([claim], 50)[0]
            want = stable_top(bm25.scores(claim), 50)
            assert got.rows.tolist() == want.rows.tolist() and np.array_equal(got.scores, want.scores)
            assert got.scores.dtype == want.scores.dtype


def test_term_counts_by_shard_score_like_the_per_passage_counts(sample_index, claims):
    """Sorted ids instead of first-seen ones; every score is the same bits."""
    texts = list(sample_index.texts)
    lists = TermCounts.from_texts(texts, analyze)
    shards = TermCounts.from_index(sample_index)
    assert np.array_equal(np.sort(lists.idf), np.sort(shards.idf)) and np.array_equal(lists.lengths, shards.lengths)
    assert lists.avg_length == shards.avg_length and len(lists.tf) == len(shards.tf)
    for k1, b in ((0.9, 0.4), (1.2, 0.75)):
        x, y = lists.bm25(k1, b), shards.bm25(k1, b)
        for claim in claims:
            stems = analyze(claim)
            sx, sy = x.get_scores_from_ids(x.get_tokens_ids(stems)), y.get_scores_from_ids(y.get_tokens_ids(stems))
            assert np.array_equal(sx, sy)


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
    for want, have in ((forward, got.forward), (nums, got.numbers)):
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


def test_term_index_bm25_touched_equals_the_full_vector(sample_index, claims):
    terms = TermIndex.for_index(sample_index, cache=False)
    for claim in claims:
        ids, weights = terms.query_weights(split_stems(claim))
        for k1, b in ((0.9, 0.4), (1.2, 0.75)):
            full = terms.bm25(ids, weights, k1, b)
            rows, scores = terms.bm25_touched(ids, weights, k1, b)
            assert np.array_equal(rows, np.flatnonzero(full)) and np.array_equal(scores, full[rows])
        rm3 = np.linspace(0.01, 1.0, len(ids))  # fractional weights (the RM3 expansion's)
        full = terms.bm25(ids, rm3, 0.9, 0.4)
        rows, scores = terms.bm25_touched(ids, rm3, 0.9, 0.4)
        assert np.array_equal(scores, full[rows])


def test_feature_rows_on_demand_equal_the_whole_corpus_matrices(sample_index):
    """Unit rows, tag-space rows and shared-tag counts of a pool are the rows of the
    corpus-wide matrices the features used to slice, bit for bit and entry order included."""
    terms = TermIndex.for_index(sample_index, cache=False)
    ctx = F.FeatureContext(sample_index, terms)
    unit = unit_rows(terms.forward, terms.idf)
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
    unit = unit_rows(r.terms_.forward, r.terms_.idf)
    for claim in [c.text for c in read_claims(DEMO / "dev-claims.json")]:
        q = r.generator_.query(claim)
        full = r.terms_.bm25(q.term_ids, q.counts, 0.9, 0.4)
        cands = r.generator_.generate(claim)
        want = stable_top(full, r.candidates_.depth)
        keep = want.scores > 0
        assert np.array_equal(cands.bm25_list, want.rows[keep])
        assert np.array_equal(cands.bm25, full[cands.rows].astype(np.float64))
        vecs = r.context_.unit[cands.rows]
        ctx_rows = unit[cands.rows]
        assert np.array_equal(vecs.data, ctx_rows.data) and np.array_equal(vecs.indices, ctx_rows.indices)
