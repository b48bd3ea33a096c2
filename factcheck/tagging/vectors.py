"""Passage vectors for the open mode (docs/open-mode.md): the offline embedding job and its
verified loader. Inside a tag index directory: ``vectors/manifest.json`` (written last),
``vectors/vectors-NNNNN.npy`` (float16, passages x dim), from :data:`~factcheck.tagging.ann.MIN_PASSAGES`
passages on ``vectors/ann.index`` (their nearest-neighbour index) and resumable state under ``work/``.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import numpy as np

from factcheck.errors import InputError, IntegrityError, check_number
from factcheck.formats.files import (atomic_path, read_record, remove_stale_temporaries, save_npy, sha256_file,
                                     write_record)
from factcheck.formats.npy import open_npy
from factcheck.tagging import ann, store
from factcheck.tagging.backends import WorkerPool, resolve_jobs
from factcheck.tagging.outdir import DirectoryLock, check_no_symlinks
from factcheck.text.embedding import describe_model, same_model
from factcheck.text.onnx_embedding import changed_files, model_key, vector_problem

__all__ = ["MappedVectors", "PassageVectorJob", "VECTORS_DIR", "load_ann", "load_vectors", "open_vectors",
           "read_vectors_manifest", "relocate_embedding_model", "vectors_model", "verify_vectors"]

VECTORS_DIR = store.VECTORS_DIR
MANIFEST = "manifest.json"
FORMAT = "factcheck-passage-vectors/1"
DTYPE = "float16"  # half the disk and RAM of float32; cosine ranks move by < 1e-3
SHARD_SIZE, ONNX_SHARD_SIZE = 100_000, 10_000  # default passages per file (see PassageVectorJob)
BUILD_HINT = ("build them with `factcheck tag --mode open` (the same arguments as the index) "
              "or PassageVectorJob().run(INDEX_DIR)")


def shard_name(shard: int) -> str:
    return f"vectors-{shard:05d}.npy"


class PassageVectorJob:
    """Embed every passage of a tag index into ``INDEX_DIR/vectors/`` (or resume doing so).

    Parameters
    ----------
    shard_size : int, optional
        Passages per vector file: default 100,000 for the bundled model, 10,000 for a local
        ONNX model (slower: the progress bar moves and a resumed run loses little). Vectors
        complete for the same model are kept whatever shard size built them.
    jobs : int, default 1
        Worker processes (``-1``: all cores); the bytes written do not depend on it.
    progress : bool or None
        Progress bars: ``None`` automatic, ``False`` never.
    embedding_model : None, str, Path or dict
        ``None``: the bundled model (the ``open`` extra); a directory (or its settings as a
        dict, see :func:`~factcheck.text.embedding.load_embedder`): a local ONNX model.

    Example
    -------
    >>> import factcheck
    >>> index = factcheck.build_index("data/demo/evidence.json", "out/demo-index", progress=False)
    >>> manifest = PassageVectorJob(progress=False).run("out/demo-index")
    >>> manifest["passages"], manifest["dim"], manifest["dtype"]
    (40, 256, 'float16')
    >>> load_vectors("out/demo-index").shape
    (40, 256)
    """

    def __init__(self, shard_size: int | None = None, jobs: int = 1, progress: bool | None = None,
                 embedding_model=None):
        self.shard_size = shard_size
        self.jobs = jobs
        self.progress = progress
        self.embedding_model = embedding_model

    def run(self, index_dir, index_manifest: store.Manifest | None = None) -> dict:
        """Build (or complete) the vectors of ``index_dir``.

        Parameters
        ----------
        index_dir : str or Path
            A tag index directory; the vectors go to its ``vectors/``.
        index_manifest : Manifest or None
            The index's manifest if the caller has just verified it; else it is verified here.

        Returns
        -------
        dict
            The vectors' manifest (``passages``, ``dim``, ``dtype``, ``model``, ``content_sha256``, ...).
        """
        from factcheck.text.embedding import load_embedder
        if self.shard_size is not None:
            check_number(self.shard_size, "shard_size", integer=True, low=1)
        root = Path(index_dir)
        if index_manifest is None:  # the passages we embed are the ones it vouches for
            index_manifest = store.verify_index(root)
        identity = load_embedder(self.embedding_model).identity  # fails here, in one line, without the extra
        if index_manifest.n_passages >= ann.MIN_PASSAGES:
            ann.require_faiss()  # before the embedding, not after it
        out = root / VECTORS_DIR
        check_no_symlinks(root, (VECTORS_DIR,))  # never write through a link (see tagging/outdir.py)
        with DirectoryLock(out):
            try:  # complete and verified vectors of this index and model
                existing = verify_vectors(root, index_manifest, identity)
            except InputError:
                existing = None
            if existing is not None and (existing.get("ann") or existing["passages"] < ann.MIN_PASSAGES):
                return existing
            if existing is not None:  # vectors from before the nearest-neighbour index: add it
                existing["ann"] = ann.build_ann(out, _mapped_vectors(root, existing))
                write_record(out / MANIFEST, existing, store.MANIFEST_CHECKSUM)
                return existing
            # A stale manifest must not vouch for shards this run is about to replace.
            (out / MANIFEST).unlink(missing_ok=True)
            remove_stale_temporaries(out)
            size = self.shard_size or (ONNX_SHARD_SIZE if identity.get("kind") == "onnx" else SHARD_SIZE)
            return self._build(root, out, index_manifest, identity, size)

    def _build(self, root: Path, out: Path, index_manifest, identity: dict, shard_size: int) -> dict:
        n = index_manifest.n_passages
        plan_key = index_manifest.data["plan_key"]
        shards = [(i, start, min(shard_size, n - start)) for i, start in enumerate(range(0, n, shard_size))]
        # Where the model's files are is not part of a shard's key (a moved model is the same model).
        model = model_key(identity)
        keys = {i: store.content_key(plan_key, model, DTYPE, start, count) for i, start, count in shards}
        todo = [(str(root.resolve()), i, start, count, keys[i], identity) for i, start, count in shards
                if not store.is_done(out, shard_name(i), keys[i])]
        # No more workers than shards: the cores left go to the workers' native thread pools.
        with WorkerPool("loky", min(resolve_jobs(self.jobs), max(1, len(todo)))) as pool:
            pool.map(_embed_task, todo, desc="embedding passages", progress=self.progress)
        entries, content = [], hashlib.sha256()
        for i, start, count in shards:
            npy = open_npy(root, f"{VECTORS_DIR}/{shard_name(i)}", error=IntegrityError, hint=BUILD_HINT,
                           keep_open=True)
            try:
                content.update(np.ascontiguousarray(npy.array))  # the map's bytes, not a copy of them
                entries.append({"shard": i, "start": start, "count": count, "file": shard_name(i),
                                "sha256": npy.sha256()})
            finally:
                npy.close()
        listed = {e["file"] for e in entries}
        for path in out.glob("vectors-*.npy"):  # from a run with another shard size
            if path.name not in listed:
                path.unlink()
        data = {"format": FORMAT, "model": identity, "dim": identity["dim"], "dtype": DTYPE,
                "index": {"plan_key": plan_key, "passages": n}, "passages": n,
                "shard_size": shard_size, "shards": entries, "content_sha256": content.hexdigest()}
        if n >= ann.MIN_PASSAGES:  # below it, search stays exact (tagging/ann.py)
            data["ann"] = ann.build_ann(out, _mapped_vectors(root, data))
        else:
            (out / ann.ANN_FILE).unlink(missing_ok=True)
        write_record(out / MANIFEST, data, store.MANIFEST_CHECKSUM)
        shutil.rmtree(out / store.WORK_DIR, ignore_errors=True)
        return data


def read_vectors_manifest(index_dir, index_manifest=None, identity: dict | None = None) -> dict:
    """The vectors' manifest, checked against itself, the tag index and (if given) the model."""
    path = Path(index_dir) / VECTORS_DIR / MANIFEST
    data = read_record(index_dir, f"{VECTORS_DIR}/{MANIFEST}", error=IntegrityError, fmt=FORMAT, what="manifest",
                       checksum=store.MANIFEST_CHECKSUM, hint=BUILD_HINT,
                       missing=f"missing: this index has no passage vectors; {BUILD_HINT}")
    index_manifest = index_manifest or store.read_manifest(Path(index_dir))
    if data["index"]["plan_key"] != index_manifest.data.get("plan_key") or data["passages"] != index_manifest.n_passages:
        raise IntegrityError(path, None, f"the vectors were built for another tag index; {BUILD_HINT}")
    if identity is not None and not same_model(data["model"], identity):
        raise IntegrityError(path, None, f"the vectors were built with another model "
                             f"({describe_model(data['model'])}, not {describe_model(identity)}); {BUILD_HINT}")
    return data


