"""The retriever interface every method implements (tags, bm25, rerank, chunked, dense, hybrid).

A retriever is a scikit-learn estimator (:class:`sklearn.base.BaseEstimator`): its
settings are the parameters of ``__init__``, stored unchanged under the same names (so
``get_params``, ``set_params``, ``clone`` and the ``repr`` come from scikit-learn), and
they are checked at ``fit``. ``fit(index)`` binds it to a tag index; what it learns or
builds there ends in ``_`` (``index_`` always). Then, per claim:

* ``rank(claims, depth)`` -- passages ordered by the method's score, for measuring
  retrieval on its own (recall@k, MRR) independently of any cut-off;
* ``retrieve(claims)`` -- the passages the method actually returns as evidence, each
  with an explanation of why it was picked.

Both take one claim string (and answer with one result) or a list of them (and answer
with a list, in order). Subclasses implement ``_rank`` and ``_retrieve`` over a list;
the checks and the one-or-many convention live here, once.

Ties are always broken by corpus order (a stable sort), so results never depend on the
platform's sort or on thread timing.
"""

from __future__ import annotations

import inspect
import os
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError
from sklearn.utils import metadata_routing

from factcheck.errors import InputError, check_number

__all__ = ["Hit", "NotFittedError", "Ranking", "Retriever", "Selection", "TopK", "as_texts", "stable_top"]


@dataclass
class Hit:
    """One passage picked for a claim, with the evidence of why.

    Parameters
    ----------
    row : int
        The passage's row in the index (corpus order).
    id : str
        The passage's id.
    score : float
        The method's score (BM25, combined cosine + overlap, P(gold), ...).
    explanation : dict
        The numbers and terms behind the pick (the ``.explain.json`` sidecar's hit record).

    Example
    -------
    >>> Hit(3, "evidence-3", 2.5, {"bm25": 2.5, "rank": 1}).to_json()
    {'id': 'evidence-3', 'score': 2.5, 'bm25': 2.5, 'rank': 1}
    """

    row: int
    id: str
    score: float
    explanation: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        """The hit as the explanations sidecar records it (``id``, ``score``, then the explanation)."""
        return {"id": self.id, "score": float(self.score), **self.explanation}


@dataclass
class Selection:
    """What a retriever returns as evidence for one claim (:meth:`Retriever.retrieve`).

    Parameters
    ----------
    hits : list of Hit
        The passages returned, best first.
    path : str
        How they were chosen: ``"filtered"`` or ``"fallback"`` (tag rule), ``"ranked"``
        (BM25, dense, hybrid), ``"reranked"`` or ``"fallback"`` (reranker).
    details : dict
        What the method records for the whole claim (its parameters, the claim's tags, ...).

    Example
    -------
    >>> s = Selection([Hit(3, "evidence-3", 2.5), Hit(0, "evidence-0", 1.0)], "ranked")
    >>> s.ids
    ['evidence-3', 'evidence-0']
    >>> s.to_json()["path"]
    'ranked'
    """

    hits: list[Hit]
    path: str
    details: dict = field(default_factory=dict)

    @property
    def ids(self) -> list[str]:
        """The returned passages' ids, best first."""
        return [h.id for h in self.hits]

    def to_json(self) -> dict:
        """The claim's record in the explanations sidecar (path, details, hits)."""
        return {"path": self.path, **self.details, "hits": [h.to_json() for h in self.hits]}


class TopK(NamedTuple):
    """Rows by descending score and their scores (what :func:`stable_top` selects)."""

    rows: np.ndarray
    scores: np.ndarray


@dataclass
class Ranking:
    """A claim's passages by descending score (ties by corpus order), to a depth
    (:meth:`Retriever.rank`).

    Parameters
    ----------
    ids : list of str
        The passages' ids, best first.
    scores : ndarray of float
        Their scores under the method.
    rows : ndarray of int64
        Their rows in the index (``index.ids[rows[i]] == ids[i]``).

    Example
    -------
    >>> import numpy as np
    >>> r = Ranking(["evidence-3", "evidence-0"], np.array([2.5, 1.0]), np.array([3, 0]))
    >>> len(r), r.ids[0]
    (2, 'evidence-3')
    """

    ids: list[str]
    scores: np.ndarray
    rows: np.ndarray

    def __len__(self) -> int:
        return len(self.ids)


