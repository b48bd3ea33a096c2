"""BM25 queries per second: ours (default install, and with numba) against bm25s (numpy and numba backends).

Writes reports/bench-bm25.md. Two collections, one thread, Lucene's BM25 with k1 0.9 and
b 0.4, the top 10:

* the bench corpus of ``benchmarks/make_corpus.py`` (``bench/corpus-N.json``, 1.2M passages
  by default), queried by the 1,382 course claims (train + dev);
* the arXiv CSV (``shared/data/arxiv-abstracts.csv``: the abstracts, queried by the titles).

Four sides. Ours is what a user of the Python API runs: ``factcheck.build_index(path)`` in
memory (no file written), ``BM25Retriever(k1=0.9, b=0.4, k=10).fit(index)``, then
``.rank(queries, k=10)`` -- "default" with ``FACTCHECK_NUMBA=0`` (the product path of an install
without numba), "fastest" with ``FACTCHECK_NUMBA=1`` (the compiled loop of the ``fast`` extra).
bm25s scores the same stems (the project's analyser, so the scores are comparable): its
index analyses every passage with ``analyze`` then builds ``bm25s.BM25(method="lucene")``; its
queries are ``retrieve([analyze(q) ...], k=10, n_threads=1)`` with the numpy or the numba
backend. Each side's query time includes analysing the queries.

Per collection: each side is warmed up (numba compiles there), its top 10 scores checked
against ours (default) within a relative 1e-6 (ours fastest: the same ids and the same bits),
then the four are timed in alternating rounds (the order rotates) for ``--repeats`` rounds;
the report gives the median queries/s, wall and CPU, of the library's call alone (``rank``,
``retrieve``; the conversion to arrays for the comparison is not timed). Build time and peak
memory come from a fresh child process per side (a build of 50 short texts first, so that
neither side's module imports count; then the build, then one pass of the queries): wall seconds
of the build (analysing included) and the child's peak resident memory. bm25s's build with its own
tokenizer (``bm25s.tokenize``, English stop words, no stemming) is given beside it.

    python -m benchmarks.bm25_speed                                        # the report
    python -m benchmarks.bm25_speed --n 0 --arxiv tests/data/workbench/papers.csv --id-column paper_id \\
        --title-column title --text-column abstract --out /tmp/bm25.md    # smoke
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_var] = "1"  # one thread, before numpy or numba load

import argparse  # noqa: E402
import csv  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from harness.measure import ROOT, SHARED, ensure_corpus, machine, write_report  # noqa: E402

K1, B, K = 0.9, 0.4, 10
SIDES = ("ours (default)", "ours (fastest, numba)", "bm25s (numpy)", "bm25s (numba)")


def timed(fn):
    """(result, wall s, CPU s, 1-min load average before) of ``fn()``, the cyclic GC paused."""
    gc.collect()
    gc.disable()
    load = os.getloadavg()[0]
    try:
        wall, cpu = time.perf_counter(), time.process_time()
        out = fn()
        return out, time.perf_counter() - wall, time.process_time() - cpu, load
    finally:
        gc.enable()


def collection(spec: dict):
    """(build kwargs for factcheck.build_index, the queries) of a collection spec."""
    if spec["kind"] == "corpus":
        from factcheck.formats.claims import read_claims
        queries = [c.text for name in ("train-claims.json", "dev-claims.json") for c in read_claims(SHARED / name)]
        return {"evidence": spec["path"]}, queries
    with open(spec["path"], encoding="utf-8", newline="") as fh:
        queries = [row[spec["title"]] for row in csv.DictReader(fh)]
    return {"evidence": spec["path"], "id_column": spec["id"], "text_column": spec["text"],
            "title_column": spec["title"]}, queries


def ranker(side: str, index):
    """The side's ranker over ``index`` (analysing included): ``(run, tops)``, ``run`` the
    library's own call on the queries (what is timed), ``tops`` its output as each query's
    (rows, float32 scores) for the comparison. Ours fits the retriever; bm25s analyses every
    passage of the index, then indexes the stems."""
    from factcheck.text.analyzer import analyze
    if side.startswith("ours"):
        import factcheck
        ours = factcheck.BM25Retriever(k1=K1, b=B, k=K).fit(index)
        numba = "1" if "numba" in side else "0"

        def run_ours(queries):
            os.environ["FACTCHECK_NUMBA"] = numba
            return ours.rank(queries, K)
        return run_ours, lambda out: [(np.asarray(r.rows), np.asarray(r.scores, dtype=np.float32)) for r in out]
    import bm25s
    backend = "numba" if "numba" in side else "numpy"
    theirs = bm25s.BM25(k1=K1, b=B, method="lucene", backend=backend)
    theirs.index([analyze(text) for _, texts in index.text_batches() for text in texts], show_progress=False)
    kw = {"backend_selection": backend} if backend == "numba" else {}

    def run(queries):
        return theirs.retrieve([analyze(q) for q in queries], k=K, n_threads=1, show_progress=False, **kw)
    return run, lambda out: [(d[s > 0], s[s > 0]) for d, s in zip(*out)]  # bm25s pads with zero scores


def child(side: str, spec: dict) -> None:
    """One side in a fresh process: its build's wall seconds and the peak memory of build + one pass.
    Ours: ``build_index`` in memory (reading and tagging the collection) and the fit; bm25s: after
    our in-memory index is read (not counted), analysing its passages and bm25s's index."""
    import factcheck
    how, queries = collection(spec)
    # Each side's modules imported and its code run once on a few texts first: the build time
    # is the collection's, not the process's start-up (ours imports scikit-learn lazily).
    warm = [f"passage {i} on cats, dogs and {i % 7} other animals" for i in range(50)]
    if spec.get("own_tokenizer"):
        import bm25s
        bm25s.BM25().index(bm25s.tokenize(warm, stopwords="en", show_progress=False), show_progress=False)
    else:
        ranker(side, factcheck.build_index(warm, progress=False))
    t = time.perf_counter()
    index = factcheck.build_index(**how, progress=False)
    if side.startswith("bm25s"):
        t = time.perf_counter()
    if spec.get("own_tokenizer"):
        import bm25s
        texts = [text for _, batch in index.text_batches() for text in batch]
        t = time.perf_counter()
        model = bm25s.BM25(k1=K1, b=B, method="lucene")
        model.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
        print(json.dumps({"build_s": time.perf_counter() - t}))
        return
    run, _ = ranker(side, index)
    build_s = time.perf_counter() - t
    run(queries)
    # VmHWM, the high-water mark of this process's own memory: getrusage's ru_maxrss carries the
    # parent's peak across fork and exec (every side read 1,827 MiB, the parent's, in one run)
    with open("/proc/self/status") as fh:
        peak = next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmHWM:"))
    print(json.dumps({"build_s": build_s, "peak_bytes": peak}))


