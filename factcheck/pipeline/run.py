"""``factcheck run`` end to end (docs/main-job.md): dev is scored, never tuned on; test is only
predicted. Outputs are written atomically; no symbolic link among :data:`RUN_ENTRIES` is followed.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import NamedTuple

from factcheck.errors import InputError, check_number, ref
from factcheck.formats.claims import CLAIM_OPTIONS, detect_claims_format, label_set, ordered_labels, read_claims
from factcheck.formats.evidence import SOURCE_OPTIONS, source_spec
from factcheck.formats.files import (check_no_symlinks, check_regular_file, remove_stale_temporaries, sha256_file,
                                     write_csv_atomic, write_json_atomic)
from factcheck.formats.rundir import MARKER, begin_run, end_run
from factcheck.formats.splits import MAX_SCORING_CLAIMS, MAX_TUNING_CLAIMS, train_holdout_split, tuning_subsample
from factcheck.evaluation.fever import MAX_EVIDENCE
from factcheck.classification.cv import check_training_labels
from factcheck.training.classifier_cv import config_json
from factcheck.system.checker import FactChecker, write_verdicts
from factcheck.system.model_dir import save_system
from factcheck.retrieval.registry import POOL_SETTINGS, check_method
from factcheck.tagging.heap import return_freed_memory

logger = logging.getLogger(__name__)  # the stage lines (the CLI shows them on stderr)


RUN_ENTRIES = (MARKER, "index", "model", "tuning", "plots", "metrics.json", "report.md",
               *(f"{split}-claims-predictions{ext}" for split in ("dev", "test")
                 for ext in (".json", ".explain.json", ".jsonl")))
MODEL_ENTRIES = ("classifier.skops", "rerank.skops", "tuning")


# Where ``run`` looks in a data directory, per split: the course's names, then FEVER's.
DATA_FILES = {
    "train": ("train-claims.json", "train.jsonl"),
    "dev": ("dev-claims.json", "dev.jsonl", "shared_task_dev.jsonl", "paper_dev.jsonl"),
    "test": ("test-claims-unlabelled.json", "test.jsonl", "shared_task_test.jsonl", "paper_test.jsonl"),
    "evidence": ("evidence.json", "evidence.json.gz", "evidence.jsonl", "evidence.csv", "wiki-pages",
                 "corpus.jsonl"),
}


def find_data(data_dir: Path | None, evidence: Path | None = None, *, train: Path | None = None,
              dev: Path | None = None, test: Path | None = None) -> dict[str, Path]:
    """The four inputs of a run: each given, or found in ``data_dir`` under one of :data:`DATA_FILES`."""
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
    """Stage lines (``[  12.3s] predicting dev ...``, logged at INFO) and each stage's seconds."""

    def __init__(self, quiet: bool):
        self.quiet, self.timings, self.start = quiet, {}, time.perf_counter()

    @contextlib.contextmanager
    def step(self, name: str):
        started = time.perf_counter()
        if not self.quiet:
            logger.info("[%6.1fs] %s ...", started - self.start, name)
        yield
        self.timings[name] = round(time.perf_counter() - started, 2)


