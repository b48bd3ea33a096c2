"""Cost curve of the offline tagging job: loky vs a Dask LocalCluster, 0.3M -> 5M passages.

For every corpus size and backend, runs ``factcheck tag CORPUS --out DIR --jobs 2``
(``--backend dask`` for Dask) in a fresh output directory, ``--repeats`` times, and
writes a Markdown report (plus the raw runs as JSON next to it) with the median wall
time, passages/s, and peak memory:

* driver    -- the ``factcheck`` process itself;
* worker    -- the largest of its descendant processes (loky workers; Dask worker
               processes -- with a LocalCluster the nannies and the scheduler live in
               the driver process);
* tree      -- the largest sum of RSS over the whole process tree at one instant.

Per-process peaks are the kernel's own high-water mark (``VmHWM`` in
``/proc/PID/status``), read with the tree every ``--interval`` seconds, so a peak
between two samples is not missed; the tree peak is the largest sampled sum of
``VmRSS`` (shared pages counted once per process). The report checks the scaling
targets between two sizes (default 1.2M -> 5M): time grows at most 1.2x linearly, and
the driver's peak RSS at most 1.5x.

Corpora are ``bench/corpus-N.json``, built by ``benchmarks/make_corpus.py`` when
missing (not timed; the 5M corpus takes a few minutes and a few GB of RAM to build).
Run it on a quiet machine; the full default run (3 sizes x 2 backends x 3 repeats)
takes roughly half an hour to an hour on 2 cores:

    python -m benchmarks.scale                       # -> reports/bench-scale.md
    python -m benchmarks.scale --sizes 20000,60000 --repeats 1 --shard-size 5000 \\
        --out /tmp/bench-scale-smoke.md                 # smoke test, about a minute
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

from harness.measure import ROOT, measure

BENCH = ROOT / "bench"


# --------------------------------------------------------------------------- setup

def parse_size(text: str) -> int:
    text = text.strip().lower().replace("_", "")
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1:], 1)
    number = text[:-1] if scale > 1 else text
    return int(round(float(number) * scale))


def human(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1e6:g}M"
    if n >= 1_000:
        return f"{n / 1e3:g}K"
    return str(n)


def mib(n: float) -> str:
    return f"{n / 2**20:,.0f} MiB"


def corpus(n: int) -> Path:
    path = BENCH / f"corpus-{n}.json"
    if not path.is_file():
        print(f"building {path.relative_to(ROOT)} (not timed) ...", file=sys.stderr, flush=True)
        subprocess.run([sys.executable, str(ROOT / "scripts" / "make_bench_corpus.py"), "--n", str(n),
                        "--out", str(path)], check=True)
    return path


def machine() -> dict:
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    versions = {}
    for name in ("factcheck", "dask", "distributed", "joblib", "numpy", "scikit-learn"):
        try:
            from importlib.metadata import version
            versions[name] = version(name)
        except Exception:
            versions[name] = "?"
    git = "unknown"
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
        git = head + (" + uncommitted changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        pass
    return {"cores": len(os.sched_getaffinity(0)), "cpu": cpu,
            "ram_gib": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30,
            "os": f"{platform.system()} {platform.release()}", "python": platform.python_version(),
            "versions": versions, "git": git}


def tag_command(path: Path, out: Path, backend: str, jobs: int, shard_size: int) -> list[str]:
    cmd = [sys.executable, "-m", "factcheck", "tag", str(path), "--out", str(out), "--jobs", str(jobs)]
    if backend == "dask":
        cmd += ["--backend", "dask"]
    if shard_size != 100_000:
        cmd += ["--shard-size", str(shard_size)]
    return cmd


def shown(cmd: list[str]) -> str:
    """The command as a user types it: ``factcheck ...`` with paths relative to the repo."""
    words = ["factcheck", *cmd[3:]]
    return " ".join(str(Path(w).relative_to(ROOT)) if w.startswith(str(ROOT)) else w for w in words)


# --------------------------------------------------------------------------- report

def summarise(runs: list[dict]) -> dict:
    keys = ("wall_s", "driver_peak_rss", "worker_peak_rss", "tree_peak_rss")
    out = {k: statistics.median(r[k] for r in runs) for k in keys}
    out["wall_min"] = min(r["wall_s"] for r in runs)
    out["wall_max"] = max(r["wall_s"] for r in runs)
    out["processes"] = max(r["processes"] for r in runs)
    out["load_max"] = max(r["load_1min"] for r in runs)
    return out


def acceptance(summary: dict, backend: str, small: int, large: int) -> list[tuple[str, bool]]:
    a, b = summary[(backend, small)], summary[(backend, large)]
    ratio = large / small
    t_ratio = b["wall_s"] / a["wall_s"]
    m_ratio = b["driver_peak_rss"] / a["driver_peak_rss"]
    return [
        (f"time({human(large)}) / time({human(small)}) = {b['wall_s']:.1f} s / {a['wall_s']:.1f} s = "
         f"{t_ratio:.2f} <= 1.2 x {large:,}/{small:,} = {1.2 * ratio:.2f}", t_ratio <= 1.2 * ratio),
        (f"driver peak RSS at {human(large)} / at {human(small)} = {mib(b['driver_peak_rss'])} / "
         f"{mib(a['driver_peak_rss'])} = {m_ratio:.2f} <= 1.5", m_ratio <= 1.5),
    ]


def write_report(path: Path, args, argv: list[str], info: dict, runs: list[dict], commands: dict,
                 identical: dict) -> bool:
    summary = {}
    for backend in args.backends:
        for n in args.sizes:
            summary[(backend, n)] = summarise([r for r in runs if r["backend"] == backend and r["passages"] == n])
    small, large = args.check
    lines = [
        "# Tagging job: cost curve to millions of passages",
        "",
        f"Generated {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC by",
        "",
        "```bash",
        "python " + " ".join(argv),
        "```",
        "",
        f"**Machine**: {info['cores']} cores ({info['cpu']}), {info['ram_gib']:.1f} GiB RAM, {info['os']}, "
        f"Python {info['python']}; " + ", ".join(f"{k} {v}" for k, v in info["versions"].items())
        + f"; git {info['git']}.",
        "",
        "**Runs**: each configuration ran " + f"{args.repeats} time(s) in a fresh output directory "
        "(sizes in turn, backends interleaved); the table shows the median (wall: median, min-max). "
        "The 1-minute load average before each run is shown as a check that the machine was quiet "
        f"(it should stay below {info['cores']}).",
        "",
        "**Commands** (corpora from `benchmarks/make_corpus.py --n N --out bench/corpus-N.json`):",
        "",
        "```bash",
        *[commands[(b, n)] for n in args.sizes for b in args.backends],
        "```",
        "",
        "| backend | passages | wall (s) | passages/s | driver peak RSS | max worker peak RSS "
        "| tree peak RSS | processes | max load |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n in args.sizes:
        for backend in args.backends:
            s = summary[(backend, n)]
            lines.append(
                f"| {backend} | {n:,} | {s['wall_s']:.1f} ({s['wall_min']:.1f}-{s['wall_max']:.1f}) "
                f"| {n / s['wall_s']:,.0f} | {mib(s['driver_peak_rss'])} | {mib(s['worker_peak_rss'])} "
                f"| {mib(s['tree_peak_rss'])} | {s['processes']} | {s['load_max']:.2f} |")
    lines += ["", "Outputs: " + "; ".join(
        f"{human(n)}: every run's manifest.json {'identical' if ok else '**DIFFERS**'}"
        for n, ok in identical.items()) + " (loky and Dask, all repeats).", ""]
    lines += [f"## Acceptance ({human(small)} -> {human(large)})", ""]
    all_ok = True
    for backend in args.backends:
        for text, ok in acceptance(summary, backend, small, large):
            all_ok &= ok
            lines.append(f"* {backend}: {text}: **{'PASS' if ok else 'FAIL'}**")
    lines += [
        "",
        "## How it is measured",
        "",
        "Wall time is from starting the `factcheck` process to its exit (start-up, input checksum, "
        "streaming split, both map stages, manifest; for Dask also starting and stopping the "
        "LocalCluster). Every "
        f"{args.interval * 1000:.0f} ms the script walks the driver's process tree through "
        "`/proc/PID/task/*/children` and reads each process's `VmRSS` and `VmHWM`. Driver and "
        "worker peaks are kernel high-water marks (exact); the tree peak is the largest sampled "
        "sum of RSS. With a Dask LocalCluster the scheduler and the nannies run inside the driver "
        "process, so the driver's RSS includes them. The driver's peak is meant to depend on the "
        "shard size (`--shard-size`, default 100,000 passages) and the vocabulary, not on the "
        "corpus, except for the exact duplicate-id check: 8 bytes per passage while reading, "
        "up to 16 bytes per passage for a moment when the input ends (the hashes are copied into one array and sorted in place) (in `formats/evidence.py`).",
        "",
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines), encoding="utf-8")
    raw = {"argv": argv, "machine": info, "runs": runs,
           "commands": {f"{b} {n}": c for (b, n), c in commands.items()}}
    path.with_suffix(".json").write_text(json.dumps(raw, indent=2) + "\n", encoding="utf-8")
    return all_ok


# --------------------------------------------------------------------------- main

def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="300000,1200000,5000000",
                    help="corpus sizes, comma-separated; 1.2M and 300K work (default: 0.3M,1.2M,5M)")
    ap.add_argument("--repeats", type=int, default=3, help="runs per configuration; the median is reported")
    ap.add_argument("--backends", default="loky,dask", help="comma-separated: loky, dask (default: both)")
    ap.add_argument("--jobs", type=int, default=2, help="--jobs of factcheck tag (default: 2)")
    ap.add_argument("--shard-size", type=int, default=100_000, help="--shard-size of factcheck tag")
    ap.add_argument("--check", default=None,
                    help="SMALL,LARGE sizes for the acceptance check (default: 1.2M,5M if both are "
                         "in --sizes, else the two largest sizes)")
    ap.add_argument("--interval", type=float, default=0.05, help="seconds between /proc samples")
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "bench-scale.md", help="report path")
    ap.add_argument("--work", type=Path, default=BENCH / "scale-runs",
                    help="where the output directories go (default: bench/scale-runs)")
    args = ap.parse_args(argv)
    args.sizes = sorted({parse_size(s) for s in args.sizes.split(",") if s.strip()})
    args.backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if not args.sizes or set(args.backends) - {"loky", "dask"} or not args.backends or args.repeats < 1:
        ap.error("need at least one size, backends among loky,dask and --repeats >= 1")
    if args.check:
        args.check = tuple(parse_size(s) for s in args.check.split(","))
    elif {1_200_000, 5_000_000} <= set(args.sizes):
        args.check = (1_200_000, 5_000_000)
    elif len(args.sizes) >= 2:
        args.check = tuple(args.sizes[-2:])
    else:
        ap.error("the acceptance check needs two sizes")
    if not set(args.check) <= set(args.sizes):
        ap.error(f"--check sizes {args.check} must be among --sizes")

    info = machine()
    runs, commands, identical = [], {}, {}
    args.work.mkdir(parents=True, exist_ok=True)
    for n in args.sizes:
        path = corpus(n)
        free = shutil.disk_usage(args.work).free
        if free < 4 * path.stat().st_size:  # passages + counts + tags shards, with room
            raise SystemExit(f"bench_scale: {mib(free)} free, a {human(n)} run needs about "
                             f"{mib(4 * path.stat().st_size)}")
        digests = set()
        for r in range(args.repeats):
            for backend in args.backends:
                out = args.work / f"{backend}-{n}"
                shutil.rmtree(out, ignore_errors=True)
                out.parent.mkdir(parents=True, exist_ok=True)
                cmd = tag_command(path, out, backend, args.jobs, args.shard_size)
                commands[(backend, n)] = shown(cmd)
                load = os.getloadavg()[0]
                result = measure(cmd, out.parent / f"{backend}-{n}.log", args.interval)
                digests.add(hashlib.sha256((out / "manifest.json").read_bytes()).hexdigest())
                shutil.rmtree(out)
                result.update(backend=backend, passages=n, repeat=r + 1, load_1min=load)
                runs.append(result)
                print(f"{backend:5s} {human(n):>6s} run {r + 1}/{args.repeats}: {result['wall_s']:7.1f} s, "
                      f"driver {mib(result['driver_peak_rss'])}, worker {mib(result['worker_peak_rss'])}, "
                      f"tree {mib(result['tree_peak_rss'])} (load {load:.2f})", file=sys.stderr, flush=True)
        identical[n] = len(digests) == 1
    ok = write_report(args.out, args, ["-m", "benchmarks.scale", *argv], info, runs, commands, identical)
    print(args.out.read_text(encoding="utf-8"))
    return 0 if ok and all(identical.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
