"""Sentence embeddings for the open mode: the ``wordllama`` wheel's bundled static model,
or a transformer (:mod:`factcheck.text.onnx_embedding`).

The bundled model is loaded from the installed package with downloads disabled. Each
text's token vectors are summed on their own (``np.add.reduceat``, not wordllama's padded
batches), so a vector has the same bits whatever its batch; the sum is L2-normalised, and
a text with no known token gets the zero vector. An embedder has ``embed(texts, kind,
memo)``, ``dim`` and an ``identity`` (what produced its vectors).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from factcheck.errors import InputError, install_hint
from factcheck.hashing import sha256_bytes, sha256_file

__all__ = ["Embedder", "MODEL_CONFIG", "MODEL_DIM", "describe_model", "embed", "load_embedder", "model_signature",
           "relocate", "same_model"]

MODEL_CONFIG = "l2_supercat"
MODEL_DIM = 256
INSTALL_HINT = install_hint("open", "the open mode")
BATCH = 1024  # texts pooled at a time (bounds the gather; never changes a result)


@dataclass
class Embedder:
    """A loaded static embedding model: a float32 token-vector ``table``, its ``tokenizer``
    (padding and truncation off) and the ``identity`` of its vectors."""

    table: np.ndarray
    tokenizer: object
    identity: dict

    @property
    def dim(self) -> int:
        return int(self.table.shape[1])

    def embed(self, texts: list[str], kind: str = "passage", memo: bool = True,
              batch_size: int = BATCH) -> np.ndarray:
        """L2-normalised float32 vectors, one row per text (``kind`` and ``memo`` are ignored)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), batch_size):
            chunk = list(texts[start:start + batch_size])
            out[start:start + len(chunk)] = self._embed_batch(chunk)
        return out

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        encodings = self.tokenizer.encode_batch(texts, add_special_tokens=False)
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(encodings))
        vectors = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not lengths.any():
            return vectors
        ids = np.concatenate([np.asarray(e.ids, dtype=np.int64) for e in encodings])
        np.clip(ids, 0, len(self.table) - 1, out=ids)  # as wordllama: an id past the table is its last row
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        present = lengths > 0
        # reduceat of an empty segment would return the next row: only non-empty ones are summed.
        vectors[present] = np.add.reduceat(self.table[ids], starts[present], axis=0)
        norms = np.sqrt(np.einsum("ij,ij->i", vectors, vectors))
        with np.errstate(invalid="ignore", divide="ignore"):  # a zero sum becomes NaN: refused below
            vectors[present] /= norms[present, None]
        return _checked(vectors, self.identity, lengths)


def _checked(vectors: np.ndarray, identity: dict, tokens) -> np.ndarray:
    from factcheck.text.onnx_embedding import vector_problem
    problem = vector_problem(vectors, identity.get("dim"), tokens)
    if problem:
        raise InputError(identity.get("name"), None, f"the model gives {problem}")
    return vectors


_LOADED: Embedder | None = None
_BY_MODEL: dict[str, object] = {}  # every model loaded in this process, by what decides its vectors


def load_embedder(model=None):
    """An embedding model, loaded once per process.

    Parameters
    ----------
    model : None, str, Path or dict
        ``None``: the bundled model. A packaged name or a directory: an ONNX model
        (:func:`~factcheck.text.onnx_embedding.load_onnx_embedder`). A dict: a ``path`` with
        its settings, or a recorded ``identity`` (the same model is returned, or refused).
    """
    global _LOADED
    if model is None or (isinstance(model, dict) and _is_bundled(model)):
        if _LOADED is None:
            _LOADED = _load()
        embedder = _LOADED
    elif isinstance(model, dict):
        embedder = _BY_MODEL.get(_key(model)) if _is_identity(model) else None
        if embedder is None:
            try:
                embedder = _load_onnx(model)
            except InputError as exc:
                # A model still at its recorded place is not lost: its own error says what is wrong.
                if not _is_identity(model) or (model.get("path") and Path(model["path"], "model.onnx").is_file()):
                    raise
                raise InputError(exc.path, exc.place, f"the local embedding model recorded "
                                 f"({describe_model(model)}) cannot be loaded from where it was: {exc.message} "
                                 f"(give the directory it is in now)", param="embedding_model") from None
    else:
        embedder = _load_onnx({"path": model})
    if isinstance(model, dict) and _is_identity(model) and not same_model(model, embedder.identity):
        where = model.get("path") or "the bundled model"
        raise InputError(where, None, f"is not the embedding model recorded ({_difference(model, embedder.identity)}): "
                         f"give the directory of that model, or rebuild the passage vectors and retrain",
                         param="embedding_model")
    _BY_MODEL.setdefault(_key(embedder.identity), embedder)
    return embedder


