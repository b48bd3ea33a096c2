"""A tiny sentence-embedding model made at test time: ``model.onnx`` + ``tokenizer.json``.

No weights are committed and nothing is downloaded: the ONNX file is written here, field by
field in protobuf's wire format (the ``onnx`` package is not needed for four operators),
and the tokenizer is built with the ``tokenizers`` library. The graph is a miniature
encoder with the inputs and output of a sentence-transformers export::

    x = E[input_ids] + T[token_type_ids]           (batch, seq, dim)
    last_hidden_state = tanh((x + mean_seq(x)) @ W)

The sequence mean makes every token depend on the whole sequence, as attention does, so a
pad token that reached the model would change the other tokens' vectors. onnxruntime's
ReduceMean gives a row other last bits in a batch, so the embedder runs this model's texts
one at a time. ``mix="attention"`` replaces the mean with attention
(``softmax(x x^T) x``), whose kernels treat rows independently: texts are then batched.
:func:`reference_vectors` computes the expected sentence vectors with numpy alone.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

DIM = 8
SPECIALS = ["[PAD]", "[CLS]", "[SEP]", "[UNK]"]


# ---------------------------------------------------------------- protobuf, by hand

def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # negative int64 values are ten-byte two's complement
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _int(field: int, value: int) -> bytes:
    return _varint(field << 3) + _varint(value)


def _bytes(field: int, value: bytes | str) -> bytes:
    data = value.encode("utf-8") if isinstance(value, str) else value
    return _varint(field << 3 | 2) + _varint(len(data)) + data


def _tensor(name: str, array: np.ndarray) -> bytes:
    kind = {np.dtype(np.float32): 1, np.dtype(np.int64): 7}[array.dtype]
    return (b"".join(_int(1, d) for d in array.shape) + _int(2, kind) + _bytes(8, name)
            + _bytes(9, np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<")).tobytes()))


def _external_tensor(name: str, array: np.ndarray, location: str, offset: int) -> bytes:
    """A float32 TensorProto whose data is in another file: external_data entries (13) and
    data_location EXTERNAL (14), as large exports keep their weights."""
    entries = {"location": location, "offset": str(offset), "length": str(array.nbytes)}
    return (b"".join(_int(1, d) for d in array.shape) + _int(2, 1) + _bytes(8, name)
            + b"".join(_bytes(13, _bytes(1, k) + _bytes(2, v)) for k, v in entries.items()) + _int(14, 1))


def _value_info(name: str, elem_type: int, dims: list) -> bytes:
    shape = b"".join(_bytes(1, _bytes(2, d) if isinstance(d, str) else _int(1, d)) for d in dims)
    return _bytes(1, name) + _bytes(2, _bytes(1, _int(1, elem_type) + _bytes(2, shape)))


def _node(op: str, inputs: list[str], outputs: list[str], **ints_attrs) -> bytes:
    out = b"".join(_bytes(1, i) for i in inputs) + b"".join(_bytes(2, o) for o in outputs)
    out += _bytes(3, outputs[0]) + _bytes(4, op)
    for name, value in ints_attrs.items():  # AttributeProto: name 1, i 3, ints 8, type 20 (INT 2, INTS 7)
        if isinstance(value, list):
            out += _bytes(5, _bytes(1, name) + b"".join(_int(8, v) for v in value) + _int(20, 7))
        else:
            out += _bytes(5, _bytes(1, name) + _int(3, value) + _int(20, 2))
    return out


def model_bytes(E: np.ndarray, T: np.ndarray, W: np.ndarray, inputs=("input_ids", "attention_mask",
                                                                     "token_type_ids"), mix: str = "mean",
                external: str | bytes | None = None, positions: int | None = None) -> bytes:
    """The graph's bytes; ``external``: the file (relative to the model) holding E, T and W
    (:func:`weights_bytes`) instead of the graph; ``positions``: a position table of that
    many rows, as a BERT export names it (unused by the graph, so the vectors stay the same)."""
    nodes = [_node("Gather", ["E", "input_ids"], ["tok"])]
    if "token_type_ids" in inputs:
        nodes += [_node("Gather", ["T", "token_type_ids"], ["typ"]), _node("Add", ["tok", "typ"], ["x"])]
    else:
        nodes += [_node("Identity", ["tok"], ["x"])]
    if mix == "attention":
        nodes += [_node("Transpose", ["x"], ["xt"], perm=[0, 2, 1]), _node("MatMul", ["x", "xt"], ["scores"]),
                  _node("Softmax", ["scores"], ["attn"], axis=-1), _node("MatMul", ["attn", "x"], ["ctx"])]
    else:
        nodes += [_node("ReduceMean", ["x"], ["ctx"], axes=[1], keepdims=1)]
    nodes += [_node("Add", ["x", "ctx"], ["mixed"]),
              _node("MatMul", ["mixed", "W"], ["proj"]),
              _node("Tanh", ["proj"], ["last_hidden_state"])]
    graph = b"".join(_bytes(1, n) for n in nodes) + _bytes(2, "tiny")
    offsets = np.cumsum([0, E.nbytes, T.nbytes])
    graph += b"".join(_bytes(5, _external_tensor(n, a, external, int(o)) if external else _tensor(n, a))
                      for (n, a), o in zip((("E", E), ("T", T), ("W", W)), offsets))
    if positions:
        graph += _bytes(5, _tensor("embeddings.position_embeddings.weight", np.zeros((positions, W.shape[0]), np.float32)))
    graph += b"".join(_bytes(11, _value_info(name, 7, ["batch", "sequence"])) for name in inputs)
    graph += _bytes(12, _value_info("last_hidden_state", 1, ["batch", "sequence", W.shape[1]]))
    opset = _bytes(1, "") + _int(2, 13)
    return _int(1, 8) + _bytes(2, "factcheck-tests") + _bytes(7, graph) + _bytes(8, opset)


def weights_bytes(E: np.ndarray, T: np.ndarray, W: np.ndarray) -> bytes:
    """E, T and W as an external data file holds them: float32 little-endian, one after another."""
    return b"".join(np.ascontiguousarray(a, dtype="<f4").tobytes() for a in (E, T, W))


# ---------------------------------------------------------------- the model directory

def words_of(texts) -> list[str]:
    return sorted({w for t in texts for w in re.findall(r"\w+", t.lower())})


def weights(vocabulary: int, dim: int = DIM, seed: int = 0):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(vocabulary, dim)).astype(np.float32),
            rng.normal(size=(2, dim)).astype(np.float32) * np.float32(0.1),
            rng.normal(size=(dim, dim)).astype(np.float32) / np.float32(np.sqrt(dim)))


def make_model(directory: Path, texts, seed: int = 0, dim: int = DIM, max_length: int | None = None,
               mix: str = "mean", external: str | None = None, positions: int | None = None) -> Path:
    """Write ``model.onnx`` and ``tokenizer.json`` (a word-level vocabulary of ``texts``);
    ``external``: the weights go to that file beside ``model.onnx`` (ONNX external data);
    ``positions``: see :func:`model_bytes`."""
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordLevel
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    vocab = {w: i for i, w in enumerate(SPECIALS + words_of(texts))}
    tok = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]",
                                                       special_tokens=[("[CLS]", 1), ("[SEP]", 2)])
    if max_length:
        tok.enable_truncation(max_length)
    tok.save(str(directory / "tokenizer.json"))
    E, T, W = weights(len(vocab), dim, seed)
    (directory / "model.onnx").write_bytes(model_bytes(E, T, W, mix=mix, external=external, positions=positions))
    if external:
        (directory / external).parent.mkdir(parents=True, exist_ok=True)
        (directory / external).write_bytes(weights_bytes(E, T, W))
    (directory / "weights.json").write_text(json.dumps({"seed": seed, "dim": dim, "mix": mix}))
    return directory


def reference_vectors(directory: Path, texts, max_length: int = 512, pooling: str = "mean",
                      prefix: str = "") -> np.ndarray:
    """The sentence vectors the model directory should give, by numpy alone: the tokens as
    the tokenizer splits them, the graph's arithmetic, mean (or first-token) pooling, L2."""
    from tokenizers import Tokenizer
    directory = Path(directory)
    meta = json.loads((directory / "weights.json").read_text())
    tok = Tokenizer.from_file(str(directory / "tokenizer.json"))
    E, T, W = weights(tok.get_vocab_size(), meta["dim"], meta["seed"])
    out = []
    for text in texts:
        words = re.findall(r"\w+|[^\w\s]+", (prefix + text).lower())
        vocab = tok.get_vocab()
        ids = [1] + [vocab.get(w, 3) for w in words][: max_length - 2] + [2]
        x = E[ids].astype(np.float64) + T[0]
        if meta.get("mix") == "attention":
            scores = x @ x.T
            attn = np.exp(scores - scores.max(axis=1, keepdims=True))
            context = (attn / attn.sum(axis=1, keepdims=True)) @ x
        else:
            context = x.mean(axis=0)
        h = np.tanh((x + context) @ W.astype(np.float64))
        v = h[0] if pooling == "cls" else h.mean(axis=0)
        out.append(v / np.linalg.norm(v))
    return np.array(out)
