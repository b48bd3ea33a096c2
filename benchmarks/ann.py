"""Choose the approximate nearest-neighbour library by measurement: faiss, hnswlib, usearch
(and the product's own index).

Writes reports/bench-ann.md. For an index with passage vectors (``factcheck tag --mode
open``; the 1.2M bench corpus by default), every candidate configuration is built in a
fresh process (wall, CPU, the process's peak RSS beyond the vectors it loads, file
size), then searched one claim at a time for the dev claims (and the training claims):
p50/p99 latency, and recall@100 against exact search (the top 100 of the exact cosine
ranking, :class:`~factcheck.retrieval.dense.DenseRetriever`). Candidates returned by an
index are re-scored exactly (as the product does), so recall is what the app would see.
Each build is also repeated on a 100K-passage prefix to see whether the same input gives
the same bytes.

    python -m benchmarks.ann --index bench/idx-1208827            # -> reports/bench-ann.md
    python -m benchmarks.ann --index bench/idx-1208827 --only faiss-ivf --out /tmp/a.md

With ``--search --claims FILE``, nothing is built: the product's own dense first stage is
timed on the index as built (:func:`product_search`), one JSON line on stdout.

    python -m benchmarks.ann --index bench/idx-25000000 --search --claims dev.jsonl --requests 1000
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from factcheck.tagging import ann as product_ann
from harness.measure import ROOT, SHARED, machine, measure, pct, rss_parts_mib, write_report

DEPTH = 100
# name -> (library, parameters). Parameters are the usual starting points of each
# library's documentation for ~1M vectors, then widened where recall fell short. The one
# list-valued parameter is the search setting swept; "candidates" (default DEPTH) is how many
# candidates a search asks for, all re-scored exactly. Indexes that store the vectors (Flat)
# score them exactly already, so their top 100 is their best; indexes that store codes (SQ,
# PQ) rank by approximate scores and are asked for more.
CONFIGS = {
    "faiss-ivf": ("faiss", {"kind": "ivf", "nlist": 2048, "nprobe": [16, 32, 64, 128]}),
    "faiss-hnsw": ("faiss", {"kind": "hnsw", "M": 16, "ef_construction": 64, "ef_search": [64, 128, 256]}),
    "hnswlib": ("hnswlib", {"M": 16, "ef_construction": 64, "ef_search": [64, 128, 256]}),
    "usearch": ("usearch", {"connectivity": 16, "expansion_add": 64, "expansion_search": [64, 128, 256],
                            "dtype": "f16"}),
    # The product's own index and search, as `tag --mode open` builds it and DenseRetriever asks it
    # (factcheck/tagging/ann.py: its factory description, build settings and candidate count).
    "product": ("product", {"search_depth": [product_ann.SEARCH_DEPTH]}),
    # Towards recall 0.99. The same builds as above searched deeper: where each family's recall
    # tops out with exact distances (IVF: the lists' coverage; HNSW: the graph).
    "faiss-ivf-deep": ("faiss", {"kind": "ivf", "nlist": 2048, "nprobe": [256, 512]}),
    "faiss-hnsw-deep": ("faiss", {"kind": "hnsw", "M": 16, "ef_construction": 64, "ef_search": [512, 1024, 2048]}),
    # Denser graphs (twice the links, twice the insertion beam): the usual remedy when recall
    # stalls as ef grows; about four times the insertions' work, so builds may pass 10 minutes.
    "faiss-hnsw32": ("faiss", {"kind": "hnsw", "M": 32, "ef_construction": 128, "ef_search": [512, 1024, 2048]}),
    "hnswlib-m32": ("hnswlib", {"M": 32, "ef_construction": 128, "ef_search": [512, 1024, 2048]}),
    # Codes instead of vectors, through the product's build_ann and AnnIndex (so a winner is a
    # SPEC away): the only families whose index fits 25M vectors in 16 GB. search_depth is nprobe.
    # SQ8: one byte a dimension, near-exact scores, a scan 4x lighter than Flat's.
    "ivf-sq8": ("product", {"spec": "IVF4096,SQ8", "candidates": 500, "search_depth": [64, 128, 256, 512]}),
    # 4-bit PQ fast-scan (faiss's "x4fs"; "x4fsr" encodes the residual to the list's centroid):
    # scans from SIMD registers, so far more lists per ms; coarse scores, hence 1,000 candidates
    # re-scored exactly. 32 bytes a vector, or 64 with 128 sub-quantizers (finer scores).
    "ivf-pq64fs": ("product", {"spec": "IVF4096,PQ64x4fs", "candidates": 1000,
                               "search_depth": [64, 128, 256, 512, 1024]}),
    "ivf-pq64fsr": ("product", {"spec": "IVF4096,PQ64x4fsr", "candidates": 1000,
                                "search_depth": [64, 128, 256, 512, 1024]}),
    "ivf-pq128fs": ("product", {"spec": "IVF4096,PQ128x4fsr", "candidates": 1000,
                                "search_depth": [64, 128, 256, 512, 1024]}),
    # The default's codes with more of the lists scanned (recall stalls at the lists' coverage;
    # a search re-scores at least as many candidates as lists, and more candidates than that
    # gave the same recall).
    "ivf-pq128fsr-deep": ("product", {"spec": "IVF4096,PQ128x4fsr", "candidates": 1024,
                                      "search_depth": [1024, 1280, 1536, 2048]}),
}


CHUNK = 100_000  # vectors widened to float32 at a time (the float16 matrix is what stays in memory)


def load_vectors(index_dir: Path, limit: int | None = None) -> np.ndarray:
    """The index's passage vectors as stored, float16 (passages x dim), memory-mapped from one
    flat copy under bench/ (made once, named by the vectors' content sha256): the builds'
    processes then share one copy in the page cache instead of holding one each (25M x 256
    is 12.8 GB)."""
    from factcheck.tagging.vectors import load_vectors as load, read_vectors_manifest
    sha = read_vectors_manifest(index_dir)["content_sha256"]
    path = ROOT / "bench" / f"ann-vectors-{sha[:16]}.npy"
    if not path.is_file():
        path.parent.mkdir(exist_ok=True)
        tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp.npy")
        np.save(tmp, load(index_dir))
        os.replace(tmp, path)
    v = np.load(path, mmap_mode="r")
    return v[:limit] if limit else v


def resident(vectors: np.ndarray) -> np.ndarray:
    """``vectors`` after reading every page (so memory measured next is what comes on top)."""
    for a in range(0, len(vectors), CHUNK):
        vectors[a:a + CHUNK].max()
    return vectors


def chunks(vectors: np.ndarray):
    for a in range(0, len(vectors), CHUNK):
        yield a, np.ascontiguousarray(vectors[a:a + CHUNK], dtype=np.float32)


def build(library: str, params: dict, vectors: np.ndarray, threads: int):
    n, d = vectors.shape
    if library == "product":  # always one thread, whatever --threads: the product's setting
        (ROOT / "bench").mkdir(exist_ok=True)  # beside the file save() moves it to (one filesystem)
        out = Path(tempfile.mkdtemp(prefix="bench-ann-product-", dir=ROOT / "bench"))
        product_ann.build_ann(out, vectors, spec=params.get("spec"), candidates=params.get("candidates"))
        return out / product_ann.ANN_FILE
    if library == "faiss":
        import faiss
        faiss.omp_set_num_threads(threads)
        if params["kind"] == "ivf":
            quantizer = faiss.IndexFlatIP(d)
            index = faiss.IndexIVFFlat(quantizer, d, min(params["nlist"], max(1, n // 39)), faiss.METRIC_INNER_PRODUCT)
            rng = np.random.default_rng(0)
            sample = vectors[np.sort(rng.choice(n, size=min(n, 100_000), replace=False))].astype(np.float32)
            index.cp.seed = 1234
            index.train(sample)
        else:
            index = faiss.IndexHNSWFlat(d, params["M"], faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = params["ef_construction"]
        for _, part in chunks(vectors):
            index.add(part)
        return index
    if library == "hnswlib":
        import hnswlib
        index = hnswlib.Index(space="ip", dim=d)
        index.init_index(max_elements=n, ef_construction=params["ef_construction"], M=params["M"], random_seed=100)
        index.set_num_threads(threads)
        for a, part in chunks(vectors):
            index.add_items(part, np.arange(a, a + len(part)))
        return index
    from usearch.index import Index
    index = Index(ndim=d, metric="ip", dtype=params["dtype"], connectivity=params["connectivity"],
                  expansion_add=params["expansion_add"])
    for a, part in chunks(vectors):
        index.add(np.arange(a, a + len(part)), part, threads=threads)
    return index


def save(library: str, index, path: Path) -> None:
    if library == "product":
        index.replace(path)
        index.parent.rmdir()
    elif library == "faiss":
        import faiss
        faiss.write_index(index, str(path))
    elif library == "hnswlib":
        index.save_index(str(path))
    else:
        index.save(str(path))


def load(library: str, params: dict, path: Path, d: int):
    if library == "product":
        import faiss
        index = faiss.read_index(str(path))
        # The default's own depth and candidates for that many vectors, as build_ann records them.
        _, depth, candidates = (product_ann.default_setting(index.ntotal, d) if "spec" not in params
                                else (None, product_ann.SEARCH_DEPTH, params.get("candidates")))
        return product_ann.AnnIndex(index, {"search_depth": depth, "candidates": candidates})
    if library == "faiss":
        import faiss
        return faiss.read_index(str(path))
    if library == "hnswlib":
        import hnswlib
        index = hnswlib.Index(space="ip", dim=d)
        index.load_index(str(path))
        return index
    from usearch.index import Index
    return Index.restore(str(path))


def searcher(library: str, index, knob: str, value: int, candidates: int = DEPTH):
    """One claim's candidate rows at the search setting ``knob`` = ``value``."""
    if library == "product":
        index.depth = value
        return lambda q: index.search(q, DEPTH)  # the candidates DenseRetriever asks for a top 100
    if library == "faiss":
        import faiss
        faiss.omp_set_num_threads(1)
        if knob == "nprobe":
            index.nprobe = value
        else:
            index.hnsw.efSearch = value
        return lambda q: index.search(q[None, :], candidates)[1][0]
    if library == "hnswlib":
        index.set_ef(value)
        index.set_num_threads(1)
        return lambda q: index.knn_query(q[None, :], k=candidates)[0][0]
    index.expansion_search = value
    return lambda q: index.search(q, candidates, exact=False, threads=1).keys



def asked(library: str, index, params: dict) -> int:
    """How many candidates a search at the setting last given to ``searcher`` asks for."""
    return index.count(DEPTH) if library == "product" else params.get("candidates", DEPTH)


def one(args) -> int:
    """Child process: build one configuration (or load it) and print JSON."""
    library, params = CONFIGS[args.one]
    vectors = resident(load_vectors(args.index, args.limit))
    rss_before = _rss()
    t, c = time.perf_counter(), time.process_time()
    index = build(library, params, vectors, args.threads)
    out = {"build_s": time.perf_counter() - t, "build_cpu_s": time.process_time() - c,
           "index_rss_mib": (_rss() - rss_before) / 2**20}
    save(library, index, args.save)
    out["file_bytes"] = args.save.stat().st_size
    out["sha256"] = hashlib.sha256(args.save.read_bytes()).hexdigest()
    print(json.dumps(out))
    return 0


def _rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def exact_top(vectors: np.ndarray, queries: np.ndarray) -> list[np.ndarray]:
    """The exact top 100 of each query (rows, best first, ties by row): a chunk of the vectors
    widened to float32 at a time against all queries at once, so float16 vectors of any size
    serve."""
    from factcheck.scoring.topk import top_k
    queries = np.ascontiguousarray(queries, dtype=np.float32)
    best = [(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)) for _ in queries]
    for a, part in chunks(vectors):
        scores = queries @ part.T  # queries x chunk
        for i, row in enumerate(scores):
            here = top_k(row, DEPTH)[0]
            rows = np.concatenate([best[i][0], here + a])
            best[i] = top_k(np.concatenate([best[i][1], row[here]]), DEPTH, rows)
    return [rows for rows, _ in best]


