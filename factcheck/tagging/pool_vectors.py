"""Second-stage passage vectors for the open mode's candidate pools (docs/open-mode.md): a
passage is embedded by the contextual model when it first enters a claim's pool, and its
vector is kept in the index directory for every later run, process and claim.

Layout: ``INDEX/pool-vectors/<model>/`` where ``<model>`` is the sha256 of what decides the
model's vectors (:func:`~factcheck.text.embedding.model_signature`), holding ``model.json``
(the model's identity) and segments. A segment is two files, each named by the sha256 of its
own bytes: ``vectors-<sha256>.npy`` (float32, texts x dim) and ``segment-<sha256>.json``
(the sha256 of each row's passage text, in row order, and the vectors file's name).

Writers only ever add files, each written to a temporary and renamed into place, the
segment's JSON last. A name is its content's hash, so two processes never write one name
with different bytes and need no lock; a passage embedded by two of them at once is stored
twice with the same vector (a vector depends on its text and model only). Readers check
each file's structure as every index array's (:func:`~factcheck.formats.npy.open_npy`: no
link, a regular file, the header's type and shape, the size the header gives) and map the
vectors; ``factcheck verify`` (:func:`verify_pool_vectors`) also checks every file against
its name. Either way a bad file is an :class:`~factcheck.errors.IntegrityError` naming it.
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
from pathlib import Path

import numpy as np

from factcheck.errors import InputError, IntegrityError
from factcheck.formats.files import (SYMLINK_READ_REFUSED, SYMLINK_REFUSED, TMP_PREFIX, atomic_path, loads_json,
                                     read_beneath, read_record, sha256_bytes)
from factcheck.formats.npy import open_npy
from factcheck.tagging import store
from factcheck.text.embedding import describe_model, model_signature, same_model
from factcheck.text.onnx_embedding import vector_problem

__all__ = ["POOL_VECTORS_DIR", "PoolVectorCache", "text_key", "verify_pool_vectors"]

log = logging.getLogger(__name__)

POOL_VECTORS_DIR = store.POOL_VECTORS_DIR
MODEL_RECORD = "model.json"
FORMAT = "factcheck-pool-vectors/1"
DTYPE = np.float32  # the bytes a cold run scores with: a warm run reads them back unchanged
REBUILD = f"delete the {POOL_VECTORS_DIR} folder to compute them again"
VECTORS_NAME = re.compile(r"vectors-[0-9a-f]{64}\.npy")
NAMED_BY_SHA256 = "its name is the sha256 of its bytes: edited or truncated"


def text_key(text: str) -> str:
    """A passage's key in the cache: the sha256 of its text (UTF-8)."""
    return sha256_bytes(text.encode("utf-8"))


class PoolVectorCache:
    """The second-stage vectors of one index and one model.

    Parameters
    ----------
    index_dir : str or Path
        The tag index directory the cache lives in.
    embedder : Embedder or OnnxEmbedder
        The contextual model (:func:`~factcheck.text.embedding.load_embedder`).

    Attributes
    ----------
    embedded : int
        Passages this object has embedded (not found in the cache).

    Example
    -------
    >>> import factcheck
    >>> from factcheck.text.embedding import load_embedder
    >>> index = factcheck.build_index("data/demo/evidence.json", "out/demo-index", progress=False)
    >>> cache = PoolVectorCache(index.root, load_embedder())
    >>> cache.vectors(index.texts_of(["evidence-8", "evidence-5"])).shape
    (2, 256)
    """

    def __init__(self, index_dir, embedder):
        self.embedder = embedder
        self.identity = embedder.identity
        self.root = Path(index_dir)
        self.folder = self.root / POOL_VECTORS_DIR / sha256_bytes(model_signature(self.identity).encode("utf-8"))
        self.embedded = 0
        self._rows: dict[str, np.ndarray] = {}
        self._read: set[str] = set()  # segment files already read
        self._writable = True

    def vectors(self, texts: list[str], embed=None) -> np.ndarray:
        """The model's passage vectors of ``texts`` (float32, one row each): read from the
        cache, or embedded and added to it. ``embed``: texts -> their vectors by this model, in
        place of ``embedder.embed`` (another process's copy of it: a vector is the same bits)."""
        keys = [text_key(t) for t in texts]
        if any(k not in self._rows for k in keys):
            self._refresh()  # segments other processes (or earlier runs) wrote since
        todo = sorted({k: t for k, t in zip(keys, texts) if k not in self._rows}.items())
        if todo:
            new = [t for _, t in todo]
            fresh = self.embedder.embed(new, "passage", memo=False) if embed is None else embed(new)
            fresh = np.ascontiguousarray(fresh, dtype=DTYPE)
            self.embedded += len(todo)
            self._rows.update((k, fresh[i]) for i, (k, _) in enumerate(todo))
            self._save([k for k, _ in todo], fresh)
        out = np.empty((len(texts), self.embedder.dim), dtype=DTYPE)
        for i, k in enumerate(keys):
            out[i] = self._rows[k]
        return out

    def _refresh(self) -> None:
        if not self.folder.is_dir():
            return
        self._check_model()
        for path in sorted(self.folder.glob("segment-*.json")):
            if path.name not in self._read:
                keys, vectors = _read_segment(self.root, path, self.identity)
                for k, row in zip(keys, vectors):
                    self._rows.setdefault(k, row)
                self._read.add(path.name)

    def _check_model(self) -> None:
        record = self.folder / MODEL_RECORD
        if not record.exists() and not record.is_symlink():
            return
        model = _read_record(record)
        if not same_model(model, self.identity):
            raise IntegrityError(record, None, f"does not record the model its folder is named after "
                                 f"({describe_model(self.identity)}); {REBUILD}")

    def _save(self, keys: list[str], vectors: np.ndarray) -> None:
        """Add one segment (nothing is lost if the index directory is read-only: the
        vectors stay in this process)."""
        if not self._writable:
            return
        for path in (self.folder.parent, self.folder):  # never write through a link
            if path.is_symlink():
                raise InputError(path, None, SYMLINK_REFUSED)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            if not (self.folder / MODEL_RECORD).is_file():
                _write(self.folder / MODEL_RECORD, json.dumps(self.identity, sort_keys=True).encode("utf-8"))
            buffer = _npy_bytes(vectors)
            name = f"vectors-{sha256_bytes(buffer)}.npy"
            _write(self.folder / name, buffer)
            segment = json.dumps({"format": FORMAT, "dim": int(vectors.shape[1]), "vectors": name,
                                  "texts": keys}).encode("utf-8")
            seg_name = f"segment-{sha256_bytes(segment)}.json"
            _write(self.folder / seg_name, segment)
        except (OSError, InputError) as exc:  # atomic_path names an unwritable place as an InputError
            self._writable = False
            log.info("%s: pool vectors not saved (%s)", self.folder, getattr(exc, "strerror", None) or exc)
            return
        self._read.add(seg_name)


