"""Benchmark `factcheck tag` of this checkout against another checkout of the code, alternating.

Writes reports/bench-tagging-ab.md: wall and CPU seconds (the whole process tree) of
``factcheck tag --jobs 2`` with this checkout's code and with the reference checkout's
(``--reference``, e.g. a worktree of main), run in turns so both see the same machine,
the json.load + tokenise floor measured before each pair, medians of ``--repeats`` pairs,
and the load average beside every run. Both runs use this interpreter; the reference's
code comes first on PYTHONPATH.

    python -m benchmarks.tagging_ab --reference ../main                  # 1.2M, 3 pairs
    python -m benchmarks.tagging_ab --reference ../main --corpus F.json --repeats 1 --out /tmp/ab.md
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from harness.measure import ROOT, ensure_corpus, machine, measure, measure_floor


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reference", type=Path, required=True, help="another checkout of the repository")
    ap.add_argument("--size", type=int, default=1_208_827, help="bench corpus size (benchmarks/make_corpus.py)")
    ap.add_argument("--corpus", type=Path, default=None, help="a corpus file instead of the bench corpus")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "bench-tagging-ab.md")
    args = ap.parse_args(argv)
    corpus = args.corpus or ensure_corpus(args.size)
    code = {"this checkout": ROOT, "reference": args.reference.resolve()}
    runs: dict[str, list[dict]] = {name: [] for name in code}
    floors = []
    for _ in range(args.repeats):
        floors.append(measure_floor(corpus))
        for name, root in code.items():
            out = Path(tempfile.mkdtemp(prefix="bench-ab-"))
            try:
                m = measure([sys.executable, "-m", "factcheck", "tag", str(corpus), "--out", str(out / "idx"),
                             "--jobs", str(args.jobs)], env={"PYTHONPATH": str(root)}, cwd=root)
            finally:
                shutil.rmtree(out, ignore_errors=True)
            runs[name].append({**m, "load": os.getloadavg()[0]})
            print(f"{name}: {m['wall_s']:.2f} s wall, {m['cpu_s']:.2f} CPU-s, load {os.getloadavg()[0]:.2f}",
                  flush=True)
    floor = statistics.median(f["wall_s"] for f in floors)
    lines = ["# Benchmark: `factcheck tag`, this checkout against a reference, alternating", "",
             f"Machine: {machine()}. Corpus: {corpus.name}. Command: `python -m benchmarks.tagging_ab "
             f"--reference {args.reference} --repeats {args.repeats} --jobs {args.jobs}`; medians of "
             f"{args.repeats} runs each, in turns; floor (json.load + tokenise) {floor:.2f} s.", "",
             "| code | wall s | CPU s | wall / floor | load averages (1 min) |", "|---|---|---|---|---|"]
    for name, rs in runs.items():
        wall, cpu = statistics.median(r["wall_s"] for r in rs), statistics.median(r["cpu_s"] for r in rs)
        loads = ", ".join(f"{r['load']:.2f}" for r in rs)
        lines.append(f"| {name} | {wall:.2f} | {cpu:.2f} | {wall / floor:.2f}× | {loads} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
