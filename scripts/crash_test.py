"""Crash-resume test of ``factcheck tag`` and ``factcheck run``: SIGKILL them many times,
rerun, compare bytes.

``--run`` (see :func:`run_main`): a ``factcheck run`` output directory rerun into, killed at
exact points and at random moments; every surviving directory must be refused in one line
by every reader of a run (check, predict, ablation, evaluate, serve, the reranker loader)
or be byte-identical to an uninterrupted run (its wall-clock timings aside).

The tag test:

1. Build a course-format sample (the first N passages of the proxy corpus, or of --source).
2. Reference: one uninterrupted ``factcheck tag --jobs 1`` run.
3. Exact kills (``--jobs 1``): a chain of runs on one directory, each killed by the
   fault-injection hook (``FACTCHECK_CRASH_AT``, see harness/crashpoints.py) at the next of
   a list of points in pipeline order -- half-way through a shard write, before/after a
   rename, between stages, half-way through the manifest write... -- then one final
   run. Every killed run must die by SIGKILL (so the point was really reached) and must
   not leave a manifest that fails verification.
4. Random kills (``--jobs 2``): chains of runs killed (the whole process group, workers
   included) at random moments, then a final run.
5. Each chain's result must equal the reference byte for byte (manifest and every file
   it lists, and no other file left behind), and ``factcheck export-tags`` must list every
   input id exactly once, in input order.

    python -m scripts.crash_test --passages 200000 --kills 30
    python -m scripts.crash_test --passages 5000 --shard-size 500 --kills 12 --random-kills 2
    python -m scripts.crash_test --run --kills 30          # factcheck run, on data/demo

Exit status 0 when every chain matched, 1 otherwise. The in-suite version is
tests/reliability/test_crash_resume.py, which reuses the functions below.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from harness.crashpoints import crash_env

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SOURCE = ROOT.parent / "shared" / "data" / "evidence.json.gz"
STAGE_POINTS = ("after-split", "after-count", "after-tag", "before-manifest", "after-manifest")


# --------------------------------------------------------------------------- running

def tag_command(src: Path, out: Path, shard_size: int, jobs: int) -> list[str]:
    return [sys.executable, "-m", "factcheck", "tag", str(src), "--out", str(out),
            "--shard-size", str(shard_size), "--jobs", str(jobs)]


@dataclass
class Run:
    returncode: int
    stderr: str
    seconds: float
    started: float | None  # seconds from launch to the run's first write in the index dir

    @property
    def killed(self) -> bool:
        return self.returncode == -signal.SIGKILL


def run_tag(src: Path, out: Path, shard_size: int, jobs: int, crash_at: str | None = None,
            kill_after: float | None = None, timeout: float = 3600) -> Run:
    """Run ``factcheck tag`` in its own process group.

    ``crash_at``: FACTCHECK_CRASH_AT for the run (the process kills itself there).
    ``kill_after``: SIGKILL the whole group -- the driver and its loky workers, like a
    power cut -- this many seconds after the run starts writing (its first new file in
    ``out``; the seconds before that are interpreter start-up and reading the input).
    """
    return run_command(tag_command(src, out, shard_size, jobs), out, crash_at, kill_after, timeout)


def run_command(cmd: list[str], out: Path, crash_at: str | None = None, kill_after: float | None = None,
                timeout: float = 3600) -> Run:
    """Run ``cmd`` (writing into ``out``) in its own process group; see :func:`run_tag`."""
    env = crash_env(crash_at)
    launched_ns = time.time_ns()
    t0 = time.monotonic()
    started = None
    with tempfile.TemporaryFile("w+", encoding="utf-8") as err:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                                stderr=err, text=True, start_new_session=True)
        while proc.poll() is None:
            now = time.monotonic()
            if now - t0 > timeout:
                _killpg(proc.pid)
                break
            if kill_after is not None:
                if started is None and _wrote_since(out, launched_ns):
                    started = now - t0
                if started is not None and now - t0 >= started + kill_after:
                    _killpg(proc.pid)
                    break
            time.sleep(0.005)
        proc.wait()
        seconds = time.monotonic() - t0
        _killpg(proc.pid)  # workers orphaned by a driver that killed itself
        _wait_group_gone(proc.pid)
        err.seek(0)
        return Run(proc.returncode, err.read(), seconds, started)


def _wrote_since(out: Path, ns: int) -> bool:
    try:
        return any(p.stat().st_mtime_ns >= ns for p in out.rglob("*"))
    except OSError:  # a file renamed or removed while we looked
        return False


def _killpg(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _wait_group_gone(pgid: int, timeout: float = 30.0) -> None:
    """Wait until no process of the group is left (so nothing writes behind the next run)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.02)
    raise RuntimeError(f"process group {pgid} still alive {timeout}s after SIGKILL")


