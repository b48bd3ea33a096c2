"""The model directory: ``classifier.skops`` (the pipeline and a ``meta`` record of the
retrievers, the index and the mode it was trained with) and, for the learned retriever,
``rerank.skops``, loaded only when its sha256 is the one the meta records (docs/main-job.md).
"""

from __future__ import annotations

import warnings
from pathlib import Path

from factcheck.classification.model import save_classifier
from factcheck.errors import FactcheckWarning, InputError
from factcheck.formats.files import sha256_file
from factcheck.retrieval.base import retriever_spec
from factcheck.retrieval.registry import check_mode, make_retriever
from factcheck.text.embedding import describe_model, same_model

__all__ = ["RERANK_FILE", "save_system", "available_methods", "model_mode", "require_mode", "load_retriever"]

RERANK_FILE = "rerank.skops"


def save_system(model_dir: Path, classifier, retriever, meta: dict, alternatives: dict | None = None,
                reader=None) -> None:
    """Save the classifier, the chosen retriever and reader, and every other tuned retriever's spec."""
    model_dir = Path(model_dir)
    spec = retriever_spec(retriever)
    meta = {**meta, "reader": retriever_spec(reader or retriever)}
    everyone = {**(alternatives or {}), spec["method"]: retriever}
    specs = {name: retriever_spec(r) for name, r in everyone.items()}
    rerank_sha256 = None
    if "rerank" in everyone:
        getattr(everyone["rerank"], "inner", everyone["rerank"]).save(model_dir / RERANK_FILE)
        rerank_sha256 = sha256_file(model_dir / RERANK_FILE)
    else:  # an earlier training's reranker is not this model's
        (model_dir / RERANK_FILE).unlink(missing_ok=True)
    save_classifier(classifier, model_dir, {**meta, "retriever": spec, "retrievers": specs,
                                            "rerank_sha256": rerank_sha256})


def available_methods(meta: dict) -> list[str]:
    """The retrievers a model directory's record can rebuild, by name."""
    return sorted((meta.get("retrievers") or {meta["retriever"]["method"]: None}).keys())


def model_mode(meta: dict) -> str:
    """The mode a model was trained in (models from before the open mode: ``course``)."""
    return meta.get("mode", "course")


def require_mode(model_dir: Path, mode: str, embedding_model=None) -> None:
    """An open-mode model needs its embedding model: one line naming the model if it is missing."""
    try:
        check_mode(mode, embedding_model)
    except InputError as exc:
        where = f"{exc.path}: " if exc.path else ""
        raise InputError(model_dir, None, f"was trained in the {mode} mode; {where}{exc.message}",
                         param=exc.param or "mode") from None


def load_retriever(model_dir: Path, meta: dict, method: str | None = None, index=None):
    """The chosen retriever, or another tuned one by name; fitted to ``index`` if given."""
    chosen = meta.get("retriever") or {}
    method = method or chosen.get("method")
    if method is None:
        raise InputError(model_dir, None, "model does not name its retriever")
    spec = (meta.get("retrievers") or {}).get(method) or (chosen if chosen.get("method") == method else {})
    params = dict(spec.get("params", {}))
    if method == "bm25" and params.get("method") == "lucene":
        del params["method"]  # recorded while BM25 had a parameter with this one value
    if method == "tags" and "top_n" in params:
        params["k"] = params.pop("top_n")  # the tag rule's k, recorded under its former name
    if method == "rerank":
        path = Path(model_dir) / RERANK_FILE
        if not path.is_file():
            raise InputError(path, None, "no trained reranker in this model directory")
        # A recorded None: trained without one. Models older than the record are not checked.
        if "rerank_sha256" in meta and sha256_file(path) != meta["rerank_sha256"]:
            raise InputError(path, None, "is not the reranker classifier.skops was trained with (its sha256 "
                             "differs): the model directory mixes two trainings; train it again")
        params = {"model": path}
    retriever = make_retriever(method, params, spec.get("chunk_window"), spec.get("chunk_overlap", 20),
                               mode=model_mode(meta), embedding_model=meta.get("embedding_model"))
    if index is None:
        return retriever
    try:
        retriever.fit(index)
    except InputError as exc:
        pool_model = params.get("model") if method == "pool" else None
        if not (pool_model and exc.param == "embedding_model" and exc.path
                and Path(exc.path).is_relative_to(Path(pool_model))):
            raise
        # The pool's model is this directory's record, not the passage vectors' --embedding-model.
        raise InputError(exc.path, exc.place, f"{exc.message} (the pool retriever's model, as {model_dir} "
                         f"records it): put that model back, or train again") from None
    recorded = spec.get("pool_model")
    if recorded and not same_model(recorded, retriever.embedder_.identity):
        raise InputError(model_dir, None, f"the pool retriever was tuned with another contextual model "
                         f"({describe_model(recorded)}; found {describe_model(retriever.embedder_.identity)} at "
                         f"{params.get('model')}): put that model back, or train again")
    tuned_on = spec.get("vectors_sha256")
    if tuned_on and tuned_on != retriever_spec(retriever).get("vectors_sha256"):
        warnings.warn(FactcheckWarning(f"{model_dir}: the {method} retriever was tuned on other passage vectors "
                                       f"than those of {index.root}"), stacklevel=2)
    return retriever
