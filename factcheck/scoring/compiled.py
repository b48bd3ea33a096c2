"""The term-at-a-time top k and product compiled by numba (the ``fast`` extra), used by
:meth:`~factcheck.scoring.matrix.TermMatrix.rank` and ``products`` when numba imports.
The product (every unit sharing a term, units ascending) is for the methods that read every
candidate's score, as the tag rule does.

Each query's terms are added in the order stored (ascending, for a canonical query),
``sum[unit] += weight * w``, into sums that start at 0: scipy's ``csr_matmat`` adds a
product's entries in that order, so every score has the product's bits (no ``fastmath``: a
fused multiply-add would change them). The top ``k`` is sorted by score descending, ties by
unit ascending, as :func:`~factcheck.scoring.topk.top_k` orders them.

The top ``k`` and the product are made a block of :data:`BLOCK` units at a time: every
term's postings in the block are added into the block's sums, which stay in a core's cache,
then the block's units are read (into the top, or out in order). Adding into one buffer as
long as the units misses the cache at almost every posting once the units run to millions (a
buffer of 25M scores is 100 MB): at 25M passages the block form ranks a claim in about a
fifth of the time, with the same bits (``docs/decisions.md``, "A block at a time").

Loading numba and its compiled code costs a fraction of a second once per process, more than
a few queries cost on the product path: with ``FACTCHECK_NUMBA`` unset the loop is loaded once
the postings ranked in the process reach :data:`~factcheck.scoring.matrix.WORTH_LOADING` (a
batch of claims over a large index does at once; a single search does not).
``FACTCHECK_NUMBA=1`` uses it from the first call, ``FACTCHECK_NUMBA=0`` never (the product
path then ranks, with the same results); :func:`~factcheck.scoring.matrix.compiled_enabled`
reads the variable at every call. The switch lives in :mod:`~factcheck.scoring.matrix`, so
this module is entered only once the loop runs.
"""

from __future__ import annotations

import numpy as np

__all__ = ["load", "products_batch", "rank_batch"]

# Units ranked a block at a time: the block's scores (64 KB of float32) stay in a core's cache
# (measured at 25M: 8,192 and 16,384 alike, 65,536 10% and 262,144 30% slower).
BLOCK = 16_384
# A block whose postings reach 1/SCAN_RATIO of its units is read whole, in order (measured: 4
# halves the loop's time on the arXiv titles, 3,397 units, and leaves 1.2M as it was).
SCAN_RATIO = 4
# A top k of at most this many is kept sorted by insertion as the units are read.
SMALL_K = 64
# A product's block whose postings reach 1/SORT_RATIO of its units is read whole, in order,
# rather than its touched units sorted (a sort costs about SORT_RATIO reads a unit).
SORT_RATIO = 64

_kernel = None  # the compiled functions once made; False when numba is missing


def load() -> bool:
    """Whether the loop can run: numba imports (loads it, compiling it the first time)."""
    return _compiled() is not False


def _compiled():
    global _kernel
    if _kernel is None:
        try:
            import numba
        except ImportError:
            _kernel = False
        else:
            _kernel = _make(numba)
    return _kernel


def _make(numba):
    global _place, _cut, _best_first, _cursors, _start, _next_block
    # compiled into the loops where they are called (the loops find them by this module's names)
    _place = numba.njit(inline="always")(getattr(_place, "py_func", _place))  # py_func: made before
    _cursors = numba.njit(getattr(_cursors, "py_func", _cursors))
    _start = numba.njit(inline="always")(getattr(_start, "py_func", _start))
    _next_block = numba.njit(inline="always")(getattr(_next_block, "py_func", _next_block))
    _best_first = numba.njit(getattr(_best_first, "py_func", _best_first))
    _cut = numba.njit(getattr(_cut, "py_func", _cut))
    try:
        # The compiled code is kept beside this module (or numba's per-user cache), as Python
        # keeps its bytecode: a later process skips the one-off compilation.
        jit = numba.njit(cache=True, nogil=True)
        return jit(_rank_batch), jit(_products_batch)
    except RuntimeError:  # no place to cache it: compile in each process
        return numba.njit(nogil=True)(_rank_batch), numba.njit(nogil=True)(_products_batch)