@dataclass(frozen=True)
class RunConfig:
    """Every choice of a run besides its data and output directories (``factcheck run``'s options).

    Parameters
    ----------
    train, dev, test, evidence : str, Path or None
        An input named instead of found in the data directory.
    index_dir : str, Path or None
        An existing tag index to use instead of building ``OUT/index``.
    source, claims : dict
        Reader options of the knowledge source and the claims (errors name ``claims.format``, ...).
    method : str, default "auto"
        ``"auto"`` (the best hold-out evidence F) or a retriever of ``mode``'s.
    mode : {"course", "open"}, default "course"
        ``"open"`` adds the pretrained-embedding retrievers and features.
    embedding_model : None, str, Path or dict
        Open mode: a transformer (``"minilm"`` or an ONNX model directory, or a dict of its
        ``path`` and settings). It orders each claim's candidate pool
        (:class:`~factcheck.retrieval.pool.PoolRetriever`, a candidate beside the others)
        while the passage vectors are the bundled static model's. More keys of the dict: the
        pool's settings (:data:`~factcheck.retrieval.registry.POOL_SETTINGS`: ``pool_size``,
        ``combine``, ``bm25_weight``, ``dense_weight``), or ``embed_corpus: True`` to embed every
        passage with it instead (no pool). None: the bundled model only (``method="pool"``: the
        pool ordered by minilm).
    tagging : dict
        :class:`~factcheck.tagging.job.TagJob` settings.
    jobs : int, default -1
        Worker processes for tagging and cross-validation (-1: all cores).
    force : bool, default False
        Replace an index built with other settings.
    progress : bool or None
        Progress bars and stage lines: None automatic, False never.
    max_tuning_claims : int, default 10000
        Training claims that tuning and training use at most (a deterministic sample beyond).
    max_scoring_claims : int, default 5000
        Dev claims on which every candidate retriever is scored at most, for the report's table
        (a deterministic sample beyond; the run's predictions are scored on every dev claim).
    max_evidence : int or None
        Evidence ids per claim in the predictions, the retriever's then its ranking's next (FEVER's
        evidence slots), and the sentences the FEVER score counts; None: 5 for FEVER-format claims,
        else the retriever's own.

    Example
    -------
    >>> RunConfig(method="bm25", claims={"format": "jsonl"}).claims
    {'format': 'jsonl'}
    >>> RunConfig(claims={"label": "x"})
    Traceback (most recent call last):
    ...
    factcheck.errors.InputError: claims label: not a reader option; expected format, id_column, text_column, label_column, evidence_column, max_claim_chars
    """

    train: Path | None = None
    dev: Path | None = None
    test: Path | None = None
    evidence: Path | None = None
    index_dir: Path | None = None
    source: dict = field(default_factory=dict)
    claims: dict = field(default_factory=dict)
    method: str = "auto"
    mode: str = "course"
    embedding_model: object = None
    tagging: dict = field(default_factory=dict)
    jobs: int = -1
    force: bool = False
    progress: bool | None = None
    max_tuning_claims: int = MAX_TUNING_CLAIMS
    max_scoring_claims: int = MAX_SCORING_CLAIMS
    max_evidence: int | None = None

    def __post_init__(self):
        for name in ("max_tuning_claims", "max_scoring_claims", "max_evidence"):
            if getattr(self, name) is not None:
                check_number(getattr(self, name), name, integer=True, low=1)
        for name, known in (("source", SOURCE_OPTIONS), ("claims", (*CLAIM_OPTIONS, "max_claim_chars"))):
            options = getattr(self, name)
            if not isinstance(options, dict):
                raise InputError(None, None, f"expected a dict of reader options, got {type(options).__name__}",
                                 param=name)
            for key in options:
                if key not in known:
                    raise InputError(None, key, f"not a reader option; expected {', '.join(known)}", param=name)
        if isinstance(self.embedding_model, dict) and self.embedding_model.get("embed_corpus") and \
                (self.method == "pool" or set(POOL_SETTINGS) & set(self.embedding_model)):
            raise InputError(None, None, "embed_corpus embeds every passage instead of the pools: not with the "
                             f"pool retriever or its settings ({', '.join(POOL_SETTINGS)})", param="embedding_model")
        if self.embedding_model is not None and self.mode != "open":
            raise InputError(None, None, f"a local embedding model is for the open mode ({ref('mode')} open)",
                             param="embedding_model")


def run_pipeline(data_dir, out, config: RunConfig | None = None, **options) -> dict:
    """``factcheck run``: everything end to end; a second run into ``out`` fails at once.

    Parameters
    ----------
    data_dir : str, Path or None
        Where the inputs are found (:data:`DATA_FILES`); None when ``config`` names all four.
    out : str or Path
        The run directory.
    config : RunConfig or None
        The run's choices (None: the defaults).
    **options
        :class:`RunConfig` fields that replace ``config``'s (``method="bm25"``).

    Returns
    -------
    dict
        What ``OUT/metrics.json`` holds.

    Example
    -------
    >>> metrics = run_pipeline("data/demo", "out/demo", RunConfig(progress=False))   # doctest: +SKIP
    """
    from factcheck.reporting.plots import require_plots
    from factcheck.tagging.backends import require_backend
    from factcheck.progress import progress_setting
    from factcheck.tagging.outdir import DirectoryLock
    if config is not None and not isinstance(config, RunConfig):
        raise InputError(None, None, f"expected a RunConfig, got {type(config).__name__}", param="config")
    config = replace(config or RunConfig(), **options)
    # before any work: an open mode without its extra is one line, now
    vectors_model, pool = _stages(config)
    check_method(config.method, config.mode, also=("auto",), embedding_model=vectors_model)
    if pool is not None:  # the pool's model and settings too
        check_method(config.method, config.mode, also=("auto",), embedding_model=pool["model"])
        _check_pool(pool)
    require_backend(config.tagging.get("backend", "loky"))  # so is the Dask backend without its extra
    require_plots()  # and the figures without theirs
    files = find_data(data_dir, config.evidence, train=config.train, dev=config.dev, test=config.test)
    with DirectoryLock(Path(out)), progress_setting(config.progress), contextlib.ExitStack() as held:
        check_no_symlinks(Path(out), RUN_ENTRIES)
        # What a killed run's atomic writes left (the index's and the model's: their jobs')
        remove_stale_temporaries(Path(out), RUN_ENTRIES, recursive=False)
        remove_stale_temporaries(Path(out) / "plots", ("*.png",), recursive=False)
        return _run_pipeline(data_dir, Path(out), files, config, held)


