"""Shared benchmark plumbing: run a command, sample its process tree, describe the machine.

Benchmarks are scripts, not tests: they write reports/*.md with medians of several runs
and the machine they ran on. Memory is sampled from /proc every ``interval`` seconds
over the whole process tree (driver and every worker process), so the peak of the
sum, the driver's own peak and the largest single worker's peak are all reported.
"""

from __future__ import annotations

import os
import platform
import resource
import statistics
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "data"
PAGE = os.sysconf("SC_PAGE_SIZE")


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            return [int(x) for x in fh.read().split()]
    except OSError:
        return []


def _tree(pid: int) -> list[int]:
    out, stack = [], [pid]
    while stack:
        p = stack.pop()
        out.append(p)
        stack.extend(_children(p))
    return out


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * PAGE
    except OSError:
        return 0


def measure(cmd: list[str], interval: float = 0.05, env: dict | None = None, cwd=None) -> dict:
    """Run ``cmd`` to completion; wall, CPU of the tree, and peak RSS (tree/driver/worker)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env={**os.environ, **(env or {})}, cwd=cwd,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peak_tree = peak_driver = peak_worker = 0
    worker_cpu: dict[int, float] = {}
    while proc.poll() is None:
        pids = _tree(proc.pid)
        sizes = {p: _rss(p) for p in pids}
        peak_tree = max(peak_tree, sum(sizes.values()))
        peak_driver = max(peak_driver, sizes.get(proc.pid, 0))
        workers = [s for p, s in sizes.items() if p != proc.pid]
        if workers:
            peak_worker = max(peak_worker, max(workers))
        for p in pids:
            if p != proc.pid:
                worker_cpu[p] = _cpu_seconds(p) or worker_cpu.get(p, 0.0)
        time.sleep(interval)
    wall = time.perf_counter() - t0
    stderr = proc.stderr.read()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({proc.returncode}): {stderr[-2000:]}")
    # Workers that are killed rather than reaped by the driver are missing from rusage.
    cpu = max(cpu, sum(worker_cpu.values()))
    return {"wall": wall, "cpu": cpu, "peak_rss_tree": peak_tree, "peak_rss_driver": peak_driver,
            "peak_rss_worker": peak_worker}


def _cpu_seconds(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def median_runs(runs: list[dict]) -> dict:
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    cores = len(os.sched_getaffinity(0))
    return (f"{cores} cores ({cpu}), {mem:.0f} GiB RAM, Python {platform.python_version()}, "
            f"{platform.system()} {platform.release()}")


def gib(n_bytes: float) -> str:
    return f"{n_bytes / 2**30:.2f} GiB"


def ensure_corpus(n: int) -> Path:
    """bench/corpus-N.json, built by make_bench_corpus.py when missing."""
    path = ROOT / "bench" / f"corpus-{n}.json"
    if not path.is_file():
        subprocess.run([os.sys.executable, str(ROOT / "scripts" / "make_bench_corpus.py"), "--n", str(n),
                        "--out", str(path)], check=True)
    return path


def write_report(path: Path, lines: list[str]) -> None:
    """Write a markdown report and echo it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(path.read_text())
