"""The term-at-a-time top k and product compiled by numba (the ``fast`` extra), used by
:meth:`~factcheck.scoring.matrix.TermMatrix.rank` and ``products`` when numba imports.
The product (every unit sharing a term, units ascending) is for the methods that read every
candidate's score, as the tag rule does.

Each query's terms are added in the order stored (ascending, for a canonical query),
``buf[unit] += weight * w``, into a dense buffer that starts at 0: scipy's ``csr_matmat``
adds a product's entries in that order, so every score has the product's bits (no ``fastmath``: a fused multiply-add would change them). The top
``k`` is read from the units scoring at or above the ``k``-th score of the shortest term with
``k`` units (no unit below it can enter), sorted by score descending, ties by unit ascending,
as :func:`~factcheck.scoring.topk.top_k` orders them; only the entries touched are reset.

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

# A query with at least as many postings as 1/SCAN_RATIO of the units reads the whole buffer
# (measured: 4 halves the loop's time on the arXiv titles, 3,397 units, and leaves 1.2M as it was).
SCAN_RATIO = 4
# A top k of at most this many is kept sorted by insertion as the units are read.
SMALL_K = 64
# A product whose postings reach 1/SORT_RATIO of the units reads its units ascending off the
# whole buffer rather than sorting the ones it touched (a sort costs about SORT_RATIO buffer
# reads a unit).
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
    global _place
    # compiled into the loop where it is called (the loop finds it by this module's name)
    _place = numba.njit(inline="always")(getattr(_place, "py_func", _place))  # py_func: made before
    try:
        # The compiled code is kept beside this module (or numba's per-user cache), as Python
        # keeps its bytecode: a later process skips the one-off compilation.
        jit = numba.njit(cache=True, nogil=True)
        return jit(_rank_batch), jit(_products_batch)
    except RuntimeError:  # no place to cache it: compile in each process
        return numba.njit(nogil=True)(_rank_batch), numba.njit(nogil=True)(_products_batch)


def rank_batch(indptr, indices, data, q_indptr, q_indices, q_data, k: int, buf):
    """Each query's top ``k`` as ``(counts, rows, scores)``: query ``i``'s units are
    ``rows[i * k:i * k + counts[i]]``. ``q_*``: the queries' CSR arrays (terms added in the
    order stored), in the matrix's index and data dtypes; ``buf``: zeros, one per unit (left zeros)."""
    return _compiled()[0](np.asarray(indptr), np.asarray(indices), np.asarray(data), q_indptr, q_indices, q_data,
                          k, buf)


def products_batch(indptr, indices, data, q_indptr, q_indices, q_data, buf):
    """Each query's product as ``(ends, rows, scores)``: query ``i``'s units (ascending) and
    scores are ``rows[ends[i - 1]:ends[i]]`` (``ends[-1]`` read as 0), every unit whose sum is
    not 0, with the bits of scipy's product (its sums, in the order above). Arguments as
    :func:`rank_batch`'s; the buffer is left zeros."""
    return _compiled()[1](np.asarray(indptr), np.asarray(indices), np.asarray(data), q_indptr, q_indices, q_data,
                          buf)


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


