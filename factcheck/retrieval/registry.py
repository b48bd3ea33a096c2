"""Build retrievers by name and run them over a claim set, with their explanations."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from factcheck.errors import InputError, ref

if TYPE_CHECKING:
    from factcheck.formats.claims import Claim
    from factcheck.retrieval.base import Explanation, Retriever

# Every retriever by name: the one list the library and the CLI's choices draw from. The
# CLI imports this module to build its parser, so it imports nothing heavy at the top
# (numpy, joblib and the retrievers load when a retriever is made or written).
# ``tfidf`` (the minimal pipeline's TF-IDF cosine) is offered everywhere but is not one of
# the main job's automatic candidates (training.selection): the course system is unchanged.
METHODS = ("tags", "bm25", "rerank", "tfidf")
# The open mode's retrievers (pretrained embeddings, :mod:`factcheck.retrieval.dense`):
# offered only with ``mode="open"``, never in the course mode (the default).
OPEN_METHODS = ("dense", "hybrid")
ALL_METHODS = (*METHODS, *OPEN_METHODS)
MODES = ("course", "open")
DEPTH = 100  # ranking depth kept for recall@k / MRR


def methods_for(mode: str = "course", embedding_model=None) -> tuple[str, ...]:
    """The retrievers a mode offers (:data:`METHODS`, plus :data:`OPEN_METHODS` in the open
    mode; ``embedding_model``: see :func:`check_mode`)."""
    return ALL_METHODS if check_mode(mode, embedding_model) == "open" else METHODS


def check_mode(mode: str, embedding_model=None) -> str:
    """``mode`` if known; for ``"open"``, also that its embedding model loads: the bundled
    one (``embedding_model=None``: the optional extra installed) or the local one named
    (:func:`~factcheck.text.embedding.load_embedder`) -- one line saying what to install or
    what is wrong otherwise, before any work starts."""
    if mode not in MODES:
        raise InputError(None, None, f"unknown mode {mode!r}; expected one of {', '.join(MODES)}", param="mode")
    if mode == "open":
        from factcheck.text.embedding import load_embedder
        load_embedder(embedding_model)
    return mode


def check_method(method: str, mode: str = "course", also: tuple[str, ...] = (), embedding_model=None) -> str:
    """``method`` if ``mode`` offers it (or it is one of ``also``, e.g. ``"auto"``); checks
    the mode too (with ``embedding_model``, see :func:`check_mode`). An open-mode
    retriever asked for in the course mode says so."""
    if method in OPEN_METHODS and mode == "course":
        raise InputError(None, None, f"{method!r} is an open-mode retriever (pretrained embeddings); the "
                         f"course mode offers {', '.join((*also, *METHODS))} (or use {ref('mode')} open)", param="method")
    methods = (*also, *methods_for(mode, embedding_model))
    if method not in methods:
        raise InputError(None, None, f"unknown method {method!r}; expected one of {', '.join(methods)}",
                         param="method")
    return method


def make_retriever(method: str, params: dict | None = None, chunk_window: int | None = None,
                   chunk_overlap: int = 20, mode: str = "course", embedding_model=None) -> Retriever:
    """A retriever by name, unfitted: what the CLI's ``--method`` and a model directory build.

    Parameters
    ----------
    method : str
        One of :data:`METHODS` (``"tags"``, ``"bm25"``, ``"rerank"``), or in the open mode
        also ``"dense"``, ``"hybrid"``.
    params : dict or None
        The retriever's parameters (None values are left at their defaults). For
        ``"rerank"``, ``{"model": PATH}`` loads a trained reranker.
    chunk_window : int or None
        Search word windows of this size (:class:`~factcheck.ChunkedRetriever`); None:
        whole passages.
    chunk_overlap : int, default 20
        Words shared by consecutive windows.
    mode : {"course", "open"}, default "course"
        ``"open"`` also offers the retrievers with pretrained embeddings.
    embedding_model : None, str, Path or dict
        The embedding model whose presence the open mode checks (:func:`check_mode`); the
        dense retrievers themselves use the one their index's passage vectors were built with.

    Returns
    -------
    Retriever
        Unfitted: call ``fit(index)``.

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
    if method == "tags":
        from factcheck.retrieval.tag_rule import TagRuleRetriever
        r = TagRuleRetriever(**params)
    elif method == "bm25":
        from factcheck.retrieval.bm25 import BM25Retriever
        r = BM25Retriever(**params)
    elif method == "rerank":
        from factcheck.retrieval.rerank.retriever import RerankRetriever
        r = RerankRetriever.load(params.pop("model")) if "model" in params else RerankRetriever(**params)
    elif method == "tfidf":
        from factcheck.retrieval.tfidf import TfidfRetriever
        r = TfidfRetriever(**params)
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


