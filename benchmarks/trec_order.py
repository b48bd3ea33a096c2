"""TREC run files on real data: our order survives trec_eval's sort, our metrics equal ir_measures.

The unit tests check both on random runs; this checks them on the arXiv collection, where
ties are real (BM25's float32 scores tie often, the tag rule's too). Each arXiv title is a
judged query whose own abstract is its one relevant document (grade 1). For each retriever:
rank every query to depth 1000 (:func:`factcheck.pipeline.workbench.rank_queries`), write the TREC run
(:func:`factcheck.formats.qrels.write_trec_run`), read it back sorted as trec_eval sorts it (score
descending, ties by docid descending: :func:`factcheck.formats.qrels.read_trec_run`), and compare

* the order of every query's documents with ours (must be identical), and
* our metrics on our run with ir_measures' on the file read back (largest difference).

Writes reports/workbench-trec-order.md.

    python -m benchmarks.trec_order
"""

from __future__ import annotations

import argparse
import csv
import shutil
import tempfile
from pathlib import Path

from harness.measure import ROOT, SHARED, write_report

ARXIV = SHARED / "arxiv-abstracts.csv"
DEPTH, KS = 1000, (1, 5, 10, 100)


def check(retriever, queries: dict, qrels: dict, folder: Path) -> dict:
    import ir_measures

    from factcheck.evaluation.ir_metrics import ir_measures_names, judged_metrics
    from factcheck.formats.qrels import read_trec_run, write_trec_run
    from factcheck.pipeline.workbench import rank_queries

    run = rank_queries(retriever, queries, k=DEPTH, progress=False)
    path = folder / f"{retriever.name}.trec"
    lines = write_trec_run(path, run, tag=retriever.name.replace("+", "-"))
    back = read_trec_run(path)
    differ = sum([d for d, _ in back.get(q, [])] != [d for d, _ in ranked] for q, ranked in run.items())
    ties = sum(s == t for ranked in run.values() for (_, s), (_, t) in zip(ranked, ranked[1:]))
    ours = judged_metrics(run, qrels, ks=KS).metrics
    names = {k: ir_measures.parse_measure(m) for k, m in ir_measures_names(ks=KS).items()}
    theirs = ir_measures.calc_aggregate(
        list(names.values()),
        [ir_measures.Qrel(q, d, g) for q, docs in qrels.items() for d, g in docs.items()],
        [ir_measures.ScoredDoc(q, d, s) for q, docs in back.items() for d, s in docs])
    worst = max(abs(ours[k].value - theirs[m]) for k, m in names.items())
    return {"method": retriever.name, "lines": lines, "ties": ties, "differ": differ, "worst": worst,
            "metrics": {k: ours[k].value for k in names}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "workbench-trec-order.md")
    args = ap.parse_args(argv)
    import factcheck

    from benchmarks.selftest import build_index

    with open(ARXIV, newline="", encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh) if r["title"].strip()]
    queries = {f"q{r['index']}": r["title"] for r in rows}
    qrels = {f"q{r['index']}": {r["index"]: 1} for r in rows}
    (ROOT / "bench").mkdir(exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="bench-trec-", dir=ROOT / "bench"))
    try:
        index = build_index(ARXIV, "index", "abstract", folder / "index")
        retrievers = [factcheck.TfidfRetriever(analyzer="plain"),
                      factcheck.ChunkedRetriever(factcheck.TfidfRetriever(analyzer="plain"), window=60, overlap=20),
                      factcheck.BM25Retriever(), factcheck.TagRuleRetriever()]
        results = [check(r.fit(index), queries, qrels, folder) for r in retrievers]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    lines = [
        "# TREC run files on the arXiv collection: trec_eval's order and ir_measures' figures", "",
        f"Command: `python -m benchmarks.trec_order`. {len(queries):,} arXiv titles as judged queries (the "
        f"paper's own abstract relevant, grade 1), each retriever ranked to depth {DEPTH}, the run written as a "
        "TREC file, read back sorted as trec_eval sorts it (score descending, ties by docid descending), and "
        "scored by ir_measures (0.4.x). *Tied pairs*: adjacent documents of one query with equal scores in our "
        "ranking (written as strictly decreasing float32 steps).", "",
        "| method | run lines | tied pairs | queries whose TREC order differs from ours | largest "
        "&#124;ours − ir_measures&#124; | R@1 | R@10 | MRR@10 | nDCG@10 | MAP |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        m = r["metrics"]
        lines.append(f"| {r['method']} | {r['lines']:,} | {r['ties']:,} | **{r['differ']}** | {r['worst']:.1e} | "
                     f"{m['recall@1']:.4f} | {m['recall@10']:.4f} | {m['mrr@10']:.4f} | {m['ndcg@10']:.4f} | "
                     f"{m['map']:.4f} |")
    ok = all(r["differ"] == 0 and r["worst"] <= 1e-9 for r in results)
    lines += ["", f"Requirement (our order for every query; metrics equal to 1e-9): {'met' if ok else 'NOT met'}."]
    write_report(args.out, lines)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
