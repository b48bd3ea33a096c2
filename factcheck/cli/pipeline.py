"""``factcheck run``, ``train``, ``predict`` and ``ablation``: the classification stage and the main job."""

from __future__ import annotations

import json
from pathlib import Path

from factcheck.cli.options import (add_backend_args, add_claims_args, add_embedding_args, add_index_args, add_mode_arg,
                                   add_pool_args, add_quiet_arg, add_reader_args, add_renamed, add_tag_args,
                                   check_output_dir, check_outputs, PREDICTION_FORMATS, claims_options,
                                   index_from_args, jobs_type, plural,
                                   pool_from_args, positive_int, read_claims_from_args, relocate_from_args,
                                   run_embedding_from_args, source_options, tag_settings)
from factcheck.retrieval.registry import ALL_METHODS

AUTO_HELP = ("retriever (default: auto = best evidence F on the training hold-out; dense, hybrid and pool need "
             "--mode open)")

__all__ = ["add_run", "add_train", "add_predict", "add_ablation", "add_predictions_format_arg", "describe"]


def add_run(p):
    p.add_argument("--data-dir", type=Path, default=None,
                   help="directory with the course's train-claims.json, dev-claims.json, test-claims-unlabelled.json "
                        "and evidence.json, or FEVER's train.jsonl, shared_task_dev.jsonl (or paper_dev.jsonl), "
                        "shared_task_test.jsonl and wiki-pages/ (docs/formats.md)")
    p.add_argument("--out", type=Path, required=True, help="output directory")
    p.add_argument("--train", type=Path, default=None, help="training claims (default: found in DATA_DIR)")
    p.add_argument("--dev", type=Path, default=None, help="dev claims, scored once (default: found in DATA_DIR)")
    p.add_argument("--test", type=Path, default=None, help="test claims, predicted (default: found in DATA_DIR)")
    p.add_argument("--evidence", type=Path, default=None,
                   help="knowledge source (default: found in DATA_DIR: evidence.json[.gz], wiki-pages/, ...)")
    p.add_argument("--index", type=Path, default=None, help="reuse this verified tag index instead of tagging")
    p.add_argument("--method", default="auto", choices=("auto", *ALL_METHODS), help=AUTO_HELP)
    add_mode_arg(p)
    add_max_tuning_claims_arg(p)
    from factcheck.formats.splits import MAX_SCORING_CLAIMS
    p.add_argument("--max-scoring-claims", type=positive_int, default=MAX_SCORING_CLAIMS, metavar="N",
                   help="dev claims on which the report scores every candidate retriever at most; beyond, a "
                        f"deterministic sample of N (default: {MAX_SCORING_CLAIMS:,}; the run's predictions are "
                        "scored on every dev claim)")
    add_max_evidence_arg(p, "; the FEVER score in metrics.json counts as many")
    add_quiet_arg(p)
    add_tag_args(p)
    add_embedding_args(p, build=True, embed_corpus=True)
    add_pool_args(p.add_argument_group("two stages (with --embedding-model, or --method pool)"), model=False)
    add_reader_args(p)
    add_claims_args(p)

    def run(args):
        from factcheck.evaluation.intervals import format_interval
        from factcheck.pipeline.run import RunConfig, run_pipeline
        config = RunConfig(
            train=args.train, dev=args.dev, test=args.test, evidence=args.evidence, index_dir=args.index,
            source=source_options(args), claims={k.removeprefix("claims_"): v for k, v in claims_options(args).items()},
            method=args.method, mode=args.mode, embedding_model=run_embedding_from_args(args),
            tagging=tag_settings(args), jobs=args.jobs, force=args.force,
            progress=False if args.quiet else None, max_tuning_claims=args.max_tuning_claims,
            max_scoring_claims=args.max_scoring_claims, max_evidence=args.max_evidence)
        m = run_pipeline(args.data_dir, args.out, config)
        iv = m["intervals"]
        ret = m["run"]["retriever"]
        how = {"default": ", the default", "user": ", named with --method"}.get(ret.get("chosen_by"), "")
        how += "; open mode" if args.mode == "open" else ""
        print(f"dev evidence F {format_interval(iv['evidence_f'])}, accuracy {format_interval(iv['accuracy'])}, "
              f"harmonic mean {format_interval(iv['harmonic_mean'])} (retriever: {ret['chosen']}{how})")
        if "fever" in m:
            fiv = m["fever"]["intervals"]
            print(f"dev FEVER score {format_interval(fiv['fever_score'])}, label accuracy "
                  f"{format_interval(fiv['label_accuracy'])} (evidence: the first {m['fever']['max_evidence']} "
                  "predicted sentences)")
        fever = " (and .jsonl in FEVER's format)" if (args.out / "dev-claims-predictions.jsonl").is_file() else ""
        print(f"wrote {args.out}/dev-claims-predictions.json, test-claims-predictions.json{fever}, metrics.json, "
              "report.md")
    return run