def rescored(vectors: np.ndarray, q: np.ndarray, found: np.ndarray) -> np.ndarray:
    """The top 100 of the candidate rows ``found`` by their exact scores (as DenseRetriever
    re-scores them; float16 vectors are widened row by row)."""
    from factcheck.scoring.topk import top_k
    found = np.unique(found[found >= 0]).astype(np.int64)
    return found[top_k(np.dot(vectors[found].astype(np.float32, copy=False), q), DEPTH)[0]]


def recall(got: np.ndarray, want: np.ndarray) -> float:
    """Share of the exact top ``want`` among ``got``."""
    return len(set(got.tolist()) & set(want.tolist())) / len(want)


def search_rows(library: str, params: dict, index, vectors: np.ndarray, queries: dict, truth: dict) -> list[dict]:
    """Each search setting of a configuration: the candidates asked, p50/p99 latency over the
    first queries' part (one claim at a time: search, then exact re-scoring) and recall@100 of
    each part against ``truth`` (its exact top 100s)."""
    knob, values = next((k, v) for k, v in params.items() if isinstance(v, list))
    first = next(iter(queries))
    out = []
    for value in values:
        search = searcher(library, index, knob, value, params.get("candidates", DEPTH))
        search(queries[first][0])  # warm
        lat, found = [], {part: [] for part in queries}
        for part, vecs in queries.items():
            for q, want in zip(vecs, truth[part]):
                t1 = time.perf_counter()
                got = rescored(vectors, q, np.asarray(search(q), dtype=np.int64))
                if part == first:
                    lat.append((time.perf_counter() - t1) * 1000)
                found[part].append(recall(got, want))
        out.append({"knob": f"{knob}={value}", "candidates": asked(library, index, params),
                    "p50": statistics.median(lat), "p99": pct(lat, 99),
                    **{f"recall_{part}": float(np.mean(r)) for part, r in found.items()}})
    return out


