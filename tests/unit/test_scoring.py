"""The scoring core against straightforward references: the one top-k, the term-major
product, chunk collapse, the BM25 and TF-IDF weights."""

from __future__ import annotations

import mmap
import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import needs_smaps, resident_kb
from factcheck.scoring import matrix as matrix_module
from factcheck.scoring import topk as topk_module
from factcheck.scoring.bm25 import bm25_weights, length_norm, mean_length
from factcheck.scoring.matrix import TermMatrix
from factcheck.scoring.tfidf import TfidfSpace
from factcheck.scoring.topk import first_per_group, top_k, top_k_rows

VALUES = [0.0, 0.0, 0.25, 0.5, 1.0, 1.5, 2.0, -1.0]


def reference_top(scores, k, rows=None):
    rows = list(range(len(scores))) if rows is None else list(rows)
    pairs = sorted(zip(rows, scores), key=lambda rs: (-rs[1], rs[0]))[:k]
    return [r for r, _ in pairs], [s for _, s in pairs]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(VALUES), max_size=80), st.integers(0, 100), st.booleans(), st.randoms())
def test_top_k_is_the_reference_sort_and_pads_nothing(values, k, with_rows, rnd):
    scores = np.array(values, dtype=np.float32)
    rows = None
    if with_rows:  # distinct rows in any order
        rows = np.array(rnd.sample(range(1000), len(values)), dtype=np.int64)
    got_rows, got_scores = top_k(scores, k, rows)
    want_rows, want_scores = reference_top(values, k, rows)
    assert got_rows.tolist() == want_rows and got_scores.tolist() == want_scores
    assert got_scores.dtype == scores.dtype and got_rows.dtype == np.int64 and len(got_rows) == min(k, len(values))


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 6), st.integers(1, 300), st.integers(1, 60), st.integers(0, 2 ** 32 - 1), st.booleans())
def test_top_k_rows_is_top_k_of_every_row_without_its_explicit_zeros(n_rows, n, k, seed, long_rows):
    rng = np.random.default_rng(seed)
    dense = np.where(rng.random((n_rows, n)) < rng.random((n_rows, 1)), rng.choice([0.5, 1.0, 1.5, -3.0], (n_rows, n)),
                     0.0)
    m = sp.csr_matrix(dense)
    m.data[rng.random(m.nnz) < 0.1] = 0.0  # explicit zeros, as a weight matrix may hold
    for r in range(n_rows):  # columns out of order within each row
        a, b = m.indptr[r], m.indptr[r + 1]
        perm = rng.permutation(b - a) + a
        m.indices[a:b], m.data[a:b] = m.indices[perm], m.data[perm]
    m.has_sorted_indices = False
    old = topk_module._LONG_ROWS
    topk_module._LONG_ROWS = 0 if long_rows else 10 ** 9  # both paths: one row at a time, or all at once
    try:
        indptr, cols, vals = top_k_rows(m, k)
    finally:
        topk_module._LONG_ROWS = old
    for r in range(n_rows):
        a, b = m.indptr[r], m.indptr[r + 1]
        keep = m.data[a:b] != 0
        want_rows, want_scores = reference_top(m.data[a:b][keep].tolist(), k, m.indices[a:b][keep].tolist())
        assert cols[indptr[r]:indptr[r + 1]].tolist() == want_rows
        assert vals[indptr[r]:indptr[r + 1]].tolist() == want_scores


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=12), st.data())
def test_first_per_group_ranks_each_group_as_its_best_row(sizes, data):
    group = np.repeat(np.arange(len(sizes)), sizes)
    n = len(group)
    rows = data.draw(st.lists(st.integers(0, n - 1), unique=True, max_size=n))
    scores = data.draw(st.lists(st.sampled_from([0.5, 1.0, 2.0]), min_size=len(rows), max_size=len(rows)))
    limit = data.draw(st.integers(1, len(sizes)))
    ranked_rows, _ = top_k(np.array(scores), len(rows), np.array(rows, dtype=np.int64))
    pos, groups = first_per_group(ranked_rows, group, limit)
    best = {}  # each group's best score, and its first row with it
    for row, score in sorted(zip(rows, scores)):
        g = int(group[row])
        if g not in best or score > best[g][0]:
            best[g] = (score, row)
    want = sorted(best, key=lambda g: (-best[g][0], best[g][1]))[:limit]
    assert groups.tolist() == want and ranked_rows[pos].tolist() == [best[g][1] for g in want]


