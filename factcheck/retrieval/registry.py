"""Build retrievers by name, and write a claim set's retrieval with its explanations."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING

from factcheck.errors import InputError, check_choice, ref

if TYPE_CHECKING:
    from factcheck.formats.claims import Claim
    from factcheck.retrieval.base import Explanation, Retriever

# The CLI imports this module to build its parser: nothing heavy at the top.
METHODS = ("tags", "bm25", "rerank", "tfidf")
OPEN_METHODS = ("dense", "hybrid", "pool")
ALL_METHODS = (*METHODS, *OPEN_METHODS)
MODES = ("course", "open")
# The two-stage retriever's settings besides its model (PoolRetriever's parameters): what a
# run's ``embedding_model`` dict and the commands' two-stage options carry to it.
POOL_SETTINGS = ("pool_size", "combine", "bm25_weight", "dense_weight")
_CLASSES = {"tags": ("tag_rule", "TagRuleRetriever"), "bm25": ("bm25", "BM25Retriever"),
            "rerank": ("rerank.retriever", "RerankRetriever"), "tfidf": ("tfidf", "TfidfRetriever"),
            "dense": ("dense", "DenseRetriever"), "hybrid": ("dense", "HybridRetriever"),
            "pool": ("pool", "PoolRetriever")}


def methods_for(mode: str = "course", embedding_model=None) -> tuple[str, ...]:
    """The retrievers a mode offers (:data:`METHODS`, plus :data:`OPEN_METHODS` in the open mode)."""
    return ALL_METHODS if check_mode(mode, embedding_model) == "open" else METHODS


def check_mode(mode: str, embedding_model=None) -> str:
    """``mode`` if known; for ``"open"``, also that its embedding model loads (before any work starts)."""
    if check_choice(mode, "mode", MODES) == "open":
        from factcheck.text.embedding import load_embedder
        load_embedder(embedding_model)
    return mode


def check_method(method: str, mode: str = "course", also: tuple[str, ...] = (), embedding_model=None) -> str:
    """``method`` if ``mode`` offers it (or it is one of ``also``, e.g. ``"auto"``); checks the mode too."""
    if method in OPEN_METHODS and mode == "course":
        raise InputError(None, None, f"{method!r} is an open-mode retriever (pretrained embeddings); the "
                         f"course mode offers {', '.join((*also, *METHODS))} (or use {ref('mode')} open)", param="method")
    return check_choice(method, "method", (*also, *methods_for(mode, embedding_model)))


def make_retriever(method: str, params: dict | None = None, chunk_window: int | None = None,
                   chunk_overlap: int = 20, mode: str = "course", embedding_model=None) -> Retriever:
    """A retriever by name, unfitted: what the CLI's ``--method`` and a model directory build.

    Parameters
    ----------
    method : str
        One of :data:`METHODS`, or in the open mode also :data:`OPEN_METHODS`.
    params : dict or None
        The retriever's parameters (None values left at their defaults); ``{"model": PATH}``
        loads a trained reranker.
    chunk_window : int or None
        Search word windows of this size (:class:`~factcheck.ChunkedRetriever`).
    chunk_overlap : int, default 20
        Words shared by consecutive windows.
    mode : {"course", "open"}, default "course"
    embedding_model : None, str, Path or dict
        The embedding model whose presence the open mode checks.

    Returns
    -------
    Retriever

    Example
    -------
    >>> make_retriever("bm25", {"k": 3, "b": None})
    BM25Retriever(k=3)
    >>> make_retriever("tags", chunk_window=50)
    ChunkedRetriever(inner=TagRuleRetriever(), window=50)
    >>> make_retriever("dense")
    Traceback (most recent call last):
    ...
    factcheck.errors.InputError: method: 'dense' is an open-mode retriever (pretrained embeddings); the course mode offers tags, bm25, rerank, tfidf (or use mode open)
    """
    params = {k: v for k, v in (params or {}).items() if v is not None}
    check_method(method, mode, embedding_model=embedding_model)
    module, name = _CLASSES[method]
    cls = getattr(importlib.import_module(f"factcheck.retrieval.{module}"), name)
    r = cls.load(params.pop("model")) if method == "rerank" and "model" in params else cls(**params)
    if chunk_window:
        from factcheck.retrieval.chunking import ChunkedRetriever
        r = ChunkedRetriever(r, chunk_window, chunk_overlap)
    return r


def write_retrieval(out: Path, claims: list[Claim], explained: dict[str, Explanation], retriever: Retriever,
                    labels: dict | None = None, predictions_format: str | None = None) -> Path:
    """Predictions plus the ``.explain.json`` sidecar of ``retriever``'s choices; returns the sidecar's path."""
    from factcheck.formats.claims import write_explained_predictions
    from factcheck.retrieval.base import evidence_of, retriever_spec
    return write_explained_predictions(Path(out), claims, evidence_of(explained),
                                       {cid: e.to_json() for cid, e in explained.items()}, retriever_spec(retriever),
                                       labels, predictions_format)
