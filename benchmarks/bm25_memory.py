"""Peak memory of ``factcheck retrieve --method bm25`` on a large index, its BM25 build included.

Writes reports/bench-bm25-memory.md. On the tag index of a bench corpus (``bench/idx-N``,
tagged first when missing), ``retrieve --method bm25 --k1 0.9 --b 0.4`` over the course's
dev claims, ``--repeats`` times each way:

* *full build*: the index's whole BM25 cache removed first (term counts and weights);
* *weights only*: the term counts kept, the (k1, b) weights removed (what a second
  setting of k1 and b costs).

Each figure is the process tree's peak RSS (sampled) and wall/CPU seconds, with the load
average before the run; the median is reported.

    python -m benchmarks.bm25_memory                    # 5M bench corpus
    python -m benchmarks.bm25_memory --n 1208827
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from harness.measure import ROOT, SHARED, ensure_corpus, machine, measure, write_report

TARGET_GB = 2.0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=5_000_000, help="passages of the bench corpus (default 5,000,000)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--index", type=Path, default=None, help="an existing tag index of the corpus (default bench/idx-N)")
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "bench-bm25-memory.md")
    args = ap.parse_args(argv)
    index = args.index or ROOT / "bench" / f"idx-{args.n}"
    if not (index / "manifest.json").is_file():
        subprocess.run([sys.executable, "-m", "factcheck", "tag", str(ensure_corpus(args.n)), "--out", str(index),
                        "--jobs", "2"], check=True, cwd=ROOT)
    cmd = [sys.executable, "-m", "factcheck", "retrieve", "--index", str(index), "--claims",
           str(SHARED / "dev-claims.json"), "--out", str(ROOT / "bench" / "bm25-memory.json"),
           "--method", "bm25", "--k1", "0.9", "--b", "0.4"]
    ways = {"full build": index / "bm25", "weights only": index / "bm25" / "lucene-k1_0.9-b_0.4"}
    results = {}
    for way, cache in ways.items():
        runs = []
        for _ in range(args.repeats):
            shutil.rmtree(cache, ignore_errors=True)
            load = os.getloadavg()[0]
            r = measure(cmd)
            runs.append({"wall": r["wall_s"], "cpu": r["cpu_s"], "peak": r["tree_peak_rss"], "load": load})
        results[way] = runs
    lines = ["# Benchmark: peak memory of `retrieve --method bm25`, the BM25 build included", "",
             f"Machine: {machine()}.", "",
             f"Command: `python -m benchmarks.bm25_memory --n {args.n} --repeats {args.repeats}`: "
             f"`factcheck retrieve --method bm25 --k1 0.9 --b 0.4` over the 154 dev claims on the tag index of the "
             f"{args.n:,}-passage bench corpus; peak RSS of the process tree, sampled (1 GB = 10^9 bytes).", "",
             "| BM25 cache before the run | peak GB (median) | wall s | CPU s |", "|---|---|---|---|"]
    for way, runs in results.items():
        med = {k: statistics.median(r[k] for r in runs) for k in ("wall", "cpu", "peak")}
        lines.append(f"| {way} | {med['peak'] / 1e9:.2f} | {med['wall']:.1f} | {med['cpu']:.1f} |")
    full = statistics.median(r["peak"] for r in results["full build"]) / 1e9
    lines += ["", f"Target (peak ≤ {TARGET_GB} GB, index build included): **{full:.2f} GB** — "
              + ("met" if full <= TARGET_GB else "NOT met"), "", "All runs (peak GB / wall s / CPU s, load average before):", ""]
    for way, runs in results.items():
        lines.append(f"- {way}: " + "; ".join(f"{r['peak'] / 1e9:.2f} / {r['wall']:.1f} / {r['cpu']:.1f} "
                                              f"(load {r['load']:.2f})" for r in runs))
    write_report(args.out, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