SETTINGS = ("max_length", "pooling", "query_prefix", "passage_prefix")


def relocate(identity: dict, directory):
    """The model a recorded ``identity`` names, loaded from ``directory`` (where it is now);
    from then on the one that identity gets in this process."""
    embedder = _load_onnx({**{k: identity.get(k) for k in SETTINGS}, "path": directory})
    if not same_model(identity, embedder.identity):
        raise InputError(directory, None, f"is not the embedding model recorded "
                         f"({_difference(identity, embedder.identity)})", param="embedding_model")
    _BY_MODEL[_key(embedder.identity)] = embedder
    return embedder


def _difference(recorded: dict, found: dict) -> str:
    """Why ``found`` is not the ``recorded`` model: the files and settings that differ, named
    (two descriptions alone can read the same: a changed tokenizer.json is not in them)."""
    from factcheck.text.onnx_embedding import model_differences
    if recorded.get("kind") == found.get("kind") == "onnx":
        return f"{describe_model(recorded)}: {'; '.join(model_differences(recorded, found))}"
    return f"{describe_model(recorded)}; found {describe_model(found)}"


def _load_onnx(spec: dict):
    from factcheck.text.onnx_embedding import load_onnx_embedder
    if not spec.get("path"):
        raise InputError(None, None, "an embedding model needs its directory ('path')", param="embedding_model")
    return load_onnx_embedder(spec["path"], max_length=spec.get("max_length"), pooling=spec.get("pooling"),
                              query_prefix=spec.get("query_prefix") or "",
                              passage_prefix=spec.get("passage_prefix") or "")


def _is_bundled(identity: dict) -> bool:
    return str(identity.get("name", "")).startswith("wordllama/")


def _is_identity(model: dict) -> bool:
    return any(k.endswith("_sha256") for k in model)


def _key(identity: dict) -> str:
    from factcheck.text.onnx_embedding import model_key
    return json.dumps(model_key(identity), sort_keys=True)


def model_signature(identity: dict) -> str:
    """What decides a model's vectors, as one string (equal for :func:`same_model` identities)."""
    return _key(identity)


def same_model(a: dict, b: dict) -> bool:
    """Whether two recorded identities describe the same vectors."""
    return _key(a) == _key(b)


def describe_model(identity: dict) -> str:
    """A model in a few words: its name and version (or checksum)."""
    if identity.get("kind") == "onnx":
        return f"{identity.get('name')} (model.onnx sha256 {str(identity.get('model_sha256'))[:12]}{_weights(identity)})"
    return f"{identity.get('name')} {identity.get('package_version', '')}".strip()


def _weights(identity: dict) -> str:
    """The external data files' part of :func:`describe_model`."""
    files = identity.get("external_data") or {}
    if len(files) == 1:
        return "".join(f", {name} sha256 {sha[:12]}" for name, sha in files.items())
    digest = sha256_bytes(json.dumps(files, sort_keys=True).encode("utf-8"))
    return f", {len(files)} external data files, sha256 of their list {digest[:12]}" if files else ""


def _load() -> Embedder:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        import wordllama
        from wordllama import WordLlama
    except ImportError:
        raise InputError(None, None, INSTALL_HINT, param="mode") from None
    finally:
        # wordllama's import calls logging.basicConfig: undo it.
        root.handlers[:], root.level = handlers, level
    package_dir = Path(wordllama.__file__).resolve().parent
    try:
        model = WordLlama.load(config=MODEL_CONFIG, dim=MODEL_DIM, cache_dir=package_dir, disable_download=True)
    except (FileNotFoundError, OSError, ValueError) as exc:
        raise InputError(package_dir, None, f"the wordllama package cannot load its bundled model "
                         f"({exc}); reinstall it: pip install -e '.[open]'", param="mode") from None
    tokenizer = model.tokenizer
    tokenizer.no_padding()  # each text pooled on its own (see the module docstring)
    tokenizer.no_truncation()
    weights = package_dir / "weights" / f"{MODEL_CONFIG}_{MODEL_DIM}.safetensors"
    tokenizer_file = package_dir / "tokenizers" / f"{MODEL_CONFIG}_tokenizer_config.json"
    identity = {
        "name": f"wordllama/{MODEL_CONFIG}", "package_version": wordllama.__version__, "dim": MODEL_DIM,
        "weights_sha256": sha256_file(weights), "tokenizer_sha256": sha256_file(tokenizer_file),
        "pooling": "sum-l2",
    }
    return Embedder(np.ascontiguousarray(model.embedding, dtype=np.float32), tokenizer, identity)


def embed(texts: list[str], model=None, kind: str = "passage") -> np.ndarray:
    """``load_embedder(model).embed(texts, kind=kind)``: float32, L2-normalised, one row per text."""
    return load_embedder(model).embed(texts, kind=kind)
