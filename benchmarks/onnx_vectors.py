"""Benchmark passage vectors from a local ONNX model, and extrapolate to the 1.2M dump.

Writes reports/bench-onnx-vectors.md: passages per second of one core embedding a sample
of the knowledge source with the ONNX model (one thread, one text at a time, as a vector
job's worker does), the bundled static model on the same passages as the in-run
reference (machine speed varies from run to run on a shared machine; the ratio is the
comparable figure), the median of ``--repeats`` alternating runs, and the time and size
of the 1,208,827-passage dump's vectors extrapolated from them (two workers, one per core,
assumed to scale linearly; size: float16 rows plus the ``.npy`` headers).

``--float-reference DIR`` (a sentence-transformers BERT directory: ``model.safetensors``,
``config.json``, ``tokenizer.json``) also checks the vectors themselves: the same model's
float32 weights run by a plain numpy BERT encoder written here, mean-pooled and normalised
as sentence-transformers does, and the cosine of each reference vector with the ONNX
model's, on the sample's first passages (an int8 export should stay above 0.99).

    python -m benchmarks.onnx_vectors --model /work/models/all-MiniLM-L6-v2-int8
    python -m benchmarks.onnx_vectors --model DIR --sample 200 --repeats 1 --out /tmp/b.md   # smoke
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import time
from pathlib import Path

import numpy as np

from harness.measure import ROOT, SHARED, machine, write_report

DUMP = 1_208_827  # the real knowledge source's passages


def sample_texts(path: Path, n: int) -> list[str]:
    """Every k-th passage of a course-format knowledge source: ``n`` of them, spread evenly."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        texts = list(json.load(fh).values())
    step = max(1, len(texts) // n)
    return texts[::step][:n]


class NumpyBert:
    """A BERT encoder in numpy (float64) from a sentence-transformers directory: the
    reference the ONNX export is compared with. Mean pooling over the tokens, L2."""

    def __init__(self, directory: Path):
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer
        self.w = {k.removeprefix("bert."): v.astype(np.float64)
                  for k, v in load_file(str(directory / "model.safetensors")).items()}
        self.cfg = json.loads((directory / "config.json").read_text())
        self.tok = Tokenizer.from_file(str(directory / "tokenizer.json"))
        self.tok.no_padding()
        self.tok.enable_truncation(256)

    def _ln(self, x, name):
        mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + self.cfg.get("layer_norm_eps", 1e-12)) * self.w[name + ".weight"] \
            + self.w[name + ".bias"]

    def _dense(self, x, name):
        return x @ self.w[name + ".weight"].T + self.w[name + ".bias"]

    def embed(self, text: str) -> np.ndarray:
        from scipy.special import erf
        ids = np.asarray(self.tok.encode(text).ids)
        n, hidden, heads = len(ids), self.cfg["hidden_size"], self.cfg["num_attention_heads"]
        d = hidden // heads
        x = (self.w["embeddings.word_embeddings.weight"][ids] + self.w["embeddings.position_embeddings.weight"][:n]
             + self.w["embeddings.token_type_embeddings.weight"][0])
        x = self._ln(x, "embeddings.LayerNorm")
        for i in range(self.cfg["num_hidden_layers"]):
            pre = f"encoder.layer.{i}."
            q, k, v = (self._dense(x, pre + f"attention.self.{m}").reshape(n, heads, d).transpose(1, 0, 2)
                       for m in ("query", "key", "value"))
            a = q @ k.transpose(0, 2, 1) / np.sqrt(d)
            a = np.exp(a - a.max(-1, keepdims=True))
            a /= a.sum(-1, keepdims=True)
            context = (a @ v).transpose(1, 0, 2).reshape(n, hidden)
            x = self._ln(x + self._dense(context, pre + "attention.output.dense"), pre + "attention.output.LayerNorm")
            h = self._dense(x, pre + "intermediate.dense")
            h = 0.5 * h * (1 + erf(h / np.sqrt(2)))
            x = self._ln(x + self._dense(h, pre + "output.dense"), pre + "output.LayerNorm")
        vector = x.mean(axis=0)
        return vector / np.linalg.norm(vector)


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, required=True, help="ONNX model directory (model.onnx + tokenizer.json)")
    ap.add_argument("--evidence", type=Path, default=SHARED / "evidence.json.gz")
    ap.add_argument("--sample", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--float-reference", type=Path, default=None,
                    help="sentence-transformers directory of the same model's float weights (model.safetensors)")
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "bench-onnx-vectors.md")
    args = ap.parse_args(argv)

    from factcheck.tagging.vectors import ONNX_SHARD_SIZE
    from factcheck.text.embedding import describe_model, load_embedder
    from factcheck.text.onnx_embedding import load_onnx_embedder
    texts = sample_texts(args.evidence, args.sample)
    onnx = load_onnx_embedder(args.model, threads=1)
    static = load_embedder()
    onnx.embed(texts[:20]), static.embed(texts[:20])  # warm up (first-call allocations)
    runs = []
    for _ in range(args.repeats):  # alternating, so both see the same machine
        runs.append({"onnx": timed(lambda: onnx.embed(texts)), "static": timed(lambda: static.embed(texts))})
    t_onnx = statistics.median(r["onnx"] for r in runs)
    t_static = statistics.median(r["static"] for r in runs)
    rate = len(texts) / t_onnx
    dump_hours = DUMP / (2 * rate) / 3600
    shards = -(-DUMP // ONNX_SHARD_SIZE)
    size = DUMP * onnx.dim * 2 + shards * 128
    tokens = [len(e.ids) for e in onnx.tokenizer.encode_batch(texts)]
    L = [
        "# Passage vectors with a local ONNX model", "",
        f"Machine: {machine()}; load average at the start "
        f"{open('/proc/loadavg').read().split()[0]} (a shared machine: the ratio is the comparable figure).",
        f"Model: {describe_model(onnx.identity)}, dim {onnx.dim}, max length {onnx.max_length}, "
        f"{onnx.pooling} pooling; {onnx.identity['runtime']}.",
        f"Sample: {len(texts):,} passages of `{args.evidence.name}` (every k-th), {statistics.mean(tokens):.1f} "
        f"tokens on average. Median of {args.repeats} alternating runs, one thread, one text at a time.", "",
        "| | seconds | passages/s (one core) |", "|---|---|---|",
        f"| ONNX model | {t_onnx:.2f} | {rate:,.0f} |",
        f"| bundled static model (reference) | {t_static:.3f} | {len(texts) / t_static:,.0f} |",
        "", f"The ONNX model takes **{t_onnx / t_static:,.0f}x** the bundled model's time on the same passages.",
        "", f"Extrapolated to the {DUMP:,}-passage dump on 2 cores (two workers): **{dump_hours:.1f} h**; "
        f"vectors {size / 1e9:.2f} GB on disk ({DUMP:,} x {onnx.dim} float16 in {shards} shards of "
        f"{ONNX_SHARD_SIZE:,}), {DUMP * onnx.dim * 4 / 1e9:.2f} GB in RAM as float32 for dense search.",
        "", "Runs (seconds): " + "; ".join(f"onnx {r['onnx']:.2f}, static {r['static']:.3f}" for r in runs),
    ]
    if args.float_reference:
        bert = NumpyBert(args.float_reference)
        probe = ["A man is eating food.", "A man is eating a piece of bread.", "The new movie is awesome."]
        checked = probe + texts[:100]
        ref = np.array([bert.embed(t) for t in checked])
        cos = np.einsum("ij,ij->i", ref, onnx.embed(checked).astype(np.float64))
        ours = onnx.embed(probe).astype(np.float64)
        L += ["", f"Vectors against the float32 model (`{args.float_reference.name}`'s `model.safetensors` run by "
              f"a numpy BERT encoder, mean pooling, L2; {len(checked)} texts): cosine min {cos.min():.4f}, mean "
              f"{cos.mean():.4f}. Similarity of 'A man is eating food.' with '... a piece of bread.' / "
              f"'The new movie is awesome.': reference {ref[0] @ ref[1]:.4f} / {ref[0] @ ref[2]:.4f}, "
              f"ONNX {ours[0] @ ours[1]:.4f} / {ours[0] @ ours[2]:.4f}."]
    write_report(args.out, L)


if __name__ == "__main__":
    main()
