"""Benchmark the self-retrieval test against a plain-Python reference of the same method.

Writes reports/workbench-selftest.md. The reference is the minimal pipeline as its design
describes it, written here with dicts and Counters: lower-cased letter/digit tokens minus
stop words and single characters; (1 + ln tf) x smoothed IDF, L2-normalised; an inverted
index (term -> [(unit, weight)]) scored query by query into a dict; chunks (60 words,
20 shared) collapsed to their document by the best chunk; ties by corpus order. Ours is
the TF-IDF retriever (:mod:`factcheck.retrieval.tfidf`). Both run in this process, one
after the other in each round, on the same rows:

* the arXiv file (3,397 rows, ``title`` as the query): median of ``--repeats`` rounds, CPU
  and wall seconds; the rankings (top 100 of every query, whole and chunked) must be
  identical -- ids and order, scores to 1e-12 -- or the benchmark fails;
* a synthetic 100K-row CSV (``--rows``): one round; the recall figures of both;
* an index built in memory (``factcheck.build_index(texts)``, no ``out``) of a
  ``--build-rows``-passage bench corpus (``benchmarks/make_corpus.py``): median of ``--repeats`` rounds;
* ``--large``: ``factcheck selftest`` on a 1.2M-row CSV with 10,000 queries (the other
  rows' query is empty: counted and skipped), measured as a process tree (wall, CPU,
  peak RSS); run it last, ``nice``d, on a quiet machine.

Two figures for ours: *retrieval* (fit the TF-IDF space and rank every query into the run
:func:`factcheck.pipeline.workbench.rank_queries` returns -- ids and scores, as
``self_retrieval`` and a user's code get it -- the work the reference does; the tag index is
built beforehand, as ``factcheck tag`` would have) and
*end to end* (:func:`factcheck.pipeline.workbench.self_retrieval` on a fresh index
directory: reading the CSV, the tagging job for the passages and the chunks, both fits
and rankings, every metric with its bootstrap interval).

    python -m benchmarks.selftest                        # arXiv (median of 3) + 100K
    python -m benchmarks.selftest --large                # also the 1.2M-row run
    python -m benchmarks.selftest --large-only           # only it (reports/workbench-selftest-large.md)
    python -m benchmarks.selftest --rows 20000 --build-rows 20000 --repeats 1 --out /tmp/w.md   # smoke
"""

from __future__ import annotations

import argparse
import csv
import gc
import heapq
import math
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from harness.measure import ROOT, SHARED, ensure_corpus, gib, machine, measure, write_report

ARXIV = SHARED / "arxiv-abstracts.csv"
WINDOW, OVERLAP, DEPTH, KS = 60, 20, 100, (1, 5, 10)
LARGE_ROWS, LARGE_QUERIES = 1_208_827, 10_000


# --------------------------------------------------------------------------- the reference

def reference_terms(text: str, stop=None) -> list[str]:
    from factcheck.text.stopwords import ENGLISH_STOP_WORDS
    stop = ENGLISH_STOP_WORDS if stop is None else stop
    return [t for t in re.findall(r"[^\W_]+", text.lower()) if len(t) > 1 and t not in stop]


def reference_chunks(texts: list[str], window: int, overlap: int) -> tuple[list[str], list[int]]:
    """Windows of ``window`` whitespace words, ``overlap`` shared; a text that fits is one."""
    units, owner = [], []
    for row, text in enumerate(texts):
        words = text.split()
        start = 0
        while True:
            units.append(" ".join(words[start:start + window]))
            owner.append(row)
            if start + window >= len(words):
                break
            start += window - overlap
    return units, owner


