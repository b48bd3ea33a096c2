"""A term-major weight matrix, scored by one sparse product ``Q @ W`` (a score has the same
bits whatever the batch: each entry sums its query's terms in ascending term order)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from factcheck.formats.files import save_npy
from factcheck.formats.npy import open_npy, release
from factcheck.scoring.topk import top_k

__all__ = ["PRODUCT_BUDGET", "VARIABLE", "WORTH_LOADING", "TermFill", "TermMatrix", "compiled_available",
           "compiled_enabled"]

PRODUCT_BUDGET = 1_000_000
_ARRAYS = ("indptr", "indices", "data")

# The switch for the compiled loop (factcheck.scoring.compiled, whose text says when it runs):
# kept here so that a ranking that does not use the loop never enters, nor imports, that module.
VARIABLE = "FACTCHECK_NUMBA"
WORTH_LOADING = 20_000_000  # postings: about what the product path spends loading numba costs
_loaded = None  # whether the loop loaded (numba imports), once it was first asked for
_postings = 0  # postings ranked on the product path before the loop was loaded


def _setting() -> str:
    return os.environ.get(VARIABLE, "").strip()


def compiled_available() -> bool:
    """Whether the compiled loop can run: numba imports and ``FACTCHECK_NUMBA`` is not ``0`` (loads it)."""
    global _loaded
    if _setting() == "0":
        return False
    if _loaded is None:
        from factcheck.scoring import compiled
        _loaded = compiled.load()
    return _loaded


def compiled_enabled(postings: int) -> bool:
    """Whether to rank a batch touching ``postings`` postings with the compiled loop
    (:mod:`~factcheck.scoring.compiled` says when); reads ``FACTCHECK_NUMBA`` at every call."""
    global _postings
    setting = _setting()
    if setting == "0":
        return False
    if _loaded is None and setting != "1":
        _postings += postings
        if _postings < WORTH_LOADING:
            return False
    return compiled_available()


def _index_dtype(nnz: int, n: int):
    return np.int32 if max(nnz, n) < 2 ** 31 else np.int64


class TermMatrix:
    """Weights of terms (rows) in units (columns), term-major CSR.

    Parameters
    ----------
    indptr, indices, data : ndarray
        CSR arrays, units ascending within a term.
    n_units : int

    Example
    -------
    >>> import scipy.sparse as sp
    >>> units = sp.csr_matrix([[1.0, 0.0], [0.5, 2.0], [0.0, 1.0]])   # 3 units x 2 terms
    >>> w = TermMatrix.from_units(units)
    >>> w.n_terms, w.n_units, w.df.tolist()
    (2, 3, [2, 2])
    >>> [(r.tolist(), s.tolist()) for r, s in w.rank(sp.csr_matrix([[1.0, 1.0]]), 2)]
    [([1, 0], [2.5, 1.0])]
    """

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, n_units: int):
        dtype = _index_dtype(len(indices), n_units)
        self.indptr = np.asarray(indptr, dtype=dtype)
        self.indices = np.asarray(indices, dtype=dtype)
        self.data = np.asarray(data)
        self.n_units = int(n_units)
        if len(self.indptr) < 1 or int(self.indptr[-1]) != len(self.indices) or len(self.data) != len(self.indices):
            raise ValueError("inconsistent term matrix arrays")
        self.csr = sp.csr_matrix((self.data, self.indices, self.indptr), shape=(self.n_terms, self.n_units))
        self.csr.has_sorted_indices = True  # as built: no scan of every entry

    @property
    def n_terms(self) -> int:
        return len(self.indptr) - 1

    @property
    def df(self) -> np.ndarray:
        """Units per term (the document frequency)."""
        return np.diff(self.indptr)

    @classmethod
    def from_units(cls, units, dtype=None) -> "TermMatrix":
        """The term-major copy of a unit-major (units x terms) sparse matrix."""
        m = sp.csr_matrix(units)
        m.sum_duplicates()
        index = _index_dtype(m.nnz, max(m.shape))
        m = sp.csr_matrix((m.data.astype(dtype or m.data.dtype, copy=False), m.indices.astype(index, copy=False),
                           m.indptr.astype(index, copy=False)), shape=m.shape)
        t = m.tocsc()  # the columns of units x terms are the rows of terms x units
        t.sort_indices()
        return cls(t.indptr, t.indices, t.data, m.shape[0])

    def with_data(self, data: np.ndarray) -> "TermMatrix":
        """The same postings with other weights (one per entry, in entry order)."""
        return TermMatrix(self.indptr, self.indices, data, self.n_units)

    def take_terms(self, terms) -> "TermMatrix":
        """The rows of ``terms`` (term ids, ascending) alone, as rows ``0..len(terms)-1``: the
        same postings and weights, so a query on those terms scores as on the whole matrix."""
        terms = np.asarray(terms, dtype=np.int64)
        ptr = np.asarray(self.indptr, dtype=np.int64)
        starts, lengths = ptr[terms], ptr[terms + 1] - ptr[terms]
        indptr = np.zeros(len(terms) + 1, dtype=np.int64)
        np.cumsum(lengths, out=indptr[1:])
        take = np.repeat(starts - indptr[:-1], lengths) + np.arange(indptr[-1], dtype=np.int64)
        return TermMatrix(indptr, self.indices[take], self.data[take], self.n_units)

    def _queries(self, queries) -> sp.csr_matrix:
        q = sp.csr_matrix(queries)
        dtype = self.indptr.dtype  # a dtype mismatch makes scipy copy the matrix at every product
        return sp.csr_matrix((q.data.astype(self.data.dtype, copy=False), q.indices.astype(dtype, copy=False),
                              q.indptr.astype(dtype, copy=False)), shape=(q.shape[0], self.n_terms))

    def products(self, queries, sort: bool = False):
        """Each query's ``(units, scores)``: the units sharing a term with it (ascending with
        ``sort``), but for sums of exactly 0. With numba, a compiled loop adds the terms a block
        of units at a time, as :meth:`rank` (units then always ascending): scipy's product
        allocates and clears two arrays as long as the units at every call."""
        q = self._queries(queries)
        # each query's product entries at most: the postings of its terms
        touched = np.zeros(q.nnz + 1, dtype=np.int64)
        np.cumsum(self.df[q.indices], out=touched[1:])
        bounds = q.indptr.astype(np.int64)
        per_query = (touched[bounds[1:]] - touched[bounds[:-1]]).tolist()
        start, n = 0, q.shape[0]
        while start < n:
            stop, total = start + 1, per_query[start]
            while stop < n and total + per_query[stop] <= PRODUCT_BUDGET:
                total += per_query[stop]
                stop += 1
            batch = q[start:stop]
            if compiled_enabled(total):
                from factcheck.scoring import compiled  # entered only when its loop scores
                ends, units, scores = compiled.products_batch(self.indptr, self.indices, self.data, batch.indptr,
                                                              batch.indices, batch.data, self.n_units)
                ptr = [0, *ends.tolist()]
            else:
                product = batch @ self.csr
                if sort:
                    product.sort_indices()
                ptr, units, scores = product.indptr.tolist(), product.indices, product.data
            for a, b in zip(ptr[:-1], ptr[1:]):
                yield units[a:b], scores[a:b]
            start = stop

    def rank(self, queries, k: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """Each query's top ``k`` units and scores: :func:`~factcheck.scoring.topk.top_k` of
        :meth:`products`, the same bits. With numba, a compiled loop adds each query's terms
        a block of units at a time into scores that stay in the cache and reads the top ``k``
        without building the product (:mod:`~factcheck.scoring.compiled`, which says when:
        ``FACTCHECK_NUMBA=1`` always, ``0`` never)."""
        q = self._queries(queries)  # terms taken as stored, as the product takes them
        if not compiled_enabled(int(self.df[q.indices].sum())):
            return [top_k(scores, k, units) for units, scores in self.products(q)]
        from factcheck.scoring import compiled  # entered only when its loop ranks
        k = max(0, int(k))
        counts, rows, scores = compiled.rank_batch(self.indptr, self.indices, self.data, q.indptr, q.indices, q.data,
                                                   k, self.n_units)
        return [(rows[i * k:i * k + n], scores[i * k:i * k + n]) for i, n in enumerate(counts.tolist())]

    def unit_scores(self, query, units) -> np.ndarray:
        """One query's scores of ``units`` (0 where a unit shares no term with it), with the
        bits :meth:`products` gives them: each term's ``count * weight`` added in the query's
        stored term order, from 0, in the weights' dtype. A few units' scores cost a binary
        search per term and unit, not the postings of the query's terms."""
        q = self._queries(query)
        if q.shape[0] != 1:
            raise ValueError("unit_scores takes one query")
        units = np.asarray(units, dtype=np.int64)
        out = np.zeros(len(units), dtype=self.data.dtype)
        for t, v in zip(q.indices.tolist(), q.data):
            a, b = int(self.indptr[t]), int(self.indptr[t + 1])
            if a == b or not len(units):
                continue
            seg = self.indices[a:b]
            at = np.minimum(np.searchsorted(seg, units), b - a - 1)
            hit = np.flatnonzero(seg[at] == units)
            out[hit] += v * self.data[a + at[hit]]
        return out

    def full(self, units: np.ndarray, scores: np.ndarray) -> np.ndarray:
        """A query's scores as one vector over every unit (0 where it scored none)."""
        out = np.zeros(self.n_units, dtype=scores.dtype)
        out[units] = scores
        return out

    def save(self, folder, prefix: str = "") -> None:
        """The arrays as ``{prefix}NAME.npy`` in ``folder``."""
        save_arrays(folder, {"indptr": self.indptr, "indices": self.indices, "data": self.data,
                             "shape": _shape(self.n_terms, self.n_units)}, prefix)

    @classmethod
    def load(cls, folder, prefix: str = "") -> "TermMatrix":
        """A matrix :meth:`save` wrote, memory-mapped, its structure checked (a ValueError):
        its files are not hashed before use, and scipy's products trust ``indptr`` and ``indices``."""
        n_terms, n_units = (int(x) for x in load_array(folder, f"{prefix}shape", mmap=False))
        out = cls(*(load_array(folder, prefix + name) for name in _ARRAYS), n_units)
        ptr, idx = out.indptr, out.indices
        if out.n_terms != n_terms or ptr[0] != 0 or np.any(ptr[1:] < ptr[:-1]) or \
                (len(idx) and (idx.min() < 0 or idx.max() >= n_units)):
            raise ValueError("inconsistent term matrix arrays")
        release(ptr, idx)  # the check read them through; a query reads its terms' postings again
        return out