class Retriever(BaseEstimator, ABC):
    """Base class of the retrievers: ``fit(index)`` once, then ``rank``/``retrieve`` claims.

    Subclasses take their settings as ``__init__`` parameters (stored unchanged), check
    them in ``fit`` (an :class:`~factcheck.errors.InputError` naming the parameter) and
    implement ``_fit``, ``_rank`` and ``_retrieve``; ``name`` is the method's name in the
    CLI and in model directories.

    Attributes
    ----------
    index_ : TagIndex
        The index the retriever was fitted to.

    Example
    -------
    >>> import factcheck
    >>> index = factcheck.build_index("data/demo/evidence.json", "out/demo-index", progress=False)
    >>> bm25 = factcheck.BM25Retriever(k=2)
    >>> bm25.rank("Sea levels are rising.")
    Traceback (most recent call last):
    ...
    sklearn.exceptions.NotFittedError: This BM25Retriever is not fitted yet: call fit(index) first.
    >>> bm25.fit(index).retrieve("Sea levels are rising.").ids
    ['evidence-8', 'evidence-39']
    >>> [s.ids for s in bm25.retrieve(["Sea levels are rising.", "Arctic ice is melting."])]
    [['evidence-8', 'evidence-39'], ['evidence-5', 'evidence-7']]
    """

    name = "retriever"
    # ``fit``'s ``index`` is the data, not metadata to route: no generated ``set_fit_request``.
    __metadata_request__fit = {"index": metadata_routing.UNUSED}
    # Parameters that cannot change any result (a cache switch, a block size): left out
    # of :meth:`params`, the record written into explanations and model directories.
    _unrecorded: tuple[str, ...] = ()

    # ------------------------------------------------------------------ the interface
    def fit(self, index, **fit_params) -> "Retriever":
        """Check the parameters and bind the retriever to ``index``.

        Parameters
        ----------
        index : TagIndex or str or path
            The knowledge source's tag index (:func:`factcheck.build_index`), or its
            directory (loaded and verified with :meth:`TagIndex.load`).
        **fit_params
            Structures already built for ``index`` that a retriever may reuse (the
            reranker's ``terms``/``context``/``dense``).

        Returns
        -------
        self
            Fitted: ``index_`` and the method's own state are set.
        """
        index = _as_index(index)
        self._check_params()
        self._fit(index, **fit_params)
        self.index_ = index
        return self

    def rank(self, claims, depth: int = 100):
        """Passages by descending score, to ``depth``, for one claim or for each of a list.

        Parameters
        ----------
        claims : str or sequence of str
            One claim, or several.
        depth : int, default 100
            How many passages to rank (fewer when the index has fewer).

        Returns
        -------
        Ranking or list of Ranking
            One :class:`Ranking` for a string; a list of them, in order, for a sequence.
        """
        self._check_fitted()
        texts, one = as_texts(claims)
        check_number(depth, "depth", integer=True, low=1)
        ids = self.index_.ids
        out = [Ranking([ids[r] for r in rows.tolist()], scores, rows) for rows, scores in self._rank(texts, depth)]
        return out[0] if one else out

    def retrieve(self, claims):
        """The evidence the method returns, with its explanation, for one claim or each of a list.

        Parameters
        ----------
        claims : str or sequence of str
            One claim, or several.

        Returns
        -------
        Selection or list of Selection
            One :class:`Selection` for a string; a list of them, in order, for a sequence.
        """
        self._check_fitted()
        texts, one = as_texts(claims)
        out = self._retrieve(texts)
        return out[0] if one else out

    def params(self) -> dict:
        """The parameters that determine the results, as explanations and model
        directories record them: :meth:`get_params` in signature order, less the settings
        that cannot change a result (e.g. ``cache``)."""
        values = self.get_params(deep=False)
        return {name: values[name] for name in _signature_order(type(self)) if name not in self._unrecorded}

    # ------------------------------------------------------------------ for subclasses
    @abstractmethod
    def _fit(self, index, **fit_params) -> None:
        """Build the method's state for ``index`` (``self.index_`` is set after it)."""

    @abstractmethod
    def _rank(self, texts: list[str], depth: int) -> list[TopK]:
        """Per claim, the top ``depth`` rows and their scores."""

    @abstractmethod
    def _retrieve(self, texts: list[str]) -> list[Selection]:
        """Per claim, the evidence selection."""

    def _check_params(self) -> None:
        """Raise :class:`~factcheck.errors.InputError` (naming the parameter) for a bad value."""

    def _check_fitted(self) -> None:
        if not self.__sklearn_is_fitted__():
            raise NotFittedError(f"This {type(self).__name__} is not fitted yet: call fit(index) first.")

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "index_")