def export_ids(index: Path, dest: Path) -> tuple[int, str, bytes]:
    """``factcheck export-tags``: (returncode, stderr, bytes written)."""
    proc = subprocess.run([sys.executable, "-m", "factcheck", "export-tags", str(index), "--out", str(dest)],
                          capture_output=True, text=True)
    data = dest.read_bytes() if proc.returncode == 0 else b""
    return proc.returncode, proc.stderr, data


# --------------------------------------------------------------------------- checks

def tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (relative path -> bytes)."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def compare_index(ref: Path, out: Path) -> list[str]:
    """Differences between two index directories: manifest, listed files, leftovers."""
    a, b = tree(ref), tree(out)
    problems = []
    if "manifest.json" not in b:
        return ["no manifest.json"]
    listed = ["manifest.json", *json_files(ref)]
    for name in listed:
        if name not in b:
            problems.append(f"{name}: missing")
        elif a[name] != b[name]:
            problems.append(f"{name}: bytes differ")
    for name in sorted(set(b) - set(a)):
        problems.append(f"{name}: left behind (not in the uninterrupted run)")
    for name in sorted(set(a) - set(b) - set(listed)):
        problems.append(f"{name}: missing")
    return problems


def json_files(index: Path) -> list[str]:
    from factcheck.tagging.store import read_manifest
    return sorted(read_manifest(index).files())


def id_problems(export: bytes, input_ids: list[str]) -> list[str]:
    """Every input id exactly once, in input order."""
    got = [json.loads(line)["id"] for line in export.decode("utf-8").splitlines()]
    counts = Counter(got)
    problems = []
    missing = [i for i in input_ids if i not in counts]
    twice = [i for i, n in counts.items() if n > 1]
    unknown = sorted(set(counts) - set(input_ids))
    if missing:
        problems.append(f"{len(missing)} ids missing (first {missing[0]!r})")
    if twice:
        problems.append(f"{len(twice)} ids more than once (first {twice[0]!r})")
    if unknown:
        problems.append(f"{len(unknown)} ids not in the input (first {unknown[0]!r})")
    if not problems and got != input_ids:
        problems.append("ids out of input order")
    return problems


def manifest_problem(out: Path) -> str | None:
    """A manifest may only exist over a complete, verified index."""
    from factcheck.errors import InputError
    from factcheck.tagging.store import verify_index
    if not (out / "manifest.json").exists():
        return None
    try:
        verify_index(out)
    except InputError as exc:
        return f"manifest present but the index does not verify: {exc.one_line()}"
    return None


# --------------------------------------------------------------------------- kill points

def all_points(n_shards: int) -> list[str]:
    """Every crash point of a --jobs 1 run, in the order a fresh run reaches them."""
    def file_points(name: str) -> list[str]:
        return [f"mid-write:{name}", f"before-rename:{name}", f"after-rename:{name}"]

    def shard_points(kind: str, shard: int) -> list[str]:
        base = f"{kind}-{shard:05d}"  # a folder of arrays
        folder = {"passages": "passages", "counts": "work", "tags": "tags"}[kind]
        return file_points(base) + file_points(f"{folder}__{base}.json")  # the shard, its done record

    points = file_points("plan.json")
    for s in range(n_shards):
        points += shard_points("passages", s)
    points += file_points("split.json") + ["after-split"]
    for s in range(n_shards):
        points += shard_points("counts", s)
    points += ["after-count"]
    for s in range(n_shards):
        points += shard_points("tags", s)
    points += ["after-tag"] + file_points("vocabulary") + file_points("ids")
    points += ["before-manifest"] + file_points("manifest.json") + ["after-manifest"]
    return points


