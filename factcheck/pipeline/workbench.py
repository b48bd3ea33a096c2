"""The retrieval workbench for any id + text collection, without claims or a trained system:
the self-retrieval test, free-text search and judged queries.

A document scoring exactly 0 shares nothing with the query and is left out of a run: a
ranking fills its depth with such documents in corpus order, which would "find" the first
rows' own documents.
"""

from __future__ import annotations

import gc
import logging
import os
import tempfile
from contextlib import contextmanager, nullcontext
import time
import warnings
from dataclasses import dataclass, replace
from pathlib import Path

from factcheck.errors import FactcheckWarning, InputError, check_number
from factcheck.evaluation.intervals import Metric, Result
from factcheck.evaluation.ir_metrics import DEFAULT_KS, judged_metrics
from factcheck.formats.evidence import SourceSpec, as_source, is_collection, iter_passage_batches
from factcheck.formats.files import write_json_atomic, write_text_atomic
from factcheck.formats.qrels import check_trec_id, write_trec_run
from factcheck.formats.records import MAX_QUERY_CHARS, check_length, length_cap, shown
from factcheck.retrieval.registry import check_method, make_retriever
from factcheck.scoring.topk import DEPTH

__all__ = ["SELFTEST_METHODS", "SELF_KS", "JudgedRetrieval", "SelfRetrieval", "SelfRetrievalRun",
           "judged_retrieval", "rank_queries", "read_query_column", "search",
           "self_retrieval", "write_self_retrieval"]

logger = logging.getLogger(__name__)

#: What a self-retrieval test runs by default (the open mode adds dense and hybrid).
SELFTEST_METHODS = ("tfidf", "bm25")
OPEN_SELFTEST_METHODS = ("dense", "hybrid")
SELFTEST_FILES = ("selftest.json", "selftest.md")
SELF_KS = (1, 5, 10)
# Queries ranked at a time (progress steps; a retriever may batch inside one).
QUERY_BATCH = 1000


@dataclass
class SelfRetrievalRun(Result):
    """One retriever's self-retrieval test (whole documents or chunks)."""

    method: str
    units: str
    chunk_window: int | None
    chunk_overlap: int | None
    indexed_units: int
    spec: dict
    metrics: dict[str, Metric]
    no_match: int
    seconds: dict


@dataclass
class SelfRetrieval(Result):
    """:func:`self_retrieval`'s result: one :class:`SelfRetrievalRun` per (method, units)."""

    corpus: dict
    queries: int
    skipped_empty: int
    ks: list
    depth: int
    mode: str
    analyzer: str
    results: list[SelfRetrievalRun]


@dataclass
class JudgedRetrieval(Result):
    """:func:`judged_retrieval`'s result (``judged_not_in_index``: relevant, never findable)."""

    queries: int
    skipped_unjudged: int
    judged_not_in_index: int
    depth: int
    retriever: dict
    no_match: int
    metrics: dict[str, Metric]


def rank_queries(retriever, queries: dict[str, str], k: int = DEPTH, progress: bool | None = None) -> dict:
    """``{qid: [(docid, score), ...]}``: each query's top ``k`` documents, those scoring 0 left out.

    Parameters
    ----------
    retriever : Retriever
        Fitted; a chunked one answers with documents.
    queries : dict
        ``{qid: text}``.
    k : int
        Documents ranked per query.
    progress : bool or None
        A progress bar (``None``: on a terminal).

    Returns
    -------
    dict

    Example
    -------
    >>> import factcheck
    >>> index = factcheck.build_index("data/demo/evidence.json", "out/demo-index", progress=False)
    >>> tfidf = factcheck.TfidfRetriever().fit(index)
    >>> run = rank_queries(tfidf, {"q1": "Sea levels are rising.", "q2": "Arctic ice is melting."}, k=3)
    >>> [(docid, round(score, 3)) for docid, score in run["q1"]]
    [('evidence-8', 0.5), ('evidence-39', 0.287), ('evidence-7', 0.28)]
    """
    from factcheck.progress import progress as progress_bar

    qids, texts = list(queries), list(queries.values())
    run: dict[str, list[tuple[str, float]]] = {}
    with progress_bar(total=len(qids), desc=f"ranking ({retriever.name})", unit="queries", enabled=progress,
                      leave=False) as bar, cyclic_gc_paused():
        for at in range(0, len(qids), QUERY_BATCH):
            batch = texts[at:at + QUERY_BATCH]
            for qid, ranking in zip(qids[at:at + QUERY_BATCH], retriever.rank(batch, k)):
                pairs = list(zip(ranking.ids, ranking.scores))  # in C: most hold no 0 (0.0: a float compares fast)
                run[qid] = [p for p in pairs if p[1] != 0] if 0.0 in ranking.scores else pairs
            bar.update(len(batch))
    return run


