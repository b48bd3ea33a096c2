"""Benchmark passage vectors from a local ONNX model, and extrapolate to the 1.2M dump.

Writes reports/bench-onnx-vectors.md: passages per second of one core embedding a sample
of the knowledge source with the ONNX model (one thread, one text at a time, as a vector
job's worker does), the bundled static model on the same passages as the in-run
reference (machine speed varies from run to run on a shared machine; the ratio is the
comparable figure), the median of ``--repeats`` alternating runs, and the time and size
of the 1,208,827-passage dump's vectors extrapolated from them (two workers, one per core,
assumed to scale linearly; size: float16 rows plus the ``.npy`` headers).

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

from harness.measure import ROOT, SHARED, machine, write_report

DUMP = 1_208_827  # the real knowledge source's passages


def sample_texts(path: Path, n: int) -> list[str]:
    """Every k-th passage of a course-format knowledge source: ``n`` of them, spread evenly."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        texts = list(json.load(fh).values())
    step = max(1, len(texts) // n)
    return texts[::step][:n]


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
    write_report(args.out, L)


if __name__ == "__main__":
    main()
