"""``FactChecker``, a trained system (tag index + retriever + classifier), and ``Verdicts``.

Two retrievers play two roles, each chosen on the training hold-out: the *retriever*
returns the evidence (best evidence F), the *reader* supplies the passages the
classifier reads (best label accuracy). They are often the same; when they are not
(e.g. the reranker finds gold passages more precisely, while BM25's top passages
serve the classifier better), both are run and the explanation records what the
classifier read. What a trained system is saved as: :mod:`factcheck.system.model_dir`.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from factcheck.classification.model import load_classifier
from factcheck.errors import FactcheckWarning, InputError
from factcheck.formats.claims import as_claims
from factcheck.retrieval.registry import check_mode, retriever_spec, run_retrieval
from factcheck.system.model_dir import load_retriever, model_mode, require_mode

__all__ = ["FactChecker", "Verdicts"]


@dataclass
class Verdicts:
    """What :meth:`FactChecker.check` found, each a dict keyed by claim id: the evidence
    ids, the label, the label probabilities and the explanation record."""

    evidences: dict[str, list[str]]
    labels: dict[str, str]
    probabilities: dict[str, dict[str, float]]
    explain: dict[str, dict]


class FactChecker:
    """A trained system: retrieve evidence for claims, then classify each claim.

    Parameters
    ----------
    index : TagIndex
        The knowledge source's index (:func:`factcheck.build_index`).
    retriever : Retriever
        Fitted to ``index``; returns the evidence.
    classifier : scikit-learn estimator
        Reads ``(claim text, [passage texts])`` pairs (:func:`factcheck.make_classifier`).
    meta : dict
        The model directory's record (which retrievers, trained against which index).
    reader : Retriever or None
        Supplies the passages the classifier reads, when it is not ``retriever``.

    Example
    -------
    >>> checker = FactChecker.load("out/demo/index", "out/demo/model")  # doctest: +SKIP
    >>> verdicts = checker.check(["Sea levels are rising."])            # doctest: +SKIP
    >>> verdicts.labels["0"], verdicts.evidences["0"]                   # doctest: +SKIP
    """

    def __init__(self, index, retriever, classifier, meta: dict, reader=None):
        self.index = index
        self.retriever = retriever
        self.classifier = classifier
        self.meta = meta
        self.reader = reader or retriever

    @property
    def mode(self) -> str:
        """``"course"`` or ``"open"``: the mode the model was trained in."""
        return model_mode(self.meta)

    @classmethod
    def load(cls, index_dir: Path, model_dir: Path, method: str | None = None,
             mode: str | None = None) -> "FactChecker":
        """The system a model directory records, on the tag index ``index_dir``.

        ``mode``: ``None`` (the model's own) or the mode the caller expects; a model
        trained in another mode is a one-line error, as is an open-mode model where the
        open extra is not installed.
        """
        from factcheck.tagging.index import TagIndex
        classifier, meta = load_classifier(model_dir)
        trained_in = model_mode(meta)
        if mode is not None and check_mode(mode) != trained_in:
            raise InputError(model_dir, None, f"was trained in the {trained_in} mode, not the {mode} mode "
                             f"(use mode {trained_in}, or train a model in the {mode} mode)", param="mode")
        require_mode(model_dir, trained_in)
        index = TagIndex.load(index_dir)
        trained_on = meta.get("index_plan_key")
        if trained_on and trained_on != index.manifest.data.get("plan_key"):
            warnings.warn(FactcheckWarning(f"{model_dir} was trained against another tag index than {index_dir}"),
                          stacklevel=2)
        retriever = load_retriever(model_dir, meta, method, index)
        reader_method = (meta.get("reader") or {}).get("method")
        reader = None
        if reader_method and reader_method != retriever_spec(retriever)["method"]:
            reader = load_retriever(model_dir, meta, reader_method, index)
        return cls(index, retriever, classifier, meta, reader)

    def texts(self, ids: list[str]) -> list[str]:
        return self.index.texts_of(ids)

    def read(self, claims, evidences: dict | None = None) -> dict[str, list[str]]:
        """The passages the classifier reads for each claim."""
        claims = as_claims(claims)
        if self.reader is self.retriever and evidences is not None:
            return evidences
        return run_retrieval(self.reader, claims, depth=0)[0]

    def check(self, claims) -> Verdicts:
        """Evidence, label, label probabilities and explanation of every claim.

        Parameters
        ----------
        claims : str, or a sequence of str or :class:`~factcheck.formats.claims.Claim`
            Plain strings are keyed by their position (``"0"``, ``"1"``, ...), claims by their id.

        Example
        -------
        >>> checker.check(["Sea levels are rising."]).labels  # doctest: +SKIP
        {'0': 'SUPPORTS'}
        """
        claims = as_claims(claims)
        evidences, explain = run_retrieval(self.retriever, claims)
        read = self.read(claims, evidences)
        X = [(c.text, self.texts(read[c.id])) for c in claims]
        proba = self.classifier.predict_proba(X) if claims else np.zeros((0, 4))
        classes = [str(c) for c in self.classifier.classes_]
        labels, probabilities = {}, {}
        for claim, p in zip(claims, proba):
            labels[claim.id] = classes[int(np.argmax(p))]
            probabilities[claim.id] = {c: float(v) for c, v in zip(classes, p)}
            explain[claim.id]["probabilities"] = probabilities[claim.id]
            explain[claim.id]["classifier_read"] = {"method": self.reader.name, "ids": read[claim.id]}
        return Verdicts(evidences, labels, probabilities, explain)