def reference_rankings(texts: list[str], queries: list[str], window: int | None = None, overlap: int = OVERLAP,
                       depth: int = DEPTH) -> list[list[tuple[int, float]]]:
    """Each query's top ``depth`` documents (row, cosine), best chunk per document when
    chunked, ties by corpus order, documents scoring 0 left out: dicts and Counters."""
    from factcheck.text.stopwords import ENGLISH_STOP_WORDS
    stop = ENGLISH_STOP_WORDS
    units, owner = reference_chunks(texts, window, overlap) if window else (texts, list(range(len(texts))))
    bags = [Counter(reference_terms(u, stop)) for u in units]
    df = Counter()
    for bag in bags:
        df.update(bag.keys())
    n = len(units)
    idf = {t: math.log((1 + n) / (1 + f)) + 1 for t, f in df.items()}
    postings = defaultdict(list)
    for unit, bag in enumerate(bags):
        weights = {t: (1 + math.log(c)) * idf[t] for t, c in bag.items()}
        norm = math.sqrt(sum(w * w for w in weights.values()))
        for t, w in weights.items():
            postings[t].append((unit, w / norm))
        bags[unit] = None  # the bag is in the postings now
    out = []
    for query in queries:
        bag = Counter(t for t in reference_terms(query, stop) if t in idf)
        weights = {t: (1 + math.log(c)) * idf[t] for t, c in bag.items()}
        norm = math.sqrt(sum(w * w for w in weights.values()))
        scores = defaultdict(float)
        for t in sorted(weights):  # ascending terms, as ours adds them
            q = weights[t] / norm
            for unit, w in postings[t]:
                scores[unit] += q * w
        # a document's best chunk (the first such chunk on ties); whole documents: itself
        best = {}
        for unit, s in scores.items():
            doc = owner[unit]
            held = best.get(doc)
            if held is None or s > held[0] or (s == held[0] and unit < held[1]):
                best[doc] = (s, unit)
        top = heapq.nsmallest(depth, best.items(), key=lambda item: (-item[1][0], item[1][1]))
        out.append([(doc, s) for doc, (s, _) in top if s > 0])
    return out


def recall_figures(rankings, own_rows) -> dict:
    ranks = []
    for ranking, own in zip(rankings, own_rows):
        ranks.append(next((i for i, (doc, _) in enumerate(ranking, 1) if doc == own), None))
    out = {f"recall@{k}": float(np.mean([r is not None and r <= k for r in ranks])) for k in KS}
    out["mrr@10"] = float(np.mean([1 / r if r is not None and r <= 10 else 0.0 for r in ranks]))
    return out


# --------------------------------------------------------------------------- ours

def ours_run(index, queries: list[str], window: int | None) -> dict:
    """The TF-IDF retriever (without its cache: the space is fitted inside the timing), its
    run made by :func:`factcheck.pipeline.workbench.rank_queries`, as ``self_retrieval``
    and a user's code rank: ``{query number: [(document id, score), ...]}``, 0s left out."""
    from factcheck.pipeline.workbench import rank_queries
    from factcheck.retrieval.base import without_cache
    from factcheck.retrieval.chunking import ChunkedRetriever
    from factcheck.retrieval.tfidf import TfidfRetriever
    retriever = without_cache(TfidfRetriever(analyzer="plain"))  # the reference does not stem
    if window:
        retriever = ChunkedRetriever(retriever, window, OVERLAP)
    retriever.fit(index)
    return rank_queries(retriever, {str(i): q for i, q in enumerate(queries)}, DEPTH, progress=False)


def as_rows(run: dict, ids: list[str]) -> list[list[tuple[int, float]]]:
    """A run as the reference answers, (row, score) pairs per query (outside the timing)."""
    row = {d: r for r, d in enumerate(ids)}
    return [[(row[d], s) for d, s in pairs] for pairs in run.values()]


def in_memory_build(texts: list[str]):
    """``factcheck.build_index(texts)``: an index built in memory, the analysis included, from
    a fresh stem memo (as a new process starts: the arXiv rounds left this one warm)."""
    from factcheck.tagging.job import build_index as build
    from factcheck.text import analyzer
    analyzer._TOKEN_IDS.clear()
    return build(texts)


def build_rounds(rows: int, repeats: int) -> dict:
    """CPU and wall seconds of :func:`in_memory_build` on a ``rows``-passage bench corpus
    (``benchmarks/make_corpus.py``: the proxy's sentences and filler drawn like them)."""
    import json
    texts = list(json.loads(ensure_corpus(rows).read_text("utf-8")).values())
    rounds = [timed(in_memory_build, texts)[1:] for _ in range(repeats)]
    return {"rows": len(texts), "rounds": rounds}


