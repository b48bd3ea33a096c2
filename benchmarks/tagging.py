"""Benchmark the offline tagging job against the 2024 notebook method.

Writes reports/bench-tagging.md: wall, CPU, peak RSS and passages/s of
``factcheck tag --jobs 2`` at 0.3M and 1.2M passages (median of 3 fresh runs each), and
of a faithful re-implementation of the 2024 notebook method (pandas ``apply`` per
passage for preprocessing, scikit-learn ``TfidfVectorizer(max_features=20000)``, then
per passage a dense row and ``np.argsort``) on a 20K-passage sample, with the per-passage
speed ratio.

    python -m benchmarks.tagging                 # full benchmark (~10 minutes)
    python -m benchmarks.tagging --sizes 20000 --repeats 1 --out /tmp/b.md   # smoke
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

from harness.measure import (FLOOR_DOC, ROOT, ensure_corpus, gib, machine, measure,
                      measure_floor, median_runs, write_report)

SAMPLE_2024 = 20_000


def method_2024(corpus: Path, n: int) -> None:
    """The 2024 notebook's tagging, reconstructed (run in a subprocess by the benchmark)."""
    import re

    import numpy as np
    import pandas as pd
    from nltk.stem.porter import PorterStemmer
    from sklearn.feature_extraction.text import TfidfVectorizer

    from factcheck.text.stopwords import ENGLISH_STOP_WORDS

    with open(corpus, encoding="utf-8") as fh:
        evidence = json.load(fh)
    df = pd.DataFrame(list(evidence.items())[:n], columns=["id", "text"])
    stemmer = PorterStemmer()

    def preprocess(text):  # no memo: every token stemmed every time, as in 2024
        tokens = re.findall(r"\w+", text.lower())
        return " ".join(stemmer.stem(t) for t in tokens if t.isalpha() and t not in ENGLISH_STOP_WORDS)

    df["processed"] = df["text"].apply(preprocess)
    vectorizer = TfidfVectorizer(max_features=20000)
    matrix = vectorizer.fit_transform(df["processed"])
    names = vectorizer.get_feature_names_out()

    def top_tags(i):
        row = matrix[i].toarray().ravel()
        return list(names[np.argsort(row)[::-1][:10]])

    df["tags"] = df.index.to_series().apply(top_tags)
    assert len(df) == n


def bench_ours(corpus: Path, repeats: int, jobs: int) -> dict:
    runs, floors = [], []
    for _ in range(repeats):
        floors.append(measure_floor(corpus))  # interleaved: both see the same machine
        out = Path(tempfile.mkdtemp(prefix="bench-tag-", dir=ROOT / "bench"))
        try:
            runs.append(measure([sys.executable, "-m", "factcheck", "tag", str(corpus), "--out", str(out / "idx"),
                                 "--jobs", str(jobs)]))
        finally:
            shutil.rmtree(out, ignore_errors=True)
    return {"median": median_runs(runs), "runs": runs, "floor": median_runs(floors), "floors": floors}


def bench_2024(corpus: Path, repeats: int) -> dict:
    runs = [measure([sys.executable, "-m", "benchmarks.tagging", "--run-2024", str(corpus), "--n", str(SAMPLE_2024)])
            for _ in range(repeats)]
    return {"median": median_runs(runs), "runs": runs}