def _random_units(seed, n_units=300, n_terms=40, dtype=np.float64):
    rng = np.random.default_rng(seed)
    m = sp.random(n_units, n_terms, density=0.15, random_state=seed, format="csr")
    m.data = rng.choice([0.1, 1 / 3, 1e-7, 7.0, 1e8], size=m.nnz)
    return m.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_products_are_the_dense_product_and_never_depend_on_the_batch(dtype, monkeypatch):
    units = _random_units(3, dtype=dtype)
    w = TermMatrix.from_units(units)
    assert w.indptr.dtype == w.indices.dtype == np.int32 and w.data.dtype == dtype
    queries = sp.random(25, 40, density=0.2, random_state=4, format="csr").astype(dtype)
    dense = (queries @ units.T).toarray()
    together = list(w.products(queries, sort=True))
    monkeypatch.setattr(matrix_module, "PRODUCT_BUDGET", 1)  # one query per product
    alone = list(w.products(queries))
    for q, (rows, scores), (rows1, scores1) in zip(range(25), together, alone):
        assert rows.tolist() == np.flatnonzero(dense[q]).tolist()
        np.testing.assert_allclose(scores, dense[q][rows], rtol=1e-6 if dtype == np.float32 else 1e-12)
        order = np.argsort(rows1)
        assert np.array_equal(rows1[order], rows) and scores1[order].tobytes() == scores.tobytes()
    for (rows, scores), (top_rows, top_scores) in zip(together, w.rank(queries, 5)):
        want_rows, want_scores = reference_top(scores.tolist(), 5, rows.tolist())
        assert top_rows.tolist() == want_rows and top_scores.tolist() == want_scores


def _mapped(a) -> bool:
    """Whether ``a`` is a view of a file mapping (np.memmap, or the mmap of formats.npy)."""
    while a is not None and not isinstance(a, (np.memmap, mmap.mmap)):
        a = a.obj if isinstance(a, memoryview) else a.base
    return a is not None


def test_a_product_reads_the_saved_matrix_in_place(tmp_path):
    """Memory-mapped, int32 index arrays: a product allocates its output, never a copy of
    the weights (scipy converts index arrays of mixed dtypes, which would copy them)."""
    w = TermMatrix.from_units(_random_units(5, n_units=200_000, n_terms=50, dtype=np.float32))
    w.save(tmp_path)
    loaded = TermMatrix.load(tmp_path)
    assert _mapped(loaded.indices) and _mapped(loaded.data) and _mapped(loaded.csr.indices)
    query = sp.csr_matrix((np.array([1.0, 2.0]), np.array([3, 7], dtype=np.int64), np.array([0, 2], dtype=np.int64)),
                          shape=(1, 50))
    size = loaded.indices.nbytes + loaded.data.nbytes
    next(loaded.products(query))  # the compiled loop's score buffer, one per matrix, kept across calls
    tracemalloc.start()
    (rows, scores), = loaded.products(query)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < size / 4, (peak, size)
    assert np.array_equal(scores, next(w.products(query))[1])