def same_rankings(ours, reference) -> tuple[bool, float]:
    """(identical ids and order for every query, the largest score difference)."""
    worst = 0.0
    for a, b in zip(ours, reference):
        if [d for d, _ in a] != [d for d, _ in b]:
            return False, math.inf
        worst = max([worst] + [abs(x - y) for (_, x), (_, y) in zip(a, b)])
    return worst <= 1e-12, worst


def timed(fn, *args):
    """(result, wall s, CPU s) of ``fn(*args)``, with Python's cyclic garbage collector
    paused (as ``timeit`` pauses it): its passes over whatever the previous call left
    alive would be charged to whichever side happens to allocate next."""
    gc.collect()
    gc.disable()
    try:
        wall, cpu = time.perf_counter(), time.process_time()
        out = fn(*args)
        return out, time.perf_counter() - wall, time.process_time() - cpu
    finally:
        gc.enable()


def read_rows(path: Path, id_column: str, text_column: str, query_column: str):
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    return [r[id_column] for r in rows], [r[text_column] for r in rows], [r[query_column] for r in rows]


def build_index(path: Path, id_column: str, text_column: str, out: Path):
    from factcheck.formats.evidence import source_spec
    from factcheck.tagging.index import TagIndex
    from factcheck.tagging.job import TagJob
    TagJob(progress=False, jobs=1).run(source_spec(path, id_column=id_column, text_column=text_column), out)
    index = TagIndex.load(out)
    # The chunk index, once: a derived cache of the index, as a second selftest finds it.
    from factcheck.retrieval.chunking import ChunkedRetriever
    from factcheck.retrieval.base import without_cache
    from factcheck.retrieval.tfidf import TfidfRetriever
    ChunkedRetriever(without_cache(TfidfRetriever(analyzer="plain")), WINDOW, OVERLAP).fit(index)
    return index


def end_to_end(path: Path, id_column: str, text_column: str, query_column: str):
    from factcheck.formats.evidence import source_spec
    from factcheck.pipeline.workbench import self_retrieval
    folder = Path(tempfile.mkdtemp(prefix="bench-selftest-", dir=ROOT / "bench"))
    try:
        return self_retrieval(source_spec(path, id_column=id_column, text_column=text_column), query_column,
                              ("tfidf",), index_dir=folder / "index", analyzer="plain", progress=False)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def compare(path: Path, id_column: str, text_column: str, query_column: str, repeats: int) -> dict:
    ids, texts, queries = read_rows(path, id_column, text_column, query_column)
    asked = [i for i, q in enumerate(queries) if q.strip()]
    qtexts = [queries[i] for i in asked]
    folder = Path(tempfile.mkdtemp(prefix="bench-selftest-", dir=ROOT / "bench"))
    try:
        index = build_index(path, id_column, text_column, folder / "index")
        assert index.ids == ids
        rounds = []
        for i in range(repeats):
            r = {}
            for window in (None, WINDOW):
                key = "chunks" if window else "whole"
                # Alternate who goes first: the second runs in the heap the first left.
                sides = [("ref", lambda: timed(reference_rankings, texts, qtexts, window)),
                         ("ours", lambda: timed(ours_run, index, qtexts, window))]
                for side, run in (sides if i % 2 == 0 else sides[::-1]):
                    r[f"{side}_{key}"] = run()
                ran, wall, cpu = r[f"ours_{key}"]
                r[f"ours_{key}"] = (as_rows(ran, ids), wall, cpu)
            r["end_to_end"] = timed(end_to_end, path, id_column, text_column, query_column)
            rounds.append(r)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    last = rounds[-1]
    out = {"rows": len(ids), "queries": len(asked), "rounds": rounds, "figures": {}, "identical": {}}
    for key in ("whole", "chunks"):
        ours, ref = last[f"ours_{key}"][0], last[f"ref_{key}"][0]
        out["identical"][key] = same_rankings(ours, ref)
        out["figures"][f"ours_{key}"] = recall_figures(ours, asked)
        out["figures"][f"ref_{key}"] = recall_figures(ref, asked)
        if not out["identical"][key][0]:
            raise SystemExit(f"{path.name}: the rankings differ from the reference ({key}): "
                             f"largest score difference {out['identical'][key][1]}")
    return out