def vectors_model(index_dir) -> dict | None:
    """The model an index's vectors were built with, as their manifest says (unverified), or ``None``."""
    try:
        model = read_record(index_dir, f"{VECTORS_DIR}/{MANIFEST}").get("model")
    except (InputError, OSError):  # a link too: refused
        return None
    return model if isinstance(model, dict) else None


def relocate_embedding_model(index_dir, directory):
    """The embedder of the local model the vectors were built with, loaded from ``directory``."""
    from factcheck.text.embedding import relocate
    model = vectors_model(index_dir)
    if model is None:
        raise IntegrityError(Path(index_dir) / VECTORS_DIR / MANIFEST, None,
                             f"missing: this index has no passage vectors; {BUILD_HINT}")
    if model.get("kind") != "onnx":
        raise InputError(directory, None, f"the index's vectors were built with the bundled model "
                         f"({describe_model(model)}), not a local one", param="embedding_model")
    return relocate(model, directory)


def verify_vectors(index_dir, index_manifest=None, identity: dict | None = None) -> dict | None:
    """The vectors' manifest after checking it, every shard's sha256 and values, and the
    model's files (``None``: no vectors); with ``identity``, for that model, just loaded."""
    manifest = Path(index_dir) / VECTORS_DIR / MANIFEST
    if not manifest.is_file() and not manifest.is_symlink():  # a link is refused by the reader
        return None
    data = read_vectors_manifest(index_dir, index_manifest, identity)
    for _ in _checked_shards(index_dir, data, verify=True):
        pass
    if data.get("ann"):
        ann.verify_ann(index_dir, data["ann"], BUILD_HINT)
    changed = [] if identity else changed_files(data["model"])
    if changed:
        raise IntegrityError(Path(data["model"]["path"]) / changed[0], None, f"differs from the file the vectors "
                             f"were built with ({describe_model(data['model'])}; changed: {', '.join(changed)}); "
                             f"{BUILD_HINT}")
    return data


