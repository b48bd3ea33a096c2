"""The compiled term-at-a-time top k against the product path it speeds up: the same bits.

``TermMatrix.rank`` runs a numba loop when numba imports (``FACTCHECK_NUMBA=1`` always,
``0`` never); every score, every top k (ties included) and so every course prediction must be the
product path's, whatever the matrix, the queries (duplicate and unsorted terms included) or k.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from factcheck.scoring import compiled
from factcheck.scoring import matrix as scoring_matrix  # the switch (a test names its matrix matrix)
from factcheck.scoring.matrix import TermMatrix

needs_numba = pytest.mark.skipif(not scoring_matrix.compiled_available(),
                                 reason="needs numba (pip install -e '.[fast]')")

# Few distinct weights, some negative: many ties, and sums of exactly 0 (which the product drops).
WEIGHTS = st.sampled_from([0.25, 0.5, 1.0, 1.5, -0.5, -1.0, 0.1, 0.3])


def _products(matrix: TermMatrix, queries, numba: bool):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(scoring_matrix.VARIABLE, "1" if numba else "0")
        return list(matrix.products(queries, sort=True))


def _ranks(matrix: TermMatrix, queries, k: int, numba: bool):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(scoring_matrix.VARIABLE, "1" if numba else "0")
        return matrix.rank(queries, k)


@st.composite
def cases(draw):
    n_units, n_terms = draw(st.integers(1, 40)), draw(st.integers(1, 12))
    cells = draw(st.lists(st.tuples(st.integers(0, n_units - 1), st.integers(0, n_terms - 1), WEIGHTS),
                          max_size=120))
    units = sp.coo_matrix(([w for _, _, w in cells], ([u for u, _, _ in cells], [t for _, t, _ in cells])),
                          shape=(n_units, n_terms))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    matrix = TermMatrix.from_units(units.tocsr(), dtype=dtype)
    # Queries as raw CSR: terms in any order, repeated, as a caller may pass them.
    rows = draw(st.lists(st.lists(st.tuples(st.integers(0, n_terms - 1), WEIGHTS), max_size=6), min_size=1,
                         max_size=5))
    indptr = np.cumsum([0] + [len(r) for r in rows])
    queries = sp.csr_matrix((np.array([w for r in rows for _, w in r], dtype=dtype),
                             np.array([t for r in rows for t, _ in r], dtype=np.int64), indptr),
                            shape=(len(rows), n_terms))
    return matrix, queries, draw(st.integers(0, n_units + 2))


@needs_numba
@settings(max_examples=300, deadline=None)
@given(cases())
def test_compiled_rank_is_the_products_top_k(case):
    matrix, queries, k = case
    fast = _ranks(matrix, queries, k, numba=True)
    slow = _ranks(matrix, queries, k, numba=False)
    assert len(fast) == len(slow) == queries.shape[0]
    for (rows, scores), (want_rows, want_scores) in zip(fast, slow):
        assert rows.tolist() == want_rows.tolist()
        assert scores.dtype == want_scores.dtype and scores.tobytes() == want_scores.tobytes()
    # a second call ranks the same
    again = _ranks(matrix, queries, k, numba=True)
    assert [(r.tolist(), s.tobytes()) for r, s in again] == [(r.tolist(), s.tobytes()) for r, s in fast]


@needs_numba
@settings(max_examples=300, deadline=None)
@given(cases(), st.integers(1, 9))
def test_compiled_rank_a_few_units_a_block_is_the_products_top_k(case, block):
    # Blocks of a few units: many blocks a query, some empty, a unit's terms in one block.
    matrix, queries, k = case
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(compiled, "BLOCK", block)
        fast = _ranks(matrix, queries, k, numba=True)
    slow = _ranks(matrix, queries, k, numba=False)
    assert [(r.tolist(), s.tobytes()) for r, s in fast] == [(r.tolist(), s.tobytes()) for r, s in slow]


@needs_numba
@pytest.mark.parametrize("k", [1, 64, 65, 200])
@pytest.mark.parametrize("block", [16, 5000])
def test_ties_across_blocks_are_broken_by_unit(monkeypatch, k, block):
    # 3,000 units of one score, a few better ones late: beyond SMALL_K the candidates are cut
    # as blocks go (all tied: the k smallest kept), and a later tie must not enter.
    units = np.zeros((3000, 2), dtype=np.float32)
    units[:, 0] = 1.0
    units[2990:, 1] = 1.0
    matrix = TermMatrix.from_units(sp.csr_matrix(units))
    q = sp.csr_matrix(np.array([[1.0, 0.5]], dtype=np.float32))
    monkeypatch.setattr(compiled, "BLOCK", block)
    (rows, scores), = _ranks(matrix, q, k, numba=True)
    want = (list(range(2990, 3000)) + list(range(k)))[:k]
    assert rows.tolist() == want and scores.tolist() == [1.5] * min(k, 10) + [1.0] * (k - min(k, 10))
    assert [(r.tolist(), s.tobytes()) for r, s in _ranks(matrix, q, k, numba=False)] == [(rows.tolist(), scores.tobytes())]


@needs_numba
def test_ties_at_the_cut_are_broken_by_unit():
    # Six units with the same score, k = 3: the three smallest units, whatever the path.
    units = sp.csr_matrix(np.array([[1.0, 0.0]] * 6 + [[0.0, 2.0]], dtype=np.float32))
    matrix = TermMatrix.from_units(units)
    q = sp.csr_matrix(np.array([[1.0, 0.25]], dtype=np.float32))
    (rows, scores), = _ranks(matrix, q, 3, numba=True)
    assert rows.tolist() == [0, 1, 2] and scores.tolist() == [1.0, 1.0, 1.0]


def test_the_variable_turns_the_compiled_path_off_and_on(monkeypatch):
    monkeypatch.setenv(scoring_matrix.VARIABLE, "0")
    assert not scoring_matrix.compiled_available() and not scoring_matrix.compiled_enabled(10 ** 12)
    monkeypatch.setenv(scoring_matrix.VARIABLE, "1")
    assert scoring_matrix.compiled_enabled(0) == scoring_matrix.compiled_available()


@needs_numba
def test_unset_the_loop_is_loaded_once_enough_postings_were_ranked(monkeypatch):
    monkeypatch.delenv(scoring_matrix.VARIABLE, raising=False)
    monkeypatch.setattr(scoring_matrix, "_loaded", None)
    monkeypatch.setattr(scoring_matrix, "_postings", 0)
    assert not scoring_matrix.compiled_enabled(scoring_matrix.WORTH_LOADING - 1)  # a single search: no load
    assert scoring_matrix.compiled_enabled(1)  # the running total reached it
    assert scoring_matrix.compiled_enabled(0)  # loaded: used from then on


@needs_numba
def test_a_unit_no_term_touched_never_enters_a_top_k_of_negative_scores():
    # The one-pass read of the buffer once held the k-th score so far as its bar: below an
    # untouched unit's 0 when every score is negative, so that unit entered the top k.
    matrix = TermMatrix.from_units(sp.csr_matrix(np.array([[-0.5], [0.0]], dtype=np.float32)))
    q = sp.csr_matrix(np.array([[1.0]], dtype=np.float32))
    for numba in (True, False):
        (rows, scores), = _ranks(matrix, q, 1, numba=numba)
        assert rows.tolist() == [0] and scores.tolist() == [-0.5]


@pytest.mark.parametrize("setting", ["0", None])
def test_a_ranking_off_the_loop_enters_no_compiled_code(monkeypatch, setting):
    # The switch is read in scoring.matrix: a ranking on the product path (FACTCHECK_NUMBA=0, or
    # unset before WORTH_LOADING postings) calls nothing in scoring.compiled, a module fewer on
    # a claim's path (docs/architecture.md).
    import sys
    if setting is None:
        monkeypatch.delenv(scoring_matrix.VARIABLE, raising=False)
    else:
        monkeypatch.setenv(scoring_matrix.VARIABLE, setting)
    monkeypatch.setattr(scoring_matrix, "_loaded", None)
    monkeypatch.setattr(scoring_matrix, "_postings", 0)
    units = TermMatrix.from_units(sp.csr_matrix(np.array([[1.0, 0.0], [0.5, 2.0]], dtype=np.float32)))
    entered = set()

    def profile(frame, event, _arg):
        if event == "call":
            entered.add(frame.f_globals.get("__name__", ""))
    sys.setprofile(profile)
    try:
        (rows, _), = units.rank(sp.csr_matrix(np.array([[1.0, 1.0]], dtype=np.float32)), 2)
    finally:
        sys.setprofile(None)
    assert rows.tolist() == [1, 0]
    assert scoring_matrix.__name__ in entered and compiled.__name__ not in entered


@needs_numba
def test_no_place_to_cache_the_compiled_code_compiles_it_uncached(monkeypatch):
    # A read-only install with no writable user cache: numba refuses cache=True; the loop still runs.
    import numba
    import numba.core.caching as caching
    monkeypatch.setattr(caching.CacheImpl, "_locator_classes", [])
    kernels = compiled._make(numba)  # not run: compiling uncached again would cost every session
    assert [k.py_func for k in kernels] == [compiled._rank_batch, compiled._products_batch]


@needs_numba
def test_a_saved_matrix_read_memory_mapped_ranks_the_same(tmp_path):
    units = sp.random(60, 9, density=0.3, random_state=3, format="csr", dtype=np.float32)
    TermMatrix.from_units(units).save(tmp_path)
    matrix = TermMatrix.load(tmp_path)  # read-only memory maps
    q = sp.random(4, 9, density=0.5, random_state=4, format="csr", dtype=np.float32)
    fast, slow = _ranks(matrix, q, 5, numba=True), _ranks(matrix, q, 5, numba=False)
    assert [(r.tolist(), s.tobytes()) for r, s in fast] == [(r.tolist(), s.tobytes()) for r, s in slow]


@needs_numba
@pytest.mark.parametrize("k", [3, 64, 65, 200])
@pytest.mark.parametrize("block", [7, 64, None])
def test_a_deep_top_k_ranks_the_same(monkeypatch, k, block):
    # Beyond compiled.SMALL_K the candidates are collected, cut as blocks go, then sorted: both
    # ways, same bits.
    if block:
        monkeypatch.setattr(compiled, "BLOCK", block)
    rng = np.random.default_rng(k)
    units = sp.csr_matrix(rng.choice([0.0, 0.0, 0.5, 1.0, 2.0], size=(400, 30)).astype(np.float32))
    matrix = TermMatrix.from_units(units)
    q = sp.csr_matrix(rng.choice([0.0, 0.0, 0.0, 1.0, 0.5], size=(20, 30)).astype(np.float32))
    fast, slow = _ranks(matrix, q, k, numba=True), _ranks(matrix, q, k, numba=False)
    assert [(r.tolist(), s.tobytes()) for r, s in fast] == [(r.tolist(), s.tobytes()) for r, s in slow]


@settings(max_examples=300, deadline=None)
@given(cases(), st.data())
def test_unit_scores_are_the_products_scores(case, data):
    matrix, queries, _ = case
    units = np.array(data.draw(st.lists(st.integers(0, matrix.n_units - 1), unique=True, max_size=matrix.n_units)),
                     dtype=np.int64)
    for i in range(queries.shape[0]):
        (touched, scores), = matrix.products(queries[i])
        want = matrix.full(touched, scores)[units]
        got = matrix.unit_scores(queries[i], units)
        assert got.dtype == want.dtype and np.array_equal(got, want)


@needs_numba
@settings(max_examples=300, deadline=None)
@given(cases(), st.sampled_from([np.float32, np.float64, np.int16]))
def test_compiled_products_are_the_products(case, dtype):
    # Every unit and score of scipy's product (sums of exactly 0 left out), units ascending, the
    # same bits; int16: the tag rule's shared-tag counts.
    matrix, queries, _ = case
    if dtype is np.int16:
        matrix = matrix.with_data(np.sign(matrix.data).astype(np.int16))
    fast, slow = _products(matrix, queries, numba=True), _products(matrix, queries, numba=False)
    assert len(fast) == len(slow) == queries.shape[0]
    for (rows, scores), (want_rows, want_scores) in zip(fast, slow):
        assert rows.tolist() == want_rows.tolist()
        assert scores.dtype == want_scores.dtype and scores.tobytes() == want_scores.tobytes()
    again = _products(matrix, queries, numba=True)  # the block's sums were left zeros
    assert [(r.tolist(), s.tobytes()) for r, s in again] == [(r.tolist(), s.tobytes()) for r, s in fast]


@needs_numba
@settings(max_examples=300, deadline=None)
@given(cases(), st.integers(1, 9), st.sampled_from([np.float32, np.int16]))
def test_compiled_products_a_few_units_a_block_are_the_products(case, block, dtype):
    matrix, queries, _ = case
    if dtype is np.int16:
        matrix = matrix.with_data(np.sign(matrix.data).astype(np.int16))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(compiled, "BLOCK", block)
        fast = _products(matrix, queries, numba=True)
    slow = _products(matrix, queries, numba=False)
    assert [(r.tolist(), s.tobytes()) for r, s in fast] == [(r.tolist(), s.tobytes()) for r, s in slow]


@needs_numba
@pytest.mark.parametrize("density", [0.002, 0.3])
def test_compiled_products_sorted_or_read_off_the_buffer_are_the_same(density):
    # 0.002: each query's postings are under 1/SORT_RATIO of the units, which are sorted; 0.3:
    # over it, every block is read whole. Several queries a batch, some without postings.
    rng = np.random.default_rng(7)
    units = sp.random(20000, 40, density=density, random_state=5, format="csr", dtype=np.float64)
    matrix = TermMatrix.from_units(units)
    q = sp.random(30, 40, density=0.1, random_state=6, format="csr", dtype=np.float64)
    q.data[:] = rng.choice([0.5, 1.0, 2.0], size=q.nnz)
    q = sp.vstack([q, sp.csr_matrix((1, 40)), q[:3]], format="csr")
    cum = np.concatenate([[0], np.cumsum(matrix.df[q.indices])])
    postings = cum[q.indptr[1:]] - cum[q.indptr[:-1]]
    sorted_ = postings[postings > 0] * compiled.SORT_RATIO < matrix.n_units
    assert (postings == 0).any() and (sorted_.all() if density < 0.1 else not sorted_.any())
    fast, slow = _products(matrix, q, numba=True), _products(matrix, q, numba=False)
    assert [(r.tolist(), s.tobytes()) for r, s in fast] == [(r.tolist(), s.tobytes()) for r, s in slow]
