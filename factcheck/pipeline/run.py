"""``factcheck run``: the whole pipeline, end to end, from a course data directory.

tag (or reuse a verified index) -> tune the tag rule and BM25 and train the reranker on
the training split -> pick the retriever with the best hold-out evidence F -> select and
train the classifier -> predict and score dev -> gold-vs-retrieved ablation -> predict
test -> metrics.json, report.md, plots. Dev is scored, never tuned on; test has no labels
and is only predicted.

``mode="open"`` (the optional extra: pretrained embeddings) adds the passage vectors
after tagging (:class:`~factcheck.tagging.vectors.PassageVectorJob`, computed once and
reused), the hybrid retriever to the candidates and dense features to the reranker
(:mod:`factcheck.training.selection`); the model records the mode. The embedding model
is the bundled one, or with ``embedding_model`` a local ONNX model
(:func:`~factcheck.text.embedding.load_embedder`); the passage vectors and the model
directory record which. ``"course"``, the default, is the course's system and never
imports the embedding package.

Outputs (all written atomically; ``metrics.json`` and ``report.md`` last)::

    OUT/index/                          the tag index (unless --index was given)
    OUT/index/vectors/                  open mode: the passage vectors (also with --index)
    OUT/model/                          classifier.skops (+ rerank.skops)
    OUT/dev-claims-predictions.json     leaderboard format (+ .explain.json)
    OUT/test-claims-predictions.json    leaderboard format (+ .explain.json)
    OUT/tuning/*.csv, OUT/plots/*.png   sweeps, confusion matrices, interval chart
    OUT/metrics.json, OUT/report.md
    OUT/run-in-progress.json            only while the run writes: its readers refuse the
                                        directory until it is gone (formats/rundir.py)

The output directory is one unit: the marker is written before the run's first write
and removed after its last, so a run stopped part-way never leaves a directory that
mixes two runs and looks complete. No symbolic link among the names above is followed.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

from factcheck.errors import InputError
from factcheck.formats.claims import (detect_claims_format, label_set, prefixed_params, read_claims,
                                     write_predictions)
from factcheck.formats.evidence import source_spec
from factcheck.formats.files import (check_no_symlinks, check_regular_file, remove_stale_temporaries, sha256_file,
                                     write_json_atomic)
from factcheck.formats.rundir import MARKER, begin_run, end_run
from factcheck.formats.splits import train_holdout_split
from factcheck.training.classifier_cv import config_json
from factcheck.system.checker import FactChecker
from factcheck.system.model_dir import save_system
from factcheck.retrieval.registry import check_method, write_retrieval
from factcheck.tagging.heap import return_freed_memory

# Stage lines ("[  12.3s] predicting dev ...") go to this logger at INFO; the CLI shows
# them on stderr as they are, a Python caller sees them only if it configures logging.
logger = logging.getLogger(__name__)


#: What a run writes directly under its output directory (none may be a symbolic link).
RUN_ENTRIES = (MARKER, "index", "model", "tuning", "plots", "metrics.json", "report.md",
               *(f"{split}-claims-predictions{ext}" for split in ("dev", "test")
                 for ext in (".json", ".explain.json", ".jsonl")))
#: What ``train`` writes into a model directory.
MODEL_ENTRIES = ("classifier.skops", "rerank.skops", "tuning")


# Where ``run`` looks in a data directory, per split: the course's names, then FEVER's
# (its distribution's names and plain ones). Two matches for one split is an error: which
# one was meant cannot be guessed.
DATA_FILES = {
    "train": ("train-claims.json", "train.jsonl"),
    "dev": ("dev-claims.json", "dev.jsonl", "shared_task_dev.jsonl", "paper_dev.jsonl"),
    "test": ("test-claims-unlabelled.json", "test.jsonl", "shared_task_test.jsonl", "paper_test.jsonl"),
    "evidence": ("evidence.json", "evidence.json.gz", "evidence.jsonl", "evidence.csv", "wiki-pages",
                 "corpus.jsonl"),
}


def find_data(data_dir: Path | None, evidence: Path | None = None, *, train: Path | None = None,
              dev: Path | None = None, test: Path | None = None) -> dict[str, Path]:
    """The four inputs of a run: each given explicitly, or found in ``data_dir`` under one
    of :data:`DATA_FILES`' names (a course directory, or FEVER's layout: ``train.jsonl``,
    ``shared_task_dev.jsonl`` or ``paper_dev.jsonl``, ... and ``wiki-pages/``)."""
    given = {"train": train, "dev": dev, "test": test, "evidence": evidence}
    if data_dir is not None:
        data_dir = Path(data_dir)
        if not data_dir.is_dir():
            raise InputError(data_dir, None, "no such data directory", param="data_dir")
    files = {}
    for key, names in DATA_FILES.items():
        if given[key] is not None:
            files[key] = Path(given[key])
            continue
        if data_dir is None:
            raise InputError(None, None, f"no {key} file: give it, or a data directory holding one of "
                             f"{', '.join(names)}", param=key)
        found = [data_dir / n for n in names if (data_dir / n).exists()]
        if not found:
            raise InputError(data_dir / names[0], None, f"missing (a data directory holds one of {', '.join(names)} "
                             f"for {key}; or name the file)", param=key)
        if len(found) > 1:
            raise InputError(data_dir, None, f"holds {' and '.join(p.name for p in found)} for {key}: "
                             "name the one to use", param=key)
        files[key] = found[0]
    return files


class Clock:
    def __init__(self, quiet: bool):
        self.quiet = quiet
        self.timings: dict[str, float] = {}
        self.start = time.perf_counter()

    def step(self, name: str):
        clock = self

        class _Step:
            def __enter__(self):
                self.t = time.perf_counter()
                if not clock.quiet:
                    logger.info("[%6.1fs] %s ...", time.perf_counter() - clock.start, name)

            def __exit__(self, *exc):
                clock.timings[name] = round(time.perf_counter() - self.t, 2)

        return _Step()


def run_pipeline(data_dir: Path | None, out: Path, evidence: Path | None = None, index_dir: Path | None = None,
                 method: str = "auto", jobs: int = -1, force: bool = False, progress: bool | None = None,
                 tag_args: dict | None = None, mode: str = "course", embedding_model=None, *,
                 train: Path | None = None, dev: Path | None = None, test: Path | None = None,
                 format: str | None = None, id_column: str | None = None, text_column: str | None = None,
                 title_column: str | None = None, index_titles: bool | None = None,
                 max_passage_chars: int | None = None, claims_format: str | None = None,
                 claims_id_column: str | None = None, claims_text_column: str | None = None,
                 claims_label_column: str | None = None, claims_evidence_column: str | None = None,
                 max_claim_chars: int | None = None) -> dict:
    """``factcheck run``: everything end to end (see the module docstring).

    ``out`` is this run's alone while it runs (a second run into it fails at once, naming
    this one's pid: without the lock both would finish, each writing part of the model,
    predictions and metrics).

    Parameters
    ----------
    data_dir : str, Path or None
        Where the inputs are found (:func:`find_data`: the course's file names or FEVER's);
        None when ``train``, ``dev``, ``test`` and ``evidence`` are all given.
    out : str or Path
        The run directory (index, model, predictions, metrics, report, plots).
    evidence : Path or None
        The knowledge source, when not the data directory's.
    index_dir : Path or None
        An existing tag index to use instead of building ``OUT/index``.
    method : str, default "auto"
        ``"auto"`` (the best hold-out evidence F) or a retriever of ``mode``'s
        (:func:`~factcheck.retrieval.registry.methods_for`).
    jobs : int, default -1
        Worker processes for tagging and cross-validation (-1: all cores).
    force : bool, default False
        Replace an index built with other settings.
    progress : bool or None
        Progress bars: None automatic, False never.
    tag_args : dict or None
        :class:`~factcheck.TagJob` settings (``top_k``, ``max_features``, ...).
    mode : {"course", "open"}, default "course"
        ``"open"`` adds the pretrained-embedding retrievers and features.
    embedding_model : None, str, Path or dict
        Open mode: a local ONNX model's directory (or its settings, see
        :func:`~factcheck.text.embedding.load_embedder`); None, the bundled model.
    train, dev, test : Path or None
        A claims file named explicitly instead of found in ``data_dir``.
    format, id_column, text_column, title_column, index_titles, max_passage_chars : optional
        How to read the knowledge source (:func:`~factcheck.formats.evidence.source_spec`'s options).
    claims_format, claims_id_column, claims_text_column, claims_label_column, claims_evidence_column : optional
        How to read the three claims files (:func:`~factcheck.formats.claims.read_claims`'s
        options, ``claims_`` in front).
    max_claim_chars : int or None
        A longer claim is an error (:func:`~factcheck.formats.claims.read_claims`).

    Returns
    -------
    dict
        The run's metrics (what ``OUT/metrics.json`` holds).

    Example
    -------
    >>> metrics = run_pipeline("data/demo", "out/demo", progress=False)   # doctest: +SKIP
    >>> metrics["evidence_f"], metrics["accuracy"]                        # doctest: +SKIP
    """
    from factcheck.tagging.backends import require_backend
    from factcheck.progress import progress_setting
    from factcheck.tagging.outdir import DirectoryLock
    if embedding_model is not None and mode != "open":
        raise InputError(None, None, "a local embedding model is for the open mode (mode open)",
                         param="embedding_model")
    # before any work: an open mode without its extra (or a bad model directory) is one line, now
    check_method(method, mode, also=("auto",), embedding_model=embedding_model)
    require_backend((tag_args or {}).get("backend", "loky"))  # so is --backend dask without its extra
    source = {"format": format, "id_column": id_column, "text_column": text_column, "title_column": title_column,
              "index_titles": index_titles, "max_passage_chars": max_passage_chars}
    claims = {"format": claims_format, "id_column": claims_id_column, "text_column": claims_text_column,
              "label_column": claims_label_column, "evidence_column": claims_evidence_column,
              "max_claim_chars": max_claim_chars}
    files = find_data(data_dir, evidence, train=train, dev=dev, test=test)
    with DirectoryLock(Path(out)), progress_setting(progress):
        check_no_symlinks(Path(out), RUN_ENTRIES)
        # What a killed run's atomic writes left (the index's and the model's: their jobs')
        remove_stale_temporaries(Path(out), RUN_ENTRIES, recursive=False)
        remove_stale_temporaries(Path(out) / "plots", ("*.png",), recursive=False)
        return _run_pipeline(data_dir, out, files, index_dir, method, jobs, force, progress, tag_args, mode,
                             embedding_model, source, claims)


def _read_claims(path, options: dict, require_labels: bool = False):
    with prefixed_params("claims_"):
        return read_claims(path, require_labels=require_labels, **options)


def _run_pipeline(data_dir: Path | None, out: Path, files: dict, index_dir: Path | None,
                  method: str, jobs: int, force: bool, progress: bool | None, tag_args: dict | None,
                  mode: str, embedding_model, source: dict, claim_options: dict) -> dict:
    from factcheck.classification.calibration import reliability
    from factcheck.evaluation.ablation import ablation
    from factcheck.evaluation.evaluate import evaluate
    from factcheck.evaluation.intervals import to_json
    from factcheck.reporting import report
    from factcheck.training import selection
    from factcheck.reporting.plots import draw_plots
    from factcheck.tagging.index import TagIndex
    from factcheck.tagging.job import TagJob

    out = Path(out)
    quiet = progress is False
    clock = Clock(quiet)
    with clock.step("reading claims"):
        train = _read_claims(files["train"], claim_options, require_labels=True)
        dev = _read_claims(files["dev"], claim_options, require_labels=True)
        test = _read_claims(files["test"], claim_options)
        labels = label_set(c.label for c in train)
        _check_labels(dev, labels, files["dev"])
        claims_format = claim_options["format"] or detect_claims_format(files["dev"])

    if index_dir is None:
        if not Path(files["evidence"]).is_dir():  # FEVER's wiki-pages/ is a directory
            check_regular_file(files["evidence"])  # before detection reads it: a FIFO would block
        spec = source_spec(files["evidence"], **source)
    else:
        for name, value in source.items():
            if value is not None:
                raise InputError(index_dir, None, "applies to the knowledge source read, and an index is "
                                 "reused as built", param=name)
    begin_run(out)  # the inputs are read: from here to end_run the directory is refused by its readers
    with clock.step("tagging the knowledge source"):
        if index_dir is None:
            index_dir = out / "index"
            TagJob(jobs=jobs, progress=progress, **(tag_args or {})).run(spec, index_dir, force=force)
        index = TagIndex.load(index_dir)
    if mode == "open":
        from factcheck.tagging.vectors import PassageVectorJob
        with clock.step("passage vectors (open mode)"):
            PassageVectorJob(jobs=jobs, progress=progress, embedding_model=embedding_model).run(
                index_dir, index.manifest)  # verified by load
    with clock.step("checking the claims' gold ids against the knowledge source"):
        index.require_gold(train, files["train"])
        index.require_gold(dev, files["dev"])

    trained = train_system(index, train, out, method, progress, clock, jobs=jobs, mode=mode)
    system, candidates, config = trained.system, trained.candidates, trained.config
    classifier, texts_of = system.classifier, index.texts_of
    # Baselines, selected by the same cross-validation (see classifier_cv).
    baselines = {"always-majority": trained.selection.majority, "claim-only": trained.selection.claim_only}

    with clock.step("predicting dev"):
        verdicts = system.check(dev)
        dev_path = out / "dev-claims-predictions.json"
        write_verdicts(dev_path, dev, verdicts, system)
        if claims_format == "fever":  # also in FEVER's own predictions format, for its scorer
            _write_fever_predictions(dev_path.with_suffix(".jsonl"), dev, verdicts)
    with clock.step("gold-versus-retrieved ablation on dev"):
        gold_X = [(c.text, texts_of(c.evidences)) for c in dev]
        retrieved_X = [(c.text, texts_of(v.explanation["classifier_read"]["ids"])) for c, v in zip(dev, verdicts)]
        y = [c.label for c in dev]
        base_preds = {name: list(m.predict(retrieved_X)) for name, m in baselines.items()}
        abl = to_json(ablation(y, list(classifier.predict(gold_X)), verdicts.labels, base_preds))
    with clock.step("predicting test"):
        test_verdicts = system.check(test)
        test_path = out / "test-claims-predictions.json"
        write_verdicts(test_path, test, test_verdicts, system)
        if claims_format == "fever":
            _write_fever_predictions(test_path.with_suffix(".jsonl"), test, test_verdicts)

    with clock.step("scoring dev (the system and every retriever)"):
        predictions = verdicts.predictions()
        metrics = evaluate(predictions, dev, {v.id: v.explanation for v in verdicts}, source=str(dev_path)).to_json()
        dev_proba = [[p.get(lab, 0.0) for lab in labels] for p in verdicts.probabilities]
        trained.selection.summary["calibration"]["dev"] = reliability([c.label for c in dev], dev_proba, labels)
        on_dev = selection.dev_scores(candidates, dev)
    metrics["run"] = {
        "data_dir": str(Path(data_dir).resolve()) if data_dir is not None else None,
        "evidence": files["evidence"].name, "mode": mode,
        "dev_sha256": sha256_file(files["dev"]),
        "index": str(Path(index_dir).resolve()), "passages": len(index),
        "retriever": {"chosen": candidates.best, "params": system.retriever.params(),
                      "holdout": candidates.holdout_scores, "chosen_by": candidates.chosen_by,
                      "holdout_claims": len(train_holdout_split(train)[1])},
        "retrievers_on_dev": on_dev,
        "classifier": {**config_json(config), "reader": candidates.reader,
                       "reader_cv": candidates.reader_scores},
        "classifier_cv": {k: v for k, v in trained.selection.summary.items() if k != "variants"},
        "ablation": abl, "timings": clock.timings,
    }
    with clock.step("plots"):
        plots = draw_plots(out, candidates, abl, metrics)
    # The steps above cover all but milliseconds; "total" is the wall time to this point
    # (writing metrics.json and report.md after it takes a few ms).
    clock.timings["total"] = round(time.perf_counter() - clock.start, 2)
    write_json_atomic(out / "metrics.json", metrics)
    (out / "report.md").parent.mkdir(parents=True, exist_ok=True)
    report.write_report(out / "report.md", metrics, plots)
    end_run(out)
    if not quiet:
        logger.info("[%6.1fs] done: %s/report.md", time.perf_counter() - clock.start, out)
    return metrics


@dataclass
class Trained:
    system: FactChecker
    candidates: object           # factcheck.training.selection.TunedRetrievers
    config: object
    train_evidence: dict
    selection: object = None     # factcheck.training.classifier_cv.ClassifierSelection


def train_system(index, train, out: Path, method: str = "auto", progress=None, clock=None,
                 model_dir: Path | None = None, jobs: int = -1, mode: str = "course") -> Trained:
    """Tune retrievers, pick one, select and train the classifier; save the model dir
    (recording ``mode``). In the open mode the index must have its passage vectors; their
    embedding model is recorded as ``embedding_model``."""
    from factcheck.reporting import report
    from factcheck.training import selection
    from factcheck.training.classifier_cv import select_classifier

    embedding = None
    if mode == "open":
        from factcheck.tagging.vectors import read_vectors_manifest, vectors_model
        # The vectors' model (the bundled one if none yet) must load; then no vectors is
        # one line now, not after the course retrievers' sweeps.
        check_method(method, mode, also=("auto",), embedding_model=vectors_model(index.root))
        embedding = read_vectors_manifest(index.root, index.manifest)["model"]
    else:
        check_method(method, mode, also=("auto",))
    model_dir = Path(model_dir or Path(out) / "model")
    check_no_symlinks(Path(out), ("tuning",))
    check_no_symlinks(model_dir, MODEL_ENTRIES)
    remove_stale_temporaries(model_dir, MODEL_ENTRIES, recursive=False)  # a killed training's
    remove_stale_temporaries(Path(out) / "tuning", ("*.csv",), recursive=False)
    clock = clock or Clock(progress is False)
    fit, holdout = train_holdout_split(train)
    with clock.step("tuning and training retrievers on the training split"):
        candidates = selection.tune_retrievers(index, fit, holdout, out, method, progress, mode)
    retriever = candidates.retrievers[candidates.best]

    # The classifier and its reader (whose passages it reads): chosen together by repeated
    # stratified k-fold cross-validation over all training claims, reading out-of-fold
    # evidence (see factcheck.training.classifier_cv). When the hold-out was too small to
    # choose a retriever (the demo), the reader is not chosen either: the default's.
    readers = (candidates.retrievers if candidates.chosen_by != "default"
               else {candidates.best: candidates.retrievers[candidates.best]})
    return_freed_memory()  # heap freed by retriever training, before the CV's workers start
    with clock.step("classifier selection by cross-validation"):
        chosen = select_classifier(train, readers, index, jobs=jobs, progress=progress, dense=(mode == "open"))
    candidates.reader = chosen.reader
    candidates.reader_scores = {n: {"accuracy": acc} for n, acc in chosen.summary["readers"].items()}
    reader = candidates.retrievers[chosen.reader]
    meta = {"index_plan_key": index.manifest.data.get("plan_key"), "mode": mode,
            **({"embedding_model": embedding} if embedding else {}),
            "labels": [str(c) for c in chosen.model.classes_],  # what loading checks its classes against
            "classifier": config_json(chosen.config),
            "calibration": {"temperature": chosen.summary["calibration"]["temperature"]}}
    # Its own step: skops-writing the reranker and classifier takes ~1 s on the demo, a
    # quarter of the run's wall time, and the steps' timings must add up to the total.
    with clock.step("saving the model"):
        report.write_csv(out / "tuning" / "classifier-cv.csv", chosen.summary["variants"])
        save_system(model_dir, chosen.model, retriever, meta, candidates.retrievers, reader)
    system = FactChecker(index, retriever, chosen.model, {**meta, "reader": {"method": chosen.reader}}, reader)
    return Trained(system, candidates, chosen.config, chosen.evidence[chosen.reader], chosen)


def write_verdicts(path: Path, claims, verdicts, system, predictions_format: str | None = None) -> None:
    """A system's predictions and their explanations (the one sidecar schema); the
    predictions in the course format or FEVER's (default: FEVER's for a ``.jsonl`` path)."""
    by_id = verdicts.by_id
    write_retrieval(path, claims, {cid: v.evidences for cid, v in by_id.items()},
                    {cid: v.explanation for cid, v in by_id.items()}, system.retriever,
                    {cid: v.label for cid, v in by_id.items()}, predictions_format)


def _write_fever_predictions(path: Path, claims, verdicts) -> None:
    """The predictions alone in FEVER's format (beside the course-format file and its sidecar)."""
    by_id = verdicts.by_id
    write_predictions(path, claims, {cid: v.evidences for cid, v in by_id.items()},
                      {cid: v.label for cid, v in by_id.items()}, "fever")


def _check_labels(claims, labels, path) -> None:
    """Every label of ``claims`` must be one the classifier can predict (the training set's)."""
    for c in claims:
        if c.label not in labels:
            raise InputError(path, f"claim {c.id!r}", f"label {c.label!r} is not among the training claims' labels "
                             f"({', '.join(labels)})")
