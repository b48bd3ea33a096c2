"""``FactChecker``, a trained system (tag index + retriever + classifier), and its ``Verdicts``.

The *retriever* returns the evidence, the *reader* (often the same) supplies the passages
the classifier reads; the explanation records what it read.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType

import numpy as np

from factcheck.classification.model import load_classifier
from factcheck.errors import FactcheckWarning, InputError, ref
from factcheck.formats.claims import Claim, as_claims
from factcheck.retrieval.base import Explanation
from factcheck.retrieval.base import evidence_of, retriever_spec, run_retrieval
from factcheck.retrieval.registry import check_mode
from factcheck.system.model_dir import available_methods, load_retriever, model_mode, require_mode

__all__ = ["FactChecker", "Verdict", "Verdicts", "evidence_slots", "write_verdicts"]


@dataclass(frozen=True)
class Verdict:
    """What :meth:`FactChecker.check` found for one claim.

    Parameters
    ----------
    id : str
        The claim's id (a plain string's is its position in the input: ``"0"``, ``"1"``, ...).
    text : str
        The claim.
    label : str
        The predicted label, one of :data:`factcheck.formats.claims.LABELS`.
    explanation : Explanation
        The evidence with its scores, what the classifier read, the label probabilities.

    Example
    -------
    >>> from factcheck.retrieval.base import Explanation
    >>> why = Explanation("ranked", [{"id": "evidence-8", "score": 6.7}], probabilities={"SUPPORTS": 0.7, "REFUTES": 0.3})
    >>> v = Verdict("0", "Sea levels are rising.", "SUPPORTS", why)
    >>> v.label, v.evidences, v.probabilities["SUPPORTS"]
    ('SUPPORTS', ['evidence-8'], 0.7)
    """

    id: str
    text: str
    label: str
    explanation: Explanation

    @property
    def evidences(self) -> list[str]:
        """The ids of the passages returned as evidence, best first."""
        return self.explanation.ids

    @property
    def probabilities(self) -> dict[str, float]:
        """The classifier's probability of each label (plain floats)."""
        return self.explanation.probabilities or {}


def _per_claim(field: str, doc: str) -> property:
    return property(lambda self: [getattr(v, field) for v in self._verdicts], doc=doc)


