"""Benchmark online retrieval on the 1.2M-passage bench corpus.

Writes reports/bench-retrieval.md: the tag rule's latency per claim (p50/p99 over the
154 dev claims, one claim per call, after a warm-up pass; median of 3 repeats) and
BM25's throughput in claims/s (all dev claims; median of 3), plus the one-off costs
(index load, retriever fit).

    python -m benchmarks.retrieval            # builds bench/idx-1208827 if missing
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from harness.measure import ROOT, SHARED, ensure_corpus, machine, write_report


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--n", type=int, default=1_208_827)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "bench-retrieval.md")
    args = ap.parse_args(argv)

    from factcheck.formats.claims import read_claims
    from factcheck.retrieval.bm25 import BM25Retriever
    from factcheck.retrieval.tag_rule import TagRuleRetriever
    from factcheck.tagging.index import TagIndex

    corpus = ensure_corpus(args.n)
    index_dir = ROOT / "bench" / f"idx-{args.n}"
    subprocess.run([sys.executable, "-m", "factcheck", "tag", str(corpus), "--out", str(index_dir), "--jobs", "2"],
                   check=True)
    claims = [c.text for c in read_claims(SHARED / "dev-claims.json")]

    t = time.perf_counter()
    index = TagIndex.load(index_dir)
    load_s = time.perf_counter() - t
    t = time.perf_counter()
    tags = TagRuleRetriever().fit(index)
    tags_fit_s = time.perf_counter() - t
    tags.retrieve(claims)  # warm-up
    p50s, p99s, fallback = [], [], 0
    for _ in range(args.repeats):
        lat = []
        for c in claims:
            t = time.perf_counter()
            sel = tags.retrieve([c])[0]
            lat.append(time.perf_counter() - t)
            fallback += sel.path == "fallback"
        p50s.append(np.percentile(lat, 50) * 1000)
        p99s.append(np.percentile(lat, 99) * 1000)
    p50, p99 = statistics.median(p50s), statistics.median(p99s)

    t = time.perf_counter()
    bm25 = BM25Retriever(k1=0.9, b=0.4, k=4).fit(index)
    bm25_fit_s = time.perf_counter() - t
    bm25.retrieve(claims[:10])  # warm-up
    rates = []
    for _ in range(args.repeats):
        t = time.perf_counter()
        bm25.retrieve(claims)
        rates.append(len(claims) / (time.perf_counter() - t))
    rate = statistics.median(rates)

    lines = [
        "# Benchmark: online retrieval at 1.2M passages", "",
        f"Machine: {machine()}.", "",
        f"Command: `python -m benchmarks.retrieval --n {args.n} --repeats {args.repeats}`. Corpus: "
        f"`bench/corpus-{args.n}.json` from `benchmarks/make_corpus.py` ({len(index):,} passages), "
        f"tagged with default parameters; queries: the {len(claims)} dev claims. Single process.", "",
        "| measure | value | target |", "|---|---|---|",
        f"| tag rule latency p50 (ms/claim) | {p50:.2f} | ≤ 5 — {'met' if p50 <= 5 else 'NOT met'} |",
        f"| tag rule latency p99 (ms/claim) | {p99:.2f} | ≤ 25 — {'met' if p99 <= 25 else 'NOT met'} |",
        f"| BM25 (k1=0.9, b=0.4, k=4) throughput (claims/s) | {rate:.0f} | ≥ 100 — "
        f"{'met' if rate >= 100 else 'NOT met'} |", "",
        "One-off costs: "
        f"index load + verification {load_s:.1f} s; tag-rule fit (inverted index + tag vectors) {tags_fit_s:.1f} s; "
        f"BM25 fit {bm25_fit_s:.1f} s (bm25s index build, or load when cached next to the tags).", "",
        f"Per-repeat p50 ms: {', '.join(f'{x:.2f}' for x in p50s)}; p99 ms: {', '.join(f'{x:.2f}' for x in p99s)}; "
        f"BM25 claims/s: {', '.join(f'{x:.0f}' for x in rates)}. Fallback share of the tag rule on this corpus: "
        f"{fallback / (len(claims) * args.repeats):.2f}.",
    ]
    write_report(args.out, lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