def run_retrieval(retriever: Retriever, claims: list[Claim], depth: int = DEPTH) -> dict[str, Explanation]:
    """Each claim's :class:`~factcheck.retrieval.base.Explanation` (its evidence is
    ``.ids``), by claim id in claim order, from one scoring of each claim.

    Parameters
    ----------
    retriever : Retriever
        Fitted.
    claims : list of Claim
        The claims (:func:`factcheck.read_claims`); their ids key the results.
    depth : int, default 100
        > 0 also keeps each claim's top-``depth`` ranking (for recall@k and MRR) as
        ``ranking``; 0 ranks nothing beyond the evidence.

    Returns
    -------
    dict of str to Explanation

    Example
    -------
    >>> import factcheck
    >>> index = factcheck.build_index("data/demo/evidence.json", "out/demo-index", progress=False)
    >>> claims = factcheck.read_claims("data/demo/dev-claims.json")
    >>> explained = run_retrieval(factcheck.BM25Retriever(k=2).fit(index), claims, depth=5)
    >>> explained[claims[0].id].ids == explained[claims[0].id].ranking[:2]
    True
    """
    from factcheck.retrieval.base import Explanation
    texts = [c.text for c in claims]
    # A duck-typed reader (a test's stand-in) may offer ``retrieve`` only.
    selections = retriever.search(texts, depth) if depth > 0 else retriever.retrieve(texts)
    return {c.id: Explanation.of(sel) for c, sel in zip(claims, selections)}


def evidence_of(explained: dict[str, Explanation]) -> dict[str, list[str]]:
    """Claim id -> evidence ids, from :func:`run_retrieval`'s explanations."""
    return {cid: e.ids for cid, e in explained.items()}


def retriever_spec(retriever: Retriever) -> dict:
    """What rebuilds ``retriever``: ``{"method", "params"}``, plus the chunk window and
    overlap when it searches word windows, and for the open mode's retrievers the
    checksum of the passage vectors they searched (the record model directories and the
    ``.explain.json`` sidecar store)."""
    # a chunked retriever's inner one: fitted (``inner_``, it holds the vectors' checksum) or not
    inner = getattr(retriever, "inner_", None) or getattr(retriever, "inner", retriever)
    spec = {"method": inner.name, "params": inner.params()}
    if getattr(inner, "vectors_sha256_", None):
        spec["vectors_sha256"] = inner.vectors_sha256_
    if hasattr(retriever, "inner"):
        spec["chunk_window"], spec["chunk_overlap"] = retriever.window, retriever.overlap
    return spec


def write_retrieval(out: Path, claims: list[Claim], explained: dict[str, Explanation], retriever: Retriever,
                    labels: dict | None = None, predictions_format: str | None = None) -> Path:
    """Predictions (course format, or FEVER's: ``predictions_format``) plus the
    ``.explain.json`` sidecar of ``retriever``'s choices (see
    :mod:`factcheck.formats.explanations`); returns the sidecar's path."""
    from factcheck.formats.explanations import write_explained_predictions
    return write_explained_predictions(Path(out), claims, evidence_of(explained),
                                       {cid: e.to_json() for cid, e in explained.items()}, retriever_spec(retriever),
                                       labels, predictions_format)