def rank_batch(indptr, indices, data, q_indptr, q_indices, q_data, k: int, n_units: int):
    """Each query's top ``k`` as ``(counts, rows, scores)``: query ``i``'s units are
    ``rows[i * k:i * k + counts[i]]``. ``q_*``: the queries' CSR arrays (terms added in the
    order stored), in the matrix's index and data dtypes; ``n_units``: the matrix's units."""
    return _compiled()[0](np.asarray(indptr), np.asarray(indices), np.asarray(data), q_indptr, q_indices, q_data,
                          k, n_units, BLOCK)


def products_batch(indptr, indices, data, q_indptr, q_indices, q_data, n_units: int):
    """Each query's product as ``(ends, rows, scores)``: query ``i``'s units (ascending) and
    scores are ``rows[ends[i - 1]:ends[i]]`` (``ends[-1]`` read as 0), every unit whose sum is
    not 0, with the bits of scipy's product (its sums, in the order above). Arguments as
    :func:`rank_batch`'s."""
    return _compiled()[1](np.asarray(indptr), np.asarray(indices), np.asarray(data), q_indptr, q_indices, q_data,
                          n_units, BLOCK)


def _place(best_s, best_u, n, k, x, u):  # pragma: no cover (compiled)
    """``(x, u)`` placed in the top ``best_s[:n]``, ``best_u[:n]`` (score descending, ties by unit
    ascending, as top_k), the last dropped when ``n == k``: the top's new size."""
    j = n if n < k else k - 1
    while j > 0 and (best_s[j - 1] < x or (best_s[j - 1] == x and best_u[j - 1] > u)):
        best_s[j] = best_s[j - 1]
        best_u[j] = best_u[j - 1]
        j -= 1
    best_s[j] = x
    best_u[j] = u
    return n + 1 if n < k else n


def _cursors(q_indptr):  # pragma: no cover (compiled)
    """Room for each term's next posting and its end, for the widest query."""
    width = 0
    for i in range(len(q_indptr) - 1):
        width = max(width, q_indptr[i + 1] - q_indptr[i])
    return np.empty(width, dtype=np.int64), np.empty(width, dtype=np.int64)


def _start(indptr, terms, at, stop, n_units, ratio):  # pragma: no cover (compiled)
    """Each of a query's ``terms`` at its first posting; whether the query is dense: its
    postings reach ``1 / ratio`` of the units, so every block is read whole and no unit noted."""
    total = 0
    for j in range(len(terms)):
        at[j], stop[j] = indptr[terms[j]], indptr[terms[j] + 1]
        total += stop[j] - at[j]
    return total * ratio >= n_units


def _next_block(indices, data, q_data, at, stop, n_units, block, sums, touched, dense, ratio):  # pragma: no cover (compiled)
    """The next block holding a posting of the query's terms (``at``: each term's next posting,
    moved on), every term's postings in it added into ``sums`` (terms in the order stored: each
    unit's sum has the product's bits), the units touched noted in ``touched`` unless ``dense``
    (at most the block's units). Returns ``(first unit, units, units noted, whole)``, ``units``
    0 when no posting is left; ``whole``: the block is to be read whole, in order (the query is
    dense, or every unit was noted, or a sum back at 0 noted twice, or its postings reach
    ``1 / ratio`` of its units)."""
    lo = n_units
    for j in range(len(q_data)):
        if at[j] < stop[j] and indices[at[j]] < lo:
            lo = indices[at[j]]
    if lo >= n_units:
        return lo, 0, 0, 0
    lo -= lo % block
    span = min(block, n_units - lo)
    m, added = 0, 0
    for j in range(len(q_data)):
        v = q_data[j]
        p, e = at[j], stop[j]
        if dense and span == n_units:  # one block, read whole: every posting is in it
            for p in range(p, e):
                sums[indices[p]] += v * data[p]
            p = e
        elif dense:
            while p < e:
                u = indices[p] - lo
                if u >= span:
                    break
                sums[u] += v * data[p]
                p += 1
        else:
            while p < e:
                u = indices[p] - lo
                if u >= span:
                    break
                # noted when its sum is 0 before the add, without a branch (the test is as often
                # true as not); once the block's units are noted, no more
                touched[m] = u
                m = min(m + (sums[u] == 0), span)
                sums[u] += v * data[p]
                p += 1
        added += p - at[j]
        at[j] = p
    return lo, span, m, dense or m >= span or added * ratio >= span


