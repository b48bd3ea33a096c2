"""Your own sentence-embedding model for the open mode: a local ONNX export and its tokenizer.

A model directory holds ``model.onnx`` (a transformer encoder exported to ONNX whose first
output is the token-level hidden states, ``(batch, sequence, dim)``: what the common
exports of sentence-transformers models -- all-MiniLM-L6-v2, bge-small, e5 -- give) and
``tokenizer.json`` (the Hugging Face ``tokenizers`` file of the same model). It is run by
onnxruntime on the CPU and never downloaded: the directory is read, nothing else.

Sentence vectors follow the sentence-transformers conventions: the tokenizer's own
special tokens are added (``[CLS] ... [SEP]``), texts are truncated to ``max_length``
tokens (special tokens included), the token vectors are pooled over the attention mask
-- their mean (``pooling="mean"``, all-MiniLM-L6-v2, e5) or the first token's
(``pooling="cls"``, bge) -- and the result is L2-normalised. Models trained with
instructions take a ``query_prefix`` (claims) and a ``passage_prefix`` (passages), e.g.
``"query: "`` / ``"passage: "`` for e5. When the directory also holds the
sentence-transformers files ``sentence_bert_config.json`` (``max_seq_length``) or
``1_Pooling/config.json`` (the pooling mode), their values are the defaults; otherwise
``max_length`` defaults to the tokenizer's truncation length, or 512.

Why one text at a time: onnxruntime's float32 matrix products give a row different last
bits depending on its position in the batch (measured on a test model: the same text at
rows 0 and 14 of one batch differs by ~1e-8), and the passage vectors' bytes must not
depend on the shard size or the number of jobs. Each text is therefore run alone, without
padding (its attention mask all ones); batching bought nothing measurable for the int8
all-MiniLM-L6-v2 on this machine (48-53 vs 42-55 passages/s on one thread).

Threads: ``threads`` (default: the worker's share of the cores the process pool sets in
``OMP_NUM_THREADS``, else every core) for onnxruntime's intra-op pool, which does not
spin between calls (a shared machine's other processes keep their cores).

The identity of a loaded model (:attr:`OnnxEmbedder.identity`) names what makes its
vectors: the sha256 of both files, the pooling, ``max_length`` and the prefixes; it is
stored with the passage vectors so vectors of another model are never mixed in. Where
the files are (``path``) and the runtime's version (``runtime``) are recorded beside it
but are not part of the comparison (:func:`model_key`): a model copied elsewhere is the
same model.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np

from factcheck.errors import InputError

__all__ = ["OnnxEmbedder", "POOLINGS", "file_sha256", "load_onnx_embedder", "model_key", "pool"]

POOLINGS = ("mean", "cls")
MODEL_FILE, TOKENIZER_FILE = "model.onnx", "tokenizer.json"
INSTALL_HINT = "a local ONNX embedding model needs the optional extra: pip install -e '.[onnx]'"
DEFAULT_MAX_LENGTH = 512
# Where a model was found (and the folder's name) and which runtime ran it: recorded, never compared.
NOT_COMPARED = ("path", "runtime")


def model_key(identity: dict) -> dict:
    """The part of an identity that decides the vectors: everything but where the files are
    (for a local model also its name, the folder's) and the runtime's version."""
    ignored = NOT_COMPARED + (("name",) if identity.get("kind") == "onnx" else ())
    return {k: v for k, v in identity.items() if k not in ignored}


class OnnxEmbedder:
    """A loaded ONNX sentence-embedding model (use :func:`load_onnx_embedder`).

    Parameters
    ----------
    directory : Path
        Holds ``model.onnx`` and ``tokenizer.json``.
    max_length : int
        Tokens kept per text, special tokens included.
    pooling : {"mean", "cls"}
        Mean of the token vectors over the attention mask, or the first token's vector.
    query_prefix, passage_prefix : str
        Prepended to claims (``kind="query"``) and to passages (``kind="passage"``).
    threads : int
        onnxruntime's intra-op threads.

    Attributes
    ----------
    dim : int
        Vector size (the model's hidden size).
    identity : dict
        What produces these vectors (see the module docstring).

    Example
    -------
    >>> embedder = load_onnx_embedder("models/all-MiniLM-L6-v2", max_length=256)  # doctest: +SKIP
    >>> embedder.embed(["Sea levels are rising."], kind="query").shape             # doctest: +SKIP
    (1, 384)
    """

    def __init__(self, directory: Path, max_length: int, pooling: str, query_prefix: str, passage_prefix: str,
                 threads: int):
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError:
            raise InputError(None, None, INSTALL_HINT, param="embedding_model") from None
        self.directory = directory
        self.max_length = max_length
        self.pooling = pooling
        self.prefixes = {"query": query_prefix, "passage": passage_prefix}
        model_path, tokenizer_path = directory / MODEL_FILE, directory / TOKENIZER_FILE
        try:
            self.tokenizer = Tokenizer.from_file(str(tokenizer_path))
        except Exception as exc:  # tokenizers raises its own Exception subclass, one line
            raise InputError(tokenizer_path, None, f"not a tokenizers file ({_first_line(exc)})") from None
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3  # errors only: its warnings would reach the user's terminal
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        try:
            self.session = ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime's errors are of its own types
            raise InputError(model_path, None, f"onnxruntime cannot load it ({_first_line(exc)})") from None
        self._inputs = self._check_inputs(model_path)
        # Run once on a word: a model that does not run, or whose first output is not
        # (batch, sequence, dim), is refused now, in one line.
        probe = self._run(np.asarray([self.tokenizer.encode("probe").ids], dtype=np.int64), model_path)
        self.dim = int(probe.shape[1])
        self.identity = {
            "name": f"onnx/{directory.name}", "kind": "onnx", "dim": self.dim,
            "model_sha256": file_sha256(model_path), "tokenizer_sha256": file_sha256(tokenizer_path),
            "pooling": pooling, "normalization": "l2", "max_length": max_length,
            "query_prefix": query_prefix, "passage_prefix": passage_prefix,
            "path": str(directory), "runtime": _runtime(ort),
        }

    def _check_inputs(self, model_path: Path) -> tuple[str, ...]:
        names = tuple(i.name for i in self.session.get_inputs())
        known = ("input_ids", "attention_mask", "token_type_ids")
        unknown = [n for n in names if n not in known]
        if "input_ids" not in names or unknown:
            raise InputError(model_path, None, f"takes inputs {', '.join(names)}; expected input_ids and "
                             f"optionally attention_mask and token_type_ids (a sentence-transformers export)")
        return names

    def _run(self, ids: np.ndarray, model_path: Path | None = None) -> np.ndarray:
        """Pooled, normalised float32 vectors of a batch of token ids (rows x length, no padding)."""
        mask = np.ones_like(ids)
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        try:
            hidden = self.session.run(None, {n: feed[n] for n in self._inputs})[0]
        except Exception as exc:
            raise InputError(model_path or self.directory / MODEL_FILE, None,
                             f"onnxruntime failed to run it ({_first_line(exc)})") from None
        if hidden.ndim != 3 or hidden.shape[:2] != ids.shape:
            raise InputError(model_path or self.directory / MODEL_FILE, None,
                             f"its first output has shape {hidden.shape}; expected token vectors "
                             f"(batch, sequence, dim) to pool")
        return pool(hidden, mask, self.pooling)

    def embed(self, texts: list[str], kind: str = "passage") -> np.ndarray:
        """L2-normalised float32 vectors, one row per text.

        ``kind``: ``"passage"`` or ``"query"`` (which prefix is prepended). Each text is run
        on its own, so its vector does not depend on the other texts (module docstring).
        """
        prefix = self.prefixes[kind]
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, encoding in enumerate(self.tokenizer.encode_batch([prefix + t for t in texts]) if texts else []):
            out[i] = self._run(np.asarray([encoding.ids], dtype=np.int64))[0]
        return out


def pool(hidden: np.ndarray, mask: np.ndarray, pooling: str) -> np.ndarray:
    """Sentence vectors from token vectors (batch x sequence x dim) and the attention mask:
    the masked mean or the first token, L2-normalised (a zero vector stays zero), float32.
    Sums are float64 and run over the sequence in order, so a row never depends on another."""
    if pooling == "cls":
        vectors = hidden[:, 0, :].astype(np.float64)
    else:
        weights = mask.astype(np.float64)[:, :, None]
        vectors = (hidden.astype(np.float64) * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1.0)
    norms = np.sqrt(np.einsum("ij,ij->i", vectors, vectors))
    return (vectors / np.where(norms > 0, norms, 1.0)[:, None]).astype(np.float32)


_LOADED: dict[tuple, OnnxEmbedder] = {}


def load_onnx_embedder(directory, max_length: int | None = None, pooling: str | None = None,
                       query_prefix: str = "", passage_prefix: str = "", threads: int | None = None) -> OnnxEmbedder:
    """The ONNX model in ``directory``, loaded once per process and settings.

    Parameters
    ----------
    directory : str or Path
        Holds ``model.onnx`` and ``tokenizer.json``.
    max_length : int, optional
        Tokens kept per text (default: ``sentence_bert_config.json``'s ``max_seq_length``,
        else the tokenizer's truncation length, else 512).
    pooling : {"mean", "cls"}, optional
        Default: ``1_Pooling/config.json``'s mode if present, else ``"mean"``.
    query_prefix, passage_prefix : str, default ""
    threads : int, optional
        Default: ``OMP_NUM_THREADS`` (a worker's share of the cores) or every core.

    Raises
    ------
    InputError
        One line: the extra is missing, a file is missing or unreadable, the model does
        not run or does not give token vectors, a setting is out of range.
    """
    root = Path(directory).expanduser()
    for name in (MODEL_FILE, TOKENIZER_FILE):
        if not (root / name).is_file():
            raise InputError(root, None, f"no {name} here: an embedding model directory holds {MODEL_FILE} "
                             f"and {TOKENIZER_FILE}", param="embedding_model")
    root = root.resolve()
    st = _sentence_transformers_settings(root)
    max_length = st.get("max_length") if max_length is None else max_length
    if max_length is None:
        max_length = _tokenizer_truncation(root / TOKENIZER_FILE) or DEFAULT_MAX_LENGTH
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 2:
        raise InputError(None, None, f"must be an integer of at least 2, got {max_length!r}",
                         param="embedding_max_length")
    pooling = pooling or st.get("pooling") or "mean"
    if pooling not in POOLINGS:
        raise InputError(None, None, f"unknown pooling {pooling!r}; expected one of {', '.join(POOLINGS)}",
                         param="embedding_pooling")
    for name, value in (("query_prefix", query_prefix), ("passage_prefix", passage_prefix)):
        if not isinstance(value, str):
            raise InputError(None, None, f"must be a string, got {value!r}", param=name)
    threads = threads or _default_threads()
    key = (str(root), max_length, pooling, query_prefix, passage_prefix, threads)
    if key not in _LOADED:
        _LOADED[key] = OnnxEmbedder(root, max_length, pooling, query_prefix, passage_prefix, threads)
    return _LOADED[key]


def _sentence_transformers_settings(root: Path) -> dict:
    """``max_length`` and ``pooling`` from a sentence-transformers model's own files, if there."""
    out = {}
    st, pooling = root / "sentence_bert_config.json", root / "1_Pooling" / "config.json"
    if st.is_file():
        value = _json(st).get("max_seq_length")
        if isinstance(value, int) and not isinstance(value, bool):
            out["max_length"] = value
    if pooling.is_file():
        data = _json(pooling)
        if data.get("pooling_mode_cls_token"):
            out["pooling"] = "cls"
        elif data.get("pooling_mode_mean_tokens"):
            out["pooling"] = "mean"
        else:
            raise InputError(pooling, None, "a pooling mode other than mean or CLS; only those are supported")
    return out


def _tokenizer_truncation(path: Path) -> int | None:
    truncation = _json(path).get("truncation")
    value = truncation.get("max_length") if isinstance(truncation, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(path, None, f"invalid JSON ({type(exc).__name__})") from None
    if not isinstance(data, dict):
        raise InputError(path, None, "expected a JSON object")
    return data


def _default_threads() -> int:
    value = os.environ.get("OMP_NUM_THREADS", "")
    if value.isdigit() and int(value) > 0:
        return int(value)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _runtime(ort) -> str:
    import tokenizers
    return f"onnxruntime {ort.__version__}, tokenizers {tokenizers.__version__}"


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__