def median(rounds, key: str, which: int) -> float:
    return statistics.median(r[key][which] for r in rounds)


# --------------------------------------------------------------------------- data

def synthetic_csv(rows: int, queries: int, path: Path, seed: int = 24) -> Path:
    """``rows`` synthetic papers drawn from the arXiv file's own word distribution: each
    abstract's length from the real lengths, its words i.i.d. from the real unigram
    counts (whitespace tokens). Every ``rows // queries``-th row has a title of 8 words,
    5 from its abstract and 3 from the unigram distribution (findable, not trivially);
    the others' title is empty (a self-retrieval test counts and skips them), which keeps
    the plain-Python reference's share of the run to minutes."""
    if path.is_file():
        return path
    _, texts, _ = read_rows(ARXIV, "index", "abstract", "title")
    words = [w for t in texts for w in t.split()]
    vocab, counts = np.unique(np.array(words, dtype=object), return_counts=True)
    cdf = np.cumsum(counts) / counts.sum()
    lengths = np.array([len(t.split()) for t in texts])
    rng = np.random.default_rng(seed)

    def draw(size):  # the unigram distribution, by inverting its CDF (choice(p=) recomputes it per call)
        return vocab[np.minimum(np.searchsorted(cdf, rng.random(size), side="right"), len(vocab) - 1)].tolist()

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "title", "abstract"])
        step = max(rows // queries, 1)
        for i in range(rows):
            abstract = draw(int(rng.choice(lengths)))
            title = [abstract[j] for j in rng.choice(len(abstract), size=5)] + draw(3)
            w.writerow([f"s{i}", " ".join(title) if i % step == 0 else "", " ".join(abstract)])
    tmp.rename(path)
    return path


def large_csv(path: Path) -> Path:
    """The 1.2M-passage bench corpus (``benchmarks/make_corpus.py``) as a CSV, with a query
    (8 of its words) on every ``rows / 10,000``-th row and an empty query elsewhere."""
    if path.is_file():
        return path
    import json
    corpus = json.loads(ensure_corpus(LARGE_ROWS).read_text("utf-8"))
    step = len(corpus) // LARGE_QUERIES
    rng = np.random.default_rng(12)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "text", "query"])
        for i, (pid, text) in enumerate(corpus.items()):
            query = ""
            if i % step == 0 and i // step < LARGE_QUERIES:
                words = text.split()
                query = " ".join(words[j] for j in rng.choice(len(words), size=min(8, len(words)), replace=False))
            w.writerow([pid, text, query])
    tmp.rename(path)
    return path


# --------------------------------------------------------------------------- report

