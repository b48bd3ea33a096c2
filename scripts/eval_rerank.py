#!/usr/bin/env python3
"""Train the reranker on the training split and measure it on dev, with ablations.

    python scripts/eval_rerank.py --evidence ../shared/data/evidence.json.gz
    python scripts/eval_rerank.py --evidence ../shared/data/evidence-wiki.json.gz \\
        --transfer-model out/rerank-proxy.joblib

Protocol (issue 8): every choice -- BM25's k, the reranker's candidate settings, model
configuration and cut-off, and each ablation's cut-off -- is made on the fixed 80/20
split of the *training* claims (``train_holdout_split``); dev claims are only scored,
once, at the end. Test claims are never read.

Rows: the BM25 baseline; the reranker; the reranker with each feature group left out
(retrained, cut-off re-tuned); the reranker without the label memory at all (no memory
candidates, no memory features); optionally a model trained on another corpus
(``--transfer-model``: e.g. the proxy-trained model on the wiki-only corpus, where no
dictionary-versus-Wikipedia shortcut can help). Columns: dev evidence F with a 95%
bootstrap interval, recall@100 of the candidate stage and of the final ranking, the
share of claims with at least one gold passage returned (Wilson interval), and the mean
number of passages returned. Writes ``reports/rerank-<corpus>.md``.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import factcheck  # noqa: E402  (the public API; the rest are measurement internals)
from factcheck.evaluation.course_metric import evidence_f  # noqa: E402
from factcheck.evaluation.intervals import bootstrap_mean, paired_bootstrap_diff, wilson  # noqa: E402
from factcheck.evaluation.retrieval_metrics import recall_at  # noqa: E402
from factcheck.formats.splits import train_holdout_split  # noqa: E402
from factcheck.retrieval.rerank import features as F  # noqa: E402
from factcheck.pipeline.rerank_training import DEFAULT_CANDIDATES, TrainingData  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data"
BM25_PARAMS = {"k1": 0.9, "b": 0.4}


def corpus_name(evidence: Path) -> str:
    name = evidence.name.split(".")[0]
    return {"evidence": "proxy", "evidence-wiki": "wiki"}.get(name, name)


def load_index(evidence: Path, root: Path) -> factcheck.TagIndex:
    if not (root / "manifest.json").is_file():
        print(f"tagging {evidence} into {root} ...", flush=True)
    return factcheck.build_index(evidence, root, progress=False)


def score(ids: list[str], selected: dict, ranked: dict, candidates: dict | None, claims) -> dict:
    f = [evidence_f(selected[c.id], c.evidences) for c in claims]
    hits = sum(bool(set(selected[c.id]) & set(c.evidences)) for c in claims)
    out = {"f": f, "F": bootstrap_mean(f), "any_gold": wilson(hits, len(claims)),
           "rank_r100": np.mean([recall_at(ranked[c.id], c.evidences, 100) for c in claims]),
           "mean_returned": float(np.mean([len(selected[c.id]) for c in claims]))}
    out["cand_r100"] = (np.mean([recall_at(candidates[c.id], c.evidences, 100) for c in claims])
                        if candidates is not None else out["rank_r100"])
    return out


def evaluate_rerank(retriever: factcheck.RerankRetriever, claims) -> dict:
    texts = [c.text for c in claims]
    ids = retriever.index.ids
    sel = retriever.retrieve(texts)
    ranks = retriever.rank(texts, 100)
    cands = {c.id: [ids[r] for r in retriever.scored(c.text)[0].rows[:100].tolist()] for c in claims}
    return score(ids, {c.id: s.ids for c, s in zip(claims, sel)},
                 {c.id: [ids[r] for r in k.rows.tolist()] for c, k in zip(claims, ranks)}, cands, claims)


def bm25_baseline(index, holdout, dev) -> tuple[dict, int, float]:
    """BM25 top-k with k chosen on the holdout part (1..10)."""
    bm = factcheck.BM25Retriever(**BM25_PARAMS).fit(index)
    ids = index.ids
    hold_rank = bm.rank([c.text for c in holdout], 10)
    best_k, best_f = 1, -1.0
    for k in range(1, 11):
        f = np.mean([evidence_f([ids[r] for r in x.rows[:k].tolist()], c.evidences)
                     for x, c in zip(hold_rank, holdout)])
        if f > best_f + 1e-12:
            best_k, best_f = k, float(f)
    dev_rank = bm.rank([c.text for c in dev], 100)
    ranked = {c.id: [ids[r] for r in x.rows.tolist()] for c, x in zip(dev, dev_rank)}
    selected = {c.id: ranked[c.id][:best_k] for c in dev}
    return score(ids, selected, ranked, None, dev), best_k, best_f


def latency(retriever: factcheck.RerankRetriever, texts: list[str]) -> tuple[float, float]:
    retriever.retrieve(texts[:20])  # warm-up
    times = []
    for t in texts[20:220]:
        retriever.clear_cache()
        start = time.perf_counter()
        retriever.retrieve([t])
        times.append((time.perf_counter() - start) * 1000)
    return float(np.percentile(times, 50)), float(np.percentile(times, 90))


def row(name: str, m: dict, holdout_f: float | None) -> str:
    hf = f"{holdout_f:.3f}" if holdout_f is not None else "--"
    return (f"| {name} | {m['F'].fmt()} | {m['cand_r100']:.3f} | {m['rank_r100']:.3f} | "
            f"{m['any_gold'].fmt()} | {m['mean_returned']:.2f} | {hf} |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--evidence", type=Path, required=True, help="knowledge source (course format)")
    ap.add_argument("--data-dir", type=Path, default=DEFAULT_DATA, help="directory with train/dev claims")
    ap.add_argument("--index", type=Path, default=None,
                    help="tag index of EVIDENCE (built there if missing; default: a temporary directory)")
    ap.add_argument("--corpus", default=None, help="name used in the report file (default: from EVIDENCE)")
    ap.add_argument("--out", type=Path, default=None, help="report (default: reports/rerank-<corpus>.md)")
    ap.add_argument("--save-model", type=Path, default=None, help="also save the trained reranker here")
    ap.add_argument("--transfer-model", type=Path, default=None,
                    help="a reranker trained on another corpus, also evaluated on this one")
    ap.add_argument("--no-ablations", action="store_true")
    args = ap.parse_args(argv)

    corpus = args.corpus or corpus_name(args.evidence)
    out = args.out or ROOT / "reports" / f"rerank-{corpus}.md"
    index_dir = args.index or Path(tempfile.gettempdir()) / f"factcheck-rerank-index-{corpus}"
    index = load_index(args.evidence, index_dir)
    train = factcheck.read_claims(args.data_dir / "train-claims.json", require_labels=True)
    dev = factcheck.read_claims(args.data_dir / "dev-claims.json", require_labels=True)
    fit, holdout = train_holdout_split(train)

    rows, notes = [], []
    base, k, base_hold = bm25_baseline(index, holdout, dev)
    rows.append(row(f"BM25 k1={BM25_PARAMS['k1']} b={BM25_PARAMS['b']}, top-{k} (k on holdout)", base, base_hold))
    print(rows[-1], flush=True)

    t0 = time.perf_counter()
    datas = []
    for config in DEFAULT_CANDIDATES:
        prev = datas[0] if datas else None
        datas.append(TrainingData(index, fit, holdout, config, prev.terms if prev else None,
                                  prev.context if prev else None))
    main_r = None
    for d in datas:
        r = factcheck.train_reranker(index, fit, holdout, data=d)
        if main_r is None or r.report["holdout"]["evidence_f"] > main_r.report["holdout"]["evidence_f"] + 1e-12:
            main_r, main_d = r, d
    train_s = time.perf_counter() - t0
    chosen = main_r.report["chosen"]
    full = evaluate_rerank(main_r, dev)
    rows.append(row("**rerank** (all feature groups)", full, main_r.report["holdout"]["evidence_f"]))
    print(rows[-1], flush=True)
    p50, p90 = latency(main_r, [c.text for c in holdout])
    if args.save_model:
        main_r.save(args.save_model)
    diff = paired_bootstrap_diff(full["f"], base["f"])

    ablations = []
    if not args.no_ablations:
        from factcheck.retrieval.rerank.model import ModelConfig
        grid = (ModelConfig(**chosen["model"]),)
        for group, names in F.GROUPS.items():
            r = factcheck.train_reranker(index, fit, holdout, data=main_d, grid=grid,
                               features=[f for f in F.FEATURES if f not in names])
            m = evaluate_rerank(r, dev)
            rows.append(row(f"rerank without `{group}`", m, r.report["holdout"]["evidence_f"]))
            ablations.append((group, m))
            print(rows[-1], flush=True)
        no_mem = TrainingData(index, fit, holdout, replace(main_d.config, memory_k=0), main_d.terms, main_d.context)
        mem_names = F.GROUPS["memory"]
        r = factcheck.train_reranker(index, fit, holdout, data=no_mem, grid=grid,
                           features=[f for f in F.FEATURES if f not in mem_names])
        m = evaluate_rerank(r, dev)
        rows.append(row("rerank without label memory (no memory candidates, no `memory` features)", m,
                        r.report["holdout"]["evidence_f"]))
        print(rows[-1], flush=True)
    if args.transfer_model:
        r = factcheck.RerankRetriever.load(args.transfer_model).fit(index, main_r.terms, main_r.context)
        m = evaluate_rerank(r, dev)
        rows.append(row(f"rerank trained on another corpus (`{args.transfer_model.name}`), applied here", m,
                        r.report.get("holdout", {}).get("evidence_f")))
        print(rows[-1], flush=True)
        notes.append("The transferred model's holdout F was measured on the corpus it was trained on. Its row "
                     "mixes two effects: any reliance on the other corpus's make-up, and a plain scale shift -- "
                     "absolute BM25 scores (`bm25`, `claim_top_bm25`) depend on corpus size and idf, and the "
                     "model's trees split on values learned at the other scale.")

    command = "python " + " ".join(shlex.quote(a) for a in ["scripts/eval_rerank.py", *(argv or sys.argv[1:])])
    hold = main_r.report["holdout"]
    lines = [
        f"# Learned reranker on `{args.evidence.name}` ({corpus}, {len(index):,} passages)",
        "",
        "```",
        command,
        "```",
        "",
        f"Trained on {len(fit)} training claims, every choice made on the {len(holdout)} holdout claims of the "
        f"fixed split (`train_holdout_split`); scored once on the {len(dev)} dev claims. Intervals: 95%, "
        "bootstrap over claims (F) or Wilson (any-gold rate).",
        "",
        "| retriever | dev evidence F [95% CI] | candidate recall@100 | ranking recall@100 | "
        "any gold returned [95% CI] | mean returned | holdout F |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
        f"* rerank minus BM25, dev evidence F (paired bootstrap): {diff.fmt()}",
        f"* candidate stage: BM25 top-{chosen['candidates']['depth']} (k1={chosen['candidates']['k1']}, "
        f"b={chosen['candidates']['b']}) + gold passages of the {chosen['candidates']['memory_k']} most similar "
        f"training claims, ordered by BM25/best BM25 + summed similarity of the citing claims; mean pool {hold['mean_pool']:.0f} passages; holdout recall of "
        f"the whole pool {hold['candidate_pool_recall']:.3f}, of its fused top-100 "
        f"{hold['candidate_recall@100']:.3f}",
        f"* chosen on the holdout: model {chosen['model']}; cut-off {chosen['cutoff']}",
        f"* training (all candidate settings and model grid, features included): {train_s:.0f} s; "
        f"`retrieve` latency per claim after warm-up (holdout claim texts): p50 {p50:.1f} ms, p90 {p90:.1f} ms",
        "* `candidate recall@100`: the candidate stage's own fused order; `ranking recall@100`: the reranked order "
        "(`rank()`); for BM25 both are BM25's ranking.",
        *[f"* {n}" for n in notes],
        "",
    ]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