def _stages(config: RunConfig) -> tuple[object, dict | None]:
    """The model the passage vectors are built with, and the pool retriever's settings (None:
    no pool retriever)."""
    model = config.embedding_model
    if config.mode != "open" or (model is None and config.method != "pool"):
        return model, None
    spec = dict(model) if isinstance(model, dict) else {"path": "minilm" if model is None else model}
    settings = {k: v for k in POOL_SETTINGS if (v := spec.pop(k, None)) is not None}
    if spec.pop("embed_corpus", False):
        return (spec if len(spec) > 1 else spec["path"]), None
    from factcheck.text.onnx_embedding import model_location
    spec["path"] = model_location(spec["path"])  # recorded in the model directory: a directory in full
    return None, {"model": spec if len(spec) > 1 else spec["path"], **settings}


def _check_pool(pool: dict | None) -> None:
    """The pool retriever's settings refused now, not when it is built after the other retrievers' sweeps."""
    if pool is not None:
        from factcheck.retrieval.pool import PoolRetriever
        PoolRetriever(**pool)._check_params()


@contextlib.contextmanager
def _grouped(group: str, options):
    """Errors naming a reader option name it as RunConfig groups it (``claims.format``)."""
    try:
        yield
    except InputError as exc:
        raise exc.renamed({o: f"{group}.{o}" for o in options}) from None


def _read_claims(path, options: dict, require_labels: bool = False):
    with _grouped("claims", CLAIM_OPTIONS):
        return read_claims(path, require_labels=require_labels, **options)