class TermFill:
    """A term-major matrix filled from its unit-major batches, in unit order: each batch's
    entries go to their terms after the earlier batches' (units ascending within a term), so
    the matrix is :meth:`TermMatrix.from_units` of the batches stacked, the same arrays, while
    only one batch is transposed at a time.

    Parameters
    ----------
    df : ndarray
        Units per term of the whole matrix (its batches' entries per column, summed).
    n_units : int
        Its batches' rows, summed.
    dtype : dtype
        The weights' type (a batch's are cast to it).
    folder : path, optional
        Fill ``{prefix}indices.npy`` and ``{prefix}data.npy`` of this folder through their
        maps, each batch's pages released from the process once written (only the output's
        pointers stay in memory); :meth:`matrix` writes the rest as :meth:`TermMatrix.save`
        would, the same bytes, and maps it. None: in memory.
    prefix : str, default ""

    Example
    -------
    >>> import scipy.sparse as sp
    >>> units = sp.csr_matrix([[1.0, 0.0], [0.5, 2.0], [0.0, 1.0]])
    >>> fill = TermFill(np.array([2, 2]), 3, np.float64)
    >>> fill.add(units[:1]); fill.add(units[1:])
    >>> m = fill.matrix()
    >>> (m.indptr.tolist(), m.indices.tolist(), m.data.tolist())
    ([0, 2, 4], [0, 1, 1, 2], [1.0, 0.5, 2.0, 1.0])
    """

    def __init__(self, df: np.ndarray, n_units: int, dtype, folder=None, prefix: str = ""):
        df = np.asarray(df, dtype=np.int64)
        nnz, self.n_units = int(df.sum()), int(n_units)
        index = _index_dtype(nnz, self.n_units)
        self.indptr = np.zeros(len(df) + 1, dtype=index)
        self.indptr[1:] = np.cumsum(df)
        self.folder, self.prefix = folder, prefix
        self.indices = new_array(folder, f"{prefix}indices", index, nnz)
        self.data = new_array(folder, f"{prefix}data", dtype, nnz)
        self._fill = self.indptr[:-1].astype(np.int64)  # each term's next free entry
        self._base = 0  # the next batch's first unit

    def add(self, units) -> None:
        """The next batch: a sparse matrix of its units (rows) by terms, no entry twice."""
        # By term, units ascending within one: scipy's CSR -> CSC is a stable counting sort.
        by_term = sp.csr_matrix(units).tocsc()
        n_rows, n_terms = by_term.shape
        if n_terms != len(self._fill):
            raise ValueError(f"a batch of {n_terms} terms, expected {len(self._fill)}")
        starts = by_term.indptr.astype(np.int64)
        per_term = np.diff(starts)
        at = np.arange(by_term.nnz, dtype=np.int64) + np.repeat(self._fill - starts[:-1], per_term)
        self.data[at] = by_term.data
        self.indices[at] = by_term.indices.astype(np.int64) + self._base
        self._fill += per_term
        self._base += n_rows
        release(self.indices, self.data)  # filled through a map: its pages go to the file

    def matrix(self) -> "TermMatrix":
        """The matrix, once every batch was added (a ValueError if they do not make ``df`` and
        ``n_units``); mapped from ``folder`` when filled there."""
        if self._base != self.n_units or not np.array_equal(self._fill, self.indptr[1:]):
            raise ValueError("the batches added do not make the matrix announced")
        if self.folder is None:
            return TermMatrix(self.indptr, self.indices, self.data, self.n_units)
        for array in (self.indices, self.data):
            array.flush()
        self.indices = self.data = None  # unmapped: what was written is read back checked
        save_arrays(self.folder, {"indptr": self.indptr, "shape": _shape(len(self.indptr) - 1, self.n_units)},
                    self.prefix)
        return TermMatrix.load(self.folder, self.prefix)