def row(label: str, n: int, m: dict, floor: dict | None = None) -> str:
    ratio = f"{floor['wall_s']:.1f} | {m['wall_s'] / floor['wall_s']:.1f}×" if floor else "– | –"
    return (f"| {label} | {n:,} | {m['wall_s']:.1f} | {m['cpu_s']:.1f} | {ratio} | {gib(m['tree_peak_rss'])} | "
            f"{gib(m['driver_peak_rss'])} | {n / m['wall_s']:,.0f} |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--sizes", default="300000,1208827", help="corpus sizes for factcheck tag")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--repeats-2024", type=int, default=3, help="runs of the 2024 method (~55 s each)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "bench-tagging.md")
    ap.add_argument("--run-2024", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, default=SAMPLE_2024, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.run_2024:
        method_2024(args.run_2024, args.n)
        return 0
    (ROOT / "bench").mkdir(exist_ok=True)
    sizes = [int(s) for s in args.sizes.split(",")]
    results = {n: bench_ours(ensure_corpus(n), args.repeats, args.jobs) for n in sizes}
    old = bench_2024(ensure_corpus(max(sizes)), args.repeats_2024)

    largest = max(sizes)
    ours_rate = largest / results[largest]["median"]["wall_s"]
    old_rate = SAMPLE_2024 / old["median"]["wall_s"]
    lines = [
        "# Benchmark: the offline tagging job", "",
        f"Machine: {machine()}.", "",
        f"Command: `python -m benchmarks.tagging --sizes {args.sizes} --repeats {args.repeats} "
        f"--jobs {args.jobs} --repeats-2024 {args.repeats_2024}`; each figure of ours is the median of "
        f"{args.repeats} fresh runs (new output directory each time), the 2024 method's of {args.repeats_2024}. "
        f"Floor: {FLOOR_DOC}, once before each run (median reported). Corpora come from `benchmarks/make_corpus.py` (the 316,312-passage proxy corpus "
        "plus synthetic filler drawn from its own unigram and length distributions). Peak RSS is sampled "
        "every 50 ms over the whole process tree (driver + worker processes).", "",
        "| method | passages | wall s | CPU s | floor s | wall / floor | peak RSS (tree) | peak RSS (driver) "
        "| passages/s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for n in sizes:
        lines.append(row(f"`factcheck tag --jobs {args.jobs}`", n, results[n]["median"], results[n]["floor"]))
    lines.append(row("2024 notebook method (pandas apply + dense argsort)", SAMPLE_2024, old["median"]))
    m = results[largest]["median"]
    lines += [
        "", f"Per-passage speed-up over the 2024 method: **{ours_rate / old_rate:.0f}×** "
        f"({ours_rate:,.0f} vs {old_rate:,.0f} passages/s).", "",
        "Targets of the offline job at Wikipedia scale:", "",
        f"- 1.2M passages in ≤ 60 s wall: **{m['wall_s']:.1f} s** — {'met' if m['wall_s'] <= 60 else 'NOT met'}"
        if largest >= 1_200_000 else "- 1.2M size not run in this invocation",
        f"- peak RSS ≤ 4 GB: **{gib(m['tree_peak_rss'])}** (whole tree) — "
        f"{'met' if m['tree_peak_rss'] <= 4e9 else 'NOT met'}",
        f"- ≥ 20× faster per passage than 2024: **{ours_rate / old_rate:.0f}×** — "
        f"{'met' if ours_rate / old_rate >= 20 else 'NOT met'}",
    ]
    if largest >= 1_200_000:
        ratio = m["wall_s"] / results[largest]["floor"]["wall_s"]
        lines += ["", "Target of the tagging step inside the main job at real scale:", "",
                  f"- tagging 1.2M ≤ 2.5× the floor measured in the same run: **{ratio:.1f}×** "
                  f"({m['wall_s']:.1f} s vs {results[largest]['floor']['wall_s']:.1f} s) — "
                  f"{'met' if ratio <= 2.5 else 'NOT met'}"]
    lines += ["", "All runs (wall s / CPU s / tree peak GiB; floor s):", ""]
    for n in sizes:
        lines.append(f"- {n:,}: " + "; ".join(f"{r['wall_s']:.1f} / {r['cpu_s']:.1f} / {r['tree_peak_rss'] / 2**30:.2f}"
                                             for r in results[n]["runs"])
                     + "; floor " + ", ".join(f"{f['wall_s']:.1f}" for f in results[n]["floors"]))
    lines.append(f"- 2024 method, {SAMPLE_2024:,}: " + "; ".join(
        f"{r['wall_s']:.1f} / {r['cpu_s']:.1f} / {r['tree_peak_rss'] / 2**30:.2f}" for r in old["runs"]))
    write_report(args.out, lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
