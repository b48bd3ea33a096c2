"""``factcheck selftest``, ``search`` and ``evaluate-retrieval`` (:mod:`factcheck.pipeline.workbench`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from factcheck.cli.options import (METHOD_OPTIONS, add_analyzer_arg, add_cap_arg, add_embedding_args, add_mode_arg,
                                   add_quiet_arg, add_retriever_args, add_source_args, check_outputs,
                                   embedding_model_from_args, jobs_type, non_negative_int, plural, positive_int,
                                   retriever_from_args, source_from_args, text_arg)
from factcheck.cli.terminal import field
from factcheck.retrieval.registry import ALL_METHODS

__all__ = ["add_selftest", "add_search", "add_evaluate_retrieval"]

TEXT_SHOWN = 160  # characters of a passage that search shows
SEARCH_K = 10     # passages search shows per query
DEPTH = 100       # documents selftest ranks per query


def depth_type(text: str) -> int:
    """A positive integer; a comma-separated list says where the recall cut-offs went."""
    if "," in text:
        raise argparse.ArgumentTypeError(f"--k is the ranking depth (one number); recall cut-offs such as {text} "
                                         "are --cutoffs")
    return positive_int(text)


def int_list(text: str) -> tuple[int, ...]:
    """``1,5,10`` -> (1, 5, 10): positive integers, comma separated."""
    return tuple(positive_int(v) for v in text.split(","))


def method_list(text: str) -> tuple[str, ...]:
    """``tfidf,bm25`` -> ('tfidf', 'bm25'): known method names, comma separated."""
    methods = tuple(m.strip() for m in text.split(",") if m.strip())
    unknown = [m for m in methods if m not in ALL_METHODS]
    if not methods or unknown:
        raise argparse.ArgumentTypeError(f"unknown method {(unknown or [text])[0]!r}; expected a comma-separated "
                                         f"list of {', '.join(ALL_METHODS)}")
    return methods


def add_selftest(p):
    add_source_args(p)
    for action in p._actions:  # the shared source argument, named for this command
        if action.dest == "evidence":
            action.metavar, action.help = "CORPUS", "the collection: .csv (or .tsv) or .jsonl, one row a document"
    p.add_argument("--query-column", required=True,
                   help="the column (field) holding each row's query, e.g. title: not part of the indexed text")
    p.add_argument("--method", type=method_list, default=None,
                   help="retrievers to compare, comma separated (default: tfidf,bm25; with --mode open also "
                        "dense,hybrid)")
    add_analyzer_arg(p)
    p.add_argument("--chunk-window", type=non_negative_int, default=60,
                   help="also search word windows of this size, each document scored by its best one "
                        "(default: 60; 0: whole documents only)")
    p.add_argument("--chunk-overlap", type=non_negative_int, default=20,
                   help="words shared by consecutive windows (default: 20)")
    p.add_argument("--k", type=depth_type, default=DEPTH, metavar="N",
                   help=f"documents ranked per query, for MRR, nDCG and MAP (default: {DEPTH})")
    p.add_argument("--cutoffs", type=int_list, default=(1, 5, 10), help="recall cut-offs (default: 1,5,10)")
    p.add_argument("--out", type=Path, default=None,
                   help="write selftest.json and selftest.md here (and keep the index in OUT/index)")
    p.add_argument("--index", type=Path, default=None,
                   help="tag index directory to build or reuse (default: OUT/index, or a temporary one)")
    p.add_argument("--jobs", type=jobs_type, default=-1, help="worker processes for tagging (default: -1 = all cores)")
    add_mode_arg(p)
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    add_quiet_arg(p)
    add_embedding_args(p, build=True)

    def run(args):
        from factcheck.formats.files import check_no_symlinks, remove_stale_temporaries
        from factcheck.pipeline.workbench import (OPEN_SELFTEST_METHODS, SELFTEST_FILES, SELFTEST_METHODS,
                                                  self_retrieval, write_self_retrieval)
        from factcheck.reporting.workbench import self_retrieval_markdown
        from factcheck.retrieval.chunking import check_window
        if args.chunk_window:
            check_window(args.chunk_window, args.chunk_overlap)
        methods = args.method or (SELFTEST_METHODS + (OPEN_SELFTEST_METHODS if args.mode == "open" else ()))
        index_dir = args.index or (args.out / "index" if args.out else None)
        if args.out:  # OUT is the user's to place anywhere; what we write under it is no link
            check_no_symlinks(args.out, SELFTEST_FILES + (() if args.index else ("index",)))
            check_outputs([args.out / name for name in SELFTEST_FILES], [args.evidence])
            remove_stale_temporaries(args.out, SELFTEST_FILES, recursive=False)  # a killed selftest's
        check_outputs([p for p in (index_dir,) if p], [args.evidence])
        embedding_model = embedding_model_from_args(args)  # before any work: one line for a wrong model
        result = self_retrieval(source_from_args(args), args.query_column, methods, args.cutoffs, args.k,
                                args.chunk_window or None, args.chunk_overlap, index_dir, args.mode,
                                args.analyzer or "stems", args.jobs, embedding_model=embedding_model)
        if args.out:
            json_path, md_path = write_self_retrieval(result, args.out)
            print(f"{json_path}, {md_path}: {plural(len(result.results), 'result')}", file=sys.stderr)
        data = result.to_json()
        print(json.dumps(data, indent=2, ensure_ascii=False) if args.json else self_retrieval_markdown(data), end="")
    return run


def add_search(p):
    p.add_argument("query", nargs="+", type=text_arg, help="free text to rank the index's passages for (several: one each)")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--index", type=Path, help="tag index directory (from factcheck tag)")
    where.add_argument("--run", type=Path, help="output directory of `factcheck run` (uses RUN/index, and "
                       "RUN/model's chosen retriever unless --method names one)")
    add_retriever_args(p, f"passages shown per query (default: {SEARCH_K})", SEARCH_K)
    for action in p._actions:  # with --run, no --method means the run's own retriever
        if action.dest == "method":
            action.default = None
            action.help = ("retriever (default: bm25, or with --run the one the run chose; dense, hybrid and pool "
                           "need --mode open)")
    p.add_argument("--json", action="store_true", help="print one JSON object per query, one a line")
    p.add_argument("--show", type=non_negative_int, default=TEXT_SHOWN,
                   help=f"characters of each passage shown (default: {TEXT_SHOWN}; 0: the whole text)")
    add_cap_arg(p, "query")

    def run(args):
        from factcheck.pipeline.workbench import search
        from factcheck.tagging.index import TagIndex
        if args.run is not None:
            retriever = _run_retriever(args)
        else:
            args.method = args.method or "bm25"
            retriever = retriever_from_args(args, evidence_k=False).fit(TagIndex.load(args.index))
        for query, found in zip(args.query, search(retriever, args.query, args.k, max_query_chars=args.max_query_chars)):
            titles = found.titles or [None] * len(found)
            hits = [{"rank": rank, "id": pid, "score": score, "text": text, **({"title": title} if title else {})}
                    for rank, (pid, score, text, title) in enumerate(zip(found.ids, found.scores, found.texts, titles), 1)]
            if args.json:
                print(json.dumps({"query": query, "method": retriever.name, "hits": hits}, ensure_ascii=False))
                continue
            print(f"{query}  ({retriever.name}, top {args.k})")
            if not hits:  # search leaves out the passages scoring 0; dense and hybrid score vectors, not terms
                dense = getattr(getattr(retriever, "inner", retriever), "needs_vectors", False)
                print("  no passage has a non-zero score for this query" if dense
                      else "  no passage shares a term with this query")
            for h in hits:
                text = " ".join(h["text"].split())
                if args.show and len(text) > args.show:
                    text = text[:args.show].rstrip() + "…"
                title = f"{field(h['title'])} — " if h.get("title") else ""
                print(f"{h['rank']:3d}. {h['score']:.4f}  {field(h['id'])}  {title}{text}")
    return run


def _run_retriever(args):
    """``search --run``: the run's chosen retriever as trained, or ``--method``'s on the run's index."""
    from factcheck.serve.artefacts import resolve_paths
    from factcheck.tagging.index import TagIndex
    index_dir, model_dir = resolve_paths(args.run, None, None)
    if args.method is not None:
        args.index = index_dir  # as if given: the open mode reads its vectors' model there
        return retriever_from_args(args, evidence_k=False).fit(TagIndex.load(index_dir))
    from factcheck.errors import InputError
    settings = sorted({o for options in METHOD_OPTIONS.values() for o in options} - {"k"})
    for name in [*settings, "chunk_window", "chunk_overlap"]:
        if getattr(args, name, None) is not None:
            raise InputError(None, None, "only with --method (--run alone searches with the run's trained "
                             "retriever, as it was tuned)", param=name)
    from factcheck.system.checker import FactChecker
    return FactChecker.load(index_dir, model_dir).retriever


