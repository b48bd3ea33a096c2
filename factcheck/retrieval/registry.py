"""Build retrievers by name and run them over a claim set, with their explanations."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from factcheck.errors import InputError

if TYPE_CHECKING:
    from factcheck.formats.claims import Claim
    from factcheck.retrieval.base import Retriever

# Every retriever by name: the one list the library and the CLI's choices draw from. The
# CLI imports this module to build its parser, so it imports nothing heavy at the top
# (numpy, joblib and the retrievers load when a retriever is made or written).
METHODS = ("tags", "bm25", "rerank")
DEPTH = 100  # ranking depth kept for recall@k / MRR


def make_retriever(method: str, params: dict | None = None, chunk_window: int | None = None,
                   chunk_overlap: int = 20) -> Retriever:
    params = {k: v for k, v in (params or {}).items() if v is not None}
    if method == "tags":
        from factcheck.retrieval.tag_rule import TagRuleRetriever
        r = TagRuleRetriever(**params)
    elif method == "bm25":
        from factcheck.retrieval.bm25 import BM25Retriever
        r = BM25Retriever(**params)
    elif method == "rerank":
        from factcheck.retrieval.rerank.retriever import RerankRetriever
        r = RerankRetriever.load(params.pop("model")) if "model" in params else RerankRetriever(**params)
    else:
        raise InputError(None, None, f"unknown method {method!r}; expected one of {', '.join(METHODS)}",
                         param="method")
    if chunk_window:
        from factcheck.retrieval.chunking import ChunkedRetriever
        r = ChunkedRetriever(r, chunk_window, chunk_overlap)
    return r


def run_retrieval(retriever: Retriever, claims: list[Claim], depth: int = DEPTH):
    """Evidence ids and the explanation record of every claim, in claim order.

    ``depth`` > 0 also records the top-``depth`` ranking (for recall@k and MRR).
    """
    texts = [c.text for c in claims]
    selections = retriever.retrieve(texts)
    rankings = retriever.rank(texts, depth) if depth > 0 else [None] * len(claims)
    ids = retriever.index.ids
    evidences, explain = {}, {}
    for claim, sel, ranking in zip(claims, selections, rankings):
        evidences[claim.id] = sel.ids
        explain[claim.id] = sel.to_json()
        if ranking is not None:
            explain[claim.id]["ranking"] = [ids[r] for r in ranking.rows.tolist()]
    return evidences, explain


def retriever_spec(retriever: Retriever) -> dict:
    """What rebuilds ``retriever``: ``{"method", "params"}``, plus the chunk window and
    overlap when it searches word windows (the record model directories and the
    ``.explain.json`` sidecar store)."""
    inner = getattr(retriever, "inner", retriever)
    spec = {"method": inner.name, "params": inner.params()}
    if hasattr(retriever, "inner"):
        spec["chunk_window"], spec["chunk_overlap"] = retriever.window, retriever.overlap
    return spec


def write_retrieval(out: Path, claims: list[Claim], evidences: dict, explain: dict, retriever: Retriever,
                    labels: dict | None = None) -> Path:
    """Predictions (course format) plus the ``.explain.json`` sidecar of ``retriever``'s
    choices (see :mod:`factcheck.formats.explanations`); returns the sidecar's path."""
    from factcheck.formats.explanations import write_explained_predictions
    return write_explained_predictions(Path(out), claims, evidences, explain, retriever_spec(retriever), labels)
