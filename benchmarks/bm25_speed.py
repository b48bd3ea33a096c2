"""BM25 queries per second: ours against bm25s with its numba backend, on one corpus, in one run.

Writes reports/bench-bm25.md. Both sides score the same passages analysed into the
project's stems (the bench corpus of ``benchmarks/make_corpus.py``, tagged into
``bench/idx-N``), Lucene's BM25 with k1 0.9 and b 0.4, the top 10, for the 1,382 course
claims (train + dev), on one thread. Each side's time includes the claims' analysis into
stems, timed the same way (the project's analyser, inside the timed call):

* ours: ``BM25Retriever(k1=0.9, b=0.4, k=10).fit(index).rank(claims, k=10)``;
* bm25s: ``[analyze(c) for c in claims]`` then ``retrieve(stems, k=10,
  backend_selection="numba", n_threads=1)`` of a ``bm25s.BM25(method="lucene",
  backend="numba")`` indexed with every passage's stems.

After a warm-up of each (numba compiles there), the two are timed alternately (who goes
first alternates) for ``--repeats`` rounds; the report gives each side's median
queries/s, CPU seconds, and the load average beside every round. The top 10 scores of
every claim must agree within a relative 1e-6, or the benchmark fails. numba is not a
dependency of the project: install it into the environment first::

    .venv/bin/pip install numba
    python -m benchmarks.bm25_speed                                 # the 1.2M bench corpus
    python -m benchmarks.bm25_speed --n 50000 --out /tmp/bm25.md    # smoke
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_var] = "1"  # one thread, before numpy or numba load

import argparse  # noqa: E402
import gc  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from harness.measure import ROOT, SHARED, ensure_corpus, machine, write_report  # noqa: E402

K1, B, K = 0.9, 0.4, 10


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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_208_827, help="passages of the bench corpus (default 1,208,827)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "bench-bm25.md")
    args = ap.parse_args(argv)
    try:
        import bm25s
        import numba  # noqa: F401  (bm25s's numba backend)
    except ImportError as exc:
        sys.exit(f"bench_bm25: {exc.name} is not installed (pip install bm25s numba)")
    from factcheck.formats.claims import read_claims
    from factcheck.retrieval.bm25 import BM25Retriever
    from factcheck.tagging.index import TagIndex
    from factcheck.text.analyzer import analyze

    corpus = ensure_corpus(args.n)
    index_dir = ROOT / "bench" / f"idx-{args.n}"
    subprocess.run([sys.executable, "-m", "factcheck", "tag", str(corpus), "--out", str(index_dir), "--jobs", "2"],
                   check=True)
    claims = [c.text for name in ("train-claims.json", "dev-claims.json") for c in read_claims(SHARED / name)]
    index = TagIndex.load(index_dir)

    _, ours_fit, _, _ = timed(lambda: BM25Retriever(k1=K1, b=B, k=K).fit(index))  # builds the caches if missing
    ours = BM25Retriever(k1=K1, b=B, k=K).fit(index)
    t = time.perf_counter()
    stems = [analyze(text) for _, texts in index.text_batches() for text in texts]
    theirs = bm25s.BM25(k1=K1, b=B, method="lucene", backend="numba")
    theirs.index(stems, show_progress=False)
    del stems
    theirs_build = time.perf_counter() - t

    def run_ours():
        return ours.rank(claims, K)

    def run_theirs():
        return theirs.retrieve([analyze(c) for c in claims], k=K, backend_selection="numba", n_threads=1,
                               show_progress=False)

    ranked, (_, their_scores) = run_ours(), run_theirs()  # warm-up: numba compiles, caches load
    for claim, mine, want in zip(claims, ranked, their_scores):
        want = want[want > 0]  # bm25s fills its top 10 with zero-score passages; ours ranks what it scored
        if not np.allclose(mine.scores, want[:len(mine.scores)], rtol=1e-6, atol=0) or len(mine) != len(want):
            sys.exit(f"bench_bm25: the top {K} scores differ for {claim!r}: {mine.scores} vs {want.tolist()}")
    rounds = []
    for r in range(args.repeats):
        order = (("ours", run_ours), ("bm25s", run_theirs))
        if r % 2:
            order = order[::-1]
        rounds.append({name: timed(fn)[1:] for name, fn in order})

    def median(name, i):
        return statistics.median(rnd[name][i] for rnd in rounds)
    rate = {name: len(claims) / median(name, 0) for name in ("ours", "bm25s")}
    cpu_rate = {name: len(claims) / median(name, 1) for name in ("ours", "bm25s")}
    lines = [
        "# Benchmark: BM25 queries per second, ours against bm25s (numba)", "",
        f"Machine: {machine()}.", "",
        f"Command: `python -m benchmarks.bm25_speed --n {args.n} --repeats {args.repeats}` (after `pip install "
        f"numba`; bm25s {bm25s.__version__}, numba {numba.__version__}). Corpus: `bench/corpus-{args.n}.json` "
        f"({len(index):,} passages); {len(claims):,} claims (the course's train + dev); k1 {K1}, b {B}, top {K}; one "
        "thread; each side's time includes analysing the claims into stems (see the module docstring). Every "
        f"claim's top {K} scores agree within a relative 1e-6.", "",
        "| | queries/s (wall, median) | queries/s (CPU, median) |", "|---|---|---|",
        f"| ours | {rate['ours']:.0f} | {cpu_rate['ours']:.0f} |",
        f"| bm25s (numba) | {rate['bm25s']:.0f} | {cpu_rate['bm25s']:.0f} |",
        f"| ours / bm25s | {rate['ours'] / rate['bm25s']:.2f}× | {cpu_rate['ours'] / cpu_rate['bm25s']:.2f}× |", "",
        f"Target (ours at least bm25s's queries/s): **{'met' if rate['ours'] >= rate['bm25s'] else 'NOT met'}** "
        "(wall; alternating rounds, so both sides see the same machine).", "",
        "Rounds (wall s / CPU s, load average before the call):", "",
    ]
    for i, rnd in enumerate(rounds, 1):
        lines.append(f"- round {i}: " + "; ".join(f"{name} {w:.3f} s / {c:.3f} s (load {load:.2f})"
                                               for name, (w, c, load) in rnd.items()))
    lines += ["", f"One-off costs: our fit {ours_fit:.1f} s (counts and weights built into the index directory when "
              f"missing, loaded otherwise); bm25s's index (analysing every passage, then its build) "
              f"{theirs_build:.1f} s."]
    write_report(args.out, lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
