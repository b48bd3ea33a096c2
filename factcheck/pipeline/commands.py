"""Commands of the classification stage and the main job: train, predict, ablation, run."""

from __future__ import annotations

import json
from pathlib import Path

from factcheck.cli import add_renamed, add_tag_args, check_output_dir, check_outputs, command
from factcheck.evaluation.intervals import format_interval as _fmt
from factcheck.retrieval.registry import METHODS


@command("run", "the whole pipeline end to end on a course data directory")
def _run(p):
    p.add_argument("--data-dir", type=Path, required=True,
                   help="directory with train-claims.json, dev-claims.json, test-claims-unlabelled.json, evidence.json")
    p.add_argument("--out", type=Path, required=True, help="output directory")
    p.add_argument("--evidence", type=Path, default=None, help="knowledge source (default: DATA_DIR/evidence.json[.gz])")
    p.add_argument("--index", type=Path, default=None, help="reuse this verified tag index instead of tagging")
    p.add_argument("--method", default="auto", choices=("auto", *METHODS),
                   help="retriever (default: auto = best evidence F on the training hold-out)")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    add_tag_args(p)

    def run(args):
        from factcheck.pipeline.run import run_pipeline
        tag_args = {"top_k": args.top_k, "max_features": args.max_features, "tag_features": args.tag_features,
                    "shard_size": args.shard_size, "backend": args.backend, "scheduler": args.scheduler}
        m = run_pipeline(args.data_dir, args.out, args.evidence, args.index, args.method, args.jobs,
                         args.force, False if args.quiet else None, tag_args)
        iv = m["intervals"]
        fmt = lambda k: _fmt(iv[k])  # noqa: E731
        ret = m["run"]["retriever"]
        how = {"default": ", the default", "user": ", named with --method"}.get(ret.get("chosen_by"), "")
        print(f"dev evidence F {fmt('evidence_f')}, accuracy {fmt('accuracy')}, "
              f"harmonic mean {fmt('harmonic_mean')} (retriever: {ret['chosen']}{how})")
        print(f"wrote {args.out}/dev-claims-predictions.json, test-claims-predictions.json, metrics.json, report.md")
    return run


@command("train", "tune the retriever and train the claim classifier on training claims")
def _train(p):
    p.add_argument("--index", type=Path, required=True, help="tag index directory")
    p.add_argument("--claims", type=Path, required=True, help="training claims (course format, labelled)")
    add_renamed(p, "--model", "--model-out", required=True, type=Path, help="model directory to write")
    p.add_argument("--method", default="auto", choices=("auto", *METHODS),
                   help="retriever (default: auto = best evidence F on the training hold-out)")

    def run(args):
        from factcheck.formats.claims import read_claims
        from factcheck.pipeline.run import train_system
        from factcheck.tagging.index import TagIndex

        check_outputs([args.model], [args.index, args.claims])
        check_output_dir(args.model)
        index = TagIndex.load(args.index)
        train = read_claims(args.claims, require_labels=True)
        t = train_system(index, train, args.model, args.method, model_dir=args.model)
        print(f"{args.model}: trained on {len(train)} claims")
        print(describe("retriever " + t.candidates.best, t.system.retriever.params()))
        print(describe("classifier", _config_json(t.config)))
    return run


@command("predict", "leaderboard-format predictions (label + evidence) for a claims file")
def _predict(p):
    p.add_argument("--claims", type=Path, required=True, help="claims to predict (course format; labels not needed)")
    p.add_argument("--index", type=Path, required=True, help="tag index directory (from tag or run: OUT/index)")
    p.add_argument("--model", type=Path, required=True, help="model directory (from train or run: OUT/model)")
    p.add_argument("--out", type=Path, required=True,
                   help="predictions file to write (leaderboard format, + .explain.json beside it)")

    def run(args):
        from factcheck.formats.claims import read_claims
        from factcheck.pipeline.run import _write
        from factcheck.pipeline.fact_checker import FactChecker
        from factcheck.formats.explanations import explanations_path
        check_outputs([args.out, explanations_path(args.out)], [args.claims, args.index, args.model])
        claims = read_claims(args.claims)
        system = FactChecker.load(args.index, args.model)
        verdicts = system.check(claims)
        _write(args.out, claims, verdicts, system)
        print(f"{args.out}: {len(claims)} claim{'' if len(claims) == 1 else 's'} with labels and evidence")
    return run


@command("ablation", "the classifier on gold versus retrieved evidence, with paired tests")
def _ablation(p):
    p.add_argument("--claims", type=Path, required=True, help="labelled claims (e.g. dev-claims.json)")
    p.add_argument("--index", type=Path, required=True, help="tag index directory (from tag or run: OUT/index)")
    p.add_argument("--model", type=Path, required=True, help="model directory (from train or run: OUT/model)")
    p.add_argument("--json", action="store_true", help="print one JSON object")

    def run(args):
        from factcheck.evaluation.ablation import ablation
        from factcheck.formats.claims import read_claims
        from factcheck.pipeline.fact_checker import FactChecker
        claims = read_claims(args.claims, require_labels=True)
        system = FactChecker.load(args.index, args.model)
        verdicts = system.check(claims)
        gold = [(c.text, system.texts(c.evidences)) for c in claims]
        y = [c.label for c in claims]
        result = ablation(y, list(system.classifier.predict(gold)), [verdicts.labels[c.id] for c in claims])
        if args.json:
            print(json.dumps(result, indent=2))
            return
        for cond in ("gold", "retrieved"):
            r = result[cond]
            print(f"{cond:9} accuracy {_fmt(r['accuracy'])}  macro-F1 {_fmt(r['macro_f1'])}")
        g = result["gold_vs_retrieved"]
        print(f"gold - retrieved: {_fmt(g['accuracy_difference'])}  McNemar exact p = {g['mcnemar']['p_value']:.4g}")
    return run


def _config_json(config) -> dict:
    from factcheck.pipeline.run import _config_json as to_json
    return to_json(config)


def describe(title: str, config: dict) -> str:
    """A configuration as an indented ``setting  value`` list (not a dict dump)."""
    from factcheck.pipeline.report import config_rows
    rows = config_rows(config)
    width = max((len(k) for k, _ in rows), default=0)
    return "\n".join([f"{title}:"] + [f"  {k:<{width}}  {v}" for k, v in rows])
