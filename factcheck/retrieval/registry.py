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
# The open mode's retrievers (pretrained embeddings, :mod:`factcheck.retrieval.dense`):
# offered only with ``mode="open"``, never in the course mode (the default).
OPEN_METHODS = ("dense", "hybrid")
ALL_METHODS = (*METHODS, *OPEN_METHODS)
MODES = ("course", "open")
DEPTH = 100  # ranking depth kept for recall@k / MRR


def methods_for(mode: str = "course") -> tuple[str, ...]:
    """The retrievers a mode offers."""
    return ALL_METHODS if check_mode(mode) == "open" else METHODS


def check_mode(mode: str) -> str:
    """``mode`` if known; for ``"open"``, also that the optional extra is installed (one
    line saying what to install otherwise, before any work starts)."""
    if mode not in MODES:
        raise InputError(None, None, f"unknown mode {mode!r}; expected one of {', '.join(MODES)}", param="mode")
    if mode == "open":
        from factcheck.text.embedding import load_embedder
        load_embedder()
    return mode


def check_method(method: str, mode: str = "course", also: tuple[str, ...] = ()) -> str:
    """``method`` if ``mode`` offers it (or it is one of ``also``, e.g. ``"auto"``); checks
    the mode too. An open-mode retriever asked for in the course mode says so."""
    if method in OPEN_METHODS and mode == "course":
        raise InputError(None, None, f"{method!r} is an open-mode retriever (pretrained embeddings); the "
                         f"course mode offers {', '.join((*also, *METHODS))} (or use mode open)", param="method")
    methods = (*also, *methods_for(mode))
    if method not in methods:
        raise InputError(None, None, f"unknown method {method!r}; expected one of {', '.join(methods)}",
                         param="method")
    return method


def make_retriever(method: str, params: dict | None = None, chunk_window: int | None = None,
                   chunk_overlap: int = 20, mode: str = "course") -> Retriever:
    """A retriever by name (unfitted). ``mode="open"`` also offers :data:`OPEN_METHODS`."""
    params = {k: v for k, v in (params or {}).items() if v is not None}
    check_method(method, mode)
    if method == "tags":
        from factcheck.retrieval.tag_rule import TagRuleRetriever
        r = TagRuleRetriever(**params)
    elif method == "bm25":
        from factcheck.retrieval.bm25 import BM25Retriever
        r = BM25Retriever(**params)
    elif method == "rerank":
        from factcheck.retrieval.rerank.retriever import RerankRetriever
        r = RerankRetriever.load(params.pop("model")) if "model" in params else RerankRetriever(**params)
    elif method == "dense":
        from factcheck.retrieval.dense import DenseRetriever
        r = DenseRetriever(**params)
    else:
        from factcheck.retrieval.dense import HybridRetriever
        r = HybridRetriever(**params)
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
    overlap when it searches word windows, and for the open mode's retrievers the
    checksum of the passage vectors they searched (the record model directories and the
    ``.explain.json`` sidecar store)."""
    inner = getattr(retriever, "inner", retriever)
    spec = {"method": inner.name, "params": inner.params()}
    if getattr(inner, "vectors_sha256_", None):
        spec["vectors_sha256"] = inner.vectors_sha256_
    if hasattr(retriever, "inner"):
        spec["chunk_window"], spec["chunk_overlap"] = retriever.window, retriever.overlap
    return spec


def write_retrieval(out: Path, claims: list[Claim], evidences: dict, explain: dict, retriever: Retriever,
                    labels: dict | None = None) -> Path:
    """Predictions (course format) plus the ``.explain.json`` sidecar of ``retriever``'s
    choices (see :mod:`factcheck.formats.explanations`); returns the sidecar's path."""
    from factcheck.formats.explanations import write_explained_predictions
    return write_explained_predictions(Path(out), claims, evidences, explain, retriever_spec(retriever), labels)
