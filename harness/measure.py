"""Shared benchmark plumbing: run a command, sample its process tree, describe the machine.

Benchmarks are scripts, not tests: they write reports/*.md with medians of several runs
and the machine they ran on. Memory is sampled from /proc every ``interval`` seconds
over the whole process tree (driver and every worker process): the driver's and the
largest worker's kernel high-water marks, and the peaks of the tree's summed RSS, summed
PSS and summed anonymous memory. Summed RSS counts a page of a file that several processes
map (a memory-mapped index) once in each of them; PSS shares it out between them; anonymous
memory is the processes' own, which no other process shares and the kernel cannot drop.
"""

from __future__ import annotations

import contextlib
import os
import platform
import resource
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "data"


SINGLE_RUN_S = 600.0  # a run this long is measured once, not as the median of several


class CommandFailed(SystemExit):
    """A measured command exited with a non-zero status (negative: killed by that signal, as
    the kernel's out-of-memory killer does). A SystemExit, so a benchmark that does not catch
    it stops with the message; one that does can report the status and go on."""

    def __init__(self, cmd: list, status: int, tail: str):
        super().__init__(f"{' '.join(map(str, cmd))} failed with status {status}:\n{tail}")
        self.status, self.tail = status, tail


def repeated(run_once, repeats: int, single_over: float | None = None) -> list[dict]:
    """``run_once()`` (a dict with ``wall_s``) ``repeats`` times, each with the 1-minute load
    average before and after it as ``load``; with ``single_over``, a run at least that many
    seconds long is the only one (medians where a run is short, one run otherwise)."""
    runs = []
    for _ in range(repeats):
        before = os.getloadavg()[0]
        run = run_once()
        run["load"] = [before, os.getloadavg()[0]]
        runs.append(run)
        if single_over is not None and run["wall_s"] >= single_over:
            break
    return runs


def _threads(pid: int) -> list[str]:
    try:
        return os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []


def _children(pid: int) -> list[int]:
    """Children of every thread of ``pid`` (loky and Dask spawn from helper threads)."""
    out = []
    for tid in _threads(pid):
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as fh:
                out.extend(int(x) for x in fh.read().split())
        except OSError:
            pass
    return out


def _tree(root: int) -> list[int]:
    seen, stack = [], [root]
    while stack:
        pid = stack.pop()
        if pid not in seen:
            seen.append(pid)
            stack.extend(_children(pid))
    return seen


def _fields(path: str, names: tuple[str, ...]) -> tuple[int, ...] | None:
    """The ``Name: N kB`` lines ``names`` of a /proc file, in bytes, or None (the process gone,
    no such file, or a line missing)."""
    got = {}
    try:
        with open(path) as fh:
            for line in fh:
                name = line.split(":", 1)[0]
                if name in names:
                    got[name] = int(line.split()[1]) * 1024
    except OSError:
        return None
    return tuple(got[n] for n in names) if len(got) == len(names) else None


def _memory(pid: int) -> tuple[int, int] | None:
    """(VmRSS, VmHWM) in bytes, or None if the process is gone (a zombie has no memory lines)."""
    return _fields(f"/proc/{pid}/status", ("VmRSS", "VmHWM"))


def _rollup(pid: int) -> tuple[int, int] | None:
    """(Pss, Anonymous) in bytes from /proc/PID/smaps_rollup, or None (gone, or no such file)."""
    return _fields(f"/proc/{pid}/smaps_rollup", ("Pss", "Anonymous"))


