"""Sentence embeddings for the open mode: the ``wordllama`` wheel's bundled static model.

Why this model: it ships *inside* a registry package (``pip install -e '.[open]'``), 16 MB
of 256-dimension token vectors (``l2_supercat``) plus its tokenizer, so nothing is ever
fetched from a model hub. wordllama's default loader looks for the tokenizer in the wrong
folder and then goes to the network; :func:`load_embedder` instead points its cache at
the installed package directory and disables downloads, so a missing file is an error,
never a socket.

Why our own pooling instead of ``WordLlamaInference.embed``: that pads each batch to its
longest text, so a text's vector is computed in an array whose shape depends on its
batch-mates. Here each text's token vectors are summed on their own (``np.add.reduceat``
adds a segment's rows in order), so a passage's vector is the same bits whatever the
batch size, shard size or number of processes. The sum is L2-normalised (the mean's
direction; the model's similarity is the cosine), and a text with no known token gets
the zero vector (similarity 0 to everything) rather than NaN.

The course mode never imports this module's model: ``wordllama`` is imported only inside
:func:`load_embedder` (a test checks the course-mode modules leave it out of
``sys.modules``).

A transformer instead (``load_embedder("minilm")``, ``--embedding-model minilm``, or a
local ONNX export: ``load_embedder(DIR)``; :mod:`factcheck.text.onnx_embedding`). Whichever
model it is, an embedder has ``embed(texts, kind="passage" | "query", memo=True)``, ``dim``
and an ``identity`` (what produced its vectors), and :func:`load_embedder` given a recorded
identity returns that same model or refuses in one line.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from factcheck.errors import InputError

__all__ = ["Embedder", "MODEL_CONFIG", "MODEL_DIM", "describe_model", "embed", "load_embedder", "model_signature",
           "relocate", "same_model"]

MODEL_CONFIG = "l2_supercat"
MODEL_DIM = 256
INSTALL_HINT = "the open mode needs the optional extra: pip install -e '.[open]'"
# Texts tokenised and pooled at a time: bounds the (tokens x 256) float32 gather to a few
# tens of MB; the result does not depend on it.
BATCH = 1024


@dataclass
class Embedder:
    """A loaded static embedding model: a token-vector table and its tokenizer.

    Parameters
    ----------
    table : ndarray of shape (vocabulary, dim), float32
        One vector per token id.
    tokenizer : tokenizers.Tokenizer
        The model's tokenizer (padding and truncation off).
    identity : dict
        What produced the vectors (model name, package version, file checksums); stored
        in every vector manifest so vectors of another model are never mixed in.

    Example
    -------
    >>> embedder = load_embedder()                              # doctest: +SKIP
    >>> embedder.embed(["sea level rise"]).shape                # doctest: +SKIP
    (1, 256)
    """

    table: np.ndarray
    tokenizer: object
    identity: dict

    @property
    def dim(self) -> int:
        return int(self.table.shape[1])

    def embed(self, texts: list[str], kind: str = "passage", memo: bool = True,
              batch_size: int = BATCH) -> np.ndarray:
        """L2-normalised float32 vectors, one row per text (zero rows for texts with no token).

        ``kind`` and ``memo`` are accepted for the embedders' common interface: a static
        model embeds queries and passages alike, faster than a memo would look them up."""
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
        ``None``: the bundled model, from the installed ``wordllama`` package. ``"minilm"``:
        the packaged transformer; a directory: a local ONNX model there
        (:func:`~factcheck.text.onnx_embedding.load_onnx_embedder`, default settings). A
        dict: a packaged name's or a directory's ``path`` with its settings
        (``max_length``, ``pooling``, ``query_prefix``, ``passage_prefix``), or the
        ``identity`` recorded with vectors, a model directory or a classifier -- then the
        same model is returned (one already loaded, whatever its path, or the one at the
        recorded ``path``), and anything else is refused.

    Raises a one-line :class:`~factcheck.errors.InputError` saying what to install when
    an extra is missing, naming the file when one is missing or wrong.
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
        raise InputError(where, None, f"is not the embedding model recorded ({describe_model(model)}; found "
                         f"{describe_model(embedder.identity)}): give the directory of that model, or rebuild "
                         f"the passage vectors and retrain", param="embedding_model")
    _BY_MODEL.setdefault(_key(embedder.identity), embedder)
    return embedder


SETTINGS = ("max_length", "pooling", "query_prefix", "passage_prefix")


def relocate(identity: dict, directory):
    """The model a recorded ``identity`` names, loaded from ``directory`` (where it is now)
    with the recorded settings, and from then on the one every consumer naming that
    identity gets in this process. Refused in one line if the files there differ."""
    embedder = _load_onnx({**{k: identity.get(k) for k in SETTINGS}, "path": directory})
    if not same_model(identity, embedder.identity):
        raise InputError(directory, None, f"is not the embedding model recorded ({describe_model(identity)}; "
                         f"found {describe_model(embedder.identity)})", param="embedding_model")
    _BY_MODEL[_key(embedder.identity)] = embedder
    return embedder


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
    """Whether two recorded identities describe the same vectors (where the model's files
    are, and which runtime version ran them, do not count)."""
    return _key(a) == _key(b)


def describe_model(identity: dict) -> str:
    """A model in a few words: its name and version, or for an ONNX model its name and the
    start of its ``model.onnx`` checksum."""
    if identity.get("kind") == "onnx":
        return f"{identity.get('name')} (model.onnx sha256 {str(identity.get('model_sha256'))[:12]}{_weights(identity)})"
    return f"{identity.get('name')} {identity.get('package_version', '')}".strip()


def _weights(identity: dict) -> str:
    """The external data files' part of :func:`describe_model`."""
    files = identity.get("external_data") or {}
    if len(files) == 1:
        return "".join(f", {name} sha256 {sha[:12]}" for name, sha in files.items())
    digest = hashlib.sha256(json.dumps(files, sort_keys=True).encode("utf-8")).hexdigest()
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
        # wordllama.inference calls logging.basicConfig(level=INFO) at import: a library
        # must not configure the application's logging, so undo it.
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
        "weights_sha256": _sha256(weights), "tokenizer_sha256": _sha256(tokenizer_file),
        "pooling": "sum-l2",
    }
    return Embedder(np.ascontiguousarray(model.embedding, dtype=np.float32), tokenizer, identity)


def _sha256(path: Path) -> str:
    # text sits beside formats in the layers, so it imports nothing from it
    from factcheck.text.onnx_embedding import file_sha256
    return file_sha256(path)


def embed(texts: list[str], model=None, kind: str = "passage") -> np.ndarray:
    """``load_embedder(model).embed(texts, kind=kind)``: float32, L2-normalised, one row per text."""
    return load_embedder(model).embed(texts, kind=kind)
