"""Issue 13, phase 1: what the open mode's dense and hybrid retrieval buy, measured on dev.

For each knowledge source (an index directory with passage vectors; build them with
``PassageVectorJob().run(INDEX)``): BM25, dense and hybrid (``max`` and ``rrf`` fusion)
are scored on every training and dev claim once. The fusion, its weight ``alpha`` and
the number of passages returned ``k`` are CHOSEN on the 1,228 training claims only
(5-fold cross-validation reports how well that choice generalises; the final choice uses
all training claims), then dev is scored once: evidence F (course metric), recall@100,
any-gold, with 95% percentile-bootstrap intervals, and paired differences against BM25
and against the course run's dev predictions. Also: per-claim dense search latency.

Usage::

    PYTHONPATH=$PWD python scripts/open_mode_probe.py --data-dir ../shared/data \\
        --corpus proxy:/tmp/idx-proxy:/work/ref/base/proxy-old/dev-claims-predictions.json:0.9:0.4 \\
        --corpus wiki:/tmp/idx-wiki:/work/ref/base/wiki/dev-claims-predictions.json:1.2:0.4 \\
        --out out/open-probe.json

``k1``/``b`` are the BM25 parameters the course run chose on the training split for that file.
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
from factcheck.retrieval.base import stable_top
from factcheck.retrieval.dense import HybridRetriever, fuse
from factcheck.tagging.index import TagIndex

KS = tuple(range(1, 11))
ALPHAS = tuple(round(a, 1) for a in np.arange(0.1, 1.0, 0.1))
DEPTH = 100
FOLDS = 5
SEED = 90042


def configs() -> list[tuple[str, str, float]]:
    """(method name, fusion, alpha) of every candidate ranking."""
    out = [("bm25", "max", 0.0), ("dense", "max", 1.0)]
    out += [("hybrid", fusion, a) for fusion in ("max", "rrf") for a in ALPHAS]
    return out


def rankings(hybrid: HybridRetriever, claims, ids) -> tuple[dict, list[float]]:
    """config -> per-claim ranked ids (depth 100); and the dense search time of each claim."""
    out = {c: [] for c in configs()}
    seconds = []
    for claim in claims:
        bm25 = hybrid.bm25_.scores(claim.text)
        t = time.perf_counter()
        dense = hybrid.dense_.scores(claim.text)
        seconds.append(time.perf_counter() - t)
        for cfg in out:
            name, fusion, alpha = cfg
            scores = bm25 if name == "bm25" else dense if name == "dense" else fuse(bm25, dense, alpha, fusion)
            out[cfg].append([ids[r] for r in stable_top(scores, DEPTH).rows.tolist()])
    return out, seconds


def f_table(ranked: dict, claims) -> dict:
    """(config, k) -> per-claim evidence F array."""
    return {(cfg, k): np.array([evidence_f(r[:k], c.evidences) for r, c in zip(lists, claims)])
            for cfg, lists in ranked.items() for k in KS}


def choose(table: dict, rows: np.ndarray, names: tuple[str, ...]):
    """The (config, k) of best mean F over ``rows``; ties to the earlier config, smaller k."""
    keys = [key for key in table if key[0][0] in names]
    return max(keys, key=lambda key: (table[key][rows].mean(), -configs().index(key[0]), -key[1]))


def cross_validate(table: dict, n: int, names: tuple[str, ...]) -> dict:
    folds = np.random.default_rng(SEED).permutation(n) % FOLDS
    held_f, picks = np.zeros(n), []
    for f in range(FOLDS):
        key = choose(table, np.flatnonzero(folds != f), names)
        picks.append(describe(key))
        held_f[folds == f] = table[key][folds == f]
    final = choose(table, np.arange(n), names)
    return {"cv_f": bootstrap_mean(held_f).to_json(), "fold_choices": picks, "chosen": describe(final),
            "train_f": float(table[final].mean()), "key": final}


def describe(key) -> dict:
    (name, fusion, alpha), k = key
    return {"method": name, "k": k, **({"fusion": fusion, "alpha": alpha} if name == "hybrid" else {})}


def probe(name: str, index_dir: Path, course_path: Path, k1: float, b: float, train, dev) -> dict:
    index = TagIndex.load(index_dir)
    t = time.perf_counter()
    hybrid = HybridRetriever(k1=k1, b=b).fit(index)
    fit_seconds = time.perf_counter() - t
    ids = index.ids
    train_ranked, _ = rankings(hybrid, train, ids)
    dev_ranked, dense_seconds = rankings(hybrid, dev, ids)
    train_f = f_table(train_ranked, train)
    dev_f = f_table(dev_ranked, dev)
    course = read_predictions(course_path)
    course_f = np.array([evidence_f(course[c.id]["evidences"], c.evidences) for c in dev])
    result = {"passages": len(index), "bm25": {"k1": k1, "b": b}, "fit_seconds": round(fit_seconds, 1),
              "course_dev_f": bootstrap_mean(course_f).to_json(), "methods": {}}
    per_claim = {}
    for method, names in (("bm25", ("bm25",)), ("dense", ("dense",)), ("hybrid", ("hybrid",))):
        cv = cross_validate(train_f, len(train), names)
        key = cv.pop("key")
        cfg, k = key
        f = dev_f[key]
        per_claim[method] = f
        lists = dev_ranked[cfg]
        result["methods"][method] = {
            **cv, "dev_f": bootstrap_mean(f).to_json(),
            "dev_recall@100": bootstrap_mean([recall_at(r, c.evidences, 100) for r, c in zip(lists, dev)]).to_json(),
            "dev_any_gold": wilson(sum(bool(set(r[:k]) & set(c.evidences)) for r, c in zip(lists, dev)),
                                   len(dev)).to_json(),
            "dev_any_gold@100": wilson(sum(bool(set(r) & set(c.evidences)) for r, c in zip(lists, dev)),
                                       len(dev)).to_json(),
        }
    # Every fusion's recall@100 on dev at the chosen alpha's neighbours: is the candidate
    # pool better even where the top-k is not?
    result["dev_recall@100_by_config"] = {
        f"{n}/{fu}/{a}": float(np.mean([recall_at(r, c.evidences, 100) for r, c in zip(dev_ranked[(n, fu, a)], dev)]))
        for (n, fu, a) in configs()}
    result["paired"] = {
        "hybrid-bm25": paired_bootstrap_diff(per_claim["hybrid"], per_claim["bm25"]).to_json(),
        "hybrid-course": paired_bootstrap_diff(per_claim["hybrid"], course_f).to_json(),
        "dense-bm25": paired_bootstrap_diff(per_claim["dense"], per_claim["bm25"]).to_json(),
    }
    ms = np.array(dense_seconds) * 1000
    result["dense_search_ms"] = {"p50": float(np.percentile(ms, 50)), "p95": float(np.percentile(ms, 95)),
                                 "mean": float(ms.mean()), "claims": len(ms)}
    t = time.perf_counter()
    for claim in dev[:50]:
        hybrid.retrieve([claim.text])
    result["hybrid_retrieve_ms_mean"] = (time.perf_counter() - t) * 1000 / min(50, len(dev))
    print(f"{name}: " + json.dumps({m: (v["chosen"], round(v["dev_f"]["value"], 3),
                                        round(v["dev_recall@100"]["value"], 3))
                                    for m, v in result["methods"].items()}), flush=True)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, required=True)
    ap.add_argument("--corpus", action="append", required=True,
                    help="NAME:INDEX_DIR:COURSE_DEV_PREDICTIONS:K1:B")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    train = read_claims(args.data_dir / "train-claims.json", require_labels=True)
    dev = read_claims(args.data_dir / "dev-claims.json", require_labels=True)
    results = {"train_claims": len(train), "dev_claims": len(dev), "folds": FOLDS, "corpora": {}}
    for spec in args.corpus:
        name, index_dir, course, k1, b = spec.split(":")
        results["corpora"][name] = probe(name, Path(index_dir), Path(course), float(k1), float(b), train, dev)
    write_json_atomic(args.out, results)


if __name__ == "__main__":
    main()