def _cpu_seconds(pid: int, children: bool = False) -> float:
    """utime + stime of ``pid`` (and of its reaped children with ``children``), in seconds."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = int(fields[11]) + int(fields[12]) + (int(fields[13]) + int(fields[14]) if children else 0)
    return ticks / os.sysconf("SC_CLK_TCK")


def tree_cpu(root: int) -> float:
    """CPU seconds used so far by the tree: every live process, plus what the root's
    reaped children used (loky and Dask workers that have exited)."""
    return sum(_cpu_seconds(pid, children=(pid == root)) for pid in _tree(root))


@contextlib.contextmanager
def _group_killed_on_error(proc: subprocess.Popen):
    """Sampling a command: on any exception (Ctrl-C too) its process group goes with it."""
    try:
        yield
    except BaseException:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait()
        raise


def _rss_and_cpu(pid: int, tree: list[tuple[int, int, int]]) -> tuple[int, float]:
    return sum(rss for _, rss, _ in tree), tree_cpu(pid)


def traced(cmd: list[str], stage_line, interval: float = 0.2, cwd=ROOT, env: dict | None = None,
           sample=_rss_and_cpu) -> dict:
    """Run ``cmd``, sampling its process tree every ``interval`` seconds and noting when
    each stage starts: a stage is a stderr line for which ``stage_line(line)`` returns a
    name. Returns ``{"wall_s", "samples": [(t, *sample)], "stages": [(t, name)]}``; t is
    seconds since the launch; ``sample(pid, tree_memory(pid))`` is by default (summed RSS,
    CPU so far)."""
    import threading
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=cwd,
                            env={**os.environ, **(env or {})}, start_new_session=True)
    stages: list[tuple[float, str]] = []
    tail: list[str] = []

    def read_stderr():
        for line in proc.stderr:
            name = stage_line(line.split("\r")[-1])
            if name:
                stages.append((time.perf_counter() - t0, name))
            tail[:] = (tail + [line])[-20:]
    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    samples = []
    with _group_killed_on_error(proc):
        while proc.poll() is None:
            samples.append((time.perf_counter() - t0, *sample(proc.pid, tree_memory(proc.pid))))
            time.sleep(interval)
    wall = time.perf_counter() - t0
    reader.join(timeout=10)
    reap_group(proc.pid)
    if proc.returncode != 0:
        raise CommandFailed(cmd, proc.returncode, "".join(tail))
    return {"wall_s": wall, "samples": samples, "stages": stages}


def per_stage(trace: dict, first: str = "start-up (imports, before the first stage)") -> list[dict]:
    """Wall, CPU and tree peak RSS of each stage of a :func:`traced` run."""
    bounds = [(0.0, first)] + trace["stages"] + [(trace["wall_s"], None)]
    samples = trace["samples"]
    rows = []
    for (start, name), (end, _) in zip(bounds[:-1], bounds[1:]):
        inside = [s for s in samples if start <= s[0] < end]
        before = [s for s in samples if s[0] < start]
        after = [s for s in samples if s[0] >= end]
        cpu0 = before[-1][2] if before else 0.0
        cpu1 = after[0][2] if after else (samples[-1][2] if samples else 0.0)
        rows.append({"stage": name, "wall_s": end - start, "cpu_s": max(cpu1 - cpu0, 0.0),
                     "peak_rss": max((s[1] for s in inside), default=None)})
    return rows


def tree_memory(root: int) -> list[tuple[int, int, int]]:
    """(pid, VmRSS, VmHWM) of ``root`` and every live descendant, ``root`` first."""
    out = []
    for pid in _tree(root):
        mem = _memory(pid)
        if mem is not None:
            out.append((pid, *mem))
    return out


# The sampler's share of one core at most: smaps_rollup walks a process's page tables, so a
# read costs with its mapped memory (at 25M, three processes mapping 8-10 GB each, sampling every
# 0.05 s took two thirds of a core from the 2-core run it measured). Bigger trees are sampled less often.
SAMPLING_SHARE = 0.05


def measure(cmd: list[str], log: Path | None = None, interval: float = 0.05, env: dict | None = None,
            cwd=ROOT, alongside: tuple[int, ...] | list[int] = ()) -> dict:
    """Run ``cmd`` to completion in its own process group.

    Returns wall and CPU seconds (the whole tree, from rusage) and memory: the driver's
    and the largest descendant's kernel high-water marks (VmHWM, exact), and the
    largest sampled sums over the tree of VmRSS (``tree_peak_rss``), of PSS
    (``tree_peak_pss``) and of anonymous memory (``tree_peak_anon``; both None where
    /proc has no smaps_rollup), sampled every ``interval`` seconds, or less often when a sample
    costs more than :data:`SAMPLING_SHARE` of that time. Output goes to ``log`` (or is dropped).
    ``alongside``: the roots of other process trees the command uses (a Dask cluster it reaches
    by its address), sampled with it: their processes count as workers, their CPU while the
    command runs is added.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    others_cpu = sum(tree_cpu(pid) for pid in alongside)
    out = open(log, "w") if log else subprocess.DEVNULL
    try:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=cwd,
                                env={**os.environ, **(env or {})}, start_new_session=True)
        driver_hwm, worker_hwm, tree_peak = 0, {}, 0
        pss_peak = anon_peak = 0
        rollups = True  # False once a live process had no smaps_rollup: no PSS or anonymous figure
        with _group_killed_on_error(proc):
            while proc.poll() is None:
                started = time.perf_counter()
                total = pss = anon = 0
                for pid, rss, hwm in [m for root in (proc.pid, *alongside) for m in tree_memory(root)]:
                    total += rss
                    if pid == proc.pid:
                        driver_hwm = max(driver_hwm, hwm)
                    else:
                        worker_hwm[pid] = max(worker_hwm.get(pid, 0), hwm)
                    shares = _rollup(pid) if rollups else None
                    if shares is None:
                        rollups = rollups and _memory(pid) is None  # gone meanwhile, or no smaps_rollup here
                        continue
                    pss, anon = pss + shares[0], anon + shares[1]
                tree_peak = max(tree_peak, total)
                pss_peak, anon_peak = max(pss_peak, pss), max(anon_peak, anon)
                spent = time.perf_counter() - started
                time.sleep(max(interval, spent / SAMPLING_SHARE - spent))
        wall = time.perf_counter() - t0
        others_cpu = sum(tree_cpu(pid) for pid in alongside) - others_cpu
    finally:
        if log:
            out.close()
    reap_group(proc.pid)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise CommandFailed(cmd, proc.returncode, Path(log).read_text(errors="replace")[-3000:] if log else "")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime) + others_cpu
    return {"wall_s": wall, "cpu_s": cpu, "driver_peak_rss": driver_hwm,
            "worker_peak_rss": max(worker_hwm.values(), default=0),
            "tree_peak_rss": tree_peak, "tree_peak_pss": pss_peak if rollups else None,
            "tree_peak_anon": anon_peak if rollups else None, "processes": 1 + len(worker_hwm)}


