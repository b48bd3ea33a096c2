"""The approximate nearest-neighbour index of the passage vectors (docs/open-mode.md).

Built by the vectors' job beside them (``vectors/ann.index``, a faiss index) when an index
has at least :data:`MIN_PASSAGES` passages; its sha256 and settings are in the vectors'
manifest, and the file is checked against that sha256 before faiss parses a byte of it
(faiss is not hardened against crafted files: docs/trust-model.md). Only faiss's documented
API is used: ``index_factory``, ``write_index``/``read_index``, ``ParameterSpace``, search
parameters and ``omp_set_num_threads``.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from factcheck.errors import InputError, IntegrityError
from factcheck.formats.files import atomic_path, open_beneath
from factcheck.hashing import sha256_file, sha256_fileobj
from factcheck.tagging import store

__all__ = ["ANN_FILE", "AnnIndex", "MIN_PASSAGES", "SEARCH_DEPTH", "SPEC", "build_ann", "default_setting", "open_ann", "require_faiss",
           "verify_ann"]

ANN_FILE = "ann.index"
# Below this many passages search stays exact: one matrix-vector product a claim is then
# cheap, and exact search is the reference the tests compare with.
MIN_PASSAGES = 100_000
# The default, measured on the 1.2M bench vectors (reports/bench-ann-recall.md and
# bench-ann-deep.md): inverted lists of 4-bit PQ codes (128 sub-quantizers, residuals to the
# list's centroid; 64 bytes a vector, so 25M vectors fit in 2 GB), three eighths of the lists
# scanned and as many candidates re-scored exactly: recall@100 0.991 of exact search on the
# training claims at p50 5.3 ms, built in 71 s (a quarter of the lists: 0.985 at 3.7 ms; an
# HNSW graph: 0.919 at 1.2 ms, 437 s, and a float32 copy of every vector).
MAX_LISTS = 4096  # the lists measured at 1.2M; more need a graph quantizer to build in time
PER_LIST = 256  # passages a list below that: a power of two, at least 64 lists
CANDIDATES = 1024
SPEC = f"IVF{MAX_LISTS},PQ128x4fsr"  # faiss.index_factory's description at 1.2M 256-dim vectors
EF_CONSTRUCTION = 64  # HNSW's beam while inserting, for an HNSW description
# The one search-depth knob: HNSW's efSearch, IVF's nprobe (for an IVF description built by
# default, three eighths of its lists; SEARCH_DEPTH at MAX_LISTS). The index is asked for at least
# this many candidates, twice the depth wanted and the recorded candidates, all re-scored exactly.
SEARCH_DEPTH = MAX_LISTS * 3 // 8


def default_setting(passages: int, dim: int) -> tuple[str, int, int]:
    """The description, search depth and candidates of the default index of ``passages``
    vectors of ``dim`` values: a 4-bit code for every two dimensions (every one when ``dim``
    is odd, as a product quantizer's sub-vectors must split the vector evenly)."""
    lists = MAX_LISTS
    while lists > 64 and lists * PER_LIST > passages:
        lists //= 2
    codes = dim // 2 if dim % 2 == 0 else dim
    return f"IVF{lists},PQ{codes}x4fsr", lists * 3 // 8, CANDIDATES


IVF_TRAIN = 100_000  # vectors an IVF's clustering is trained on (a fixed, seeded sample) ...
TRAIN_PER_LIST = 40  # ... or this many per inverted list if more (faiss warns below 39 a centroid)
CHUNK = 100_000  # float16 vectors widened to float32 at a time while adding
INSTALL_HINT = "the nearest-neighbour index needs the optional extra: pip install -e '.[open]'"


def require_faiss():
    """The faiss module, or an InputError naming the extra that installs it."""
    try:
        import faiss
    except ImportError:
        raise InputError(None, None, INSTALL_HINT, param="mode") from None
    return faiss


def build_ann(out: Path, vectors: np.ndarray, spec: str | None = None, candidates: int | None = None,
              search_depth: int = SEARCH_DEPTH) -> dict:
    """Build the index of ``vectors`` (passages x dim) into ``out/ann.index``; its manifest entry.

    Without ``spec``, the default for that many vectors (:func:`default_setting`: its
    description, search depth and candidates). ``spec`` may store codes instead of the vectors (``"IVF4096,SQ8"``, ``"IVF4096,PQ64x4fsr"``):
    such an index is trained on a fixed sample, and ``candidates`` (recorded only when given)
    is how many candidates a search asks it for, since its approximate scores need a wider
    pool for the exact re-scoring to find the top.

    One thread: an HNSW graph depends on the order of insertions and a clustering on the order
    of its sums, which more threads make vary, so the same vectors give the same bytes whatever
    ``--jobs``.
    """
    faiss = require_faiss()
    n, dim = vectors.shape
    if spec is None:
        spec, search_depth, candidates = default_setting(n, dim)
    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        index = faiss.index_factory(dim, spec, faiss.METRIC_INNER_PRODUCT)
        if hasattr(index, "hnsw"):
            faiss.ParameterSpace().set_index_parameter(index, "efConstruction", EF_CONSTRUCTION)
        if not index.is_trained:
            size = min(n, max(IVF_TRAIN, TRAIN_PER_LIST * getattr(index, "nlist", 0)))
            sample = np.sort(np.random.default_rng(0).choice(n, size=size, replace=False))
            index.train(np.ascontiguousarray(vectors[sample], dtype=np.float32))
        for start in range(0, n, CHUNK):
            index.add(np.ascontiguousarray(vectors[start:start + CHUNK], dtype=np.float32))
        with atomic_path(out / ANN_FILE) as tmp:
            faiss.write_index(index, str(tmp))
    finally:
        faiss.omp_set_num_threads(threads)
    entry = {"file": ANN_FILE, "sha256": sha256_file(out / ANN_FILE), "library": "faiss-cpu",
             "version": faiss.__version__, "spec": spec, "metric": "inner_product",
             "ef_construction": EF_CONSTRUCTION if hasattr(index, "hnsw") else None,
             "search_depth": int(search_depth)}
    if candidates is not None:
        entry["candidates"] = int(candidates)
    return entry


class AnnIndex:
    """A checked, loaded faiss index: :meth:`search` gives candidate rows."""

    def __init__(self, index, entry: dict):
        self.index = index
        self.entry = entry
        faiss = require_faiss()
        depth = int(entry["search_depth"])
        self._params = (faiss.SearchParametersHNSW if hasattr(index, "hnsw") else faiss.SearchParametersIVF)
        self._knob = "efSearch" if hasattr(index, "hnsw") else "nprobe"
        self.depth = depth
        self.candidates = int(entry.get("candidates") or 0)

    def count(self, depth: int) -> int:
        """How many candidates :meth:`search` asks for a top ``depth``: at least the search
        depth, twice ``depth`` and the recorded ``candidates``, where the index holds that many."""
        return min(self.index.ntotal, max(self.depth, 2 * depth, self.candidates))

    def search(self, query: np.ndarray, depth: int) -> np.ndarray:
        """Candidate rows (ascending, distinct) for a top ``depth``, :meth:`count` of them."""
        count = self.count(depth)
        # Per-call parameters (not the shared index's settings): safe with threads.
        # nprobe beyond the lists means every list: say so, since faiss 1.15's residual PQ
        # fast-scan ranks wrongly when asked for more lists than it has.
        if self._knob == "efSearch":
            knob = max(self.depth, count)
        else:
            knob = min(self.depth, getattr(self.index, "nlist", self.depth))
        params = self._params(**{self._knob: knob})
        _, found = self.index.search(np.ascontiguousarray(query[None, :], dtype=np.float32), count, params=params)
        rows = found[0]
        return np.unique(rows[rows >= 0]).astype(np.int64)


def _checked_file(index_dir, entry: dict, hint: str):
    """The ANN file ``entry`` names, opened (no link followed) and hashed: an open binary file
    at its start whose bytes match the recorded sha256."""
    rel = f"{store.VECTORS_DIR}/{entry['file']}"
    fd = open_beneath(Path(index_dir), rel, error=IntegrityError,
                      missing=f"missing nearest-neighbour index listed in the vectors' manifest; {hint}")
    fh = os.fdopen(fd, "rb")
    try:
        if sha256_fileobj(fh) != entry["sha256"]:
            raise IntegrityError(Path(index_dir) / rel, None,
                                 f"checksum mismatch (truncated, corrupted or replaced); {hint}")
        fh.seek(0)
    except BaseException:
        fh.close()
        raise
    return fh


def verify_ann(index_dir, entry: dict, hint: str) -> None:
    """Check the ANN file against its recorded sha256 (without faiss)."""
    _checked_file(index_dir, entry, hint).close()


def open_ann(index_dir, entry: dict, passages: int, dim: int, hint: str) -> AnnIndex:
    """The ANN index ``entry`` of the vectors' manifest describes, read only after its bytes
    match the recorded sha256 (hashed and parsed from the same open file)."""
    faiss = require_faiss()
    with _checked_file(index_dir, entry, hint) as fh:
        index = faiss.read_index(faiss.PyCallbackIOReader(fh.read))
    if index.ntotal != passages or index.d != dim or index.metric_type != faiss.METRIC_INNER_PRODUCT:
        raise IntegrityError(Path(index_dir) / store.VECTORS_DIR / entry["file"], None,
                             f"does not index the vectors' {passages} x {dim} inner products; {hint}")
    return AnnIndex(index, entry)
