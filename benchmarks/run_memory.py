"""Peak memory of ``factcheck run`` per stage: which step holds what, at 1.2M passages.

Writes reports/run-memory.md: one fresh run of ``factcheck run`` whose process tree is
sampled every 0.2 s (RSS of the driver and of every worker process, summed), each sample
attributed to the stage the run had announced on stderr when it was taken (the lines
``[  17.3s] tuning and training retrievers ... ...`` are read as they are written). For
each stage: its wall time, the tree's peak, and at that moment the driver's RSS and the
number and total RSS of the other processes (workers, joblib's resource trackers).

    python -m benchmarks.run_memory                                   # 1.2M bench corpus
    python -m benchmarks.run_memory --size proxy --out /tmp/m.md      # the course's proxy
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
from pathlib import Path

from benchmarks.run import corpus_of, data_dir
from harness.measure import ROOT, machine, traced, write_report

STAGE = re.compile(r"^\[\s*[\d.]+s\] (.+?) \.\.\.\s*$")


def traced_run(data: Path, out: Path, interval: float = 0.2) -> tuple[list, list, float]:
    """Run ``factcheck run``; return (samples, stage starts, wall). A sample is
    (t, driver RSS, [other RSS...]); a stage start is (t, name); t from the launch."""
    def driver_and_others(pid, tree):
        return sum(rss for p, rss, _ in tree if p == pid), [rss for p, rss, _ in tree if p != pid]
    cmd = [sys.executable, "-m", "factcheck", "run", "--data-dir", str(data), "--out", str(out)]
    trace = traced(cmd, lambda line: (m.group(1) if (m := STAGE.match(line)) else None), interval,
                   sample=driver_and_others)
    return trace["samples"], trace["stages"], trace["wall_s"]


def per_stage(samples, stages, wall) -> list[dict]:
    bounds = [(0.0, "start-up (imports, before the first stage)")] + stages + [(wall, None)]
    rows = []
    for (start, name), (end, _) in zip(bounds[:-1], bounds[1:]):
        inside = [s for s in samples if start <= s[0] < end]
        if not inside:
            rows.append({"stage": name, "seconds": end - start, "peak": None})
            continue
        t, driver, others = max(inside, key=lambda s: s[1] + sum(s[2]))
        rows.append({"stage": name, "seconds": end - start, "peak": driver + sum(others),
                     "driver": driver, "others": len(others), "others_rss": sum(others)})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="1208827", help="'proxy' or a bench corpus size (>= 1208827)")
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "run-memory.md")
    ap.add_argument("--keep", type=Path, help="keep the run's output directory here (to compare predictions)")
    args = ap.parse_args(argv)
    corpus, n = corpus_of(args.size)
    (ROOT / "bench").mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bench-mem-", dir=ROOT / "bench"))
    try:
        samples, stages, wall = traced_run(data_dir(corpus), work / "run")
        if args.keep:
            shutil.rmtree(args.keep, ignore_errors=True)
            shutil.move(str(work / "run"), args.keep)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rows = per_stage(samples, stages, wall)
    peak = max(s[1] + sum(s[2]) for s in samples)
    mib = 2 ** 20
    lines = [
        "# Peak memory of `factcheck run`, per stage", "",
        f"Machine: {machine()}.", "",
        f"Command: `python -m benchmarks.run_memory --size {args.size}` ({n:,} passages, the course "
        "claims; one fresh run). The process tree is sampled every 0.2 s; a sample belongs to the stage "
        "the run had last announced on stderr. \"Other processes\": worker processes and joblib's two "
        "resource trackers (~50 MiB together).", "",
        f"Whole run: **{wall:.0f} s wall, tree peak {peak / mib:,.0f} MiB ({peak / 1e9:.2f} GB)**.", "",
        "| stage | s | tree peak MiB | driver MiB then | other processes then (MiB) |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        if r["peak"] is None:
            lines.append(f"| {r['stage']} | {r['seconds']:.1f} | – | – | – |")
        else:
            lines.append(f"| {r['stage']} | {r['seconds']:.1f} | {r['peak'] / mib:,.0f} | {r['driver'] / mib:,.0f} | "
                         f"{r['others']} ({r['others_rss'] / mib:,.0f}) |")
    write_report(args.out, lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