def _npy_bytes(vectors: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, vectors, allow_pickle=False)
    return buffer.getvalue()


def _write(path: Path, data: bytes) -> None:
    if path.is_file():  # named by its content: already there, byte for byte (checked on reading)
        return
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def _read_segment(root: Path, path: Path, identity: dict, verify: bool = False) -> tuple[list[str], np.ndarray]:
    """A segment's text keys and vectors (mapped), each file's structure checked; with
    ``verify`` also each file against its name (its sha256)."""
    data = read_beneath(root, path.relative_to(root).as_posix(), error=IntegrityError,
                        missing=f"missing: a segment names it; {REBUILD}")
    if verify and sha256_bytes(data) != path.name.removeprefix("segment-").removesuffix(".json"):
        raise IntegrityError(path, None, f"checksum mismatch ({NAMED_BY_SHA256}); {REBUILD}")
    try:
        segment = loads_json(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise IntegrityError(path, None, f"unreadable segment ({type(exc).__name__}); {REBUILD}") from None
    if not isinstance(segment, dict):
        segment = {}  # refused just below, as any other shape that is not ours
    name, keys = segment.get("vectors"), segment.get("texts")
    # The vectors' name is what _save writes: nothing else (a NUL, a folder) reaches the file system.
    if (segment.get("format") != FORMAT or not isinstance(name, str) or not VECTORS_NAME.fullmatch(name)
            or not isinstance(keys, list) or not all(isinstance(k, str) for k in keys)):
        raise IntegrityError(path, None, f"not a {FORMAT} segment; {REBUILD}")
    vectors_path = path.parent / name
    npy = open_npy(root, vectors_path.relative_to(root).as_posix(), error=IntegrityError, hint=REBUILD,
                   missing=f"missing: a segment names it; {REBUILD}", keep_open=verify)
    try:
        if verify:
            npy.check_sha256(name.removeprefix("vectors-").removesuffix(".npy"), NAMED_BY_SHA256)
    finally:
        npy.close()
    vectors = npy.array
    if vectors.dtype != DTYPE or vectors.ndim != 2 or len(vectors) != len(keys):
        raise IntegrityError(vectors_path, None, f"wrong shape or type for its segment {path.name}; {REBUILD}")
    problem = vector_problem(vectors, identity.get("dim"))
    if problem:
        raise IntegrityError(vectors_path, None, f"{problem} ({describe_model(identity)}); {REBUILD}")
    return keys, vectors


def _read_record(record: Path) -> dict:
    root = record.parents[2]  # INDEX/pool-vectors/<model>/model.json
    return read_record(root, record.relative_to(root).as_posix(), error=IntegrityError, what="model record",
                       missing=f"missing; {REBUILD}", hint=REBUILD)


def verify_pool_vectors(index_dir) -> list[tuple[dict, int]]:
    """Every segment of every model's pool vectors checked (``factcheck verify``): each
    model's identity and how many passages it holds."""
    out = []
    base = Path(index_dir) / POOL_VECTORS_DIR
    if base.is_symlink():
        raise IntegrityError(base, None, SYMLINK_READ_REFUSED)
    if not os.path.lexists(base):
        return out
    if not base.is_dir():  # the retriever does without a cache here; verify says why
        raise IntegrityError(base, None, "is not a directory (the pool vectors' folder); delete it to let "
                             "the pool retriever keep its vectors")
    for folder in sorted(p for p in base.iterdir() if p.is_dir() and not p.name.startswith(TMP_PREFIX)):
        record = folder / MODEL_RECORD
        identity = _read_record(record)
        if sha256_bytes(model_signature(identity).encode("utf-8")) != folder.name:
            raise IntegrityError(record, None, f"does not record the model its folder is named after; {REBUILD}")
        keys = set()
        for path in sorted(folder.glob("segment-*.json")):
            keys.update(_read_segment(Path(index_dir), path, identity, verify=True)[0])
        out.append((identity, len(keys)))
    return out
