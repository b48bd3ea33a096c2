"""Time ``factcheck search --index INDEX "QUERY"`` as a fresh process: one query, start-up included.

What a user pays for one search from the shell: the interpreter, the imports a BM25 query
needs, opening the index and the query itself. Median of ``--repeats`` runs of the command
(wall and the process's peak RSS, its kernel high-water mark), next to ``python -c pass``
measured in the same run (the interpreter's own start-up); the target is 1 s wall on the
1.2M bench index. One warm-up run first, so every measured run reads the index from the page
cache (and BM25's weights, built and cached in the index directory on the first search).
Writes reports/bench-search.md.

    python -m benchmarks.search_cli [--index bench/idx-1208827] [--query "..."] [--repeats 5]

The index is built once by ``factcheck tag bench/corpus-1208827.json --out bench/idx-1208827``
(``python -m benchmarks.make_corpus`` makes the corpus).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.measure import ROOT, machine, measure, median_runs, write_report

DEFAULT_INDEX = ROOT / "bench" / "idx-1208827"
DEFAULT_QUERY = "Global sea levels are rising faster than in the last century."
TARGET_S = 1.0
OUT = ROOT / "reports" / "bench-search.md"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", type=Path, default=DEFAULT_INDEX, help=f"tag index (default: {DEFAULT_INDEX})")
    parser.add_argument("--query", default=DEFAULT_QUERY, help="the query searched")
    parser.add_argument("--repeats", type=int, default=5, help="measured runs of each command (default: 5)")
    parser.add_argument("--out", type=Path, default=OUT, help=f"the report (default: {OUT})")
    args = parser.parse_args(argv)
    if not (args.index / "manifest.json").is_file():
        parser.error(f"--index {args.index}: no tag index there; build it with "
                     "`factcheck tag bench/corpus-1208827.json --out bench/idx-1208827`")
    search = [sys.executable, "-m", "factcheck", "search", "--index", str(args.index), args.query]
    measure(search)  # warm-up: page cache, and BM25's cached weights on a fresh index
    runs = {"python -c pass": [], "factcheck search": []}
    for _ in range(args.repeats):  # alternating, so a change in the machine's load touches both
        runs["python -c pass"].append(measure([sys.executable, "-c", "pass"]))
        runs["factcheck search"].append(measure(search))
    lines = ["# `factcheck search`: one query from the shell", "",
             f"Made by `python -m benchmarks.search_cli --index {args.index} --repeats {args.repeats}` "
             f"on {machine()}.", "",
             f"The command: `factcheck search --index {args.index} {args.query!r}` (BM25, top 10), a fresh "
             f"process each time, after one warm-up run; median of {args.repeats}. Target: "
             f"{TARGET_S:g} s wall.", "",
             "| command | wall (s) | CPU (s) | peak RSS (MiB) |", "|---|---|---|---|"]
    for name, measured in runs.items():
        m = median_runs(measured)
        lines.append(f"| {name} | {m['wall_s']:.2f} | {m['cpu_s']:.2f} | {m['driver_peak_rss'] / 2**20:.0f} |")
    wall = median_runs(runs["factcheck search"])["wall_s"]
    lines += ["", f"Target {TARGET_S:g} s: {'met' if wall <= TARGET_S else 'not met'}."]
    write_report(args.out, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