def _signature_order(cls) -> list[str]:
    return [p.name for p in inspect.signature(cls.__init__).parameters.values()
            if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def as_texts(claims) -> tuple[list[str], bool]:
    """``(texts, one)``: one claim string as a list of one (``one`` True), or every string
    of a sequence (``one`` False). Anything else is an InputError naming ``claims``:
    iterating a string by accident would retrieve for each of its characters."""
    if isinstance(claims, str):
        return [claims], True
    if isinstance(claims, (bytes, bytearray)) or not hasattr(claims, "__iter__"):
        raise InputError(None, None, f"expected a claim string or a list of them, got {type(claims).__name__}",
                         param="claims")
    texts = list(claims)
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise InputError(None, f"[{i}]", f"expected a claim string, got {type(text).__name__}", param="claims")
    return texts, False


def _as_index(index):
    if isinstance(index, (str, os.PathLike)):
        from factcheck.tagging.index import TagIndex
        return TagIndex.load(index)
    if not hasattr(index, "ids"):
        raise InputError(None, None, f"expected a TagIndex (factcheck.build_index or TagIndex.load) or its "
                         f"directory, got {type(index).__name__}", param="index")
    return index


def stable_top(scores: np.ndarray, depth: int) -> TopK:
    """Rows of the top ``depth`` scores, descending, ties by row ascending.

    Sparse-scoring retrievers give most passages exactly 0, and ``np.partition`` is slow
    on such heavily tied arrays, so the positive scores are selected first (partition,
    then a stable lexsort -- numpy's default sorts are not stable) and any remaining
    places are filled by the zero-score rows in corpus order.
    """
    n = len(scores)
    depth = min(depth, n)
    positive = np.flatnonzero(scores > 0)
    if len(positive) > depth:
        vals = scores[positive]
        cut = np.partition(vals, len(vals) - depth)[len(vals) - depth]
        positive = positive[vals >= cut]
    order = positive[np.lexsort((positive, -scores[positive]))][:depth]
    if len(order) < depth:
        rest = np.flatnonzero(scores <= 0)
        if len(rest) and scores[rest].min() < 0:  # negative scores: order them fully
            rest = rest[np.lexsort((rest, -scores[rest]))]
        order = np.concatenate([order, rest[: depth - len(order)]])
    order = order.astype(np.int64)
    return TopK(order, scores[order])


def stable_top_sparse(rows: np.ndarray, scores: np.ndarray, n: int, depth: int) -> TopK:
    """:func:`stable_top` of the ``n``-long score vector that is ``scores`` at ``rows``
    (distinct, any order) and 0 elsewhere, without building it: what a sparse product's
    row gives. Scores must not be negative (entries of 0 are as if absent).
    """
    # Called once per query: few numpy calls, most on <= depth entries. (A version that
    # took a whole batch's rows in a few passes was 2x slower: the passes over the batch
    # miss the cache where one row's few hundred entries stay in it.)
    rows, vals = np.asarray(rows), np.asarray(scores)
    depth = min(depth, n)
    if len(vals) and vals.min() <= 0:
        positive = vals > 0
        rows, vals = rows[positive], vals[positive]
    if len(rows) > depth:
        cut = np.partition(vals, len(vals) - depth)[len(vals) - depth]
        keep = vals >= cut
        rows, vals = rows[keep], vals[keep]
    order = np.lexsort((rows, -vals))[:depth]
    rows, vals = rows[order].astype(np.int64), vals[order]
    if len(rows) < depth:  # zero-score rows follow in corpus order
        free = np.ones(min(n, depth + len(rows)), dtype=bool)  # the first rows are enough
        free[rows[rows < len(free)]] = False
        zeros = np.flatnonzero(free)[: depth - len(rows)]
        rows = np.concatenate([rows, zeros])
        vals = np.concatenate([vals, np.zeros(len(zeros), dtype=vals.dtype)])
    return TopK(rows, vals)


def stable_top_rows(matrix, depth: int) -> list[TopK]:
    """:func:`stable_top_sparse` of every row of a sparse (queries x passages) score
    matrix -- a batch's product."""
    m = sp.csr_matrix(matrix)
    bounds = m.indptr.tolist()
    return [stable_top_sparse(m.indices[a:b], m.data[a:b], m.shape[1], depth)
            for a, b in zip(bounds[:-1], bounds[1:])]
