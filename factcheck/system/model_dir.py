"""The model directory format: what a trained system is saved as, and how it is rebuilt.

A model directory holds ``classifier.skops`` (the scikit-learn pipeline and a ``meta``
record: which retriever and reader with which parameters, every other tuned retriever,
the index it was trained against, the mode -- ``course`` or ``open`` -- it was trained
in) and, for the learned retriever, ``rerank.skops``. An open-mode model's dense and
hybrid retrievers record the ``content_sha256`` of the passage vectors they were tuned on.
``factcheck predict``/``ablation``/``serve`` rebuild the exact system from it
(:meth:`factcheck.FactChecker.load`).

The two files are one unit: the classifier's meta records the sha256 of the
``rerank.skops`` it was trained with (``rerank_sha256``; ``None`` when it was trained
without one), and the reranker is loaded only when its bytes match. Why: a training
stopped between writing the two (``rerank.skops`` is written first) left a new reranker
beside the old classifier, and both loaded.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from factcheck.classification.model import save_classifier
from factcheck.errors import FactcheckWarning, InputError
from factcheck.formats.files import sha256_file
from factcheck.retrieval.registry import check_mode, make_retriever, retriever_spec

__all__ = ["RERANK_FILE", "save_system", "available_methods", "model_mode", "require_mode", "load_retriever"]

RERANK_FILE = "rerank.skops"


def save_system(model_dir: Path, classifier, retriever, meta: dict, alternatives: dict | None = None,
                reader=None) -> None:
    """Save the classifier, the chosen retriever and reader, and every other tuned
    retriever's spec, so a user (or the app) can switch retriever without re-tuning."""
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


def check_rerank_file(path: Path, meta: dict) -> None:
    """``rerank.skops`` must be the file the classifier was trained with (models saved
    before the sha256 was recorded are not checked)."""
    if "rerank_sha256" not in meta:
        return
    recorded = meta["rerank_sha256"]
    if recorded is None or sha256_file(path) != recorded:
        raise InputError(path, None, "is not the reranker classifier.skops was trained with (its sha256 "
                         "differs): the model directory mixes two trainings; train it again")


def available_methods(meta: dict) -> list[str]:
    """The retrievers a model directory's record can rebuild, by name."""
    return sorted((meta.get("retrievers") or {meta["retriever"]["method"]: None}).keys())


def model_mode(meta: dict) -> str:
    """The mode a model was trained in (models from before the open mode: ``course``)."""
    return meta.get("mode", "course")


def require_mode(model_dir: Path, mode: str, embedding_model=None) -> None:
    """An open-mode model needs its embedding model (the open extra, or the local model the
    model directory records as ``embedding_model``): say so in one line naming the model."""
    try:
        check_mode(mode, embedding_model)
    except InputError as exc:
        where = f"{exc.path}: " if exc.path else ""
        raise InputError(model_dir, None, f"was trained in the {mode} mode; {where}{exc.message}",
                         param=exc.param or "mode") from None


def load_retriever(model_dir: Path, meta: dict, method: str | None = None, index=None):
    """The chosen retriever, or another tuned one by name (``tags``, ``bm25``, ``rerank``,
    and in an open-mode model ``dense``, ``hybrid``); fitted to ``index`` if given.

    A dense or hybrid retriever fitted to vectors other than those it was tuned on (the
    model records their ``content_sha256``) still works, with a warning."""
    chosen = meta.get("retriever") or {}
    method = method or chosen.get("method")
    if method is None:
        raise InputError(model_dir, None, "model does not name its retriever")
    spec = (meta.get("retrievers") or {}).get(method) or (chosen if chosen.get("method") == method else {})
    params = dict(spec.get("params", {}))
    if method == "rerank":
        path = Path(model_dir) / RERANK_FILE
        if not path.is_file():
            raise InputError(path, None, "no trained reranker in this model directory")
        check_rerank_file(path, meta)
        params = {"model": path}
    retriever = make_retriever(method, params, spec.get("chunk_window"), spec.get("chunk_overlap", 20),
                               mode=model_mode(meta), embedding_model=meta.get("embedding_model"))
    if index is None:
        return retriever
    retriever.fit(index)
    tuned_on = spec.get("vectors_sha256")
    if tuned_on and tuned_on != retriever_spec(retriever).get("vectors_sha256"):
        warnings.warn(FactcheckWarning(f"{model_dir}: the {method} retriever was tuned on other passage vectors "
                                       f"than those of {index.root}"), stacklevel=2)
    return retriever
