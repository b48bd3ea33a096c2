#!/usr/bin/env python3
"""Issue 13, phase 2b: the open-mode reranker (dense candidates + dense features), measured.

For one knowledge source (a tag index WITH passage vectors):

1. Selection, on the training claims only (the fixed 80/20 ``train_holdout_split``): the
   course reranker (:data:`DEFAULT_CANDIDATES`, lexical features) and every dense option
   (candidate settings in ``--dense-depths`` x memory depths; feature sets: all, lexical
   only = dense candidates alone, all but one dense memory group) are trained on the
   80% and scored by hold-out evidence F after their cut-off is tuned there. The best
   dense option is the open-mode reranker.
2. Dev, once: the chosen open reranker (label memory = every training claim, as the
   pipeline) against the course run's dev predictions (``--course-predictions``): evidence
   F, recall@100, any-gold with 95% intervals and the paired difference; plus an oracle
   analysis of both rerankers (what the candidates, the ranking and the cut-off each
   leave on the table).

Usage::

    PYTHONPATH=$PWD python scripts/open_rerank_probe.py --index /tmp/idx-proxy \\
        --course-predictions /work/ref/base/proxy-old/dev-claims-predictions.json --out out/open-rerank-proxy.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from factcheck.evaluation.course_metric import evidence_f
from factcheck.evaluation.intervals import bootstrap_mean, paired_bootstrap_diff, wilson
from factcheck.evaluation.retrieval_metrics import recall_at
from factcheck.formats.claims import read_claims, read_predictions
from factcheck.formats.files import write_json_atomic
from factcheck.formats.splits import train_holdout_split
from factcheck.pipeline.rerank_training import DEFAULT_CANDIDATES, TrainingData, train_reranker
from factcheck.retrieval.rerank import features as F
from factcheck.retrieval.rerank.candidates import CandidateConfig
from factcheck.retrieval.rerank.semantic import ALL_FEATURES, DENSE_FEATURES
from factcheck.tagging.index import TagIndex

MAX_K = 8  # the cut-off grid's largest count (rerank_training.MAX_KS)


def feature_sets() -> dict[str, list[str]]:
    return {"all": list(ALL_FEATURES), "lexical only (dense candidates)": list(F.FEATURES),
            "all but the embedding memory": [f for f in ALL_FEATURES if not f.startswith("emem_")],
            "all but the dense memory-passage cosines": [f for f in ALL_FEATURES if not f.startswith("mem_dense")]}


def select(index, fit, holdout, depths, memory_ks, log) -> tuple:
    """Train every option on ``fit``, score on ``holdout``; return (course, best open) retrievers."""
    course_best, open_best, scorer = None, None, None
    terms = context = None
    for config in DEFAULT_CANDIDATES:
        d = TrainingData(index, fit, holdout, config, terms, context, progress=False)
        terms, context = d.terms, d.context
        r = train_reranker(index, fit, holdout, data=d)
        log.append({"option": "course", "candidates": config.to_json(), "features": "lexical",
                    **r.report["holdout"]})
        print(json.dumps(log[-1]), flush=True)
        if course_best is None or r.report["holdout"]["evidence_f"] > course_best.report["holdout"]["evidence_f"] + 1e-12:
            course_best = r
    for depth in depths:
        for memory_k in memory_ks:
            config = CandidateConfig(memory_k=memory_k, dense_depth=depth)
            t0 = time.perf_counter()
            d = TrainingData(index, fit, holdout, config, terms, context, progress=False, dense=scorer)
            scorer = d.dense
            for name, feats in feature_sets().items():
                r = train_reranker(index, fit, holdout, data=d, features=feats)
                log.append({"option": "open", "candidates": config.to_json(), "features": name,
                            **r.report["holdout"], "seconds": time.perf_counter() - t0})
                print(json.dumps(log[-1]), flush=True)
                if open_best is None or r.report["holdout"]["evidence_f"] > open_best.report["holdout"]["evidence_f"] + 1e-12:
                    open_best = r
    return course_best, open_best


def dev_rows(retriever, dev) -> dict:
    """Per dev claim: returned ids, ranked ids (100), and oracle F values."""
    ids = retriever.index.ids
    texts = [c.text for c in dev]
    sel = retriever.retrieve(texts)
    ranks = retriever.rank(texts, 100)
    out = {"f": [], "r100": [], "any": 0, "returned": [], "oracle_cut": [], "oracle_rank": [], "pool_recall": []}
    for c, s, rk in zip(dev, sel, ranks):
        gold = set(c.evidences)
        out["f"].append(evidence_f(s.ids, c.evidences))
        out["r100"].append(recall_at([ids[r] for r in rk.rows.tolist()], c.evidences, 100))
        out["any"] += bool(gold & set(s.ids))
        out["returned"].append(len(s.ids))
        cands, _, order, _ = retriever.scored(c.text)
        ranked = [ids[r] for r in cands.rows[order].tolist()]
        # cut-off oracle: this ranking, the best count in 1..MAX_K for this claim
        out["oracle_cut"].append(max(evidence_f(ranked[:k], c.evidences) for k in range(1, MAX_K + 1)))
        # ranking oracle: the pool's gold passages first, exactly those returned (F = 2h / (h + n))
        h = len(gold & set(ranked))
        out["oracle_rank"].append(2 * h / (h + len(gold)) if h else 0.0)
        out["pool_recall"].append(h / len(gold))
    return out


def summary(m: dict) -> dict:
    n = len(m["f"])
    return {"evidence_f": bootstrap_mean(m["f"]).to_json(), "recall@100": bootstrap_mean(m["r100"]).to_json(),
            "any_gold": wilson(m["any"], n).to_json(), "mean_returned": float(np.mean(m["returned"])),
            "oracle": {"cutoff_oracle_f": bootstrap_mean(m["oracle_cut"]).to_json(),
                       "ranking_oracle_f": bootstrap_mean(m["oracle_rank"]).to_json(),
                       "pool_recall": bootstrap_mean(m["pool_recall"]).to_json()}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", type=Path, required=True, help="tag index with passage vectors (a copy: caches are written)")
    ap.add_argument("--data-dir", type=Path, default=Path("/work/shared/data"))
    ap.add_argument("--course-predictions", type=Path, required=True, help="the course run's dev predictions")
    ap.add_argument("--dense-depths", default="100")
    ap.add_argument("--memory-ks", default="20,50")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)

    index = TagIndex.load(args.index)
    train = read_claims(args.data_dir / "train-claims.json", require_labels=True)
    dev = read_claims(args.data_dir / "dev-claims.json", require_labels=True)
    fit, holdout = train_holdout_split(train)
    log: list[dict] = []
    course, best = select(index, fit, holdout, [int(x) for x in args.dense_depths.split(",")],
                          [int(x) for x in args.memory_ks.split(",")], log)
    chosen = {"candidates": best.report["chosen"], "features": best.model.features,
              "holdout_f": best.report["holdout"]["evidence_f"]}
    print("chosen on the hold-out:", json.dumps(chosen), flush=True)

    # ---- dev, once
    ref = read_predictions(args.course_predictions)
    ref_f = [evidence_f(ref[c.id]["evidences"], c.evidences) for c in dev]
    ref_any = sum(bool(set(ref[c.id]["evidences"]) & set(c.evidences)) for c in dev)
    m_open, m_course = dev_rows(best, dev), dev_rows(course, dev)
    result = {
        "index": str(args.index), "passages": len(index), "fit_claims": len(fit), "holdout_claims": len(holdout),
        "selection": log, "chosen": chosen,
        "dev": {"course_run": {"evidence_f": bootstrap_mean(ref_f).to_json(),
                               "any_gold": wilson(ref_any, len(dev)).to_json()},
                "course_reranker_here": summary(m_course), "open_reranker": summary(m_open),
                "open_minus_course_run_f": paired_bootstrap_diff(m_open["f"], ref_f).to_json(),
                "open_minus_course_reranker_f": paired_bootstrap_diff(m_open["f"], m_course["f"]).to_json(),
                "open_minus_course_reranker_r100": paired_bootstrap_diff(m_open["r100"], m_course["r100"]).to_json()},
        "dense_features": DENSE_FEATURES,
    }
    write_json_atomic(args.out, result)
    print(json.dumps(result["dev"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