@needs_smaps
@pytest.mark.parametrize("in_folder", [False, True])
def test_a_term_fill_of_batches_is_from_units_of_them_stacked(tmp_path, in_folder):
    """Batches of any size (empty ones too) filled into memory, or into files through their
    maps: the arrays, and the files, :meth:`TermMatrix.from_units` and ``save`` give of the
    whole, and no page of the files is left resident once a batch is written."""
    from factcheck.scoring.matrix import TermFill
    units = _random_units(11, n_units=3000, n_terms=60, dtype=np.float32)
    keep_units, keep_terms = np.ones(3000), np.ones(60)
    keep_units[5:9] = keep_terms[7] = 0  # units without a term, a term in no unit
    units = sp.csr_matrix(sp.diags(keep_units.astype(np.float32)) @ units @ sp.diags(keep_terms.astype(np.float32)))
    units.eliminate_zeros()
    assert units.dtype == np.float32 and not units[5:9].nnz and not units[:, 7].nnz
    want = TermMatrix.from_units(units)
    for name in ("want", "got"):
        (tmp_path / name).mkdir()
    want.save(tmp_path / "want")
    cuts = [0, 0, 1, 700, 700, 2999, 3000]
    folder = tmp_path / "got" if in_folder else None
    fill = TermFill(np.bincount(units.indices, minlength=60), 3000, np.float32, folder, "w-")
    for a, b in zip(cuts[:-1], cuts[1:]):
        fill.add(units[a:b])
        if in_folder:
            assert resident_kb(fill.indices) == resident_kb(fill.data) == 0
    got = fill.matrix()
    assert _mapped(got.indices) == _mapped(got.data) == in_folder
    for name in ("indptr", "indices", "data"):
        a, b = getattr(want, name), getattr(got, name)
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), name
    if in_folder:
        for name in ("indptr", "indices", "data", "shape"):
            assert (tmp_path / "got" / f"w-{name}.npy").read_bytes() == (tmp_path / "want" / f"{name}.npy").read_bytes()
    short = TermFill(np.bincount(units.indices, minlength=60), 3000, np.float32)
    short.add(units[:2999])
    with pytest.raises(ValueError, match="do not make the matrix"):
        short.matrix()


def test_release_leaves_a_copy_on_write_map_its_writes(tmp_path):
    """A shared map's written pages leave the process and stay in the file; a private
    (copy-on-write) map's would be lost: it is left alone."""
    from factcheck.formats.npy import release
    shared = np.lib.format.open_memmap(tmp_path / "a.npy", mode="w+", dtype=np.int64, shape=(4096,))
    shared[:] = 7
    release(shared)
    assert (shared == 7).all()
    private = np.load(tmp_path / "a.npy", mmap_mode="c")
    private[:] = 9
    release(private)
    assert (private == 9).all() and (np.load(tmp_path / "a.npy") == 7).all()


def test_bm25_weights_are_the_formula():
    counts_units = sp.csr_matrix(np.array([[1, 0, 3], [2, 1, 0], [0, 0, 1], [5, 2, 2]], dtype=np.float32))
    lengths = np.array([4, 3, 1, 9])
    counts = TermMatrix.from_units(counts_units)
    for k1, b in ((1.2, 0.75), (0.0, 0.0), (2.0, 1.0)):
        w = bm25_weights(counts, lengths, k1, b)
        assert w.data.dtype == np.float32 and np.array_equal(w.indices, counts.indices)
        dense = w.csr.toarray().T
        n, df = 4, (counts_units.toarray() > 0).sum(axis=0)
        idf = np.log(1 + (n - df + 0.5) / (df + 0.5))
        tf = counts_units.toarray()
        with np.errstate(invalid="ignore"):  # 0 / 0 where tf = 0 with k1 = 0
            want = np.where(tf > 0, idf * tf / (tf + k1 * (1 - b + b * lengths[:, None] / lengths.mean())), 0.0)
        np.testing.assert_allclose(dense, want, rtol=1e-6)
        # Some units' norms are those units' bits of every unit's, the mean taken over all.
        rows = np.array([3, 0, 3])
        every = length_norm(lengths, k1, b)
        assert np.array_equal(length_norm(lengths, k1, b, rows=rows), every[rows])
        assert np.array_equal(length_norm(lengths, k1, b, rows=rows, avgdl=mean_length(lengths)), every[rows])


