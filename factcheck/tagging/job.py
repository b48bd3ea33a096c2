"""The offline tagging job: split -> count (map) -> vocabulary -> tag (map) -> finish
(docs/tagging.md). Each shard's output is recorded "done" with the key of everything it
depends on, so a rerun skips exactly the shards whose record and bytes match.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from factcheck.errors import InputError, Interval, validate_params
from factcheck.formats.evidence import SourceSpec, as_source, iter_passage_records
from factcheck.formats.files import crashpoint, read_record, write_json_atomic
from factcheck.tagging import outdir, store
from factcheck.tagging.backends import WorkerPool, require_backend
from factcheck.tagging.memory import index_record, vocabulary_arrays
from factcheck.tagging.tasks import count_shard, read_counts, tag_shard, warm_up
from factcheck.tagging.vocabulary import TermStats, Vocabulary

__all__ = ["TagJob", "TagParams"]

log = logging.getLogger(__name__)


# Start the workers early only for inputs of more than this many bytes a passage of a shard.
WARM_UP_BYTES = 32


@dataclass(frozen=True)
class TagParams:
    """Everything that changes the output bytes (jobs and backend do not)."""

    _parameter_constraints = {"top_k": Interval(int, 1), "max_features": Interval(int, 1),
                              "tag_features": Interval(int, 1), "shard_size": Interval(int, 1)}
    top_k: int = 10
    max_features: int = 20000
    tag_features: int = 1000
    shard_size: int = 100_000

    def validate(self) -> None:
        validate_params(self)


class TagJob:
    """Build (or resume, or verify) a tag index for one knowledge source.

    Parameters
    ----------
    top_k, max_features, tag_features, shard_size : int
        The knobs of :class:`TagParams` (they change the output bytes).
    jobs : int
        Worker processes (joblib's convention: -1 = all cores).
    backend : {"loky", "dask"}
        Local processes, or a Dask cluster.
    scheduler : str or None
        A Dask scheduler address; none starts a local cluster.
    progress : bool or None
        Progress bars and messages: None on a terminal only, False never, True always.
    report : callable or None
        Receives each one-line message about the output directory (None: they are logged).

    Example
    -------
    >>> from factcheck.formats.evidence import source_spec
    >>> manifest = TagJob(progress=False).run(source_spec("data/demo/evidence.json"), "idx")  # doctest: +SKIP
    """

    # scikit-learn's conventions without BaseEstimator: the tagging driver never imports scikit-learn.
    # The four knobs' defaults are TagParams's (declared once, there).
    def __init__(self, top_k=TagParams.top_k, max_features=TagParams.max_features,
                 tag_features=TagParams.tag_features, shard_size=TagParams.shard_size, jobs=1, backend="loky",
                 scheduler=None, progress=None, report: Callable[[str], None] | None = None):
        self.top_k = top_k
        self.max_features = max_features
        self.tag_features = tag_features
        self.shard_size = shard_size
        self.jobs = jobs
        self.backend = backend
        self.scheduler = scheduler
        self.progress = progress
        self.report = report

    def run(self, source, out: Path, force: bool = False, *, format: str | None = None,
            id_column: str | None = None, text_column: str | None = None, title_column: str | None = None,
            index_titles: bool | None = None, max_passage_chars: int | None = None,
            before_write: Callable[[], None] | None = None) -> store.Manifest:
        """Build the index of ``source`` in ``out``, resume a partial one, or verify a complete one.

        Parameters
        ----------
        source : SourceSpec, str or Path
            The knowledge source (a path is read with the reader options below).
        out : str or Path
            The index directory (this run's alone while it runs).
        force : bool, default False
            Replace an index of other input or settings instead of refusing. The new index is
            built beside the old one, which stays whole until the new one is complete.
        format, id_column, text_column, title_column, index_titles, max_passage_chars
            How to read ``source`` (:func:`~factcheck.formats.evidence.source_spec`).
        before_write : callable or None
            Called once, after every refusal that needs nothing written and just before the
            first change to what ``out`` holds (a run directory marks itself unfinished there).

        Returns
        -------
        Manifest
            The complete index's manifest.
        """
        source = as_source(source, "source", format=format, id_column=id_column, text_column=text_column,
                           title_column=title_column, index_titles=index_titles, max_passage_chars=max_passage_chars)
        out = Path(out)
        self._params = TagParams(self.top_k, self.max_features, self.tag_features, self.shard_size)
        self._params.validate()
        require_backend(self.backend)  # before the output directory exists
        self._input_refused = False
        self._before_write = before_write or (lambda: None)
        with outdir.DirectoryLock(out):
            self._building = out  # or its outdir.REPLACEMENT
            try:
                with WorkerPool(self.backend, self.jobs, self.scheduler, keep_heap=True) as self._pool:
                    return self._run(source, out, force)
            except BaseException as exc:
                # Nothing written from a refused input can serve a rerun; any other failure
                # keeps the finished shards and drops the ``.tmp-*`` files of workers killed mid-write.
                if isinstance(exc, InputError) and self._input_refused:
                    outdir.wipe(self._building) if self._building == out else outdir.discard(self._building)
                else:
                    outdir.remove_temporaries(self._building)
                raise

    def _run(self, source: SourceSpec, out: Path, force: bool) -> store.Manifest:
        out = Path(out)
        plan = {
            "format": store.MANIFEST_FORMAT,
            "params": asdict(self._params),
            "input": input_record(source),
        }
        plan_key = store.content_key(plan)
        done = outdir.prepare(out, plan, plan_key, force, self._say, self._before_write)
        if done is not outdir.REPLACE:
            return done or self._build(source, out, plan, plan_key)
        # The old index stays whole until the new one is: a refused input or a failure leaves it as it was.
        self._building = out / outdir.REPLACEMENT
        if (out / store.MANIFEST).is_file():
            manifest = (outdir.prepare(self._building, plan, plan_key, True, self._say)
                        or self._build(source, self._building, plan, plan_key))
        else:  # stopped while moving a complete replacement in: part of it is in ``out`` already
            manifest = None
        self._before_write()
        outdir.replace_index(out, self._building)
        return manifest or store.verify_index(out)

    def _build(self, source: SourceSpec, out: Path, plan: dict, plan_key: str) -> store.Manifest:
        if plan["input"]["bytes"] > WARM_UP_BYTES * self._params.shard_size:
            self._pool.warm_up(warm_up)  # workers import while this process reads the input
        self._pool.check_shared(out / store.WORK_DIR / "plan.json")  # before the long split
        shards, stats = self._split_and_count(source, out, plan_key)
        crashpoint("after-count")
        vocab = Vocabulary.from_stats(stats, self._params.max_features)
        if not vocab.terms:  # nothing to tag, and no tag model could be fitted: refuse, don't crash
            self._input_refused = True
            raise InputError(source.path, None, "no passage contains a word to tag "
                             "(every text is empty, stop words or numbers)")
        tags_key = store.content_key(plan_key, vocab.digest())
        self._tag(out, shards, vocab, tags_key)
        crashpoint("after-tag")
        return self._finish(out, plan, plan_key, shards, vocab, source)

    def _split_and_count(self, source: SourceSpec, out: Path, plan_key: str) -> tuple[list[dict], TermStats]:
        """Split the input into passage shards, each counted as soon as it is written, merged in
        input order (docs/decisions.md, "Splitting and counting overlap")."""
        shards: list[dict] = []
        stats = TermStats.empty()
        merged: set[int] = set()
        root = str(out.resolve())  # absolute: a remote worker's working directory is not ours

        def merge(shard: int) -> None:
            if shard in merged:
                raise AssertionError(f"shard {shard} merged twice")  # the totals would count it twice
            terms, c = read_counts(out, shard)
            stats.add(terms, c["totals"], c["doc_freq"], len(c["indptr"]) - 1)
            merged.add(shard)

        def count_tasks():
            for shard in self._split(source, out, plan_key, shards):
                if not store.is_done(out, store.counts_name(shard), plan_key):
                    yield root, shard, plan_key, source.index_titles
        self._pool.stream(count_shard, count_tasks(), desc="reading and counting terms", progress=self.progress,
                          on_done=lambda args: merge(args[1]))  # args: count_tasks' (root, shard, key, titles)
        for s in shards:  # counted by an earlier run
            if s["shard"] not in merged:
                merge(s["shard"])
        return shards, stats

    def _split(self, source: SourceSpec, out: Path, plan_key: str, shards: list[dict]):
        """Fill ``shards`` with the passage shards of ``source``, yielding each number once on disk."""
        split_path = out / store.WORK_DIR / "split.json"
        try:
            split = read_record(out, f"{store.WORK_DIR}/split.json")
            resumed = split.get("key") == plan_key and all(
                store.is_done(out, store.passages_name(s["shard"]), plan_key) for s in split["shards"])
        except (InputError, KeyError, TypeError):  # not ours: split again
            resumed = False
        if resumed:
            shards += split["shards"]
            crashpoint("after-split")
            yield from (s["shard"] for s in shards)
            return
        size = self._params.shard_size
        pending: tuple[list[str], list[str], list[str]] = ([], [], [])  # ids, texts, titles

        def flush():
            shard, start = len(shards), sum(s["count"] for s in shards)
            name = store.passages_name(shard)
            if not store.is_done(out, name, plan_key):
                titles = pending[2] if source.has_titles else None
                store.mark_done(out, name, plan_key, store.write_passages(out / name, *pending[:2], titles))
            shards.append({"shard": shard, "start": start, "count": len(pending[0])})
            for column in pending:
                column.clear()
            return shard

        for batch in self._records(source):
            at, n = 0, len(batch[0])
            while at < n:
                take = min(size - len(pending[0]), n - at)
                for column, new in zip(pending, batch):
                    column.extend((new or [])[at:at + take])  # a source without titles: None
                at += take
                if len(pending[0]) == size:
                    yield flush()
        if pending[0]:
            yield flush()
        # Only now is the input known to be whole; shards beyond its end belong to nobody.
        for path in sorted((out / store.PASSAGES_DIR).glob("passages-*"))[len(shards):]:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
        write_json_atomic(split_path, {"key": plan_key, "shards": shards})
        crashpoint("after-split")

    def _records(self, source: SourceSpec):
        """The ``(ids, texts, titles)`` batches of ``source``; a refused input is remembered."""
        try:
            yield from iter_passage_records(source)
        except InputError:
            self._input_refused = True
            raise

    def _tag(self, out: Path, shards: list[dict], vocab: Vocabulary, tags_key: str) -> None:
        todo = [s["shard"] for s in shards if not store.is_done(out, store.tags_name(s["shard"]), tags_key)]
        payload = (vocab.terms, vocab.idf, self._params.top_k)
        root = str(out.resolve())
        self._pool.map(tag_shard, [(root, shard, tags_key) for shard in todo],
                       common=payload, desc="tagging", progress=self.progress)  # tag_shard(..., payload)

    def _finish(self, out: Path, plan: dict, plan_key: str, shards: list[dict], vocab: Vocabulary,
                source: SourceSpec):
        n = sum(s["count"] for s in shards)
        tag_counts = np.zeros(len(vocab.terms), dtype=np.int64)
        entries, files = [], {}
        for s in shards:
            tname, pname = store.tags_name(s["shard"]), store.passages_name(s["shard"])
            for name in (pname, tname):
                files.update({f"{name}/{f}": entry for f, entry in store.recorded_files(out, name).items()})
            t = store.read_checked(out, tname, "tags", store.recorded_files(out, tname),
                                   columns=len(vocab.terms), top_k=self._params.top_k)
            tag_counts += np.bincount(t["terms"], minlength=len(vocab.terms))
            entries.append({"shard": s["shard"], "start": s["start"], "passages": s["count"],
                            "empty_tags": int(np.count_nonzero(np.diff(t["indptr"]) == 0))})
        arrays, tag_terms = vocabulary_arrays(vocab, tag_counts, n, self._params.tag_features)
        vocab_files = store.write_arrays(out / store.VOCABULARY_DIR, "vocabulary", arrays)
        files.update({f"{store.VOCABULARY_DIR}/{f}": entry for f, entry in vocab_files.items()})
        # The id lookup's sorted hashes, once here rather than at every open (a sort of every
        # id). The readers refuse a repeated id with its line; this checks the shards as written.
        passages = [store.open_arrays(out, store.passages_name(s["shard"]), "passages",
                                      store.recorded_files(out, store.passages_name(s["shard"]))) for s in shards]
        hashes, rows = store.unique_ids(out, store.Manifest({"shards": entries}), passages)
        del passages
        id_files = store.write_arrays(out / store.IDS_DIR, "ids", {"hashes": hashes, "rows": rows})
        files.update({f"{store.IDS_DIR}/{f}": entry for f, entry in id_files.items()})
        del hashes, rows
        manifest = {**index_record(plan, plan_key, entries, source.has_titles, source.has_titles and source.index_titles,
                                   vocab, tag_terms), "files": dict(sorted(files.items()))}
        listed = {name.rpartition("/")[0] for name in files}
        for sub in (store.PASSAGES_DIR, store.TAGS_DIR):  # a stray shard would fail verification: drop it
            for path in (out / sub).glob(f"{sub}-*"):
                if f"{sub}/{path.name}" not in listed and path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
        crashpoint("before-manifest")
        store.write_manifest(out, manifest)
        crashpoint("after-manifest")
        shutil.rmtree(out / store.WORK_DIR, ignore_errors=True)
        return store.Manifest(manifest)

    def _say(self, message: str) -> None:
        if self.progress is False:
            return
        if self.report is None:
            log.info("%s", message)
        else:
            self.report(message)


def build_index(evidence, out=None, *, format: str | None = None, id_column: str | None = None,
                text_column: str | None = None, title_column: str | None = None, index_titles: bool | None = None,
                max_passage_chars: int | None = None, top_k: int = TagParams.top_k,
                max_features: int = TagParams.max_features, tag_features: int = TagParams.tag_features,
                shard_size: int = TagParams.shard_size, jobs: int = 1, backend: str = "loky",
                scheduler: str | None = None, force: bool = False, progress: bool | None = None):
    """Tag a knowledge source, in memory or into ``out`` (reusing the index already there), and open it.

    Parameters
    ----------
    evidence : str, Path, SourceSpec, list of str, dict of str to str, or pandas.DataFrame
        The knowledge source: a file in any format :func:`factcheck.formats.evidence.source_spec`
        reads, or passages in memory (:func:`~factcheck.formats.evidence.read_collection`):
        texts (ids ``"0"``, ``"1"``, ...), id -> text, or a DataFrame's columns.
    out : str, Path or None, default None
        The index directory: a complete index of the same input and parameters is reused,
        a partial one resumed. None: the index is built and kept in memory, no file written
        (:meth:`~factcheck.TagIndex.save` writes it later).
    format, id_column, text_column, title_column, index_titles, max_passage_chars
        How to read ``evidence`` (:func:`~factcheck.formats.evidence.source_spec`; for a
        DataFrame, its columns).
    top_k, max_features, tag_features, shard_size
        The tagging knobs (:class:`TagParams`).
    jobs, backend, scheduler, force, progress
        As for :class:`TagJob` (``force`` replaces an index built with other settings); an
        index built in memory is tagged in this process.

    Returns
    -------
    TagIndex

    Example
    -------
    >>> index = build_index(["Sea levels are rising.", "Arctic sea ice is shrinking.", "Crops grow."])
    >>> len(index), index.root, index.tags(1)
    (3, None, ['arctic', 'ice', 'shrink', 'sea'])
    >>> index = build_index("data/demo/evidence.json", "out/demo-index", progress=False)  # doctest: +SKIP
    >>> arxiv = build_index("arxiv-abstracts.csv", "out/arxiv-index", id_column="index",
    ...                     text_column="abstract", title_column="title")  # doctest: +SKIP
    """
    from factcheck.formats.evidence import is_collection, read_collection
    from factcheck.tagging.index import TagIndex
    from factcheck.tagging.memory import build_in_memory

    options = {"format": format, "id_column": id_column, "text_column": text_column, "title_column": title_column,
               "index_titles": index_titles, "max_passage_chars": max_passage_chars}
    params = TagParams(top_k, max_features, tag_features, shard_size)
    if is_collection(evidence):
        ids, texts, titles, index_titles = read_collection(evidence, "evidence", **options)
        index = TagIndex(None, *build_in_memory(ids, texts, titles, index_titles, params))
        if out is not None:
            index.save(out, force=force)
            return TagIndex.load(out)
        return index
    source = as_source(evidence, "evidence", **options)
    if out is None:
        params.validate()
        ids, texts, titles = [], [], ([] if source.has_titles else None)
        for batch_ids, batch_texts, batch_titles in iter_passage_records(source):
            ids += batch_ids
            texts += batch_texts
            if titles is not None:
                titles += batch_titles
        return TagIndex(None, *build_in_memory(ids, texts, titles, source.index_titles, params, input_record(source)))
    TagJob(top_k=top_k, max_features=max_features, tag_features=tag_features, shard_size=shard_size, jobs=jobs,
           backend=backend, scheduler=scheduler, progress=progress).run(source, Path(out), force=force)
    return TagIndex.load(out)


def input_record(source: SourceSpec) -> dict:
    """What a manifest records about its input file (what changes the index's bytes)."""
    return {**source.describe(), "sha256": source.sha256(), "bytes": source.size()}