def product_search(index_dir: Path, texts: list[str], recall_claims: int, shallower: int = 3) -> dict:
    """The product's dense first stage on an index with passage vectors, as ``retrieve --method
    dense`` searches it: the retriever opened (the vectors' maps and checks, the nearest-neighbour
    index read after its checksum), then each claim's top 100 one claim at a time (the claim
    embedded, the index's candidates re-scored exactly, the top cut): p50/p99 in ms, the
    process's resident memory after them (anonymous, and file-backed: the vectors' pages read),
    and the recall@100 of the first ``recall_claims`` claims against exact search
    (:func:`exact_top`, after every timed search: it reads every vector). Through a
    nearest-neighbour index, at its recorded search depth and then at ``shallower`` halvings of
    it (the default first): what a shallower setting would trade."""
    from factcheck.retrieval.dense import DenseRetriever
    t = time.perf_counter()
    dense = DenseRetriever(k=DEPTH).fit(index_dir)
    opened = time.perf_counter() - t
    ann = dense.ann_
    rows, found = [], []
    for depth in [None] if ann is None else [max(1, ann.depth >> i) for i in range(shallower + 1)]:
        if ann is not None:
            ann.depth = depth
        dense.rank(texts[0], k=DEPTH)  # warm: the first search pages in what every later one reads
        lat, tops = [], []
        for text in texts:
            t1 = time.perf_counter()
            tops.append(np.asarray(dense.rank(text, k=DEPTH).rows, dtype=np.int64))
            lat.append((time.perf_counter() - t1) * 1000)
        anon, mapped = rss_parts_mib(os.getpid())
        rows.append({"search_depth": depth, "candidates": None if ann is None else ann.count(DEPTH),
                     "p50": statistics.median(lat), "p99": pct(lat, 99), "anon_mib": anon, "file_mib": mapped})
        found.append(tops)
    checked = texts[:recall_claims]
    truth = exact_top(dense.vectors_, dense.embedder_.embed(checked, kind="query"))
    for row, tops in zip(rows, found):
        row["recall"] = float(np.mean([recall(got, want) for got, want in zip(tops, truth)]))
    return {"passages": len(dense.vectors_), "dim": int(dense.vectors_.shape[1]),
            "ann": None if ann is None else ann.entry["spec"], "opened_s": opened, "claims": len(texts),
            "recall_claims": len(checked), "depths": rows}