def _rank_batch(indptr, indices, data, q_indptr, q_indices, q_data, k, n_units, block):  # pragma: no cover (compiled)
    n_queries = len(q_indptr) - 1
    counts = np.zeros(n_queries, dtype=np.int64)
    rows = np.zeros(n_queries * k, dtype=np.int64)
    scores = np.zeros(n_queries * k, dtype=data.dtype)
    if k < 1 or n_units < 1:
        return counts, rows, scores
    block = max(1, min(block, n_units))
    small = k <= SMALL_K  # the top k kept sorted by insertion; else collected, cut now and then, sorted
    sums = np.zeros(block, dtype=data.dtype)  # one block's scores, left zeros
    touched = np.empty(block + 1, dtype=np.int64)  # its units (less its first) while fewer than the block
    best_s = np.empty(k, dtype=data.dtype)
    best_u = np.empty(k, dtype=np.int64)
    room = 0 if small else 4 * k + block
    cand_u = np.empty(room, dtype=np.int64)
    cand_s = np.empty(room, dtype=data.dtype)
    at, stop = _cursors(q_indptr)  # each term's next posting, and its end
    for i in range(n_queries):
        a, b = q_indptr[i], q_indptr[i + 1]
        dense = _start(indptr, q_indices[a:b], at, stop, n_units, SCAN_RATIO)
        n = 0  # small: the top's size; else the candidates'
        # Small k, once full: the k-th score; large k, once cut: the cut. Only a unit above it
        # can enter, or (small k) a tie of a smaller unit in a block not read in order.
        least = data.dtype.type(-np.inf)  # of the scores' type: a mixed test slows the loop threefold
        while True:
            lo, span, m, whole = _next_block(indices, data, q_data[a:b], at, stop, n_units, block, sums, touched,
                                             dense, SCAN_RATIO)
            if span == 0:
                break
            # Read whole and in order, each unit against the k-th score so far (a test mostly false).
            if whole:
                if small:
                    for u in range(span):
                        x = sums[u]
                        # Units ascend (blocks too), so a tie never displaces an earlier unit.
                        # Full: above the k-th score; else any nonzero. (Written as measured: the
                        # form ``(x > least or n < k) and x != 0`` compiles to a loop three times as slow.)
                        if x > least if n == k else x != 0:
                            if x == 0:
                                continue
                            n = _place(best_s, best_u, n, k, x, lo + u)
                            if n == k:
                                least = best_s[k - 1]
                else:
                    for u in range(span):
                        x = sums[u]
                        if x > least and x != 0:  # the product leaves out sums of exactly 0
                            cand_u[n] = lo + u
                            cand_s[n] = x
                            n += 1
                sums[:span] = 0
            else:
                for r in range(m):
                    u = touched[r]
                    x = sums[u]
                    if x == 0:  # the product leaves out sums of exactly 0 (or read already)
                        continue
                    sums[u] = 0  # cleared at its first reading: a unit noted twice is read once
                    if not small:
                        if x > least:
                            cand_u[n] = lo + u
                            cand_s[n] = x
                            n += 1
                    elif n < k or x > best_s[n - 1] or (x == best_s[n - 1] and lo + u < best_u[n - 1]):
                        n = _place(best_s, best_u, n, k, x, lo + u)
                        if n == k:
                            least = best_s[k - 1]
            if not small and n >= 4 * k:
                n, least = _cut(cand_u, cand_s, n, k)
        if small:
            for r in range(n):
                rows[i * k + r] = best_u[r]
                scores[i * k + r] = best_s[r]
            counts[i] = n
            continue
        m = _best_first(cand_u, cand_s, n, k)
        rows[i * k:i * k + m] = cand_u[:m]
        scores[i * k:i * k + m] = cand_s[:m]
        counts[i] = m
    return counts, rows, scores