def test_tfidf_space_is_scikit_learns_sublinear_tfidf():
    from sklearn.feature_extraction.text import TfidfVectorizer
    docs = [["sea", "sea", "level"], ["ice"], [], ["ice", "sheet", "sea", "ice", "ice"]]
    space, rows = TfidfSpace.fit(docs, sublinear=True)
    ref = TfidfVectorizer(analyzer=lambda d: d, sublinear_tf=True).fit(docs)
    assert space.terms == ref.get_feature_names_out().tolist() and space.idf_.tobytes() == ref.idf_.tobytes()
    assert rows.toarray().tobytes() == ref.transform(docs).toarray().tobytes()
    from factcheck.text.analyzer import analyze
    queries = ["Ice, unknown ice", "nothing", ""]  # analysed as the space's transform analyses them
    want = ref.transform([analyze(q) for q in queries]).toarray()
    assert space.transform(queries).toarray().tobytes() == want.tobytes() and want.any()


@pytest.mark.parametrize("module", ["bm25", "counting", "matrix", "tfidf", "topk"])
def test_the_cores_examples_run(module):
    import doctest
    import importlib
    failed, _ = doctest.testmod(importlib.import_module(f"factcheck.scoring.{module}"))
    assert failed == 0


def _synthetic_batches(n_batches, per_batch=400, words=60):
    rng = np.random.default_rng(7)
    vocab = ["".join(w) for w in rng.choice(list("abcdefghijklmnopqrstuvwxyz"), (3000, 7))]
    for b in range(n_batches):
        yield b * per_batch, [" ".join(rng.choice(vocab, words)) for _ in range(per_batch)]


def test_counting_spilled_per_batch_is_the_same_matrix_and_holds_one_batch_at_a_time(tmp_path):
    """Each batch's counts written as it is counted and read back one at a time: the same
    bytes as holding them all, the folder gone, and a traced peak that does not keep every
    batch's counts beside the matrix (allocations counted by tracemalloc, not timed)."""
    from factcheck.scoring.counting import count_corpus
    batches = list(_synthetic_batches(12))

    def counted(spill):
        count_corpus(batches[:1], spill=spill and tmp_path / "warm")  # the token table warmed
        tracemalloc.start()
        out = count_corpus(batches, spill=spill)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return out, peak

    kept, kept_peak = counted(None)
    spilled, spilled_peak = counted(tmp_path / "spill")
    assert not (tmp_path / "spill").exists()
    assert kept.terms == spilled.terms and np.array_equal(kept.lengths, spilled.lengths)
    for name in ("indptr", "indices", "data"):
        a, b = getattr(kept.counts, name), getattr(spilled.counts, name)
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
    matrix = kept.counts.indices.nbytes + kept.counts.data.nbytes  # the batches' counts held: as much again
    assert spilled_peak < kept_peak - matrix / 2, (spilled_peak, kept_peak, matrix)


def test_counting_in_first_seen_order_with_pairs(tmp_path):
    """Terms in the order the corpus first uses them, each passage's distinct consecutive pairs
    as ascending codes, the same bytes spilled or not and whatever the batches."""
    from factcheck.scoring.counting import count_corpus
    texts = ["Rivers rise; the rivers rise", "", "seas rise rivers", "the of"]
    out = count_corpus([(0, texts[:1]), (1, texts[1:])], first_seen=True, pairs=True)
    assert out.terms == ["river", "rise", "sea"] and out.lengths.tolist() == [4, 0, 3, 0]
    (river, rise, sea), v = range(3), 3
    ptr, codes = out.pairs
    assert ptr.tolist() == [0, 2, 2, 4, 4]
    assert codes.tolist() == [river * v + rise, rise * v + river, rise * v + river, sea * v + rise]
    batches = list(_synthetic_batches(3, per_batch=50, words=20))
    one = count_corpus([(0, [t for _, b in batches for t in b])], first_seen=True, pairs=True)
    for spill in (None, tmp_path / "spill"):
        again = count_corpus(batches, spill=spill, first_seen=True, pairs=True)
        assert again.terms == one.terms
        for a, b in ((one.counts.indices, again.counts.indices), (one.counts.data, again.counts.data),
                     *zip(one.pairs, again.pairs)):
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes()


