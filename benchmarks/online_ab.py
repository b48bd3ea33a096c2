"""Before and after, side by side: the online commands of two source trees on the same run.

Writes reports/bench-online-ab.md: ``retrieve --method bm25|tags|rerank`` and ``predict``
over the dev claims, and ``serve`` (start-up, RSS, ``/api/check`` p50/p99), measured as
:mod:`benchmarks.online` measures them, for tree A (e.g. a worktree of the starting
main) and tree B (this one), alternating A, B in every repeat so both see the same
machine; each figure is a median, and B/A is the ratio to compare. Each tree gets its own
copy of the run (same bytes: a run of each tree, or one run copied), so the derived
caches one tree writes into an index are never read by the other.

    python -m benchmarks.online_ab --a-tree /tmp/base --a-run bench/base-run-1208827 --b-run bench/new-run-1208827
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
from pathlib import Path

from benchmarks.online import bench_commands, bench_serve
from harness.measure import ROOT, machine, write_report

MIB = 2 ** 20


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a-tree", type=Path, required=True, help="source tree A (the reference)")
    ap.add_argument("--a-run", type=Path, required=True, help="a `factcheck run` directory for A")
    ap.add_argument("--b-tree", type=Path, default=ROOT, help="source tree B (default: this one)")
    ap.add_argument("--b-run", type=Path, required=True, help="a `factcheck run` directory for B")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "bench-online-ab.md")
    args = ap.parse_args(argv)
    sides = {"A": (args.a_tree, args.a_run), "B": (args.b_tree, args.b_run)}
    got = {s: {"commands": [], "serve": []} for s in sides}
    load_before = os.getloadavg()
    for _ in range(args.repeats):
        for side, (tree, run) in sides.items():
            got[side]["commands"].append(bench_commands(run, 1, None, tree))
            got[side]["serve"].append(bench_serve(run, args.requests, 1, tree))
    load_after = os.getloadavg()
    med = {}
    for side in sides:
        cmds = got[side]["commands"]
        med[side] = {name: {k: statistics.median(c[name][k] for c in cmds) for k in ("wall_s", "cpu_s", "tree_peak_rss")}
                     for name in cmds[0]}
        serves = got[side]["serve"]
        med[side]["serve"] = {k: statistics.median(s[k] for s in serves)
                              for k in ("startup_s", "rss_start_mib", "rss_end_mib", "anon_end_mib", "file_end_mib",
                                        "p50", "p99", "errors")}
    args.out.with_suffix(".json").write_text(json.dumps({"raw": got, "median": med}, indent=1))

    def commit(tree: Path) -> str:
        return subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True).stdout.strip() or "?"

    passages = json.loads((args.b_run / "metrics.json").read_text())["run"]["passages"]
    lines = [
        "# Before and after: the online commands on one run", "",
        f"Machine: {machine()}; load average {load_before[0]:.1f} before, {load_after[0]:.1f} after "
        "(shared machine: the B/A ratio, measured alternately, is what to compare).", "",
        f"Command: `python -m benchmarks.online_ab --a-tree {args.a_tree} --a-run {args.a_run} --b-run {args.b_run} "
        f"--repeats {args.repeats} --requests {args.requests}`. A = commit {commit(args.a_tree)}, B = commit "
        f"{commit(args.b_tree)}; {passages:,} passages; dev claims (154). Medians of {args.repeats} alternating "
        "repeats; peak RSS of the process tree (1 GiB = 2^30 bytes).", "",
        "| command | A wall s | B wall s | B/A | A CPU s | B CPU s | B/A | A peak MiB | B peak MiB | B/A |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in med["A"]:
        if name == "serve":
            continue
        a, b = med["A"][name], med["B"][name]
        lines.append(f"| `{name}` | {a['wall_s']:.1f} | {b['wall_s']:.1f} | {b['wall_s'] / a['wall_s']:.2f} | "
                     f"{a['cpu_s']:.1f} | {b['cpu_s']:.1f} | {b['cpu_s'] / a['cpu_s']:.2f} | "
                     f"{a['tree_peak_rss'] / MIB:,.0f} | {b['tree_peak_rss'] / MIB:,.0f} | "
                     f"{b['tree_peak_rss'] / a['tree_peak_rss']:.2f} |")
    a, b = med["A"]["serve"], med["B"]["serve"]
    lines += ["", "| `serve --run` | A | B | B/A |", "|---|---|---|---|"]
    for key, label in (("startup_s", "start-up s (until /healthz)"), ("rss_start_mib", "RSS after start-up MiB"),
                       ("rss_end_mib", "RSS after the requests MiB"),
                       ("anon_end_mib", "of which anonymous MiB"), ("file_end_mib", "of which file-backed (mapped) MiB"),
                       ("p50", "/api/check p50 ms (chosen retriever)"),
                       ("p99", "/api/check p99 ms"), ("errors", "errors")):
        lines.append(f"| {label} | {a[key]:,.1f} | {b[key]:,.1f} | {b[key] / a[key]:.2f} |" if a[key] else
                     f"| {label} | {a[key]:,.1f} | {b[key]:,.1f} | – |")
    write_report(args.out, lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