class Verdicts(Sequence):
    """What :meth:`FactChecker.check` found for a list of claims: one :class:`Verdict` per
    claim, indexed by position in input order; :attr:`by_id` reaches a claim by its id.

    Parameters
    ----------
    verdicts : sequence of Verdict
        In input order; claim ids must be distinct.

    Example
    -------
    >>> from factcheck.retrieval.base import Explanation
    >>> a = Verdict("claim-1", "Sea levels are rising.", "SUPPORTS", Explanation("ranked", [{"id": "evidence-8"}]))
    >>> b = Verdict("claim-2", "The Arctic is cooling.", "REFUTES", Explanation("ranked", [{"id": "evidence-5"}]))
    >>> verdicts = Verdicts([a, b])
    >>> len(verdicts), verdicts[0].label, verdicts.labels
    (2, 'SUPPORTS', ['SUPPORTS', 'REFUTES'])
    >>> verdicts.by_id["claim-2"].evidences
    ['evidence-5']
    >>> verdicts.predictions()
    {'claim-1': {'evidences': ['evidence-8'], 'claim_label': 'SUPPORTS'}, 'claim-2': {'evidences': ['evidence-5'], 'claim_label': 'REFUTES'}}
    """

    def __init__(self, verdicts):
        self._verdicts = list(verdicts)
        _check_distinct([v.id for v in self._verdicts])
        self._by_id = MappingProxyType({v.id: v for v in self._verdicts})

    def __len__(self) -> int:
        return len(self._verdicts)

    def __getitem__(self, position):
        if isinstance(position, slice):
            return Verdicts(self._verdicts[position])
        return self._verdicts[position]

    def __repr__(self) -> str:
        return f"Verdicts({len(self)} claims: {dict(Counter(self.labels))})"

    @property
    def by_id(self) -> Mapping[str, Verdict]:
        """Claim id -> :class:`Verdict` (read-only), in input order."""
        return self._by_id

    ids = _per_claim("id", "The claims' ids, in input order.")
    labels = _per_claim("label", "The predicted labels, in input order.")
    evidences = _per_claim("evidences", "The evidence ids of each claim, in input order.")
    probabilities = _per_claim("probabilities", "The label probabilities of each claim, in input order.")
    explanations = _per_claim("explanation", "The explanation of each claim, in input order.")

    def predictions(self, max_evidence: int | None = None) -> dict[str, dict]:
        """The leaderboard format: claim id -> ``{"evidences": [...], "claim_label": ...}``
        (what :func:`factcheck.write_predictions` writes and :func:`factcheck.evaluate` scores);
        ``max_evidence``: the evidence slots per claim (:func:`evidence_slots`)."""
        return {v.id: {"evidences": evidence_slots(v, max_evidence), "claim_label": v.label} for v in self._verdicts}


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
    reader : Retriever or None
        Supplies the passages the classifier reads, when it is not ``retriever``.
    meta, model_dir : dict, Path or None
        Set by :meth:`load`: the model directory's record and where it is.

    Example
    -------
    A system trained by ``factcheck run --data-dir data/demo --out out/demo``:

    >>> checker = FactChecker.load("out/demo/index", "out/demo/model")  # doctest: +SKIP
    >>> checker.check("Sea levels are rising.").label                   # doctest: +SKIP
    'SUPPORTS'

    Or assembled from parts:

    >>> import factcheck
    >>> index = factcheck.build_index("data/demo/evidence.json", "out/demo-index", progress=False)
    >>> bm25 = factcheck.BM25Retriever(k=2).fit(index)
    >>> train = factcheck.read_claims("data/demo/train-claims.json", require_labels=True)
    >>> X = [(c.text, index.texts_of(s.ids)) for c, s in zip(train, bm25.retrieve([c.text for c in train]))]
    >>> classifier = factcheck.make_classifier().fit(X, [c.label for c in train])
    >>> checker = FactChecker(index, bm25, classifier)
    >>> verdicts = checker.check(["Sea levels are rising.", "The Arctic is cooling."])
    >>> verdicts[0].evidences
    ['evidence-8', 'evidence-39']
    >>> all(label in classifier.classes_ for label in verdicts.labels)
    True
    """

    def __init__(self, index, retriever, classifier, reader=None, *, meta: dict | None = None, model_dir=None):
        for name, part, needs in (("retriever", retriever, "retrieve"), ("classifier", classifier, "predict_proba"),
                                  ("reader", reader or retriever, "retrieve")):
            if not callable(getattr(part, needs, None)):
                raise InputError(None, None, f"expected an object with {needs}(), got {type(part).__name__}",
                                 param=name)
        self.index = index
        self.retriever = retriever
        self.classifier = classifier
        self.reader = reader or retriever
        self.meta = meta or {}
        self.model_dir = model_dir

    @property
    def mode(self) -> str:
        """``"course"`` or ``"open"``: the mode the model was trained in."""
        return model_mode(self.meta)

    @property
    def chosen_method(self) -> str:
        """The retriever the model chose (its ``retriever`` record), else this one's name."""
        return self.meta.get("retriever", {}).get("method") or self.retriever.name

    @classmethod
    def load(cls, index_dir: Path, model_dir: Path, method: str | None = None,
             mode: str | None = None) -> "FactChecker":
        """The system a model directory records, on the tag index ``index_dir``.

        Parameters
        ----------
        index_dir : str or Path
            The tag index (``OUT/index`` of a run).
        model_dir : str or Path
            The model directory (``OUT/model``).
        method : str or None
            Another tuned retriever of the model's instead of the chosen one
            (``"tags"``, ``"bm25"``, ``"rerank"``, ...).
        mode : {"course", "open"} or None
            None: the model's own; otherwise the mode the caller expects (another is an error).

        Returns
        -------
        FactChecker
        """
        from factcheck.tagging.index import TagIndex
        classifier, meta = load_classifier(model_dir)
        trained_in = model_mode(meta)
        if mode is not None and check_mode(mode, meta.get("embedding_model")) != trained_in:
            raise InputError(model_dir, None, f"was trained in the {trained_in} mode, not the {mode} mode "
                             f"(use {ref('mode')} {trained_in}, or train a model in the {mode} mode)", param="mode")
        require_mode(model_dir, trained_in, meta.get("embedding_model"))
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
        return cls(index, retriever, classifier, reader, meta=meta, model_dir=model_dir)

    def using(self, method: str) -> "FactChecker":
        """This system with another of its model's tuned retrievers (also as the reader)."""
        if method not in available_methods(self.meta):
            raise InputError(self.model_dir, None, f"this model has no {method!r} retriever; it has "
                             + ", ".join(available_methods(self.meta)), param="method")
        retriever = load_retriever(self.model_dir, self.meta, method, self.index)
        return FactChecker(self.index, retriever, self.classifier, meta=self.meta, model_dir=self.model_dir)

    def texts(self, ids: list[str]) -> list[str]:
        """The texts of these passage ids."""
        return self.index.texts_of(ids)

    def _read_texts(self, explanation: Explanation) -> list[str]:
        # The hits carry their rows: no id is looked up again (a stand-in reader's hits may not).
        rows = [h.row for h in explanation.hits]
        return self.texts(explanation.ids) if None in rows else self.index.texts.take(rows)

    def check(self, claims):
        """Evidence, label, label probabilities and explanation of one claim or of each of a list.

        Parameters
        ----------
        claims : str or Claim, or a sequence of str and Claim
            Plain strings get their position as id (``"0"``, ``"1"``, ...), claims keep theirs;
            ids must be distinct.

        Returns
        -------
        Verdict or Verdicts
            One :class:`Verdict` for a string or a claim; for a sequence, a :class:`Verdicts`.
        """
        one = isinstance(claims, (str, Claim))
        claims = as_claims(claims)
        _check_distinct([c.id for c in claims])  # before the work: results are keyed by id
        explained = run_retrieval(self.retriever, claims)
        explained_by = explained if self.reader is self.retriever else run_retrieval(self.reader, claims, depth=0)
        read = evidence_of(explained_by)
        X = [(c.text, self._read_texts(explained_by[c.id])) for c in claims]
        proba = self.classifier.predict_proba(X) if claims else np.zeros((0, len(self.classifier.classes_)))
        classes = [str(c) for c in self.classifier.classes_]
        out = []
        for claim, p in zip(claims, proba.tolist()):
            why = replace(explained[claim.id], probabilities=dict(zip(classes, p)),
                          classifier_read={"method": self.reader.name, "ids": read[claim.id]})
            out.append(Verdict(claim.id, claim.text, classes[int(np.argmax(p))], why))
        return out[0] if one else Verdicts(out)