def pick_points(n_shards: int, kills: int, rng: random.Random) -> list[str]:
    """``kills`` points in pipeline order, always including a shard write half-way, the
    manifest write half-way and the stage boundaries (as many as fit)."""
    points = all_points(n_shards)
    must = [f"mid-write:passages-{min(1, n_shards - 1):05d}", "mid-write:manifest.json",
            *STAGE_POINTS, f"mid-write:tags-{n_shards // 2:05d}", "before-rename:plan.json"]
    chosen = set(must[:kills])
    rest = [p for p in points if p not in chosen]
    chosen |= set(rng.sample(rest, max(0, min(len(rest), kills - len(chosen)))))
    return [p for p in points if p in chosen]


# --------------------------------------------------------------------------- chains

def _last_line(text: str) -> str:
    lines = [l for l in text.strip().splitlines() if l.strip()]
    return lines[-1] if lines else ""


def exact_chain(src, out, shard_size, points, log=print) -> list[str]:
    """Kill a --jobs 1 run at each point in turn, then finish; returns problems."""
    problems = []
    for point in points:
        run = run_tag(src, out, shard_size, jobs=1, crash_at=point)
        log(f"  kill at {point:48s} rc={run.returncode:4d}  {run.seconds:6.1f}s")
        if not run.killed:
            problems.append(f"{point}: not reached (exit {run.returncode}: {_last_line(run.stderr)})")
            return problems
        bad = manifest_problem(out)
        if bad:
            problems.append(f"after a kill at {point}: {bad}")
    run = run_tag(src, out, shard_size, jobs=1)
    log(f"  final run{'':50s} rc={run.returncode:4d}  {run.seconds:6.1f}s")
    if run.returncode != 0:
        problems.append(f"final run failed (exit {run.returncode}): {_last_line(run.stderr)}")
    return problems


def worker_crash(src, out, shard_size, point, jobs=2, log=print) -> list[str]:
    """A crash point reached inside a loky worker: the worker dies, joblib raises in the
    driver (exit 1 with a traceback), and a rerun must still resume to the same bytes."""
    run = run_tag(src, out, shard_size, jobs=jobs, crash_at=point)
    log(f"  worker killed at {point} -> driver exit {run.returncode}: {_last_line(run.stderr)[:100]}")
    problems = []
    if run.returncode in (0, 2):
        problems.append(f"worker crash at {point}: driver exit {run.returncode}, expected a failure")
    bad = manifest_problem(out)
    if bad:
        problems.append(bad)
    run = run_tag(src, out, shard_size, jobs=jobs)
    if run.returncode != 0:
        problems.append(f"rerun after the worker crash failed: {_last_line(run.stderr)}")
    return problems


def random_chain(src, out, shard_size, delays, log=print, jobs=2) -> tuple[list[str], list[float]]:
    """Kill --jobs ``jobs`` runs (whole process group) ``delays[i]`` seconds after each starts
    writing, then finish. Returns (problems, delays of the runs that were really killed)."""
    killed, problems = [], []
    for delay in delays:
        run = run_tag(src, out, shard_size, jobs=jobs, kill_after=delay)
        log(f"  kill {delay:5.2f}s after the first write  rc={run.returncode:4d}  {run.seconds:6.1f}s")
        if run.returncode == 0:
            break  # finished before the kill: the chain ends here
        if not run.killed:
            problems.append(f"run exited {run.returncode} instead of being killed: {_last_line(run.stderr)}")
            break
        killed.append(round(delay, 2))
        bad = manifest_problem(out)
        if bad:
            problems.append(f"after a kill at {delay:.2f}s: {bad}")
    run = run_tag(src, out, shard_size, jobs=jobs)
    log(f"  final run  rc={run.returncode}  {run.seconds:.1f}s")
    if run.returncode != 0:
        problems.append(f"final run failed (exit {run.returncode}): {_last_line(run.stderr)}")
    return problems, killed


def check_against(ref: Path, out: Path, ids: list[str], ref_export: bytes, scratch: Path) -> list[str]:
    """Byte-identical to the reference, and export-tags lists every id once, in order."""
    problems = compare_index(ref, out)
    if problems:
        return problems
    rc, err, data = export_ids(out, scratch)
    if rc:
        return [f"export-tags failed: {_last_line(err)}"]
    problems = id_problems(data, ids)
    if not problems and data != ref_export:
        problems = ["export-tags output differs from the reference"]
    return problems