def reap_group(pgid: int, grace: float = 15.0) -> None:
    """Wait until every process the run started has exited (workers that outlive the
    driver would steal CPU from the next run); terminate stragglers after ``grace``."""
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    print(f"processes of run {pgid} still alive after {grace:g} s; terminating them", file=sys.stderr)
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        pass


def median_runs(runs: list[dict]) -> dict:
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def rss_parts_mib(pid: int) -> tuple[float, float]:
    """(anonymous, file-backed) resident MiB of ``pid`` (0, 0 once it is gone): memory-mapped
    files count in RSS once read, but belong to the page cache and are shared between processes."""
    got = _fields(f"/proc/{pid}/status", ("RssAnon", "RssFile"))
    return (0.0, 0.0) if got is None else (got[0] / 2**20, got[1] / 2**20)


def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile (no interpolation), in the values' unit."""
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q / 100 * len(s) + 0.5) - 1))]


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


FLOOR_DOC = ("`json.load` of the corpus + one regex tokenisation (lower-cased `\\w+` runs) of every passage "
             "in one process, measured in the same invocation")


def floor_work(corpus: Path) -> None:
    """The floor: parse the corpus, tokenise every passage once (what any tagger must do)."""
    import gzip
    import json
    import re
    word = re.compile(r"\w+")
    opener = gzip.open if corpus.suffix == ".gz" else open
    with opener(corpus, "rt", encoding="utf-8") as fh:
        evidence = json.load(fh)
    n = sum(len(word.findall(text.lower())) for text in evidence.values())
    assert n > 0


def measure_floor(corpus: Path) -> dict:
    """:func:`floor_work` in a fresh process, measured like the command it is compared with."""
    code = f"from pathlib import Path; from harness.measure import floor_work; floor_work(Path({str(corpus)!r}))"
    return measure([sys.executable, "-c", code], cwd=ROOT)


def ensure_corpus(n: int) -> Path:
    """bench/corpus-N.json, built by benchmarks/make_corpus.py when missing."""
    path = ROOT / "bench" / f"corpus-{n}.json"
    if not path.is_file():
        subprocess.run([sys.executable, "-m", "benchmarks.make_corpus", "--n", str(n),
                        "--out", str(path)], check=True, cwd=ROOT)
    return path


def write_report(path: Path, lines: list[str]) -> None:
    """Write a markdown report and echo it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(path.read_text())
