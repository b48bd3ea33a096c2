"""``factcheck retrieve`` and ``factcheck evaluate``: evidence for claims, and its score."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from factcheck.cli.options import (add_claims_args, add_embedding_args, add_index_args, add_quiet_arg, add_retriever_args,
                                   check_outputs, claims_options, index_from_args, plural, positive_int,
                                   read_claims_from_args, relocate_from_args, retriever_from_args)
from factcheck.cli.terminal import field

__all__ = ["add_retrieve", "add_evaluate"]


def add_retrieve(p):
    add_index_args(p, "tag index directory (from factcheck tag)")
    p.add_argument("--claims", type=Path, required=True, help="claims file (any claims format)")
    p.add_argument("--out", type=Path, required=True, help="predictions file to write")
    from factcheck.cli.pipeline import add_predictions_format_arg
    add_predictions_format_arg(p)
    add_retriever_args(p)
    add_embedding_args(p)
    add_claims_args(p)
    add_quiet_arg(p)

    def run(args):
        from factcheck.formats.claims import explanations_path
        from factcheck.retrieval.base import run_retrieval
        from factcheck.retrieval.registry import write_retrieval
        check_outputs([args.out, explanations_path(args.out)], [args.claims, args.index, args.rerank_model])
        claims = read_claims_from_args(args, args.claims)
        index = index_from_args(args)
        relocate_from_args(args, args.index)
        retriever = retriever_from_args(args).fit(index)
        explained = run_retrieval(retriever, claims)
        sidecar = write_retrieval(args.out, claims, explained, retriever, predictions_format=args.predictions_format)
        fallback = sum(e.path == "fallback" for e in explained.values())
        print(f"{args.out}: evidence for {plural(len(claims), 'claim')} ({retriever.name}"
              + (f", {fallback} by fallback" if args.method == "tags" else "") + f"); explanations in {sidecar}")
    return run


def add_evaluate(p):
    p.add_argument("--predictions", type=Path, required=True,
                   help="predictions file (leaderboard format or FEVER's predictions JSONL, from retrieve, "
                        "predict or run)")
    p.add_argument("--groundtruth", type=Path, required=True,
                   help="labelled claims with gold evidence (any claims format, e.g. dev-claims.json)")
    p.add_argument("--explanations", type=Path, default=None,
                   help="explanations sidecar (default: PREDICTIONS with .explain.json, if present)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--metric", choices=("course", "fever"), default="course",
                   help="course: the 2024 course's evidence F, label accuracy and harmonic mean, with retrieval "
                        "metrics (default); fever: the FEVER shared task's scorer (FEVER score, label accuracy, "
                        "evidence precision/recall/F1 within the first --max-evidence predicted sentences)")
    p.add_argument("--max-evidence", type=positive_int, default=None,
                   help="with --metric fever: predicted sentences that count (default: 5, the shared task's)")
    add_claims_args(p, cap=False)  # its claims are compared, not processed

    def run(args):
        if args.metric == "fever":
            from factcheck.evaluation.fever import MAX_EVIDENCE, fever_score_files
            from factcheck.evaluation.fever import format_fever_report as report
            result = fever_score_files(args.predictions, args.groundtruth, args.max_evidence or MAX_EVIDENCE,
                                       **claims_options(args))
        elif args.max_evidence is not None:
            from factcheck.errors import InputError
            raise InputError(None, None, "only with --metric fever", param="max_evidence")
        else:
            from factcheck.evaluation.evaluate import evaluate_files
            from factcheck.evaluation.evaluate import format_report as report
            result = evaluate_files(args.predictions, args.groundtruth, args.explanations, **claims_options(args))
        for cid in result.missing:
            print(f"warning: claim {field(cid)} has no prediction; left out of the averages", file=sys.stderr)
        print(json.dumps(result.to_json(), indent=2) if args.json else report(result))
    return run