def evidence_slots(verdict: Verdict, max_evidence: int | None) -> list[str]:
    """A verdict's evidence ids as predictions hold them: ``max_evidence`` slots
    (:meth:`~factcheck.retrieval.base.Explanation.slots`), or for None the retriever's own."""
    return verdict.evidences if max_evidence is None else verdict.explanation.slots(max_evidence)


def write_verdicts(path: Path, claims, verdicts: Verdicts, system: FactChecker, predictions_format: str | None = None,
                   also_fever: bool = False, max_evidence: int | None = None) -> dict[str, dict]:
    """A system's predictions and explanations; ``also_fever``: FEVER's format beside them too;
    ``max_evidence``: the evidence slots per claim (:func:`evidence_slots`). Returns the
    predictions written (:meth:`Verdicts.predictions`)."""
    from factcheck.formats import fever
    from factcheck.formats.claims import write_explained_predictions
    predictions = verdicts.predictions(max_evidence)
    labels = {cid: p["claim_label"] for cid, p in predictions.items()}
    evidences = {cid: p["evidences"] for cid, p in predictions.items()}
    write_explained_predictions(path, claims, evidences, {v.id: v.explanation.to_json() for v in verdicts},
                                retriever_spec(system.retriever), labels, predictions_format)
    if also_fever:
        fever.write_predictions(path.with_suffix(".jsonl"), claims, evidences, labels)
    return predictions


def _check_distinct(ids: list[str]) -> None:
    first: dict[str, int] = {}
    for position, cid in enumerate(ids):
        if first.setdefault(cid, position) != position:
            raise InputError(None, f"[{position}]", f"duplicate claim id {cid!r} (also at [{first[cid]}])",
                             param="claims")