def add_train(p):
    add_index_args(p, "tag index directory")
    p.add_argument("--claims", type=Path, required=True, help="training claims, labelled (any claims format)")
    add_renamed(p, "--model", "--model-out", required=True, type=Path, help="model directory to write")
    p.add_argument("--method", default="auto", choices=("auto", *ALL_METHODS), help=AUTO_HELP)
    add_mode_arg(p)
    add_max_tuning_claims_arg(p)
    add_embedding_args(p)
    add_pool_args(p.add_argument_group("two stages (--method pool, with --mode open)"))
    add_claims_args(p)

    add_quiet_arg(p)
    def run(args):
        from factcheck.training.classifier_cv import config_json
        from factcheck.classification.cv import check_training_labels
        from factcheck.pipeline.run import train_system

        check_outputs([args.model], [args.index, args.claims])
        check_output_dir(args.model)
        train = read_claims_from_args(args, args.claims, require_labels=True)
        check_training_labels([c.label for c in train], args.claims)  # before the index is read
        index = index_from_args(args)
        relocate_from_args(args, args.index)
        index.require_gold(train, args.claims)
        t = train_system(index, train, args.model, args.method, model_dir=args.model, mode=args.mode,
                         max_tuning_claims=args.max_tuning_claims, pool=pool_from_args(args))
        sample = f" (a sample of {len(train)})" if len(t.claims) < len(train) else ""
        print(f"{args.model}: trained on {len(t.claims)} claims{sample} ({args.mode} mode)")
        print(describe("retriever " + t.candidates.best, t.system.retriever.params()))
        print(describe("classifier", config_json(t.selection.config)))
    return run


def add_predict(p):
    p.add_argument("--claims", type=Path, required=True, help="claims to predict (any claims format; labels not "
                   "needed)")
    add_index_args(p)
    p.add_argument("--model", type=Path, required=True, help="model directory (from train or run: OUT/model)")
    p.add_argument("--out", type=Path, required=True,
                   help="predictions file to write (+ .explain.json beside it)")
    add_predictions_format_arg(p)
    add_max_evidence_arg(p)
    p.add_argument("--method", default=None, choices=ALL_METHODS,
                   help="retriever for the evidence (default: the model's choice; any retriever the model tuned)")
    add_mode_arg(p, from_model=True)
    add_embedding_args(p)
    add_claims_args(p)
    g = p.add_argument_group("many claims (the same bytes for any --jobs or --backend)")
    g.add_argument("--batch-size", type=positive_int, default=1000, help="claims per task (default: 1000)")
    g.add_argument("--jobs", type=jobs_type, default=1,
                   help="worker processes, each loading the index and model once (default: 1 = this process)")
    add_backend_args(g)

    add_quiet_arg(p)
    def run(args):
        import contextlib

        from factcheck.evaluation.fever import MAX_EVIDENCE
        from factcheck.formats.claims import detect_claims_format
        from factcheck.formats.claims import (explained_predictions_writer, explanations_path,
                                                    predictions_format_of)
        from factcheck.pipeline.claim_batches import stream_batches
        from factcheck.system.checker import evidence_slots
        check_outputs([args.out, explanations_path(args.out)], [args.claims, args.index, args.model])
        claims = read_claims_from_args(args, args.claims)
        # FEVER's evidence slots for FEVER-format claims or predictions
        fever = "fever" in (predictions_format_of(args.out, args.predictions_format),
                            args.claims_format or detect_claims_format(args.claims))
        slots = args.max_evidence if args.max_evidence is not None else MAX_EVIDENCE if fever else None
        index_from_args(args)
        relocate_from_args(args, args.index)
        with contextlib.ExitStack() as stack:
            writer = None

            def write(batch, verdicts, spec):  # each batch as it is done: no verdict is kept
                nonlocal writer
                if writer is None:  # the files' temporaries, renamed when every batch is written
                    writer = stack.enter_context(explained_predictions_writer(args.out, spec,
                                                                              args.predictions_format))
                writer.write(batch, {v.id: evidence_slots(v, slots) for v in verdicts},
                             {v.id: v.explanation.to_json() for v in verdicts}, {v.id: v.label for v in verdicts})

            stream_batches(
                args.index, args.model, args.claims, claims, write, mode=args.mode, method=args.method,
                jobs=args.jobs, backend=args.backend, scheduler=args.scheduler, batch_size=args.batch_size,
                embedding_model=args.embedding_model,
                claims_options={k.removeprefix("claims_"): v for k, v in claims_options(args).items()})
        print(f"{args.out}: {plural(len(claims), 'claim')} with labels and evidence")
    return run