def add_evaluate_retrieval(p):
    p.add_argument("--queries", type=Path, default=None,
                   help="queries: BEIR queries.jsonl ({\"_id\", \"text\"} a line) or qid<TAB>text .tsv "
                        "(needed with --index)")
    p.add_argument("--qrels", type=Path, required=True,
                   help="judgments: TREC qrels (qid iter docid grade) or BEIR qrels TSV (header optional)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--index", type=Path, help="tag index directory to rank (from factcheck tag)")
    src.add_argument("--trec-run", type=Path,
                     help="score this TREC run file instead of ranking (e.g. a Pyserini run)")
    add_retriever_args(p, "documents ranked per query (default: 1000, as TREC and BEIR runs)", 1000, "--depth")
    p.add_argument("--cutoffs", type=int_list, default=(1, 5, 10, 100), help="recall cut-offs (default: 1,5,10,100)")
    p.add_argument("--run-out", type=Path, default=None,
                   help="write the run as a TREC run file (qid Q0 docid rank score tag)")
    p.add_argument("--run-tag", default=None, help="the run file's tag (default: the method name)")
    add_cap_arg(p, "query")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    add_quiet_arg(p)

    def run(args):
        from factcheck.errors import InputError
        from factcheck.formats.qrels import read_qrels, read_queries, read_trec_run
        from factcheck.reporting.workbench import judged_markdown
        qrels = read_qrels(args.qrels)
        if args.trec_run is not None:  # scored as trec_eval reads it: no index, no retriever
            from factcheck.evaluation.ir_metrics import judged_metrics
            from factcheck.pipeline.workbench import JudgedRetrieval
            if args.run_out:
                raise InputError(None, None, "only with --index (a run file is scored, not rewritten)", param="run_out")
            scored = judged_metrics(read_trec_run(args.trec_run), qrels, args.cutoffs)
            result = JudgedRetrieval(queries=scored.queries, skipped_unjudged=scored.unjudged, judged_not_in_index=0,
                                     depth=scored.depth, retriever={"method": f"run file {args.trec_run.name}"},
                                     no_match=len(scored.missing), metrics=scored.metrics)
        else:
            from factcheck.pipeline.workbench import judged_retrieval
            from factcheck.tagging.index import TagIndex
            if args.queries is None:
                raise InputError(None, None, "needed with --index (the texts of the judged queries)", param="queries")
            if args.run_out:
                check_outputs([args.run_out], [args.index, args.queries, args.qrels, args.rerank_model])
            queries = read_queries(args.queries, max_query_chars=args.max_query_chars)
            retriever = retriever_from_args(args, evidence_k=False).fit(TagIndex.load(args.index))
            result = judged_retrieval(retriever, queries, qrels, args.k, args.cutoffs, args.run_out,
                                      args.run_tag, queries_path=args.queries, qrels_path=args.qrels,
                                      max_query_chars=args.max_query_chars)
            if args.run_out:
                print(f"{args.run_out}: {plural(result.queries, 'query', 'queries')}", file=sys.stderr)
        data = result.to_json()
        print(json.dumps(data, indent=2, ensure_ascii=False) if args.json else judged_markdown(data), end="")
    return run