def test_corpus_counts_are_term_major_with_units_ascending_across_batches():
    """The merge of batches' counts against a term-by-term build of the same stems."""
    from factcheck.scoring.counting import count_corpus
    from factcheck.text.analyzer import analyze
    batches = [(0, ["Cats nap; cats purr.", "", "Ça fond, 東京 fond"]), (3, []),
               (3, ["the of", "dogs bark at cats", "Øresund café cats nap"])]
    got = count_corpus(batches)
    docs = [analyze(t) for _, texts in batches for t in texts]
    terms = sorted({s for d in docs for s in d})
    indptr, units, tf = [0], [], []
    for term in terms:
        for unit, doc in enumerate(docs):
            if doc.count(term):
                units.append(unit)
                tf.append(doc.count(term))
        indptr.append(len(units))
    assert got.terms == terms and got.counts.n_units == len(docs)
    assert got.counts.indptr.tolist() == indptr and got.counts.indices.tolist() == units
    assert got.counts.data.dtype == np.float32 and got.counts.data.tolist() == tf
    assert got.lengths.dtype == np.int64 and got.lengths.tolist() == [len(d) for d in docs]


@pytest.mark.parametrize("cache", [True, False])
def test_bm25_weights_of_tiny_shards_are_the_bytes_of_one_shard(tmp_path, cache):
    from helpers import DEMO
    from factcheck.formats.evidence import source_spec
    from factcheck.retrieval.base import without_cache
    from factcheck.retrieval.bm25 import BM25Retriever
    from factcheck.tagging.index import TagIndex
    from factcheck.tagging.job import TagJob
    weights = []
    for size in (3, 100_000):
        out = tmp_path / f"shards-{size}"
        TagJob(progress=False, shard_size=size).run(source_spec(DEMO / "evidence.json"), out)
        index = TagIndex.load(out)
        assert len(index.manifest.shards) == (14 if size == 3 else 1)
        w = (BM25Retriever() if cache else without_cache(BM25Retriever())).fit(index).weights_
        weights.append([np.asarray(a).tobytes() for a in (w.indptr, w.indices, w.data)])
        if cache:  # the shards' counts spilled while building are not left in the cache
            assert not list(out.rglob("*counting*"))
    assert weights[0] == weights[1]


@needs_smaps
def test_bm25_weights_are_the_same_bytes_whatever_the_block_and_release_the_mapped_counts(tmp_path, monkeypatch):
    """Weights derived a block of terms at a time, from counts in memory or mapped from their
    files: the same bytes for any block size, and the mapped counts' pages, read once, are not
    left resident."""
    from factcheck.scoring import bm25 as bm25_module
    from factcheck.scoring.counting import count_corpus
    counted = count_corpus(_synthetic_batches(3, per_batch=200, words=30))
    counted.counts.save(tmp_path)
    want = bm25_weights(counted.counts, counted.lengths, 1.2, 0.75).data.tobytes()
    for block in (1, 7, 4096, 1 << 30):
        monkeypatch.setattr(bm25_module, "_BLOCK_ENTRIES", block)
        mapped = TermMatrix.load(tmp_path)
        assert resident_kb(mapped.indices) == resident_kb(mapped.data) == 0  # the load's check released them
        assert bm25_weights(mapped, counted.lengths, 1.2, 0.75).data.tobytes() == want
        assert resident_kb(mapped.indices) == resident_kb(mapped.data) == 0
        assert bm25_weights(counted.counts, counted.lengths, 1.2, 0.75).data.tobytes() == want


# A query's counts on a fitted vocabulary: TermColumns against count_terms(...).to_columns(...)
_QUERY_WORDS = ["The", "sea", "seas", "levels", "level", "ROSE", "rising", "co2", "1998", "Niño", "İstanbul",
                "a_b", "well-known", "and", "ﬁne", "ǅ", "melting", "Melted", "ice"]