def _rank_batch(indptr, indices, data, q_indptr, q_indices, q_data, k, buf):  # pragma: no cover (compiled)
    n_queries = len(q_indptr) - 1
    n_units = len(buf)
    counts = np.zeros(n_queries, dtype=np.int64)
    rows = np.zeros(n_queries * k, dtype=np.int64)
    scores = np.zeros(n_queries * k, dtype=buf.dtype)
    if k < 1:
        return counts, rows, scores
    small = k <= SMALL_K  # the top k kept sorted by insertion; else collected, then sorted
    best_s = np.empty(k, dtype=buf.dtype)
    best_u = np.empty(k, dtype=np.int64)
    cand_rows = np.empty(0 if small else n_units, dtype=np.int64)
    cand_scores = np.empty(0 if small else n_units, dtype=buf.dtype)
    for i in range(n_queries):
        a, b = q_indptr[i], q_indptr[i + 1]
        total = 0
        shortest, shortest_len = -1, 0
        for jj in range(a, b):
            t = q_indices[jj]
            v = q_data[jj]
            s, e = indptr[t], indptr[t + 1]
            total += e - s
            if e - s >= k and (shortest < 0 or e - s < shortest_len):
                shortest, shortest_len = t, e - s
            for p in range(s, e):
                buf[indices[p]] += v * data[p]
        if total == 0:
            continue
        if small and total * SCAN_RATIO >= n_units:
            # Postings covering much of the buffer: one sequential pass over it, each unit
            # against the k-th score so far (a test that is mostly false, so cheap), then the
            # buffer cleared at once. Units ascend, so a tie never displaces an earlier unit.
            n = 0
            least = buf.dtype.type(0)  # once full: best_s[k - 1]
            for u in range(n_units):
                x = buf[u]
                # Full: above the k-th score; else any nonzero. An untouched unit (0) never enters,
                # though a full top k of negatives is below it. (Written as measured: the form
                # ``(x > least or n < k) and x != 0`` compiles to a loop three times as slow.)
                if x > least if n == k else x != 0:
                    if x == 0:
                        continue
                    n = _place(best_s, best_u, n, k, x, u)
                    if n == k:
                        least = best_s[k - 1]
            buf[:] = 0
            for r in range(n):
                rows[i * k + r] = best_u[r]
                scores[i * k + r] = best_s[r]
            counts[i] = n
            continue
        # The bound: the k-th score of the shortest term's units (k of them score at least it).
        bound = -np.inf
        if shortest >= 0:
            m = 0  # best_s[:m]: the largest nonzero scores so far, descending
            for p in range(indptr[shortest], indptr[shortest + 1]):
                x = buf[indices[p]]
                if x != 0 and (m < k or x > best_s[m - 1]):
                    m = _place(best_s, best_u, m, k, x, indices[p])
            if m == k:
                bound = best_s[k - 1]
        n = 0
        scan = total * SCAN_RATIO >= n_units
        # Postings covering much of the buffer: one sequential pass over it beats gathering each
        # posting again. Otherwise a unit of several terms is taken at its first visit.
        jj = a
        p, e = 0, 0
        u = -1
        while True:
            if scan:
                u += 1
                if u >= n_units:
                    break
            else:
                while p >= e and jj < b:
                    t = q_indices[jj]
                    p, e = indptr[t], indptr[t + 1]
                    jj += 1
                if p >= e:
                    break
                u = indices[p]
                p += 1
            x = buf[u]
            if x == 0:  # the product leaves out sums of exactly 0
                continue
            buf[u] = 0
            if x < bound:
                continue
            if not small:
                cand_rows[n] = u
                cand_scores[n] = x
                n += 1
            elif n < k or x > best_s[n - 1] or (x == best_s[n - 1] and u < best_u[n - 1]):
                n = _place(best_s, best_u, n, k, x, u)
        if small:
            for r in range(n):
                rows[i * k + r] = best_u[r]
                scores[i * k + r] = best_s[r]
            counts[i] = n
            continue
        found_rows, found_scores = cand_rows[:n], cand_scores[:n]
        # units ascending, then a stable sort by score descending: ties by unit
        by_unit = np.argsort(found_rows)
        found_rows, found_scores = found_rows[by_unit], found_scores[by_unit]
        order = np.argsort(-found_scores, kind="mergesort")
        m = min(k, n)
        for r in range(m):
            rows[i * k + r] = found_rows[order[r]]
            scores[i * k + r] = found_scores[order[r]]
        counts[i] = m
    return counts, rows, scores


def _products_batch(indptr, indices, data, q_indptr, q_indices, q_data, buf):  # pragma: no cover (compiled)
    n_queries = len(q_indptr) - 1
    n_units = len(buf)
    # Each query's product has at most as many entries as its postings, and the units.
    room = np.zeros(n_queries + 1, dtype=np.int64)
    totals = np.zeros(n_queries, dtype=np.int64)  # each query's postings
    widest = 0
    for i in range(n_queries):
        total = 0
        for jj in range(q_indptr[i], q_indptr[i + 1]):
            t = q_indices[jj]
            total += indptr[t + 1] - indptr[t]
        totals[i] = total
        room[i + 1] = room[i] + min(total, n_units)
        if total * SORT_RATIO < n_units:  # its touched units are noted, then sorted
            widest = max(widest, total)
    ends = np.zeros(n_queries, dtype=np.int64)
    rows = np.empty(room[n_queries], dtype=np.int64)
    scores = np.empty(room[n_queries], dtype=buf.dtype)
    # A unit is noted when its sum is 0 before an add: noted again if its sum returned to 0, then
    # read once (its buffer entry is cleared at the first reading).
    touched = np.empty(widest, dtype=np.int64)
    n = 0
    for i in range(n_queries):
        a, b = q_indptr[i], q_indptr[i + 1]
        scan = totals[i] * SORT_RATIO >= n_units
        m = 0
        for jj in range(a, b):
            t = q_indices[jj]
            v = q_data[jj]
            for p in range(indptr[t], indptr[t + 1]):
                u = indices[p]
                if not scan and buf[u] == 0:
                    touched[m] = u
                    m += 1
                buf[u] += v * data[p]
        if scan:
            for u in range(n_units):
                x = buf[u]
                if x != 0:  # the product leaves out sums of exactly 0
                    rows[n] = u
                    scores[n] = x
                    n += 1
                    buf[u] = 0
        else:
            for u in np.sort(touched[:m]):
                x = buf[u]
                if x != 0:
                    rows[n] = u
                    scores[n] = x
                    n += 1
                    buf[u] = 0
        ends[i] = n
    return ends, rows[:n], scores[:n]
