"""``factcheck train-rerank``: the learned retriever, fitted on 80% of the training claims and
tuned on the other 20% (:func:`~factcheck.formats.splits.train_holdout_split`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from factcheck.cli.options import (add_claims_args, add_index_args, add_quiet_arg, add_renamed, check_outputs,
                                   index_from_args, non_negative_int, plural, positive_int, read_claims_from_args)

__all__ = ["add_train_rerank"]


def add_train_rerank(p):
    add_index_args(p, "tag index directory (from factcheck tag)")
    p.add_argument("--claims", type=Path, required=True, help="labelled training claims (any claims format)")
    add_renamed(p, "--rerank-model", "--out", required=True, type=Path,
                help="reranker file to write (skops; the file `retrieve --rerank-model` reads)")
    add_renamed(p, "--k", "--depth", type=positive_int, default=None, metavar="N",
                help="BM25 candidates ranked per claim for the reranker (default: 300)")
    p.add_argument("--memory-k", type=non_negative_int, default=None,
                   help="similar training claims whose gold passages join the candidates "
                        "(default: 20 or 50, whichever is better on the holdout part)")
    add_claims_args(p)
    add_quiet_arg(p)

    def run(args):
        from factcheck.errors import InputError
        from factcheck.formats.splits import train_holdout_split
        from factcheck.training.rerank import DEFAULT_CANDIDATES, train_reranker

        check_outputs([args.rerank_model], [args.index, args.claims])
        claims = read_claims_from_args(args, args.claims, require_labels=True)
        if len(claims) < 5:
            raise InputError(args.claims, None, f"too few claims to train on ({len(claims)}; need at least 5)")
        index = index_from_args(args)
        index.require_gold(claims, args.claims)
        fit, holdout = train_holdout_split(claims)
        given = {k: v for k, v in (("depth", args.k), ("memory_k", args.memory_k)) if v is not None}
        configs = list(dict.fromkeys(replace(c, **given) for c in DEFAULT_CANDIDATES)) if given else None
        retriever = train_reranker(index, fit, holdout, configs=configs)  # bars on a terminal only
        retriever.save(args.rerank_model)
        r = retriever.report
        cutoff = ", ".join(f"{k} {v:g}" for k, v in r["chosen"]["cutoff"].items())
        print(f"{args.rerank_model}: reranker trained on {plural(r['fit_claims'], 'claim')}, tuned on "
              f"{r['holdout_claims']}; hold-out evidence F {r['holdout']['evidence_f']:.3f}; "
              f"cut-off: {cutoff}; took {r['timings']['total_s']:.1f} s")
    return run