def in_child(side: str, spec: dict) -> dict:
    out = subprocess.run([sys.executable, "-m", "benchmarks.bm25_speed", "--child", side, "--spec", json.dumps(spec)],
                         check=True, cwd=ROOT, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def check_same(name: str, queries, results: dict) -> None:
    base = results[SIDES[0]]
    for side, got in results.items():
        for q, (rows, scores), (want_rows, want) in zip(queries, got, base):
            if side == SIDES[1]:
                same = list(rows) == list(want_rows) and scores.tobytes() == want.tobytes()
            else:
                same = len(scores) == len(want) and np.allclose(scores, want, rtol=1e-6, atol=0)
            if not same:
                sys.exit(f"bench_bm25: {name}: {side}'s top {K} differs for {q!r}: {scores} vs {want}")


def bench(name: str, spec: dict, repeats: int) -> list[str]:
    how, queries = collection(spec)
    import factcheck
    index = factcheck.build_index(**how, progress=False)
    runs, tops = {}, {}
    for side in SIDES:
        runs[side], tops[side] = ranker(side, index)
    check_same(name, queries, {side: tops[side](runs[side](queries)) for side in SIDES})  # also the warm-up
    rounds = []
    for r in range(repeats):
        order = SIDES[r % len(SIDES):] + SIDES[:r % len(SIDES)]
        rounds.append({side: timed(lambda: runs[side](queries))[1:] for side in order})
    one_off = {side: in_child(side, spec) for side in SIDES}
    own = in_child("bm25s (numpy)", {**spec, "own_tokenizer": True})

    def median(side, i):
        return statistics.median(rnd[side][i] for rnd in rounds)
    wall = {s: len(queries) / median(s, 0) for s in SIDES}
    cpu = {s: len(queries) / median(s, 1) for s in SIDES}
    lines = [f"## {name}", "", f"{spec['describe']}; {len(index):,} passages, {len(queries):,} queries. "
             f"Every query's top {K} agrees with ours (default) within a relative 1e-6 (ours fastest: the same "
             "ids, the same bits).", "",
             "| | queries/s (wall, median) | queries/s (CPU, median) | index build, s (analysing included) | "
             "peak memory, MiB (build + one pass) |", "|---|---|---|---|---|"]
    for s in SIDES:
        lines.append(f"| {s} | {wall[s]:.0f} | {cpu[s]:.0f} | {one_off[s]['build_s']:.2f} | "
                     f"{one_off[s]['peak_bytes'] / 2 ** 20:.0f} |")
    fastest, default = wall[SIDES[1]], wall[SIDES[0]]
    lines += ["", f"Ours (fastest) / bm25s (numba): **{fastest / wall[SIDES[3]]:.2f}×** (target ≥ 1.5×); "
              f"ours (default) / bm25s (numpy): **{default / wall[SIDES[2]]:.2f}×** (target > 1×); "
              f"ours (fastest) / ours (default): {fastest / default:.2f}× (wall).", "",
              f"Index build, ours / bm25s: {one_off[SIDES[0]]['build_s'] / one_off[SIDES[2]]['build_s']:.2f}× "
              f"(bm25s analysing with our analyser); bm25s with its own tokenizer (`bm25s.tokenize`, English stop "
              f"words, no stemming; reading the collection not counted): {own['build_s']:.2f} s.", "",
              "Rounds (wall s / CPU s, load average before the call):", ""]
    for i, rnd in enumerate(rounds, 1):
        lines.append(f"- round {i}: " + "; ".join(f"{s} {w:.3f} s / {c:.3f} s (load {load:.2f})"
                                               for s, (w, c, load) in rnd.items()))
    return lines + [""]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_208_827,
                    help="passages of the bench corpus (default 1,208,827; 0: leave it out)")
    ap.add_argument("--arxiv", type=Path, default=SHARED / "arxiv-abstracts.csv", help="the CSV queried by titles")
    ap.add_argument("--id-column", default="index")
    ap.add_argument("--text-column", default="abstract")
    ap.add_argument("--title-column", default="title")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "bench-bm25.md")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--spec", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.child, json.loads(args.spec))
        return 0
    try:
        import bm25s
        import numba
    except ImportError as exc:
        sys.exit(f"bench_bm25: {exc.name} is not installed (pip install -e '.[fast]' bm25s)")
    specs = []
    if args.n:
        specs.append((f"The bench corpus, {args.n:,} passages", {
            "kind": "corpus", "path": str(ensure_corpus(args.n)),
            "describe": f"`bench/corpus-{args.n}.json` (benchmarks/make_corpus.py), queried by the course's "
                        "train + dev claims"}))
    specs.append((f"The CSV {args.arxiv.name}, titles as queries", {
        "kind": "csv", "path": str(args.arxiv.resolve()), "id": args.id_column, "text": args.text_column,
        "title": args.title_column, "describe": f"`{args.arxiv.name}`: the `{args.text_column}` column indexed, "
                                                f"the `{args.title_column}` column as queries"}))
    argv_shown = " ".join(argv if argv is not None else sys.argv[1:])
    lines = ["# Benchmark: BM25 queries per second, ours against bm25s", "",
             f"Machine: {machine()}.", "",
             f"Command: `python -m benchmarks.bm25_speed{' ' + argv_shown if argv_shown else ''}` (bm25s "
             f"{bm25s.__version__}, numba {numba.__version__}); k1 {K1}, b {B}, top {K}; one thread; "
             "alternating rounds, medians (see the module docstring for what each side runs).", ""]
    for name, spec in specs:
        lines += bench(name, spec, args.repeats)
    write_report(args.out, lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
