"""``factcheck train-rerank``: the learned retriever, fitted on 80% of the training claims and
tuned on the other 20% (:func:`~factcheck.formats.splits.train_holdout_split`)."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from factcheck.cli.options import (add_claims_args, add_index_args, add_renamed, check_outputs, index_from_args, plural,
                                   read_claims_from_args)

__all__ = ["add_train_rerank"]


def add_train_rerank(p):
    add_index_args(p, "tag index directory (from factcheck tag)")
    p.add_argument("--claims", type=Path, required=True, help="labelled training claims (any claims format)")
    add_renamed(p, "--rerank-model", "--out", required=True, type=Path,
                help="reranker file to write (skops; the file `retrieve --rerank-model` reads)")
    p.add_argument("--depth", type=int, default=None, help="BM25 candidates per claim (default: 300)")
    p.add_argument("--memory-k", type=int, default=None,
                   help="similar training claims whose gold passages join the candidates "
                        "(default: 20 or 50, whichever is better on the holdout part)")
    add_claims_args(p)

    def run(args):
        from factcheck.errors import InputError
        from factcheck.formats.splits import train_holdout_split
        from factcheck.training.rerank import DEFAULT_CANDIDATES, train_reranker

        check_outputs([args.rerank_model], [args.index, args.claims])
        claims = read_claims_from_args(args, args.claims, require_labels=True)
        if len(claims) < 5:
            raise InputError(args.claims, None, f"too few claims to train on ({len(claims)}; need at least 5)")
        for name in ("depth", "memory_k"):
            value = getattr(args, name)
            if value is not None and value < (1 if name == "depth" else 0):
                raise InputError(None, None, f"must be positive, got {value}", param=name)
        index = index_from_args(args)
        index.require_gold(claims, args.claims)
        fit, holdout = train_holdout_split(claims)
        given = {k: v for k, v in (("depth", args.depth), ("memory_k", args.memory_k)) if v is not None}
        configs = list(dict.fromkeys(replace(c, **given) for c in DEFAULT_CANDIDATES)) if given else None
        # Bars on a terminal only: piped output (logs, scripts) keeps its one-line messages.
        retriever = train_reranker(index, fit, holdout, configs=configs,
                                   progress=None if sys.stderr.isatty() else False)
        retriever.save(args.rerank_model)
        r = retriever.report
        cutoff = ", ".join(f"{k} {v:g}" for k, v in r["chosen"]["cutoff"].items())
        print(f"{args.rerank_model}: reranker trained on {plural(r['fit_claims'], 'claim')}, tuned on "
              f"{r['holdout_claims']}; hold-out evidence F {r['holdout']['evidence_f']:.3f}; "
              f"cut-off: {cutoff}; took {r['timings']['total_s']:.1f} s")
    return run
