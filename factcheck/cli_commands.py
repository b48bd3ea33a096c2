"""Sub-commands beyond tagging register here (retrieval, evaluation, classification, app)."""

from pathlib import Path

from factcheck.cli import _non_negative_int, _positive_int, bounded_float, check_outputs, command, plural
from factcheck.retrieval.registry import METHODS


def add_retriever_args(p, default_method="bm25"):
    p.add_argument("--method", default=default_method, choices=METHODS,
                   help=f"retriever (default: {default_method})")
    g = p.add_argument_group("tag rule (--method tags)")
    g.add_argument("--t-sim", type=bounded_float(0.0, 1.0), default=None, help="cosine threshold (default: 0.55)")
    g.add_argument("--t-overlap", type=bounded_float(0.0, 1.0), default=None, help="tag-overlap threshold (default: 0.5)")
    g.add_argument("--top-n", type=_positive_int, default=None, help="at most this many passages (default: 6)")
    g = p.add_argument_group("BM25 (--method bm25)")
    g.add_argument("--k1", type=bounded_float(0.0), default=None, help="term-frequency saturation (default: 1.2)")
    g.add_argument("--b", type=bounded_float(0.0, 1.0), default=None, help="length normalisation (default: 0.75)")
    g.add_argument("--k", type=_positive_int, default=None, help="passages returned per claim (default: 5)")
    g = p.add_argument_group("reranking (--method rerank)")
    g.add_argument("--rerank-model", type=Path, default=None, help="trained reranker (from factcheck train-rerank)")
    g = p.add_argument_group("chunking")
    g.add_argument("--chunk-window", type=_positive_int, default=None, help="index word windows of this size")
    g.add_argument("--chunk-overlap", type=_non_negative_int, default=20,
                   help="words shared by consecutive windows (default: 20)")


def retriever_from_args(args):
    from factcheck.retrieval.registry import make_retriever
    params = {"tags": {"t_sim": args.t_sim, "t_overlap": args.t_overlap, "top_n": args.top_n},
              "bm25": {"k1": args.k1, "b": args.b, "k": args.k},
              "rerank": {"model": args.rerank_model}}[args.method]
    return make_retriever(args.method, params, args.chunk_window, args.chunk_overlap)


@command("retrieve", "retrieve evidence for claims (course-format predictions + explanations)")
def _retrieve(p):
    p.add_argument("--index", type=Path, required=True, help="tag index directory (from factcheck tag)")
    p.add_argument("--claims", type=Path, required=True, help="claims file (course format)")
    p.add_argument("--out", type=Path, required=True, help="predictions file to write")
    add_retriever_args(p)

    def run(args):
        from factcheck.formats.claims import read_claims
        from factcheck.retrieval.registry import run_retrieval, write_retrieval
        from factcheck.evaluation.evaluate import explanations_path
        from factcheck.tagging.index import TagIndex
        check_outputs([args.out, explanations_path(args.out)], [args.claims, args.index, args.rerank_model])
        claims = read_claims(args.claims)
        retriever = retriever_from_args(args).fit(TagIndex.load(args.index))
        evidences, explain = run_retrieval(retriever, claims)
        sidecar = write_retrieval(args.out, claims, evidences, explain, retriever)
        fallback = sum(e.get("path") == "fallback" for e in explain.values())
        print(f"{args.out}: evidence for {plural(len(claims), 'claim')} ({retriever.name}"
              + (f", {fallback} by fallback" if args.method == "tags" else "") + f"); explanations in {sidecar}")
    return run


@command("evaluate", "score predictions with the course metric, recall@k and MRR, with 95% intervals")
def _evaluate(p):
    p.add_argument("--predictions", type=Path, required=True,
                   help="predictions file (leaderboard format, from retrieve, predict or run)")
    p.add_argument("--groundtruth", type=Path, required=True,
                   help="labelled claims with gold evidence (course format, e.g. dev-claims.json)")
    p.add_argument("--explanations", type=Path, default=None,
                   help="explanations sidecar (default: PREDICTIONS with .explain.json, if present)")
    p.add_argument("--json", action="store_true", help="print one JSON object")

    def run(args):
        from factcheck.evaluation.evaluate import run_evaluate
        run_evaluate(args.predictions, args.groundtruth, args.json, args.explanations)
    return run

import factcheck.pipeline.commands  # noqa: F401,E402
import factcheck.serve.commands  # noqa: F401,E402
import factcheck.serve.check  # noqa: F401,E402
import factcheck.retrieval.rerank.commands  # noqa: F401,E402