_VOCAB_TERMS = ["sea", "level", "rose", "rise", "co2", "1998", "niño", "istanbul", "well", "known", "fine", "melt",
                "ice", "levels", "melting", "the", "absent", "ǆ", "a_b"]
_QUERY_TEXTS = st.lists(st.one_of(st.lists(st.sampled_from(_QUERY_WORDS + [" ", "\n", ".", "", "\0"]),
                                           max_size=12).map(" ".join),
                                  st.text(max_size=30)), max_size=12)
_COLUMNS: dict = {}  # kept across examples: each map grows as the memo meets new words


@settings(max_examples=200, deadline=None)
@given(_QUERY_TEXTS, st.permutations(range(len(_VOCAB_TERMS))), st.integers(3, len(_VOCAB_TERMS)),
       st.sampled_from(["stems", "plain"]), st.sampled_from([None, np.float32]), st.integers(1, 4))
def test_term_columns_are_count_terms_on_the_vocabulary_bit_for_bit(texts, order, n_terms, analyzer, dtype, batch):
    from factcheck.scoring import counting
    # columns in no sorted order: the texts' terms must still come out ascending by column
    vocabulary = {_VOCAB_TERMS[i]: j for j, i in enumerate(order[:n_terms])}
    columns = _COLUMNS.setdefault(tuple(order[:n_terms]), counting.TermColumns(vocabulary))
    want = counting.count_terms(texts, analyzer).to_columns(vocabulary, dtype)
    old_batch, counting.BATCH = counting.BATCH, batch  # rows must join up across batches
    try:
        got = columns.counts(texts, analyzer, *([] if dtype is None else [dtype]))
    finally:
        counting.BATCH = old_batch
    assert got.shape == want.shape and got.has_sorted_indices and got.has_canonical_format
    for name in ("indptr", "indices", "data"):
        a, b = getattr(got, name), getattr(want, name)
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), name


def test_term_columns_follow_a_fresh_memo_and_pickle_without_their_maps(monkeypatch):
    import pickle

    from factcheck.scoring import counting
    from factcheck.text import analyzer as analyzer_module
    columns = counting.TermColumns({"sea": 1, "ice": 0})
    texts = ["Sea ice, sea", "ice ice baby", ""]
    want = columns.counts(texts).toarray().tolist()
    assert want == [[1, 2], [2, 0], [0, 0]]
    # the process's memo starts afresh when full: other ids for the same stems
    monkeypatch.setattr(analyzer_module, "_TOKEN_IDS", {})
    analyzer_module.token_ids("stems").ids(["baby", "zebra", "ice", "sea"], "Q")
    assert columns.counts(texts).toarray().tolist() == want
    copy = pickle.loads(pickle.dumps(columns))
    assert copy._maps == {} and copy.counts(texts).toarray().tolist() == want


def test_term_columns_shared_by_threads_count_as_one_thread_does():
    # a server's threads share one space's columns while the memo gains words in each
    import random
    from concurrent.futures import ThreadPoolExecutor

    from factcheck.scoring import counting
    from factcheck.text.analyzer import analyze
    rnd = random.Random(7)
    words = [f"w{i}x{chr(97 + i % 26)}" for i in range(400)] + _QUERY_WORDS
    stems = sorted({s for w in words[::3] for s in analyze(w)})
    vocabulary = {t: j for j, t in enumerate(reversed(stems))}
    batches = [[" ".join(rnd.choices(words, k=6)) + f" fresh{b}n{i}" for i in range(20)] for b in range(16)]
    columns = counting.TermColumns(vocabulary)
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(columns.counts, batches))
    for texts, m in zip(batches, got):
        want = counting.count_terms(texts).to_columns(vocabulary)
        assert (m != want).nnz == 0 and m.indices.tobytes() == want.indices.tobytes()
