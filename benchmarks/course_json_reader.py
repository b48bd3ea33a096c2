"""The course knowledge-source reader: ijson's C backend against the hand-written streaming parser.

The decision rule (docs/decisions.md): the hand-written parser stays only if the maintained
library is slower by more than 1.2x. Both readers run in this one process, alternating
(old, new, new, old, ...), over the same corpus file, and each run records CPU time
(``time.process_time``), wall time and the 1-minute load average beside it. Each reads the
whole file into batches of ids and texts and does the checks it does per passage; the
duplicate-id and length checks that follow both are the same code and are not timed.

* old -- ``factcheck/formats/course_json.py`` and ``utf8_stream.py`` as they were at
  commit d18b6f9 (read from git, imported from a temporary directory): a regular
  expression finds runs of complete members, the standard library's C decoder decodes each
  run, and a member-by-member parser takes the rest;
* new -- ``factcheck.formats.course.passages``: ijson's ``basic_parse`` (yajl2_c), with
  the lone-surrogate scan and the streaming bound on the bytes it is given;
* floor -- ``json.load`` of the whole file (memory grows with the file: not a reader).

    python -m benchmarks.course_json_reader                       # 1.2M passages, 5 rounds
    python -m benchmarks.course_json_reader --n 100000 --rounds 2 --out /tmp/b.md   # smoke
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness.measure import ROOT, ensure_corpus, machine, write_report

OLD_COMMIT = "d18b6f9"


def load_old_reader(scratch: Path):
    """``iter_course`` of commit OLD_COMMIT, importable from ``scratch``."""
    package = scratch / "old_course_reader"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name in ("course_json", "utf8_stream"):
        source = subprocess.run(["git", "show", f"{OLD_COMMIT}:factcheck/formats/{name}.py"], cwd=ROOT,
                                check=True, capture_output=True, text=True).stdout
        source = source.replace("factcheck.formats.utf8_stream", "old_course_reader.utf8_stream")
        (package / f"{name}.py").write_text(source)
    sys.path.insert(0, str(scratch))
    from old_course_reader.course_json import iter_course
    return iter_course


def timed(fn) -> dict:
    load = os.getloadavg()[0]
    cpu, wall = time.process_time(), time.perf_counter()
    n = fn()
    return {"cpu_s": time.process_time() - cpu, "wall_s": time.perf_counter() - wall, "load": load, "passages": n}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_208_827, help="corpus size (bench/corpus-N.json, built when missing)")
    ap.add_argument("--rounds", type=int, default=5, help="rounds of old, new, new, old (4 runs each)")
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "bench-course-json.md")
    args = ap.parse_args(argv)
    (ROOT / "bench").mkdir(exist_ok=True)
    corpus = ensure_corpus(args.n)

    from factcheck.formats import course
    from factcheck.formats.evidence import source_spec
    spec = source_spec(corpus)

    with tempfile.TemporaryDirectory() as scratch:
        iter_course = load_old_reader(Path(scratch))

        def old():
            return sum(len(ids) for ids, _texts, _place in iter_course(corpus))

        def new():
            return sum(len(ids) for ids, _texts, _titles, _place in course.passages(spec, corpus))

        def floor():
            with open(corpus, encoding="utf-8") as fh:
                return len(json.load(fh))

        readers = {"old": old, "new": new, "floor": floor}
        runs = {name: [] for name in readers}
        for _ in range(args.rounds):
            for name in ("old", "new", "floor", "new", "old"):
                runs[name].append(timed(readers[name]))
    counts = {r["passages"] for rs in runs.values() for r in rs}
    assert counts == {args.n}, counts

    med = {name: {k: statistics.median(r[k] for r in rs) for k in ("cpu_s", "wall_s", "load")}
           for name, rs in runs.items()}
    cpu_ratio = med["new"]["cpu_s"] / med["old"]["cpu_s"]
    wall_ratio = med["new"]["wall_s"] / med["old"]["wall_s"]
    lines = [
        "# Benchmark: reading the course knowledge source", "",
        f"Machine: {machine()}.", "",
        f"Command: `python -m benchmarks.course_json_reader --n {args.n} --rounds {args.rounds}`; corpus "
        f"`bench/corpus-{args.n}.json` ({corpus.stat().st_size / 2**20:,.0f} MiB, from `benchmarks/make_corpus.py`). "
        "In one process, each round runs old, new, floor, new, old; every figure is the median of its runs, with "
        "the median 1-minute load average at their starts."
        + ("" if args.n >= 1_208_827 else " **Preliminary**: not the 1.2M bench corpus, and not a quiet machine "
           "unless the load says so."), "",
        "| reader | runs | CPU s | wall s | load | CPU / old | wall / old |",
        "|---|---|---|---|---|---|---|",
    ]
    labels = {"old": f"hand-written streaming parser (commit {OLD_COMMIT})",
              "new": "ijson basic_parse (yajl2_c) + our checks", "floor": "`json.load` (whole file in memory)"}
    for name, m in med.items():
        lines.append(f"| {labels[name]} | {len(runs[name])} | {m['cpu_s']:.2f} | {m['wall_s']:.2f} | {m['load']:.1f} | "
                     f"{m['cpu_s'] / med['old']['cpu_s']:.2f}× | {m['wall_s'] / med['old']['wall_s']:.2f}× |")
    verdict = "ijson is kept" if cpu_ratio <= 1.2 else "the hand-written parser would stay"
    lines += ["", f"new / old: **{cpu_ratio:.2f}×** CPU, {wall_ratio:.2f}× wall. The rule: the hand-written parser "
              f"stays only if the library is slower by more than 1.2×: {verdict}.", "",
              "All runs (CPU s / wall s / load):", ""]
    for name, rs in runs.items():
        lines.append(f"- {name}: " + "; ".join(f"{r['cpu_s']:.2f} / {r['wall_s']:.2f} / {r['load']:.1f}" for r in rs))
    write_report(args.out, lines)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