def load_vectors(index_dir, index_manifest=None, identity: dict | None = None) -> np.ndarray:
    """All passage vectors of ``index_dir`` in index order, float16 (passages x dim), checked
    as every open checks (no sha256: that is :func:`verify_vectors`, docs/trust-model.md)."""
    return _all_vectors(index_dir, read_vectors_manifest(index_dir, index_manifest, identity))


def open_vectors(index_dir, index_manifest=None, identity: dict | None = None) -> "MappedVectors":
    """All passage vectors of ``index_dir`` as they are stored (:class:`MappedVectors`: float16,
    one read-only map a shard), checked as :func:`load_vectors` checks them."""
    return _mapped_vectors(index_dir, read_vectors_manifest(index_dir, index_manifest, identity))


def _all_vectors(index_dir, data: dict) -> np.ndarray:
    vectors = np.empty((data["passages"], data["dim"]), dtype=DTYPE)
    for s, part in _checked_shards(index_dir, data):
        vectors[s["start"]:s["start"] + s["count"]] = part
    return vectors


def _mapped_vectors(index_dir, data: dict) -> "MappedVectors":
    entries = list(_checked_shards(index_dir, data))
    return MappedVectors([part for _, part in entries], [s["start"] for s, _ in entries], data["passages"],
                         data["dim"])