def _run_pipeline(data_dir, out: Path, files: dict, config: RunConfig, held: contextlib.ExitStack) -> dict:
    from factcheck.classification.calibration import reliability
    from factcheck.evaluation.ablation import ablation
    from factcheck.evaluation.evaluate import evaluate
    from factcheck.evaluation.fever import claims_fever_score
    from factcheck.evaluation.intervals import to_json
    from factcheck.reporting import report
    from factcheck.training import selection
    from factcheck.reporting.plots import draw_plots
    from factcheck.tagging.index import TagIndex
    from factcheck.tagging.job import TagJob
    from factcheck.tagging.outdir import DirectoryLock

    progress, jobs, mode, index_dir = config.progress, config.jobs, config.mode, config.index_dir
    clock = Clock(progress is False)
    with clock.step("reading claims"):
        train = _read_claims(files["train"], config.claims, require_labels=True)
        dev = _read_claims(files["dev"], config.claims, require_labels=True)
        test = _read_claims(files["test"], config.claims)
        labels = label_set(c.label for c in train)
        unknown = next((c for c in dev if c.label not in labels), None)
        if unknown is not None:  # the classifier can predict the training claims' labels only
            raise InputError(files["dev"], f"claim {unknown.id!r}", f"label {unknown.label!r} is not among the "
                             f"training claims' labels ({', '.join(labels)})")
        check_training_labels([c.label for c in train], files["train"])  # now, not after the retrievers' tuning

    if index_dir is None:
        if not Path(files["evidence"]).is_dir():  # FEVER's wiki-pages/ is a directory
            check_regular_file(files["evidence"])  # before detection reads it: a FIFO would block
        with _grouped("source", SOURCE_OPTIONS):
            spec = source_spec(files["evidence"], **config.source)
    else:
        for name, value in config.source.items():
            if value is not None:
                raise InputError(index_dir, None, "applies to the knowledge source read, and an index is "
                                 "reused as built", param=f"source.{name}")
    # From the first change to the directory to end_run, its readers refuse it; not before:
    # a run refused before writing anything leaves the previous run readable.
    begin = functools.cache(lambda: begin_run(out))  # on the first call only
    with clock.step("tagging the knowledge source"):
        if index_dir is None:
            index_dir = out / "index"
            with _grouped("source", SOURCE_OPTIONS):
                TagJob(jobs=jobs, progress=progress, **config.tagging).run(spec, index_dir, force=config.force,
                                                                          before_write=begin)
            # Held to the end: a `factcheck tag` into RUN/index is refused while this run reads it.
            held.enter_context(DirectoryLock(index_dir))
        index = TagIndex.load(index_dir)
    if mode == "open":
        from factcheck.tagging.vectors import PassageVectorJob
        begin()
        with clock.step("passage vectors (open mode)"):
            PassageVectorJob(jobs=jobs, progress=progress, embedding_model=_stages(config)[0]).run(
                index_dir, index.manifest)  # verified by load
    with clock.step("checking the claims' gold ids against the knowledge source"):
        index.require_gold(train, files["train"])
        index.require_gold(dev, files["dev"])

    begin()
    system, candidates, chosen, tuned_on = train_system(index, train, out, config.method, progress, clock, jobs=jobs,
                                                         mode=mode, max_tuning_claims=config.max_tuning_claims,
                                                         pool=_stages(config)[1])
    as_fever = (config.claims.get("format") or detect_claims_format(files["dev"])) == "fever"
    slots = config.max_evidence if config.max_evidence is not None else MAX_EVIDENCE if as_fever else None

    def predict(split, claims):
        with clock.step(f"predicting {split}"):
            verdicts = system.check(claims)
            return verdicts, write_verdicts(out / f"{split}-claims-predictions.json", claims, verdicts, system,
                                            also_fever=as_fever, max_evidence=slots)

    verdicts, predictions = predict("dev", dev)
    with clock.step("gold-versus-retrieved ablation on dev"):
        gold_X = [(c.text, index.texts_of(c.evidences)) for c in dev]
        read_X = [(c.text, index.texts_of(v.explanation.classifier_read["ids"])) for c, v in zip(dev, verdicts)]
        baselines = {"always-majority": chosen.majority, "claim-only": chosen.claim_only}  # chosen by the same CV
        abl = to_json(ablation([c.label for c in dev], list(system.classifier.predict(gold_X)), verdicts.labels,
                               {name: list(m.predict(read_X)) for name, m in baselines.items()}))
    predict("test", test)
    with clock.step("scoring dev (the system and every retriever)"):
        # Per label: the classifier's labels and dev's (a training label dev lacks is still predicted).
        metrics = evaluate(predictions, dev, {v.id: v.explanation for v in verdicts},
                           source=str(out / "dev-claims-predictions.json"),
                           labels=ordered_labels({c.label for c in [*train, *dev]})).to_json()
        if as_fever:  # FEVER's own score beside the course metric, on the same predictions
            metrics["fever"] = claims_fever_score(predictions, dev, slots,
                                                  str(out / "dev-claims-predictions.jsonl")).to_json()
        dev_proba = [[p.get(lab, 0.0) for lab in labels] for p in verdicts.probabilities]
        chosen.summary["calibration"]["dev"] = reliability([c.label for c in dev], dev_proba, labels)
        # the system's retriever ranked dev to the same depth while predicting it
        on_dev = selection.dev_scores(candidates, dev, {candidates.best: {v.id: v.explanation for v in verdicts}},
                                      max_claims=config.max_scoring_claims)
    metrics["run"] = {
        "data_dir": str(Path(data_dir).resolve()) if data_dir is not None else None,
        "evidence": files["evidence"].name, "mode": mode,
        "dev_sha256": sha256_file(files["dev"]),
        "index": _recorded_index(Path(index_dir), out), "passages": len(index),
        "retriever": {"chosen": candidates.best, "params": system.retriever.params(),
                      "holdout": candidates.holdout_scores, "chosen_by": candidates.chosen_by,
                      "holdout_claims": len(train_holdout_split(tuned_on)[1])},
        "training_claims": {"given": len(train), "used": len(tuned_on), "max_tuning_claims": config.max_tuning_claims},
        "retrievers_on_dev": on_dev,
        "classifier": {**config_json(chosen.config), "reader": candidates.reader,
                       "reader_cv": candidates.reader_scores},
        "classifier_cv": {k: v for k, v in chosen.summary.items() if k != "variants"},
        "ablation": abl, "timings": clock.timings,
    }
    with clock.step("plots"):
        plots = draw_plots(out, candidates, abl, metrics)
    clock.timings["total"] = round(time.perf_counter() - clock.start, 2)
    _require_same_index(index)
    write_json_atomic(out / "metrics.json", metrics)
    (out / "report.md").parent.mkdir(parents=True, exist_ok=True)
    report.write_report(out / "report.md", metrics, plots)
    end_run(out)
    if not clock.quiet:
        logger.info("[%6.1fs] done: %s/report.md", time.perf_counter() - clock.start, out)
    return metrics