def fmt_figures(f: dict) -> str:
    return " / ".join(f"{f[k]:.3f}" for k in (*(f"recall@{k}" for k in KS), "mrr@10"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3, help="rounds on the arXiv file (median reported)")
    ap.add_argument("--rows", type=int, default=100_000, help="rows of the synthetic CSV (0: skip it)")
    ap.add_argument("--queries", type=int, default=10_000, help="rows of the synthetic CSV with a title")
    ap.add_argument("--large", action="store_true", help="also run factcheck selftest on a 1.2M-row CSV")
    ap.add_argument("--large-only", action="store_true",
                    help="only the 1.2M-row run, into reports/workbench-selftest-large.md (or --out)")
    ap.add_argument("--build-rows", type=int, default=100_000,
                    help="passages of the bench corpus built into an index in memory (0: skip it)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    (ROOT / "bench").mkdir(exist_ok=True)
    if args.large_only:
        lines = ["# Benchmark: the self-retrieval test on 1.2M rows", "",
                 f"Machine: {machine()} (shared with other work while this ran). Command: "
                 "`python -m benchmarks.selftest --large-only`.", *large_run()]
        write_report(args.out or ROOT / "reports" / "workbench-selftest-large.md", lines)
        return 0
    load_before = os.getloadavg()
    arxiv = compare(ARXIV, "index", "abstract", "title", args.repeats)
    load_after = os.getloadavg()
    lines = [
        "# Benchmark: the self-retrieval test against a plain-Python reference", "",
        f"Machine: {machine()}; load average (1/5/15 min) {'/'.join(f'{x:.2f}' for x in load_before)} before "
        f"the arXiv rounds, {'/'.join(f'{x:.2f}' for x in load_after)} after (CPU seconds are the steadier "
        "figure, wall seconds are quoted beside them).", "",
        f"Command: `python -m benchmarks.selftest --repeats {args.repeats} --rows {args.rows} --queries {args.queries}"
        f" --build-rows {args.build_rows}"
        + (" --large" if args.large else "") + "`. The reference and ours run in one process, alternately (who "
        "goes first alternates from round to round), on the same rows, with the cyclic garbage collector paused "
        "around each timed call (as `timeit` does); the rankings (top 100 of every query, whole and chunked 60/20) are checked identical "
        "(ids and order; scores to 1e-12) before any time is reported. See the module docstring of "
        "`benchmarks/selftest.py` for what each figure includes.", "",
        f"## arXiv abstracts ({arxiv['rows']:,} rows, {arxiv['queries']:,} title queries), median of "
        f"{args.repeats}", "",
        "| work | reference CPU s | ours CPU s | ratio (CPU) | reference wall s | ours wall s | ratio (wall) |",
        "|---|---|---|---|---|---|---|",
    ]
    rounds = arxiv["rounds"]
    for key in ("whole", "chunks"):
        rc, oc = median(rounds, f"ref_{key}", 2), median(rounds, f"ours_{key}", 2)
        rw, ow = median(rounds, f"ref_{key}", 1), median(rounds, f"ours_{key}", 1)
        lines.append(f"| retrieval, {key} | {rc:.2f} | {oc:.2f} | **{rc / oc:.0f}×** | {rw:.2f} | {ow:.2f} | "
                     f"{rw / ow:.0f}× |")
    rc = median(rounds, "ref_whole", 2) + median(rounds, "ref_chunks", 2)
    rw = median(rounds, "ref_whole", 1) + median(rounds, "ref_chunks", 1)
    ec, ew = median(rounds, "end_to_end", 2), median(rounds, "end_to_end", 1)
    lines.append(f"| end to end (`self_retrieval`, whole + chunks, fresh index, intervals) | {rc:.2f} | {ec:.2f} | "
                 f"{rc / ec:.1f}× | {rw:.2f} | {ew:.2f} | {rw / ew:.1f}× |")
    lines += ["", "Recall@1 / @5 / @10 / MRR@10 (identical rankings, so identical figures):", ""]
    for key in ("whole", "chunks"):
        lines.append(f"- {key}: ours {fmt_figures(arxiv['figures'][f'ours_{key}'])}; reference "
                     f"{fmt_figures(arxiv['figures'][f'ref_{key}'])}; largest score difference "
                     f"{arxiv['identical'][key][1]:.1e}")
    ratio = min(median(rounds, f"ref_{k}", 2) / median(rounds, f"ours_{k}", 2) for k in ("whole", "chunks"))
    lines += ["", f"Requirement (at least 10× the reference on the arXiv file, identical rankings): "
              f"**{ratio:.0f}×** (the smaller of whole and chunked, CPU) — {'met' if ratio >= 10 else 'NOT met'}; "
              f"end to end, with everything the test does beyond ranking, {rc / ec:.1f}×.",
              "", "All rounds (CPU s: reference whole, ours whole, reference chunks, ours chunks, end to end):", ""]
    for r in rounds:
        lines.append("- " + ", ".join(f"{r[k][2]:.2f}" for k in ("ref_whole", "ours_whole", "ref_chunks",
                                                                 "ours_chunks", "end_to_end")))
    if args.rows:
        path = synthetic_csv(args.rows, args.queries, ROOT / "bench" / f"synthetic-{args.rows}-{args.queries}.csv")
        syn = compare(path, "id", "abstract", "title", 1)
        r = syn["rounds"][0]
        lines += ["", f"## Synthetic CSV ({syn['rows']:,} rows, {syn['queries']:,} queries), one round", "",
                  "Drawn from the arXiv file's own word and length distributions (`synthetic_csv`): a title "
                  f"(on every {syn['rows'] // syn['queries']}th row; the other rows are indexed, their empty "
                  "title skipped) is 5 words of its abstract and 3 from the unigram distribution.", "",
                  "| work | reference CPU s | ours CPU s | ratio (CPU) | reference wall s | ours wall s | "
                  "recall@1 / @5 / @10 / MRR@10 (ours = reference) |", "|---|---|---|---|---|---|---|"]
        for key in ("whole", "chunks"):
            lines.append(f"| retrieval, {key} | {r[f'ref_{key}'][2]:.1f} | {r[f'ours_{key}'][2]:.1f} | "
                         f"**{r[f'ref_{key}'][2] / r[f'ours_{key}'][2]:.0f}×** | {r[f'ref_{key}'][1]:.1f} | "
                         f"{r[f'ours_{key}'][1]:.1f} | {fmt_figures(syn['figures'][f'ours_{key}'])} |")
        lines.append(f"| end to end | – | {r['end_to_end'][2]:.1f} | – | – | {r['end_to_end'][1]:.1f} | |")
    if args.build_rows:
        built = build_rounds(args.build_rows, args.repeats)
        cpu = statistics.median(c for _, c in built["rounds"])
        wall = statistics.median(w for w, _ in built["rounds"])
        lines += ["", f"## An index in memory ({built['rows']:,}-passage bench corpus), median of "
                  f"{args.repeats}", "",
                  "`factcheck.build_index(texts)` (no `out`: nothing written), the analysis included, from a fresh "
                  f"stem memo; the passages (`benchmarks/make_corpus.py --n {built['rows']}`) read beforehand.", "",
                  "| work | CPU s | wall s | target |", "|---|---|---|---|",
                  f"| in-memory build, {built['rows']:,} passages | {cpu:.1f} | {wall:.1f} | wall <= 10 s: "
                  f"{'met' if wall <= 10 else 'NOT met'} |"]
    if args.large:
        lines += large_run()
    write_report(args.out or ROOT / "reports" / "workbench-selftest.md", lines)
    return 0


def large_run() -> list[str]:
    path = large_csv(ROOT / "bench" / f"selftest-{LARGE_ROWS}.csv")
    folder = Path(tempfile.mkdtemp(prefix="bench-selftest-", dir=ROOT / "bench"))
    try:
        m = measure([sys.executable, "-m", "factcheck", "selftest", str(path), "--query-column", "query",
                     "--analyzer", "plain", "--out", str(folder), "--jobs", "2"], log=folder.parent / "selftest-large.log")
        table = (folder / "selftest.md").read_text("utf-8")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return ["", f"## {LARGE_ROWS:,}-row CSV, {LARGE_QUERIES:,} queries (`factcheck selftest`, tfidf and bm25, "
            "whole and chunked, --jobs 2)", "",
            f"The 1.2M-passage bench corpus (`benchmarks/make_corpus.py`) as a CSV; the query of every "
            f"{LARGE_ROWS // LARGE_QUERIES}th row is 8 of its own words, the other rows' is empty (counted and "
            "skipped). One run, measured as a process tree:", "",
            f"- wall **{m['wall_s']:.0f} s**, CPU {m['cpu_s']:.0f} s, peak RSS (tree, sampled) "
            f"**{gib(m['tree_peak_rss'])}**, driver high-water mark {gib(m['driver_peak_rss'])}", "",
            "Its table:", "", *table.strip().splitlines()[4:]]


if __name__ == "__main__":
    raise SystemExit(main())