def _shape(n_terms: int, n_units: int) -> np.ndarray:
    return np.array([n_terms, n_units], dtype=np.int64)


def new_array(folder, name: str, dtype, n: int) -> np.ndarray:
    """An array of ``n`` entries to fill: ``{name}.npy`` of ``folder`` mapped writable
    (:func:`save_arrays`'s bytes once filled and flushed, then read with :func:`load_array`),
    or one in memory when ``folder`` is None."""
    if folder is None:
        return np.empty(n, dtype=dtype)
    path = Path(folder) / f"{name}.npy"
    array = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=(int(n),))
    if hasattr(os, "posix_fallocate"):  # a full disk is an OSError now, not a SIGBUS at a write through the map
        with open(path, "rb+") as fh:
            os.posix_fallocate(fh.fileno(), 0, os.fstat(fh.fileno()).st_size)
    return array


def save_arrays(folder, arrays: dict, prefix: str = "") -> None:
    """Each array as ``{prefix}{name}.npy`` in ``folder`` (``allow_pickle=False``)."""
    for name, array in arrays.items():
        save_npy(Path(folder) / f"{prefix}{name}.npy", np.ascontiguousarray(array))


def load_array(folder, name: str, mmap: bool = True) -> np.ndarray:
    """``{name}.npy`` of ``folder``, memory-mapped unless ``mmap`` is False, read as every
    index array is (:func:`~factcheck.formats.npy.open_npy`: no link followed, the size as
    the header says, the checked descriptor mapped)."""
    array = open_npy(folder, f"{name}.npy").array
    return array if mmap else np.array(array)