class MappedVectors:
    """Passage vectors left as stored: one read-only float16 map a shard, nothing concatenated
    or widened in memory (at 25M passages the float32 matrix would be 25.6 GB). Indexing with a
    slice (step 1) or a 1-D array of rows gives those rows widened to float32, a new array:
    the same values as the rows of the whole matrix widened, so the same products.

    Parameters
    ----------
    shards : list of ndarray
        Each shard's rows (passages x dim), in index order.
    starts : list of int
        The index row of each shard's first row.
    passages, dim : int
        The shape of the whole.
    """

    def __init__(self, shards, starts, passages: int, dim: int):
        self.shards = tuple(shards)
        self._starts = np.asarray(starts, dtype=np.int64)
        self.shape = (int(passages), int(dim))

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, key) -> np.ndarray:
        if isinstance(key, slice):
            start, stop, step = key.indices(len(self))
            if step != 1:
                raise IndexError("MappedVectors: only slices of step 1")
            return self.widen(start, max(start, stop))
        return self.take(key)

    def widen(self, start: int, stop: int, out: np.ndarray | None = None) -> np.ndarray:
        """Rows [start, stop) as float32, into ``out`` ((stop - start) x dim float32) if given."""
        if out is None:
            out = np.empty((stop - start, self.shape[1]), dtype=np.float32)
        first = max(int(np.searchsorted(self._starts, start, side="right")) - 1, 0)
        for shard, at in zip(self.shards[first:], self._starts[first:].tolist()):
            a, b = max(start, at), min(stop, at + len(shard))
            if a >= stop:
                break
            if a < b:
                out[a - start:b - start] = shard[a - at:b - at]
        return out

    def take(self, rows) -> np.ndarray:
        """The rows ``rows`` (a 1-D integer array, any order) as float32."""
        rows = np.asarray(rows)
        if rows.ndim != 1 or (rows.dtype.kind not in "iu" and len(rows)):
            raise IndexError(f"MappedVectors: rows must be a 1-D integer array, got {rows.dtype} of {rows.ndim} dims")
        out = np.empty((len(rows), self.shape[1]), dtype=np.float32)
        if not len(rows):
            return out
        if rows.min() < 0 or rows.max() >= len(self):
            raise IndexError(f"MappedVectors: a row outside 0..{len(self) - 1}")
        order = None
        if np.any(rows[1:] < rows[:-1]):  # the index's candidates come ascending; others are sorted here
            order = np.argsort(rows, kind="stable")
            rows = rows[order]
        bounds = np.searchsorted(rows, self._starts).tolist() + [len(rows)]
        for s in np.flatnonzero(np.diff(bounds)).tolist():
            a, b = bounds[s], bounds[s + 1]
            out[a:b] = self.shards[s][rows[a:b] - self._starts[s]]
        if order is not None:
            out[order] = out.copy()
        return out


def load_ann(index_dir, data: dict):
    """The checked nearest-neighbour index the vectors' manifest ``data`` records, or ``None``
    (none recorded: built below :data:`~factcheck.tagging.ann.MIN_PASSAGES`, or before it existed)."""
    entry = data.get("ann")
    if not entry:
        return None
    return ann.open_ann(index_dir, entry, data["passages"], data["dim"], BUILD_HINT)


def _checked_shards(index_dir, data: dict, verify: bool = False):
    """Each shard's entry and rows, opened as every index array is (no link, the header's
    shape and type as the manifest says, the size as the header says; with ``verify`` the
    sha256 of what was opened), then the values as the embedders check them
    (:func:`~factcheck.text.onnx_embedding.vector_problem`; which passages have tokens is
    not known here, so only all of them zero is refused)."""
    out = Path(index_dir) / VECTORS_DIR
    nonzero = data["passages"] == 0
    for s in data["shards"]:
        npy = open_npy(index_dir, f"{VECTORS_DIR}/{s['file']}", dtype=DTYPE, shape=(s["count"], data["dim"]),
                       error=IntegrityError, hint=BUILD_HINT, missing="missing vector shard listed in the manifest",
                       keep_open=verify)
        try:
            if verify:
                npy.check_sha256(s["sha256"])
        finally:
            npy.close()
        part = npy.array
        problem = vector_problem(part, data["model"].get("dim"))
        if problem:
            raise IntegrityError(out / s["file"], None, f"{problem} ({describe_model(data['model'])}); {BUILD_HINT}")
        nonzero = nonzero or bool(part.any())
        yield s, part
    if not nonzero:
        raise IntegrityError(out / MANIFEST, None, f"every passage vector is all zeros "
                             f"({describe_model(data['model'])}); {BUILD_HINT}")


def _embed_task(root: str, shard: int, start: int, count: int, key: str, model: dict | None = None) -> None:
    """Embed rows [start, start + count) of the index at ``root`` into one vector shard."""
    from factcheck.text.embedding import load_embedder
    root = Path(root)
    vectors = load_embedder(model).embed(_texts(root, start, start + count), "passage", memo=False).astype(DTYPE)
    out = root / VECTORS_DIR
    name = shard_name(shard)
    with atomic_path(out / name) as tmp:
        save_npy(tmp, vectors)
    store.mark_done(out, name, key, {"": {"sha256": sha256_file(out / name)}})


def _texts(root: Path, start: int, stop: int) -> list[str]:
    """Texts of index rows [start, stop), read from the passage shards that hold them."""
    texts: list[str] = []
    manifest = store.read_manifest(root)
    files = manifest.folders()
    for s in manifest.shards:
        a, b = max(start, s["start"]), min(stop, s["start"] + s["passages"])
        if a < b:
            name = store.passages_name(s["shard"])
            p = store.read_checked(root, name, "passages", files[name])
            texts.extend(store.shard_texts(p, manifest.data["index_titles"], a - s["start"], b - s["start"]))
    return texts
