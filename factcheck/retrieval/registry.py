"""Build retrievers by name and run them over a claim set, with their explanations."""

from __future__ import annotations

from pathlib import Path

from factcheck.errors import InputError
from factcheck.formats.claims import Claim, write_predictions
from factcheck.formats.files import write_json_atomic
from factcheck.retrieval.base import Retriever

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


def write_retrieval(out: Path, claims: list[Claim], evidences: dict, explain: dict, retriever: Retriever,
                    labels: dict | None = None) -> Path:
    """Predictions (course format) plus the ``.explain.json`` sidecar; sidecar first, so a
    predictions file never exists without its explanations."""
    from factcheck.evaluation.evaluate import explanations_path
    sidecar = explanations_path(Path(out))
    for dest in (Path(out), sidecar):  # refuse before either write: never a sidecar alone
        if dest.is_dir():
            raise InputError(dest, None, "is a directory, expected a file name")
    write_json_atomic(sidecar, {"method": retriever.name, "params": retriever.params(), "claims": explain})
    write_predictions(out, claims, evidences, labels)
    return sidecar