def _cut(cand_u, cand_s, n, k):  # pragma: no cover (compiled)
    """The candidates ``[:n]`` (all from earlier blocks than any to come) cut to those at or
    above the ``k``-th score: ``(their number, that score)``. A later unit tying with it comes
    after ``k`` better or tied smaller units, so only a score above it can enter later."""
    cut = -np.partition(-cand_s[:n], k - 1)[k - 1]
    kept = 0
    for r in range(n):
        if cand_s[r] >= cut:
            cand_u[kept] = cand_u[r]
            cand_s[kept] = cand_s[r]
            kept += 1
    if kept >= 2 * k:  # many ties at the cut: the k first by score, then unit
        kept = _best_first(cand_u, cand_s, kept, k)
    return kept, cut


def _best_first(cand_u, cand_s, n, k):  # pragma: no cover (compiled)
    """The first ``min(k, n)`` of the candidates ``[:n]`` by score descending, ties by unit
    ascending, written back to their front: their number."""
    # units ascending, then a stable sort by score descending: ties by unit
    by_unit = np.argsort(cand_u[:n])
    us, ss = cand_u[:n][by_unit], cand_s[:n][by_unit]
    order = np.argsort(-ss, kind="mergesort")
    m = min(k, n)
    for r in range(m):
        cand_u[r] = us[order[r]]
        cand_s[r] = ss[order[r]]
    return m


def _products_batch(indptr, indices, data, q_indptr, q_indices, q_data, n_units, block):  # pragma: no cover (compiled)
    n_queries = len(q_indptr) - 1
    # Each query's product has at most as many entries as its postings, and the units.
    room = np.zeros(n_queries + 1, dtype=np.int64)
    for i in range(n_queries):
        total = 0
        for jj in range(q_indptr[i], q_indptr[i + 1]):
            t = q_indices[jj]
            total += indptr[t + 1] - indptr[t]
        room[i + 1] = room[i] + min(total, n_units)
    ends = np.zeros(n_queries, dtype=np.int64)
    rows = np.empty(room[n_queries], dtype=np.int64)
    scores = np.empty(room[n_queries], dtype=data.dtype)
    if n_units < 1:
        return ends, rows[:0], scores[:0]
    block = max(1, min(block, n_units))
    sums = np.zeros(block, dtype=data.dtype)  # one block's sums, left zeros
    touched = np.empty(block + 1, dtype=np.int64)  # its units (less its first) while fewer than the block
    at, stop = _cursors(q_indptr)  # each term's next posting, and its end
    n = 0
    for i in range(n_queries):
        a, b = q_indptr[i], q_indptr[i + 1]
        dense = _start(indptr, q_indices[a:b], at, stop, n_units, SORT_RATIO)
        while True:
            lo, span, m, whole = _next_block(indices, data, q_data[a:b], at, stop, n_units, block, sums, touched,
                                             dense, SORT_RATIO)
            if span == 0:
                break
            if whole:
                for u in range(span):
                    x = sums[u]
                    if x != 0:  # the product leaves out sums of exactly 0
                        rows[n] = lo + u
                        scores[n] = x
                        n += 1
                sums[:span] = 0
            else:
                for u in np.sort(touched[:m]):
                    x = sums[u]
                    if x != 0:  # 0: a sum of exactly 0, or a unit noted twice and read already
                        rows[n] = lo + u
                        scores[n] = x
                        n += 1
                        sums[u] = 0
        ends[i] = n
    return ends, rows[:n], scores[:n]
