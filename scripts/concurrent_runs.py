"""Two ``factcheck tag`` runs into one ``--out`` at once: never a verified index with wrong content.

Each trial starts run A (default settings) and, after a random delay within A's running
time (or up to 0.5 s before it), run B into the same directory -- with other settings (``--top-k 5``) or, with
``--same``, the same ones. Whatever the interleaving, one of these must hold afterwards:

* no ``manifest.json`` (no index claims to be complete), or
* ``factcheck verify`` fails, or
* the index is byte for byte the uninterrupted reference of A or of B (manifest and
  every listed file) and ``export-tags`` lists every input id once, in order.

An index that verifies with any other content is a failure. The losing run must fail
with one line (exit 2), never a traceback; the outcomes are counted and printed.

    python -m scripts.concurrent_runs --trials 50
    python -m scripts.concurrent_runs --trials 50 --same

Exit status 0 when no trial failed. The in-suite version (3 trials) is in
tests/reliability/test_hardening.py and reuses :func:`trial`.
"""

from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from scripts import crash_test

OTHER = ("--top-k", "5")


def tag_cmd(src: Path, out: Path, shard_size: int, extra=()) -> list[str]:
    return [*crash_test.tag_command(src, out, shard_size, 1), *extra]


def reference(src: Path, out: Path, shard_size: int, extra=()) -> bytes:
    proc = subprocess.run(tag_cmd(src, out, shard_size, extra), capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"reference run failed: {proc.stderr}")
    rc, err, data = crash_test.export_ids(out, out.parent / (out.name + ".jsonl"))
    if rc:
        raise SystemExit(f"export of the reference failed: {err}")
    return data


def _outcome(proc: subprocess.CompletedProcess | subprocess.Popen, stderr: str) -> str:
    if proc.returncode == 0:
        return "ok"
    if "Traceback" in stderr or len([l for l in stderr.splitlines() if l.strip()]) != 1:
        return "TRACEBACK"
    if "in use by another factcheck run" in stderr:
        return "refused: locked"
    if "--force" in stderr:
        return "refused: other run's index"
    return "error: " + stderr.strip().split(": error: ")[-1][:60]


def trial(src: Path, out: Path, shard_size: int, delay: float, refs: dict, ids: list[str],
          same: bool = False, verbose: bool = False) -> tuple[list[str], tuple[str, str]]:
    """One race; returns (problems, (outcome of A, outcome of B))."""
    shutil.rmtree(out, ignore_errors=True)
    extra_b = () if same else OTHER
    with tempfile.TemporaryFile("w+") as ea, tempfile.TemporaryFile("w+") as eb:
        launch_a = lambda: subprocess.Popen(tag_cmd(src, out, shard_size), stdout=subprocess.DEVNULL,  # noqa: E731
                                            stderr=ea, text=True)
        launch_b = lambda: subprocess.Popen(tag_cmd(src, out, shard_size, extra_b),  # noqa: E731
                                            stdout=subprocess.DEVNULL, stderr=eb, text=True)
        if delay >= 0:  # a negative delay launches B first
            a = launch_a()
            time.sleep(delay)
            b = launch_b()
        else:
            b = launch_b()
            time.sleep(-delay)
            a = launch_a()
        a.wait()
        b.wait()
        ea.seek(0)
        eb.seek(0)
        err_a, err_b = ea.read(), eb.read()
        outcomes = (_outcome(a, err_a), _outcome(b, err_b))
        if verbose:
            print(f"A: {err_a.strip()[-300:]}\nB: {err_b.strip()[-300:]}", flush=True)
    problems = [f"run {n}: traceback or several lines" for n, o in zip("AB", outcomes) if o == "TRACEBACK"]
    if not (out / "manifest.json").exists():
        return problems, outcomes
    verify = subprocess.run([sys.executable, "-m", "factcheck", "verify", str(out)], capture_output=True, text=True)
    if verify.returncode:
        return problems, outcomes  # not a complete index, and it says so
    scratch = out.parent / (out.name + "-export.jsonl")
    matches = {name: crash_test.check_against(ref, out, ids, export, scratch) for name, (ref, export) in refs.items()}
    if not any(p == [] for p in matches.values()):
        problems.append("index verifies but equals neither reference: "
                        + "; ".join(f"{n}: {p[:2]}" for n, p in matches.items()))
    return problems, outcomes


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Race two `factcheck tag` runs into one directory.")
    ap.add_argument("--trials", type=int, default=50)
    ap.add_argument("--passages", type=int, default=20000)
    ap.add_argument("--shard-size", type=int, default=2000)
    ap.add_argument("--same", action="store_true", help="both runs with the same settings")
    ap.add_argument("--source", type=Path, default=crash_test.DEFAULT_SOURCE)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--verbose", action="store_true", help="one line per trial")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="concurrent-"))
    try:
        src = work / "sample.json"
        ids = crash_test.make_sample(args.source, args.passages, src)
        t0 = time.monotonic()
        refs = {"A": (work / "ref-a", reference(src, work / "ref-a", args.shard_size))}
        duration = time.monotonic() - t0
        if not args.same:
            refs["B"] = (work / "ref-b", reference(src, work / "ref-b", args.shard_size, OTHER))
        # B reaches the directory one interpreter start-up after its launch, like A: draw
        # the delay over A's working time so the races land inside it.
        t1 = time.monotonic()
        subprocess.run([sys.executable, "-c", "import factcheck.cli, factcheck.tagging.job"], check=True)
        work_time = max(duration - (time.monotonic() - t1), 0.5)
        rng = random.Random(args.seed)
        failures, outcomes = 0, Counter()
        for i in range(args.trials):
            # Both runs start with seconds of imports, then split (short): a race inside the
            # split needs near-simultaneous launches, so the delays start below zero.
            delay = rng.uniform(-0.5, 0.6 * work_time)
            problems, pair = trial(src, work / "out", args.shard_size, delay, refs, ids, args.same, args.verbose)
            outcomes[pair] += 1
            if args.verbose:
                print(f"trial {i + 1}: delay {delay:.2f}s -> A {pair[0]}, B {pair[1]}", flush=True)
            if problems:
                failures += 1
                print(f"trial {i + 1} (delay {delay:.2f}s): FAIL {problems}", flush=True)
        print(f"{args.trials} trials ({'same' if args.same else 'other'} settings, {args.passages} passages, "
              f"reference run {duration:.1f}s, delays -0.5 to {0.6 * work_time:.1f}s): {failures} failed")
        for (a, b), n in sorted(outcomes.items()):
            print(f"  A {a:28} B {b:28} {n}")
        return 1 if failures else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