@contextmanager
def cyclic_gc_paused():
    """Python's cyclic garbage collector paused inside, then as it was: a run's hundred
    ``(id, score)`` pairs a query, none in a cycle, had it walk the young pairs again and
    again (a quarter to a third of the ranking's CPU on a 3,397-query run)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def read_query_column(source: SourceSpec, query_column: str) -> tuple[list[str], list[str]]:
    """(ids, query texts) of every row of a CSV or JSONL source, read by its own reader."""
    # A fixed-field format would read its text field whatever the column asked for.
    if source.format not in ("csv", "jsonl"):
        raise InputError(source.path, None, f"a self-retrieval test reads its queries from a column: give a "
                         f"CSV or JSONL collection, not {source.format}", param="query_column")
    indexed = {source.id_column, source.text_column}
    if getattr(source, "index_titles", False):  # a title indexed with the text is no query either
        indexed.add(getattr(source, "title_column", None))
    if query_column in indexed:
        raise InputError(None, query_column, "the query column must not be the id or an indexed column "
                         "(a query that is the indexed text finds itself trivially)", param="query_column")
    ids, queries = [], []
    try:
        for batch_ids, batch_queries in iter_passage_batches(replace(source, text_column=query_column)):
            ids += batch_ids
            queries += batch_queries
    except InputError as exc:
        if exc.param != "text_column":
            raise
        # The reader was asked for the query column in the text column's place: name it.
        raise InputError(exc.path, exc.place, exc.message, param="query_column") from None
    return ids, queries


def self_retrieval(source, query_column: str, methods=SELFTEST_METHODS, cutoffs=SELF_KS, k: int = DEPTH,
                   chunk_window: int | None = 60, chunk_overlap: int = 20, index_dir=None, mode: str = "course",
                   analyzer: str = "stems", jobs: int = 1, progress: bool | None = None, *,
                   format: str | None = None, id_column: str | None = None, text_column: str | None = None,
                   title_column: str | None = None, index_titles: bool | None = None,
                   max_passage_chars: int | None = None, embedding_model=None) -> SelfRetrieval:
    """The self-retrieval test of a collection: each row's ``query_column`` as a query
    whose one relevant document is the row itself.

    Parameters
    ----------
    source : str, Path, SourceSpec, pandas.DataFrame or TagIndex
        The collection (CSV or JSONL), or a ``SourceSpec`` already made; a DataFrame (its
        columns as :func:`factcheck.build_index` reads them), indexed in memory; or an index
        (in memory or loaded) whose stored titles are the queries.
    query_column : str
        The column holding each row's query, e.g. ``"title"`` (an index's: ``"title"``).
    methods : sequence of str
        Retrievers to compare (``dense``, ``hybrid`` need ``mode="open"``).
    cutoffs : sequence of int
        Recall cut-offs.
    k : int, default 100
        Documents ranked per query; at least the largest cut-off.
    chunk_window, chunk_overlap : int
        Also search word windows, each document scored by its best; ``None`` or 0: no chunks.
    index_dir : str or Path or None
        Where a file's tag index is built or reused; ``None``: a temporary directory.
    mode : {"course", "open"}
        ``"open"`` also builds the passage vectors.
    analyzer : {"stems", "plain"}
        The TF-IDF retriever's analysis (default: stems, as BM25's).
    jobs : int
        Worker processes for tagging.
    progress : bool or None
        Progress bars (``None``: on a terminal).
    format, id_column, text_column, title_column, index_titles, max_passage_chars
        How to read ``source``; without a ``title_column`` the query column is stored as the title.
    embedding_model : None, str, Path or dict
        The open mode's passage vectors' model (``"minilm"``, an ONNX model directory, or a dict
        with its settings, as :func:`factcheck.build_index` takes it); ``None``: the bundled one.

    Returns
    -------
    SelfRetrieval
        One :class:`SelfRetrievalRun` per (method, units) in ``results``.

    Example
    -------
    >>> from pathlib import Path
    >>> import factcheck
    >>> csv = Path("out/papers.csv")
    >>> csv.parent.mkdir(exist_ok=True)
    >>> _ = csv.write_text("id,title,abstract\\n"
    ...     'p1,Sea level rise,"Global mean sea level rose about 20 cm over the last century."\\n'
    ...     'p2,Arctic sea ice decline,"Satellites show Arctic sea ice in September shrinking each decade."\\n'
    ...     'p3,Carbon dioxide and crop growth,"More carbon dioxide can increase photosynthesis in crops."\\n')
    >>> result = self_retrieval(csv, query_column="title", id_column="id", text_column="abstract",
    ...                         chunk_window=6, chunk_overlap=2, progress=False)
    >>> result.corpus["rows"], result.corpus["chunks"], result.queries
    (3, 7, 3)
    >>> [(r.method, r.units, r.metrics["recall@1"].value) for r in result.results]
    [('tfidf', 'whole', 1.0), ('tfidf', 'chunks', 1.0), ('bm25', 'whole', 1.0), ('bm25', 'chunks', 1.0)]
    """
    from factcheck.retrieval.registry import check_mode
    from factcheck.tagging.index import TagIndex
    from factcheck.tagging.job import TagJob

    methods = list(methods)
    for method in methods:
        check_method(method, mode)
        if method == "rerank":
            raise InputError(None, method, "the reranker is trained on claims with gold evidence; a "
                             "self-retrieval test compares untrained scorers (tfidf, bm25, tags; dense, hybrid "
                             "with mode open)", param="method")
    check_mode(mode, embedding_model)
    if embedding_model is not None and mode != "open":
        raise InputError(None, None, "an embedding model is for the open mode (mode='open')", param="embedding_model")
    cutoffs = tuple(sorted(set(cutoffs)))
    check_number(k, "k", integer=True, low=max(cutoffs))
    options = {"format": format, "id_column": id_column, "text_column": text_column, "title_column": title_column,
               "index_titles": index_titles, "max_passage_chars": max_passage_chars}
    if isinstance(source, TagIndex) or is_collection(source):
        index, ids, texts, corpus = _collection_queries(source, query_column, options)
        path = None
    else:
        source = as_source(source, "source", **options)
        ids, texts = read_query_column(source, query_column)
        path = source.path
        corpus = {**source.describe(), "path": str(source.path), "id_column": source.id_column,
                  "text_column": source.text_column}
    queries = {pid: q for pid, q in zip(ids, texts) if q.strip()}
    skipped = len(ids) - len(queries)
    if not queries:
        raise InputError(path, None, f"every row's {query_column!r} is empty: nothing to query",
                         param="query_column")
    with tempfile.TemporaryDirectory(prefix="factcheck-selftest-") if path else nullcontext() as scratch:
        if path:
            if source.title_column is None:  # stored and shown, never indexed
                source = replace(source, title_column=query_column, index_titles=False)
            root = Path(index_dir) if index_dir is not None else Path(scratch) / "index"
            manifest = TagJob(jobs=jobs, progress=progress).run(source, root)
            index = TagIndex.load(root)
            if index.ids != ids:  # the index of another file (or of this one, edited since)
                raise InputError(root, None, f"this index does not hold the rows of {source.path} in order; "
                                 "build it from the same file", param="index_dir")
            if mode == "open" and any(m in OPEN_SELFTEST_METHODS for m in methods):
                from factcheck.tagging.vectors import PassageVectorJob
                PassageVectorJob(jobs=jobs, progress=progress, embedding_model=embedding_model).run(root, manifest)
        elif index_dir is not None:
            raise InputError(None, None, "is for a file's index; the passages given are indexed in memory "
                             "(TagIndex.save keeps an index)", param="index_dir")
        qrels = {qid: {qid: 1} for qid in queries}
        results, chunks = [], None
        for method in methods:
            for window in ([None, chunk_window] if chunk_window else [None]):
                params = {"analyzer": analyzer} if method == "tfidf" else {}
                retriever = make_retriever(method, params, window, chunk_overlap, mode=mode)
                started = time.perf_counter()
                retriever.fit(index)
                fitted = time.perf_counter()
                from factcheck.retrieval.base import retriever_spec  # the estimators' module: here, not at import
                run = rank_queries(retriever, queries, k, progress)
                ranked = time.perf_counter()
                scored = judged_metrics(run, qrels, cutoffs)
                units = len(index)
                if window:
                    chunks = units = len(retriever.chunks_.owner)
                results.append(SelfRetrievalRun(
                    method=method, units="chunks" if window else "whole", chunk_window=window,
                    chunk_overlap=chunk_overlap if window else None, indexed_units=units,
                    spec=retriever_spec(retriever), metrics=scored.metrics,
                    no_match=sum(not r for r in run.values()),
                    seconds={"fit": round(fitted - started, 3), "rank": round(ranked - fitted, 3)}))
                logger.info("%s, %s: recall@1 %.3f (%d queries, %.1f s)", method,
                            f"chunks {window}/{chunk_overlap}" if window else "whole",
                            scored.metrics["recall@1"].value, len(queries), ranked - started)
    corpus = {**corpus, "query_column": query_column, "rows": len(ids), "chunks": chunks,
              "chunk_window": chunk_window or None, "chunk_overlap": chunk_overlap if chunk_window else None}
    return SelfRetrieval(corpus=corpus, queries=len(queries), skipped_empty=skipped, ks=list(cutoffs), depth=k,
                         mode=mode, analyzer=analyzer, results=results)


def _collection_queries(source, query_column: str, options: dict):
    """``(index, ids, queries, corpus record)`` of a self-retrieval test over passages in memory:
    a DataFrame (its ``query_column``, never indexed) or an index (its stored titles)."""
    from factcheck.formats.evidence import is_data_frame, read_collection
    from factcheck.tagging.index import TagIndex
    from factcheck.tagging.job import TagParams
    from factcheck.tagging.memory import build_in_memory
    if isinstance(source, TagIndex):
        given = [name for name, value in options.items() if value is not None]
        if given:
            raise InputError(None, None, "given with an index, which was read already", param=given[0])
        if query_column != "title" or not source.has_titles or source.index_titles:
            raise InputError(None, None, "an index's queries are its stored titles: give query_column='title' "
                             "and an index whose titles are stored, not indexed", param="query_column")
        record = {"name": source.where, "format": "index"}
        return source, list(source.ids), [t or "" for t in source.titles_of(range(len(source)))], record
    if not is_data_frame(source):
        raise InputError(None, None, f"a self-retrieval test reads each row's query from a column: give a CSV or "
                         f"JSONL file, a DataFrame or an index with titles, not a {type(source).__name__}",
                         param="source")
    header = [str(c) for c in source.columns]
    if query_column not in header:
        raise InputError(None, None, f"no column {query_column!r} in the DataFrame", param="query_column")
    options = {**options, "title_column": options["title_column"] or ("title" if "title" in header else None)}
    indexed = {options["id_column"] or "id", options["text_column"] or "text"}
    if options["index_titles"]:
        indexed.add(options["title_column"])
    if query_column in indexed:
        raise InputError(None, query_column, "the query column must not be the id or an indexed column "
                         "(a query that is the indexed text finds itself trivially)", param="query_column")
    queries = []
    for i, q in enumerate(source[query_column].tolist()):
        if q is not None and not isinstance(q, str):
            if q == q:  # NaN (pandas' missing value) is an empty query; any other value is no text
                raise InputError(None, f"row {i}", f"the query column holds {type(q).__name__}, expected text",
                                 param="query_column")
            q = None
        queries.append(q or "")
    if options["title_column"] is None:  # stored and shown, never indexed
        options["title_column"] = query_column
    ids, texts, titles, index_titles = read_collection(source, "source", **options)
    index = TagIndex(None, *build_in_memory(ids, texts, titles, index_titles, TagParams(), param="source"))
    record = {"name": "(in memory)", "format": "DataFrame", "id_column": options["id_column"] or "id",
              "text_column": options["text_column"] or "text"}
    return index, ids, queries, record


def write_self_retrieval(result: SelfRetrieval, out) -> tuple[Path, Path]:
    """``OUT/selftest.md``, then ``OUT/selftest.json`` (what programs read), each atomically."""
    from factcheck.reporting.workbench import self_retrieval_markdown
    out = Path(out)
    json_path, md_path = (out / name for name in SELFTEST_FILES)
    data = result.to_json()
    write_text_atomic(md_path, self_retrieval_markdown(data))
    write_json_atomic(json_path, data)
    return json_path, md_path


def as_retriever(retriever):
    """A fitted retriever as it is; an index (or its directory) as ``BM25Retriever()`` fitted to it."""
    from factcheck.retrieval.base import Retriever
    from factcheck.tagging.index import TagIndex
    if isinstance(retriever, (TagIndex, str, os.PathLike)):
        from factcheck.retrieval.bm25 import BM25Retriever
        return BM25Retriever().fit(retriever)
    if not isinstance(retriever, Retriever):
        raise InputError(None, None, f"expected a fitted retriever, a TagIndex or an index directory, got "
                         f"{type(retriever).__name__}", param="retriever")
    retriever._check_fitted()
    return retriever


def search(retriever, queries, k: int = 10, max_query_chars: int | None = None):
    """The top ``k`` passages for free text, with their texts; passages scoring 0 are left out.

    Parameters
    ----------
    retriever : Retriever, TagIndex, str or Path
        A fitted retriever, or an index (or its directory) searched with ``BM25Retriever()``.
    queries : str or sequence of str
        One query, or several.
    k : int, default 10
        Passages per query.
    max_query_chars : int or None
        A longer query is an error; None: :data:`~factcheck.formats.records.MAX_QUERY_CHARS`.

    Returns
    -------
    Ranking or list of Ranking
        With ``texts``: each passage without its title; a list for a sequence of queries.

    Example
    -------
    >>> import factcheck
    >>> index = factcheck.build_index("data/demo/evidence.json", "out/demo-index", progress=False)
    >>> found = search(factcheck.TfidfRetriever().fit(index), "Arctic ice is melting.", k=2)
    >>> found.ids, [round(s, 3) for s in found.scores], found.texts[1][:40]
    (['evidence-5', 'evidence-7'], [0.281, 0.273], 'Global mean sea level rose by about twen')
    >>> len(search(index, ["Sea levels are rising.", "Arctic ice"], k=3))
    2
    """
    from factcheck.retrieval.base import Ranking, as_texts
    retriever = as_retriever(retriever)
    texts, one = as_texts(queries, "queries")
    cap = length_cap(max_query_chars, "max_query_chars", MAX_QUERY_CHARS)
    for i, text in enumerate(texts, 1):
        check_length(None, f"query {i}", text, cap, "max_query_chars")
    body_of = getattr(retriever.index_, "body", retriever.index_.text)
    out = []
    for r in retriever.rank(texts, k):
        keep = [i for i, score in enumerate(r.scores) if score != 0]
        out.append(Ranking([r.ids[i] for i in keep], [r.scores[i] for i in keep], [r.rows[i] for i in keep],
                           None if r.titles is None else [r.titles[i] for i in keep],
                           [body_of(r.rows[i]) for i in keep]))
    return out[0] if one else out


def judged_retrieval(retriever, queries: dict[str, str], qrels: dict[str, dict[str, int]], k: int = 1000,
                     cutoffs=DEFAULT_KS, run_out=None, tag: str | None = None, progress: bool | None = None,
                     queries_path=None, qrels_path=None,
                     max_query_chars: int | None = None) -> JudgedRetrieval:
    """Rank every judged query and score the run, optionally written as a TREC run file.

    Parameters
    ----------
    retriever : Retriever, TagIndex, str or Path
        Fitted to the judged collection, or its index (ranked with ``BM25Retriever()``).
    queries : dict
        ``{qid: text}``; queries without judgments are skipped.
    qrels : dict
        ``{qid: {docid: grade}}``; every judged query must have a non-blank text.
    k : int, default 1000
        Documents ranked per query.
    cutoffs : sequence of int
        Recall cut-offs.
    run_out : str or Path or None
        Write the run here (TREC format).
    tag : str or None
        The run's tag (default: the method's name).
    progress : bool or None
        A progress bar (``None``: on a terminal).
    queries_path, qrels_path : str or Path or None
        The files the dicts came from, for error messages.
    max_query_chars : int or None
        A longer judged query is an error; None: :data:`~factcheck.formats.records.MAX_QUERY_CHARS`.

    Returns
    -------
    JudgedRetrieval

    Example
    -------
    >>> import factcheck
    >>> index = factcheck.build_index("data/demo/evidence.json", "out/demo-index", progress=False)
    >>> queries = {"q1": "Sea levels are rising.", "q2": "Arctic ice is melting.", "q3": "not judged"}
    >>> qrels = {"q1": {"evidence-8": 1, "evidence-39": 0}, "q2": {"evidence-5": 2, "evidence-7": 1}}
    >>> result = judged_retrieval(factcheck.TfidfRetriever().fit(index), queries, qrels, k=10,
    ...                           run_out="out/demo.trec", progress=False)
    >>> result.queries, result.skipped_unjudged, round(result.metrics["ndcg@10"].value, 3)
    (2, 1, 1.0)
    >>> open("out/demo.trec").readline()
    'q1 Q0 evidence-8 1 0.4996464701578407 tfidf\\n'
    """
    retriever = as_retriever(retriever)
    missing = [qid for qid in qrels if qid not in queries]
    if missing:
        raise InputError(qrels_path, f"query {missing[0]!r}", f"judged but not in the queries file {queries_path or ''} "
                         f"({len(missing)} of {len(qrels)} judged queries have no text)")
    judged = {qid: queries[qid] for qid in queries if qid in qrels}
    cap = length_cap(max_query_chars, "max_query_chars", MAX_QUERY_CHARS)
    for qid, text in judged.items():
        check_length(queries_path, f"query {shown(qid)}", text, cap, "max_query_chars")
    empty = [qid for qid, text in judged.items() if not text.strip()]
    if empty:  # it would count as a query that matched nothing
        raise InputError(queries_path, f"query {empty[0]!r}", f"is judged but its text is empty ({len(empty)} "
                         f"of {len(judged)} judged queries)")
    if run_out is not None:  # before any ranking: an id a TREC file cannot hold
        check_trec_id(tag or retriever.name, "the run tag", run_out)
        for qid in judged:
            check_trec_id(qid, "query id", run_out)
        for docid in retriever.index_.ids:
            check_trec_id(docid, "document id", run_out)
    row_of = retriever.index_.row_of
    absent = sum(docid not in row_of for docs in qrels.values() for docid, grade in docs.items() if grade >= 1)
    if absent:
        warnings.warn(FactcheckWarning(
            f"{absent} relevant judged documents are not in the index {retriever.index_.where}: they count as "
            "relevant and can never be retrieved"), stacklevel=2)
    run = rank_queries(retriever, judged, k, progress)
    scored = judged_metrics(run, qrels, cutoffs)
    from factcheck.retrieval.base import retriever_spec  # the estimators' module: here, not at import
    if run_out is not None:
        write_trec_run(run_out, run, tag or retriever.name)
    return JudgedRetrieval(queries=scored.queries, skipped_unjudged=len(queries) - len(judged),
                           judged_not_in_index=absent, depth=k, retriever=retriever_spec(retriever),
                           no_match=sum(not r for r in run.values()), metrics=scored.metrics)