def add_ablation(p):
    p.add_argument("--claims", type=Path, required=True, help="labelled claims (e.g. dev-claims.json)")
    add_index_args(p)
    p.add_argument("--model", type=Path, required=True, help="model directory (from train or run: OUT/model)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_embedding_args(p)
    add_claims_args(p)

    add_quiet_arg(p)
    def run(args):
        from factcheck.evaluation.ablation import ablation
        from factcheck.evaluation.intervals import format_interval, to_json
        from factcheck.system.checker import FactChecker
        claims = read_claims_from_args(args, args.claims, require_labels=True)
        index_from_args(args)
        relocate_from_args(args, args.index)
        system = FactChecker.load(args.index, args.model)
        system.index.require_gold(claims, args.claims)
        verdicts = system.check(claims)
        gold = [(c.text, system.texts(c.evidences)) for c in claims]
        y = [c.label for c in claims]
        result = ablation(y, list(system.classifier.predict(gold)), verdicts.labels)
        if args.json:
            print(json.dumps(to_json(result), indent=2))
            return
        for cond in ("gold", "retrieved"):
            r = result[cond]
            print(f"{cond:9} accuracy {format_interval(r['accuracy'])}  macro-F1 {format_interval(r['macro_f1'])}")
        g = result["gold_vs_retrieved"]
        print(f"gold - retrieved: {format_interval(g['accuracy_difference'])}  "
              f"McNemar exact p = {g['mcnemar']['p_value']:.4g}")
    return run


def add_max_evidence_arg(p, more: str = "") -> None:
    p.add_argument("--max-evidence", type=positive_int, default=None, metavar="N",
                   help="FEVER's evidence slots: N evidence sentences per claim, the retriever's then the next of "
                        "its ranking (default: 5 for FEVER-format claims or predictions, else the retriever's own "
                        f"count){more}")


def add_max_tuning_claims_arg(p) -> None:
    from factcheck.formats.splits import MAX_TUNING_CLAIMS
    p.add_argument("--max-tuning-claims", type=positive_int, default=MAX_TUNING_CLAIMS, metavar="N",
                   help="training claims that tuning, classifier selection and training use at most; beyond, a "
                        f"deterministic sample of N (default: {MAX_TUNING_CLAIMS:,})")


def add_predictions_format_arg(p) -> None:
    p.add_argument("--predictions-format", choices=PREDICTION_FORMATS, default=None,
                   help="course: the leaderboard JSON; fever: FEVER's predictions JSONL, evidence as [page, line] "
                        "(default: fever for a .jsonl --out, else course)")


def describe(title: str, config: dict) -> str:
    """A configuration as an indented ``setting  value`` list (not a dict dump)."""
    from factcheck.reporting.report import config_rows
    rows = config_rows(config)
    width = max((len(k) for k, _ in rows), default=0)
    return "\n".join([f"{title}:"] + [f"  {k:<{width}}  {v}" for k, v in rows])
