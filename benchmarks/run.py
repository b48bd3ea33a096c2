"""Benchmark the main job end to end: ``factcheck run`` at 0.3M and 1.2M passages.

Writes reports/bench-run.md: for each knowledge source -- ``proxy`` (the course's
316,312-passage ``evidence.json.gz``) and N-passage corpora from
``benchmarks/make_corpus.py`` (N must be at least 1,208,827 - smaller ones drop gold
ids) -- the median of ``--repeats`` fresh runs (new output directory each time) of
``factcheck run`` on the course claims: wall, CPU,
peak RSS of the whole process tree, the run's own per-stage timings, and the wall time
as a multiple of a *floor* measured in the same invocation (machine speed differs
between sessions; the ratio does not): ``json.load`` of the corpus plus one regex
tokenisation of every passage, in one process. Then ``factcheck serve`` on the largest
run: start-up time, RSS, and ``/api/check`` p50/p99 with the chosen retriever.

    python -m benchmarks.run                                  # full (~40 min on 2 cores)
    python -m benchmarks.run --sizes proxy --repeats 1 --requests 50 --out /tmp/r.md   # smoke
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from harness.measure import (FLOOR_DOC, ROOT, SHARED, ensure_corpus, gib, machine, measure,
                      measure_floor, median_runs, write_report)

CLAIM_FILES = ("train-claims.json", "dev-claims.json", "test-claims-unlabelled.json")
TAGGING = "tagging the knowledge source"


def corpus_of(size: str) -> tuple[Path, int]:
    if size == "proxy":
        path = SHARED / "evidence.json.gz"
        if not path.is_file():
            sys.exit(f"bench_run: {path} not found (needs ../shared/data)")
        return path, 316_312
    return ensure_corpus(int(size)), int(size)


def data_dir(corpus: Path) -> Path:
    """bench/run-data-NAME/: the course claims and the corpus as evidence.json(.gz) (symlinks)."""
    gz = corpus.suffix == ".gz"
    d = ROOT / "bench" / f"run-data-{corpus.name.split('.')[0]}"
    d.mkdir(parents=True, exist_ok=True)
    for name in CLAIM_FILES:
        link = d / name
        if not link.exists():
            link.symlink_to((SHARED / name).resolve())
    link = d / ("evidence.json.gz" if gz else "evidence.json")
    if not link.exists():
        link.symlink_to(corpus.resolve())
    return d


def bench_size(size: str, repeats: int, keep: Path | None) -> dict:
    corpus, n = corpus_of(size)
    data = data_dir(corpus)
    floors, runs, stages = [], [], []
    for i in range(repeats):
        floors.append(measure_floor(corpus))  # interleaved: both see the same machine
        out = Path(tempfile.mkdtemp(prefix="bench-run-", dir=ROOT / "bench")) / "run"
        log = out.parent / "run.log"
        try:
            runs.append(measure([sys.executable, "-m", "factcheck", "run", "--data-dir", str(data),
                                 "--out", str(out)], log=log))
            metrics = json.loads((out / "metrics.json").read_text())
            stages.append(metrics["run"]["timings"])
            last = i == repeats - 1
            if last and keep is not None:
                shutil.rmtree(keep, ignore_errors=True)
                shutil.move(str(out), keep)
        finally:
            shutil.rmtree(out.parent, ignore_errors=True)
    return {"n": n, "floor": median_runs(floors), "median": median_runs(runs), "runs": runs,
            "stages": {k: statistics.median(s.get(k, 0.0) for s in stages) for k in stages[0]},
            "accuracy": metrics.get("accuracy"), "evidence_f": metrics.get("evidence_f")}


def bench_serve(run: Path, requests: int) -> dict:
    from benchmarks.serve import serve_once
    return serve_once(run, requests)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="proxy,1208827",
                    help="knowledge sources, comma-separated: 'proxy' and/or bench corpus sizes >= 1208827")
    ap.add_argument("--repeats", type=int, default=3, help="fresh runs per size (median reported)")
    ap.add_argument("--requests", type=int, default=300, help="/api/check requests on the largest run")
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "bench-run.md")
    args = ap.parse_args(argv)
    (ROOT / "bench").mkdir(exist_ok=True)
    sizes = args.sizes.split(",")
    largest = sizes[-1]
    kept = ROOT / "bench" / f"run-{largest}"
    load_before = os.getloadavg()
    # Each size's last run is kept (bench/run-SIZE) so its predictions can be compared.
    results = [bench_size(size, args.repeats, ROOT / "bench" / f"run-{size}") for size in sizes]
    serve = bench_serve(kept, args.requests) if args.requests else None
    load_after = os.getloadavg()

    lines = [
        "# Benchmark: `factcheck run` end to end", "",
        f"Machine: {machine()}; load average {load_before[0]:.1f} before, {load_after[0]:.1f} after.", "",
        f"Command: `python -m benchmarks.run --sizes {args.sizes} --repeats {args.repeats} "
        f"--requests {args.requests}`. Knowledge sources: `proxy` = the course's 316,312-passage "
        "`evidence.json.gz`; larger ones from `benchmarks/make_corpus.py` (the proxy corpus plus synthetic "
        "filler; every gold id kept); claims: the course train/dev/test files. Each "
        f"figure is the median of {args.repeats} fresh runs. Peak RSS: the whole process tree (driver + "
        f"workers), sampled every 50 ms (1 GB = 10^9 bytes). Floor: {FLOOR_DOC} (the ratio column is what "
        "to compare across machines).", "",
        "| passages | wall s | CPU s | peak RSS (tree) | floor s | wall / floor | tagging / floor | dev accuracy "
        "| dev evidence F |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        m, f = r["median"], r["floor"]
        lines.append(f"| {r['n']:,} | {m['wall_s']:.1f} | {m['cpu_s']:.1f} | {gib(m['tree_peak_rss'])} | "
                     f"{f['wall_s']:.1f} | {m['wall_s'] / f['wall_s']:.1f}× | "
                     f"{r['stages'].get(TAGGING, 0.0) / f['wall_s']:.1f}× | {r['accuracy']:.3f} | "
                     f"{r['evidence_f']:.3f} |")
    big = [r for r in results if r["n"] >= 1_200_000]
    if big:
        m, f = big[-1]["median"], big[-1]["floor"]
        lines += ["", f"Targets of the main job at real scale, {big[-1]['n']:,} passages:", "",
                  f"- ≤ 5 min wall (median): **{m['wall_s']:.0f} s** — {'met' if m['wall_s'] <= 300 else 'NOT met'}",
                  f"- ≤ 3 GB peak RSS of the process tree (median): **{m['tree_peak_rss'] / 1e9:.2f} GB** "
                  f"({gib(m['tree_peak_rss'])}) — {'met' if m['tree_peak_rss'] <= 3e9 else 'NOT met'}",
                  f"- its tagging step: {big[-1]['stages'].get(TAGGING, 0.0):.1f} s = "
                  f"{big[-1]['stages'].get(TAGGING, 0.0) / f['wall_s']:.1f}× the floor "
                  "(the tagging benchmark, `reports/bench-tagging.md`, is the one the ≤ 2.5× target counts)"]
    lines += ["", "## Per stage (the run's own timings, median s)", ""]
    names = list(dict.fromkeys(k for r in results for k in r["stages"]))
    lines += ["| stage | " + " | ".join(f"{r['n']:,}" for r in results) + " |",
              "|---|" + "---|" * len(results)]
    for name in names:
        lines.append(f"| {name} | " + " | ".join(f"{r['stages'].get(name, 0.0):.1f}" for r in results) + " |")
    lines += ["", "All runs (wall s / CPU s / tree peak GiB):", ""]
    for r in results:
        lines.append(f"- {r['n']:,}: " + "; ".join(
            f"{x['wall_s']:.1f} / {x['cpu_s']:.1f} / {x['tree_peak_rss'] / 2**30:.2f}" for x in r["runs"]))
    if serve:
        lines += [
            "", f"## `factcheck serve` on the {results[-1]['n']:,}-passage run", "",
            f"- start-up (until `/healthz` answers): **{serve['startup_s']:.1f} s**; RSS "
            f"{serve['rss_start_mib']:.0f} MiB after start-up, {serve['rss_end_mib']:.0f} MiB after the requests",
            f"- `/api/check` with the chosen retriever ({serve['best']}), {serve['n']} requests, one at a time: "
            f"**p50 {serve['p50']:.1f} ms, p99 {serve['p99']:.1f} ms**, {serve['errors']} errors",
        ]
    write_report(args.out, lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