def _recorded_index(index_dir: Path, out: Path) -> str:
    """The index as ``metrics.json`` records it: relative to the run directory when inside it
    (``index``), so two runs of the same input write the same bytes; else absolute."""
    index_dir, out = index_dir.resolve(), out.resolve()
    return index_dir.relative_to(out).as_posix() if index_dir.is_relative_to(out) else str(index_dir)


def _require_same_index(index) -> None:
    """Refuse to finish when the index was replaced or removed under the run (a ``factcheck tag
    --force`` into an index given with ``--index``): its results would vouch for an index no
    longer there."""
    from factcheck.tagging import store
    try:
        same = store.read_manifest(index.root).data == index.manifest.data
    except InputError:
        same = False
    if not same:
        raise InputError(index.root, None, "was replaced or removed while this run used it; rerun")


class Trained(NamedTuple):
    system: FactChecker
    candidates: object  # factcheck.training.selection.TunedRetrievers
    selection: object   # factcheck.training.classifier_cv.ClassifierSelection
    claims: list        # the training claims used (tuning_subsample's)


def train_system(index, train, out: Path, method: str = "auto", progress=None, clock=None,
                 model_dir: Path | None = None, jobs: int = -1, mode: str = "course",
                 max_tuning_claims: int = MAX_TUNING_CLAIMS, pool: dict | None = None) -> Trained:
    """Tune retrievers, pick one, select and train the classifier; save the model directory.
    Beyond ``max_tuning_claims`` training claims, all of it uses a deterministic sample of them."""
    from factcheck.training import selection
    from factcheck.training.classifier_cv import select_classifier

    embedding = None
    if mode == "open":
        from factcheck.tagging.vectors import read_vectors_manifest, vectors_model
        # The vectors' model must load: no vectors is one line now, not after the sweeps.
        check_method(method, mode, also=("auto",), embedding_model=vectors_model(index.root))
        embedding = read_vectors_manifest(index.root, index.manifest)["model"]
    else:
        check_method(method, mode, also=("auto",))
    model_dir = Path(model_dir or Path(out) / "model")
    check_no_symlinks(Path(out), ("tuning",))
    check_no_symlinks(model_dir, MODEL_ENTRIES)
    remove_stale_temporaries(model_dir, MODEL_ENTRIES, recursive=False)  # a killed training's
    remove_stale_temporaries(Path(out) / "tuning", ("*.csv",), recursive=False)
    _check_pool(pool)
    clock = clock or Clock(progress is False)
    # Tuning, cross-validation and training grow with the claims: bounded here, the course's unaffected.
    train = tuning_subsample(train, max_tuning_claims)
    fit, holdout = train_holdout_split(train)
    with clock.step("tuning and training retrievers on the training split"):
        candidates = selection.tune_retrievers(index, fit, holdout, out, method, progress, mode, pool, jobs=jobs)
    retriever = candidates.retrievers[candidates.best]

    # The classifier and its reader chosen together by cross-validation (training.classifier_cv);
    # a hold-out too small to choose a retriever (the demo) chooses no reader either.
    readers = (candidates.retrievers if candidates.chosen_by != "default"
               else {candidates.best: candidates.retrievers[candidates.best]})
    return_freed_memory()  # heap freed by retriever training, before the CV's workers start
    with clock.step("classifier selection by cross-validation"):
        chosen = select_classifier(train, readers, index, jobs=jobs, progress=progress, dense=(mode == "open"),
                                   evidence=candidates.evidence)
    candidates.reader = chosen.reader
    candidates.reader_scores = {n: {"accuracy": acc} for n, acc in chosen.summary["readers"].items()}
    reader = candidates.retrievers[chosen.reader]
    meta = {"index_plan_key": index.manifest.data.get("plan_key"), "mode": mode,
            **({"embedding_model": embedding} if embedding else {}),
            "labels": [str(c) for c in chosen.model.classes_],  # what loading checks its classes against
            "classifier": config_json(chosen.config),
            "calibration": {"temperature": chosen.summary["calibration"]["temperature"]}}
    with clock.step("saving the model"):  # ~1 s of the demo's 4: the timings must add up
        variants = chosen.summary["variants"]
        write_csv_atomic(out / "tuning" / "classifier-cv.csv", list(variants[0]), variants)
        save_system(model_dir, chosen.model, retriever, meta, candidates.retrievers, reader)
    system = FactChecker(index, retriever, chosen.model, reader, meta={**meta, "reader": {"method": chosen.reader}})
    return Trained(system, candidates, chosen, train)