# --------------------------------------------------------------------------- main

def make_sample(source: Path, n: int, dest: Path) -> list[str]:
    opener = gzip.open if source.suffix == ".gz" else open
    with opener(source, "rt", encoding="utf-8") as fh:
        corpus = json.load(fh)
    if n > len(corpus):
        raise SystemExit(f"crash_test: {source} has only {len(corpus)} passages, asked for {n}")
    items = list(corpus.items())[:n]
    dest.write_text(json.dumps(dict(items), ensure_ascii=False), encoding="utf-8")
    return [pid for pid, _ in items]


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--readers"]:
        return _readers_main(*map(Path, argv[1:4]))
    ap = argparse.ArgumentParser(description="SIGKILL `factcheck tag` (or, with --run, `factcheck run`) many "
                                             "times, rerun, compare bytes.")
    ap.add_argument("--run", action="store_true",
                    help="kill reruns of `factcheck run` into an existing run directory instead")
    ap.add_argument("--data-dir", type=Path, default=ROOT / "data" / "demo",
                    help="with --run: the course data directory (default: data/demo)")
    ap.add_argument("--jobs", type=int, default=2, help="with --run: worker processes of the random kills (default: 2)")
    ap.add_argument("--passages", type=int, default=20000, help="sample size (default: 20000)")
    ap.add_argument("--kills", type=int, default=15,
                    help="SIGKILLs in all: exact points (--jobs 1) plus random moments (--jobs 2); "
                         "a worker crash is added when there are random kills (default: 15)")
    ap.add_argument("--random-kills", type=int, default=None,
                    help="how many of them at random moments with --jobs 2 (default: a third)")
    ap.add_argument("--chain", type=int, default=3, help="random kills per chain before a final run (default: 3)")
    ap.add_argument("--shard-size", type=int, default=None, help="passages per shard (default: passages/10)")
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE,
                    help="course-format corpus to take the first N passages of (default: the proxy corpus)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", type=Path, default=None, help="where to work (default: a temporary dir)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args(argv)
    if args.run:
        return run_main(args)
    if not args.source.is_file():
        print(f"crash_test: {args.source}: not found (needs ../shared/data or --source)", file=sys.stderr)
        return 2
    random_kills = args.kills // 3 if args.random_kills is None else min(args.random_kills, args.kills)
    exact_kills = args.kills - random_kills
    shard_size = args.shard_size or max(1, args.passages // 10)
    rng = random.Random(args.seed)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="crash-test-"))
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    failures: list[str] = []
    n_killed = 0

    def report(name: str, kills: int, problems: list[str]) -> None:
        nonlocal n_killed
        n_killed += kills
        print(f"  -> {name}: {kills} kills, " + ("identical to the reference" if not problems
                                                 else "FAIL: " + "; ".join(problems)))
        failures.extend(problems)

    try:
        src = work / "sample.json"
        ids = make_sample(args.source, args.passages, src)
        n_shards = -(-len(ids) // shard_size)
        print(f"sample: {len(ids)} passages from {args.source.name}, {n_shards} shards of {shard_size}; "
              f"{exact_kills} exact kills (--jobs 1), {random_kills} random kills (--jobs 2)")

        ref = work / "reference"
        shutil.rmtree(ref, ignore_errors=True)
        run = run_tag(src, ref, shard_size, jobs=1)
        if run.returncode != 0:
            print(f"reference run failed: {run.stderr}", file=sys.stderr)
            return 1
        rc, err, ref_export = export_ids(ref, work / "reference.jsonl")
        print(f"reference (--jobs 1, uninterrupted): {run.seconds:.1f}s; export-tags: "
              f"{'ok' if rc == 0 else _last_line(err)}")
        failures += id_problems(ref_export, ids)
        scratch = work / "export.jsonl"

        if exact_kills:
            points = pick_points(n_shards, exact_kills, rng)
            out = work / "exact"
            shutil.rmtree(out, ignore_errors=True)
            print(f"exact chain, --jobs 1 ({len(points)} kills):")
            problems = exact_chain(src, out, shard_size, points)
            report("exact chain", len(points), problems or check_against(ref, out, ids, ref_export, scratch))
            shutil.rmtree(out, ignore_errors=True)

        if random_kills:
            out = work / "jobs2"
            shutil.rmtree(out, ignore_errors=True)
            run = run_tag(src, out, shard_size, jobs=2, kill_after=1e9)
            work_secs = run.seconds - (run.started or 0.0)
            print(f"uninterrupted --jobs 2 run: {run.seconds:.1f}s ({work_secs:.1f}s after its first write)")
            report("uninterrupted --jobs 2", 0, [f"exit {run.returncode}"] if run.returncode
                   else check_against(ref, out, ids, ref_export, scratch))
            shutil.rmtree(out, ignore_errors=True)
            print("worker crash, --jobs 2:")
            point = f"mid-write:counts-{n_shards // 2:05d}"
            problems = worker_crash(src, out, shard_size, point)
            report("worker crash", 1, problems or check_against(ref, out, ids, ref_export, scratch))
            left, chain = random_kills, 0
            while left > 0 and chain < 3 * random_kills:
                # A resumed run has less left to do: later kills in a chain come sooner.
                delays = [rng.uniform(0.0, 1.0) * work_secs / (i + 1) for i in range(min(args.chain, left))]
                out = work / f"random-{chain}"
                shutil.rmtree(out, ignore_errors=True)
                print(f"random chain {chain}, --jobs 2:")
                problems, killed = random_chain(src, out, shard_size, delays)
                left -= len(killed)
                report(f"random chain {chain}", len(killed),
                       problems or check_against(ref, out, ids, ref_export, scratch))
                shutil.rmtree(out, ignore_errors=True)
                chain += 1
        verdict = "every chain identical to the reference" if not failures else f"{len(failures)} problems"
        print(f"{n_killed} kills in {time.monotonic() - t0:.0f}s; {verdict}")
        return 0 if not failures else 1
    finally:
        if not args.keep and args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


# --------------------------------------------------------------------------- factcheck run

RUN_POINTS = (  # in the order a rerun into a complete directory reaches them
    "after-rename:run-in-progress.json",        # the marker in place, nothing else changed yet
    "mid-write:bm25-sweep.csv",                 # tuning
    "after-rename:rerank.skops",                # the new reranker beside the old classifier
    "mid-write:classifier.skops",
    "after-rename:classifier.skops",
    "after-rename:dev-claims-predictions.explain.json",
    "after-rename:dev-claims-predictions.json",  # new predictions, old metrics.json and report.md
    "after-rename:test-claims-predictions.json",
    "mid-write:confusion.png",                  # during the plots
    "after-rename:metrics.json",
    "mid-write:report.md",
    "after-rename:report.md",                   # everything written, the marker not yet removed
)
# Folders a reader may add to (the derived caches): not run outputs.
CACHES = ("index/bm25/", "index/rerank/", "index/chunks/")
TIMED = ("metrics.json", "report.md")


def run_cmd(data: Path, out: Path, jobs: int) -> list[str]:
    return [sys.executable, "-m", "factcheck", "run", "--data-dir", str(data), "--out", str(out),
            "--quiet", "--jobs", str(jobs)]


def run_outputs(root: Path) -> dict[str, bytes]:
    """A run directory's files, without reader-made caches, wall-clock timings removed
    (``metrics.json``'s ``timings``, the timing table of ``report.md``) and the directory's
    own path (``metrics.json`` records its index's): what two runs of the same command
    must share byte for byte."""
    out = {}
    for name, data in tree(root).items():
        if name.startswith(CACHES) or "/.tmp-" in f"/{name}":
            continue
        if name == "metrics.json":
            metrics = json.loads(data)
            run = metrics.get("run", {})
            run.pop("timings", None)
            if isinstance(run.get("index"), str) and Path(run["index"]).name == "index":
                run["index"] = "<run>/index"
            data = json.dumps(metrics, sort_keys=True).encode()
        elif name == "report.md":
            data = b"\n".join(line for line in data.split(b"\n") if not _timing_row(line))
        out[name] = data
    return out


def _timing_row(line: bytes) -> bool:
    """A row of report.md's timings table: ``| step | 1.23 |`` (or the bold total)."""
    cells = [c.strip(b" *") for c in line.strip().strip(b"|").split(b"|")]
    if len(cells) != 2 or not line.startswith(b"|"):
        return False
    try:
        float(cells[1])
    except ValueError:
        return False
    return not cells[0].replace(b" ", b"").isdigit()


def readers_of(run: Path, data: Path, scratch: Path) -> dict[str, list[str]]:
    """Every reader of a run directory (a child process: one interpreter for all of them)."""
    proc = subprocess.run([sys.executable, "-m", "scripts.crash_test", "--readers", str(run), str(data),
                           str(scratch)], cwd=ROOT, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        return {"readers": [f"the readers' process failed (exit {proc.returncode}): {_last_line(proc.stderr)}"]}
    return json.loads(proc.stdout)


def _readers_main(run: Path, data: Path, scratch: Path) -> int:
    """``--readers``: run each reader in this process; print {name: [exit status, stderr lines...]}."""
    import contextlib
    import io

    from factcheck.cli import main as cli
    from factcheck.errors import InputError
    claim = "Sea levels are rising."
    argv = {
        "check": ["check", "--run", run, claim],
        "predict": ["predict", "--claims", data / "dev-claims.json", "--index", run / "index",
                    "--model", run / "model", "--out", scratch / "p.json"],
        "ablation": ["ablation", "--claims", data / "dev-claims.json", "--index", run / "index",
                     "--model", run / "model"],
        "evaluate": ["evaluate", "--predictions", run / "dev-claims-predictions.json",
                     "--groundtruth", data / "dev-claims.json"],
        "retrieve --method rerank": ["retrieve", "--index", run / "index", "--claims", data / "dev-claims.json",
                                     "--out", scratch / "r.json", "--method", "rerank",
                                     "--rerank-model", run / "model" / "rerank.skops"],
    }
    results = {}
    for name, args in argv.items():
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            code = cli([str(a) for a in args])
        results[name] = [code, *[line for line in err.getvalue().splitlines() if line.strip()]]
    from factcheck.serve.app import create_app
    try:
        create_app(run, warm_up=False)
        results["serve"] = [0]
    except InputError as exc:
        results["serve"] = [2, exc.one_line()]
    print(json.dumps(results))
    return 0


def verdict(run: Path, data: Path, scratch: Path, references: list[dict[str, bytes]]) -> tuple[str, list[str]]:
    """("refused" | "identical" | "neither", problems) for a surviving run directory:
    refused in one line by every reader, or accepted by every one and byte-identical to one
    of the ``references`` (uninterrupted runs: of the rerun's command, or of whatever the
    directory held before a rerun killed before its first write)."""
    scratch.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    readers = readers_of(run, data, scratch)
    ours = [line for lines in readers.values() for line in lines[1:] if not line.startswith("factcheck run:")]
    refused = [n for n, r in readers.items() if r[0] == 2 and len(r) == 2 and "Traceback" not in r[1]]
    if len(refused) == len(readers):
        return "refused", []
    outputs = run_outputs(run)
    if any(outputs == ref for ref in references) and all(r[0] == 0 for r in readers.values()):
        return "identical", []
    reference = references[0]
    differ = sorted(n for n in set(outputs) | set(reference) if outputs.get(n) != reference.get(n))
    accepted = sorted(n for n, r in readers.items() if r[0] == 0)
    return "neither", [f"readers that accepted it: {', '.join(accepted) or 'none'}; "
                       f"refused: {', '.join(refused) or 'none'}; files that differ from the uninterrupted "
                       f"run: {', '.join(differ[:6]) or 'none'}; first reader line: {ours[:1]}"]


def run_main(args) -> int:
    """Kill ``factcheck run`` reruns into an existing directory; check every survivor."""
    data = args.data_dir
    work = args.workdir or Path(tempfile.mkdtemp(prefix="crash-run-"))
    work.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    t0 = time.monotonic()
    failures: list[str] = []
    counts: Counter = Counter()
    try:
        # The same data, 4 training claims fewer (the first: the demo's last 4 would leave one
        # NOT_ENOUGH_INFO claim, which training refuses): another run's directory.
        other = work / "other-data"
        shutil.rmtree(other, ignore_errors=True)
        shutil.copytree(data, other)
        claims = json.loads((other / "train-claims.json").read_text("utf-8"))
        (other / "train-claims.json").write_text(json.dumps(dict(list(claims.items())[4:])), "utf-8")

        ref = work / "reference"
        shutil.rmtree(ref, ignore_errors=True)
        first = run_command(run_cmd(data, ref, args.jobs), ref)
        if first.returncode != 0:
            print(f"reference run failed: {first.stderr}", file=sys.stderr)
            return 1
        rerun = run_command(run_cmd(data, ref, args.jobs), ref, kill_after=1e9)
        window = rerun.seconds - (rerun.started or 0.0)
        reference = run_outputs(ref)
        previous = {"same": ref, "other": work / "other-run"}
        shutil.rmtree(previous["other"], ignore_errors=True)
        if run_command(run_cmd(other, previous["other"], args.jobs), previous["other"]).returncode != 0:
            print("the other data's run failed", file=sys.stderr)
            return 1
        print(f"reference run: {first.seconds:.0f}s; a rerun into it: {rerun.seconds:.0f}s "
              f"({window:.1f}s after its first write); {args.kills} kills")
        # Two chains of reruns (the main data) into a directory holding: the same run, another
        # run. Each alternates an exact crash point (--jobs 1, in order, the second chain
        # starting half-way through the list) and a random moment inside the writing window
        # (the whole process group, --jobs N), until it has its share of kills: a rerun that
        # finishes before its moment is checked too, but does not count.
        def kills_of(c: int):
            j = 0
            while True:
                yield (("point", RUN_POINTS[(j // 2 + c * len(RUN_POINTS) // 2) % len(RUN_POINTS)]) if j % 2 == 0
                       else ("delay", rng.uniform(0.0, 0.9) * window))
                j += 1

        targets = {"same": args.kills - args.kills // 2, "other": args.kills // 2}
        references = {"same": [reference], "other": [reference, run_outputs(previous["other"])]}
        n = 0
        for c, (start, target) in enumerate(targets.items()):
            out = work / f"chain-{start}"
            shutil.rmtree(out, ignore_errors=True)
            shutil.copytree(previous[start], out)
            print(f"chain: reruns into a directory holding {'the same' if start == 'same' else 'another'} run")
            killed_here, attempts = 0, 0
            for how, what in kills_of(c):
                if killed_here >= target or attempts >= 3 * target:
                    break
                attempts += 1
                run = (run_command(run_cmd(data, out, 1), out, crash_at=what) if how == "point"
                       else run_command(run_cmd(data, out, args.jobs), out, kill_after=what))
                label = what if how == "point" else f"{what:.2f}s after the first write"
                if run.returncode == 0:
                    state, problems = verdict(out, data, work / "scratch", [reference])
                    state = f"finished before the kill; {state}"
                elif not run.killed:
                    state, problems = "neither", [f"exit {run.returncode}: {_last_line(run.stderr)}"]
                else:
                    n += 1
                    killed_here += 1
                    state, problems = verdict(out, data, work / "scratch", references[start])
                counts[state.split("; ")[-1]] += 1
                print(f"  kill {label:48s} rc={run.returncode:4d} -> {state}")
                failures += [f"{start}/{label}: {p}" for p in problems]
            final = run_command(run_cmd(data, out, args.jobs), out)
            state, problems = verdict(out, data, work / "scratch", [reference])
            print(f"  final rerun rc={final.returncode} -> {state}")
            if final.returncode != 0 or state != "identical":
                failures.append(f"{start}: the final rerun is {state} (exit {final.returncode}) {problems}")
            shutil.rmtree(out, ignore_errors=True)
        if n < args.kills:
            failures.append(f"only {n} of the {args.kills} kills asked for landed (the runs finished first)")
        summary = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        verdict_line = "every survivor refused by every reader or identical" if not failures else \
            f"{len(failures)} problems: " + "; ".join(failures[:5])
        print(f"{n} kills in {time.monotonic() - t0:.0f}s ({summary}); {verdict_line}")
        return 0 if not failures else 1
    finally:
        if not args.keep and args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
