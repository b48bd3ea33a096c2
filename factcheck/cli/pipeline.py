"""``factcheck run``, ``train``, ``predict`` and ``ablation``: the classification stage and the main job."""

from __future__ import annotations

import json
from pathlib import Path

from factcheck.cli.options import (add_embedding_args, add_mode_arg, add_renamed, add_tag_args, check_output_dir,
                                   check_outputs, embedding_model_from_args, relocate_from_args)
from factcheck.retrieval.registry import ALL_METHODS

AUTO_HELP = "retriever (default: auto = best evidence F on the training hold-out; dense and hybrid need --mode open)"

__all__ = ["add_run", "add_train", "add_predict", "add_ablation", "describe"]


def add_run(p):
    p.add_argument("--data-dir", type=Path, required=True,
                   help="directory with train-claims.json, dev-claims.json, test-claims-unlabelled.json, evidence.json")
    p.add_argument("--out", type=Path, required=True, help="output directory")
    p.add_argument("--evidence", type=Path, default=None, help="knowledge source (default: DATA_DIR/evidence.json[.gz])")
    p.add_argument("--index", type=Path, default=None, help="reuse this verified tag index instead of tagging")
    p.add_argument("--method", default="auto", choices=("auto", *ALL_METHODS), help=AUTO_HELP)
    add_mode_arg(p)
    p.add_argument("--quiet", action="store_true", help="no progress output")
    add_tag_args(p)
    add_embedding_args(p, build=True)

    def run(args):
        from factcheck.evaluation.intervals import format_interval
        from factcheck.pipeline.run import run_pipeline
        tag_args = {"top_k": args.top_k, "max_features": args.max_features, "tag_features": args.tag_features,
                    "shard_size": args.shard_size, "backend": args.backend, "scheduler": args.scheduler}
        m = run_pipeline(args.data_dir, args.out, args.evidence, args.index, args.method, args.jobs,
                         args.force, False if args.quiet else None, tag_args, mode=args.mode,
                         embedding_model=embedding_model_from_args(args))
        iv = m["intervals"]
        ret = m["run"]["retriever"]
        how = {"default": ", the default", "user": ", named with --method"}.get(ret.get("chosen_by"), "")
        how += "; open mode" if args.mode == "open" else ""
        print(f"dev evidence F {format_interval(iv['evidence_f'])}, accuracy {format_interval(iv['accuracy'])}, "
              f"harmonic mean {format_interval(iv['harmonic_mean'])} (retriever: {ret['chosen']}{how})")
        print(f"wrote {args.out}/dev-claims-predictions.json, test-claims-predictions.json, metrics.json, report.md")
    return run


def add_train(p):
    p.add_argument("--index", type=Path, required=True, help="tag index directory")
    p.add_argument("--claims", type=Path, required=True, help="training claims (course format, labelled)")
    add_renamed(p, "--model", "--model-out", required=True, type=Path, help="model directory to write")
    p.add_argument("--method", default="auto", choices=("auto", *ALL_METHODS), help=AUTO_HELP)
    add_mode_arg(p)
    add_embedding_args(p)

    def run(args):
        from factcheck.formats.claims import read_claims
        from factcheck.training.classifier_cv import config_json
        from factcheck.pipeline.run import train_system
        from factcheck.tagging.index import TagIndex

        check_outputs([args.model], [args.index, args.claims])
        check_output_dir(args.model)
        relocate_from_args(args, args.index)
        index = TagIndex.load(args.index)
        train = read_claims(args.claims, require_labels=True)
        t = train_system(index, train, args.model, args.method, model_dir=args.model, mode=args.mode)
        print(f"{args.model}: trained on {len(train)} claims ({args.mode} mode)")
        print(describe("retriever " + t.candidates.best, t.system.retriever.params()))
        print(describe("classifier", config_json(t.config)))
    return run


def add_predict(p):
    p.add_argument("--claims", type=Path, required=True, help="claims to predict (course format; labels not needed)")
    p.add_argument("--index", type=Path, required=True, help="tag index directory (from tag or run: OUT/index)")
    p.add_argument("--model", type=Path, required=True, help="model directory (from train or run: OUT/model)")
    p.add_argument("--out", type=Path, required=True,
                   help="predictions file to write (leaderboard format, + .explain.json beside it)")
    add_mode_arg(p, from_model=True)
    add_embedding_args(p)

    def run(args):
        from factcheck.formats.claims import read_claims
        from factcheck.formats.explanations import explanations_path
        from factcheck.system.checker import FactChecker
        from factcheck.pipeline.run import write_verdicts
        check_outputs([args.out, explanations_path(args.out)], [args.claims, args.index, args.model])
        relocate_from_args(args, args.index)
        claims = read_claims(args.claims)
        system = FactChecker.load(args.index, args.model, mode=args.mode)
        verdicts = system.check(claims)
        write_verdicts(args.out, claims, verdicts, system)
        print(f"{args.out}: {len(claims)} claim{'' if len(claims) == 1 else 's'} with labels and evidence")
    return run


def add_ablation(p):
    p.add_argument("--claims", type=Path, required=True, help="labelled claims (e.g. dev-claims.json)")
    p.add_argument("--index", type=Path, required=True, help="tag index directory (from tag or run: OUT/index)")
    p.add_argument("--model", type=Path, required=True, help="model directory (from train or run: OUT/model)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_embedding_args(p)

    def run(args):
        from factcheck.evaluation.ablation import ablation
        from factcheck.evaluation.intervals import format_interval
        from factcheck.formats.claims import read_claims
        from factcheck.system.checker import FactChecker
        relocate_from_args(args, args.index)
        claims = read_claims(args.claims, require_labels=True)
        system = FactChecker.load(args.index, args.model)
        verdicts = system.check(claims)
        gold = [(c.text, system.texts(c.evidences)) for c in claims]
        y = [c.label for c in claims]
        result = ablation(y, list(system.classifier.predict(gold)), verdicts.labels)
        if args.json:
            print(json.dumps(result, indent=2))
            return
        for cond in ("gold", "retrieved"):
            r = result[cond]
            print(f"{cond:9} accuracy {format_interval(r['accuracy'])}  macro-F1 {format_interval(r['macro_f1'])}")
        g = result["gold_vs_retrieved"]
        print(f"gold - retrieved: {format_interval(g['accuracy_difference'])}  "
              f"McNemar exact p = {g['mcnemar']['p_value']:.4g}")
    return run


def describe(title: str, config: dict) -> str:
    """A configuration as an indented ``setting  value`` list (not a dict dump)."""
    from factcheck.reporting.report import config_rows
    rows = config_rows(config)
    width = max((len(k) for k, _ in rows), default=0)
    return "\n".join([f"{title}:"] + [f"  {k:<{width}}  {v}" for k, v in rows])