# Above this many bytes of float32 vectors (25M x 256 is 25.6 GB) the benchmark keeps them
# float16, widened a chunk or a row at a time, and exact search's latency is not measured.
WIDEN_MAX_BYTES = 8 * 2**30
PREFIX = 100_000  # passages of the prefix built twice for the same-bytes check


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", type=Path, default=ROOT / "bench" / "idx-1208827")
    ap.add_argument("--only", default=",".join(CONFIGS), help="configurations, comma-separated")
    ap.add_argument("--threads", type=int, default=1, help="build threads (1: the deterministic setting)")
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "bench-ann.md")
    ap.add_argument("--limit", type=int, default=None, help="the index's first passages only (default: all)")
    ap.add_argument("--search", action="store_true",
                    help="time the product's dense search on the index as built (no build): needs --claims")
    ap.add_argument("--claims", type=Path, help="with --search: the claims searched, one at a time")
    ap.add_argument("--requests", type=int, default=1000, help="with --search: claims timed (default 1000)")
    ap.add_argument("--recall-claims", type=int, default=100,
                    help="with --search: the first claims whose recall@100 is checked against exact search")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--save", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        return one(args)
    if args.search:
        from factcheck.formats.claims import read_claims
        if args.claims is None:
            ap.error("--search needs --claims")
        texts = [c.text for c in read_claims(args.claims)][:args.requests]
        if not texts:
            ap.error(f"--claims: no claims in {args.claims}")
        print(json.dumps(product_search(args.index, texts, args.recall_claims)))
        return 0
    unknown = [name for name in args.only.split(",") if name not in CONFIGS]
    if unknown:
        ap.error(f"--only: unknown configuration {unknown[0]!r} (known: {', '.join(CONFIGS)})")

    from factcheck.formats.claims import read_claims
    from factcheck.scoring.topk import top_k
    from factcheck.text.embedding import load_embedder
    embedder = load_embedder()
    dev = embedder.embed([c.text for c in read_claims(SHARED / "dev-claims.json")])
    train = embedder.embed([c.text for c in read_claims(SHARED / "train-claims.json")])
    vectors = load_vectors(args.index, args.limit)
    n, d = vectors.shape
    widened = n * d * 4 <= WIDEN_MAX_BYTES
    if widened:
        vectors = vectors.astype(np.float32)  # as DenseRetriever holds them
    limit = ["--limit", str(args.limit)] if args.limit else []
    t = time.perf_counter()
    truth = {"dev": exact_top(vectors, dev), "train": exact_top(vectors, train)}
    exact_ms = []
    from factcheck.retrieval.dense import DenseRetriever  # the product's exact search, for its latency
    block = DenseRetriever().block_rows
    for q in dev if widened else ():
        t1 = time.perf_counter()
        out = np.empty(n, dtype=np.float32)
        for a in range(0, n, block):
            np.dot(vectors[a:a + block], q, out=out[a:a + block])
        top_k(out, DEPTH)
        exact_ms.append((time.perf_counter() - t1) * 1000)
    load_before = os.getloadavg()[0]
    # the vectors alone, measured the same way, so a build's memory is what it adds
    base = measure([sys.executable, "-c", f"from benchmarks.ann import load_vectors, resident; "
                    f"from pathlib import Path; resident(load_vectors(Path({str(args.index)!r}), {args.limit!r}))"])
    rows = []
    (ROOT / "bench").mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bench-ann-", dir=ROOT / "bench"))
    for name in args.only.split(","):
        library, params = CONFIGS[name]
        path = work / f"{name}.idx"
        cmd = [sys.executable, "-m", "benchmarks.ann", "--one", name, "--index", str(args.index),
               "--threads", str(args.threads), *limit, "--save", str(path)]
        log = work / f"{name}.log"
        try:
            m = measure(cmd, log=log)
        except SystemExit as exc:
            rows.append({"name": name, "error": str(exc).splitlines()[-1][:200]})
            continue
        info = json.loads(log.read_text().strip().splitlines()[-1])
        # determinism: the same prefix build twice
        shas = []
        for _ in range(2):
            p = work / f"{name}-prefix.idx"
            subprocess.run(cmd[:-1] + [str(p), "--limit", str(min(n, PREFIX))], check=True, cwd=ROOT,
                           capture_output=True)
            shas.append(hashlib.sha256(p.read_bytes()).hexdigest())
            p.unlink()
        index = load(library, params, path, d)
        for found in search_rows(library, params, index, vectors, {"dev": dev, "train": train}, truth):
            rows.append({"name": name, **found, **info, "wall_s": m["wall_s"], "cpu_s": m["cpu_s"],
                         "peak_mib": (m["tree_peak_rss"] - base["tree_peak_rss"]) / 2**20,
                         "deterministic": shas[0] == shas[1],
                         "bytes_25m": info["file_bytes"] / n * 25_000_000})
        path.unlink(missing_ok=True)
        # each configuration's rows as soon as they exist: a later failure keeps the earlier hours
        (args.out.with_suffix(".json")).write_text(json.dumps(rows, indent=1))
    load_after = os.getloadavg()[0]
    lines = [
        "# Approximate nearest neighbours for dense search: which library", "",
        f"Machine: {machine()}; load average {load_before:.1f} before, {load_after:.1f} after (shared machine).", "",
        f"Command: `python -m benchmarks.ann --index {args.index} --only {args.only} --threads {args.threads}"
        f"{' --limit ' + str(args.limit) if args.limit else ''}`. "
        f"Vectors: {n:,} passages x {d} (the open mode's wordllama vectors of the bench corpus, float16 on disk, "
        f"{'float32 here' if widened else 'float16 here, widened a chunk or a row at a time'}); queries: the "
        f"{len(dev):,} dev claims (latency, recall) and the {len(train):,} training claims (recall). "
        + (f"Exact search: one claim's product over all {n:,} vectors, p50 {statistics.median(exact_ms):.1f} ms "
           "(the reference, measured in the same run). " if exact_ms else "Exact search's latency: not measured "
           "(float32 vectors would not fit). ")
        + f"Exact top-100 for all claims and the builds took {time.perf_counter() - t:.0f} s. Build: a fresh "
        "process per configuration, one build each (wall, CPU; peak RSS beyond the vectors' own process, measured "
        "the same way); latency: one claim at a time, one thread, the index's candidates (the column) re-scored "
        f"exactly; deterministic: the same {min(n, PREFIX):,}-passage prefix built twice gives the same bytes; "
        f"GB at 25M: the file's bytes a passage times 25M (what such an index would hold in memory, without the "
        f"float16 vectors the re-scoring reads: {25_000_000 * d * 2 / 1e9:.1f} GB at 25M).", "",
        "| configuration | search | candidates | build s | build CPU s | peak MiB | file MiB | GB at 25M | same bytes "
        "| p50 ms | p99 ms | recall@100 dev | recall@100 train |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['name']} | – | failed: {r['error']} |||||||||||")
            continue
        lines.append(f"| {r['name']} | {r['knob']} | {r['candidates']:,} | {r['build_s']:.0f} | "
                     f"{r['build_cpu_s']:.0f} | {r['peak_mib']:,.0f} | {r['file_bytes'] / 2**20:,.0f} | "
                     f"{r['bytes_25m'] / 1e9:.1f} | {'yes' if r['deterministic'] else 'no'} | {r['p50']:.2f} | "
                     f"{r['p99']:.2f} | {r['recall_dev']:.4f} | {r['recall_train']:.4f} |")
    (args.out.with_suffix(".json")).write_text(json.dumps(rows, indent=1))
    write_report(args.out, lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
