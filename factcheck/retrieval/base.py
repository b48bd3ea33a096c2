"""The retriever interface every method implements (a scikit-learn estimator), and its result types."""

from __future__ import annotations

import inspect
import os
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from collections.abc import Sequence
from typing import Iterable, NamedTuple

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError
from sklearn.utils import metadata_routing

from factcheck.errors import InputError, check_number, validate_params
from factcheck.scoring.topk import DEPTH

__all__ = ["Explanation", "Hit", "NotFittedError", "Ranking", "Retriever", "Selection", "TermRetriever", "TopK", "as_texts",
           "evidence_of", "retriever_spec", "run_retrieval"]



@dataclass
class Hit:
    """One passage picked for a claim, with the evidence of why.

    The one form of a hit from the scorer to the predictions file: an explanation holds its
    hits as these, and the sidecar's dicts are made at the file boundary (:meth:`to_json`).

    Parameters
    ----------
    row : int or None
        The passage's row in the index (corpus order); None for a hit read from a sidecar.
    id : str
    score : float or None
        The method's score (None: a record that gives none).
    explanation : dict
        The numbers and terms behind the pick.
    title : str or None
        The passage's title, when the index has titles.
    text : str or None
        The passage's own text, when the result carries texts (:func:`factcheck.search`).

    Example
    -------
    >>> Hit(3, "evidence-3", 2.5, {"bm25": 2.5, "rank": 1}).to_json()
    {'id': 'evidence-3', 'score': 2.5, 'bm25': 2.5, 'rank': 1}
    """

    row: int | None = field(compare=False)  # the same passage whether its row is known or not
    id: str
    score: float | None
    explanation: dict = field(default_factory=dict)
    title: str | None = None
    text: str | None = None

    def to_json(self) -> dict:
        """The hit as the explanations sidecar records it."""
        out = {"id": self.id, **({} if self.score is None else {"score": float(self.score)}), **self.explanation}
        if self.title is not None:
            out["title"] = self.title
        return out

    @classmethod
    def from_json(cls, record: dict) -> "Hit":
        """The inverse of :meth:`to_json` (the row unknown)."""
        rest = dict(record)
        return cls(None, rest.pop("id"), rest.pop("score", None), rest, rest.pop("title", None))


@dataclass
class Ranking(Sequence):
    """A claim's scored passages by descending score (ties by corpus order), to a depth.

    A sequence of :class:`Hit`: ``len``, indexing (``ranking[0]``, ``ranking[-1]``; a slice
    is a shorter ``Ranking``) and iteration, each hit with its ``id``, ``score`` (a float),
    ``title`` and ``text`` (None where the ranking has none).

    Parameters
    ----------
    ids : list of str
        The passages' ids, best first.
    scores : list of float
        Their scores.
    rows : list of int
        Their rows in the index.
    titles : list of str or None, or None
        Their titles, when the index has titles.
    texts : list of str or None
        Their texts, from :func:`factcheck.search`.

    Example
    -------
    >>> r = Ranking(["evidence-3", "evidence-0"], [2.5, 1.0], [3, 0])
    >>> len(r), r.ids[0], r.to_json()
    (2, 'evidence-3', ['evidence-3', 'evidence-0'])
    >>> best = r[0]
    >>> best.id, best.score, [hit.id for hit in r], r[-1].row, r[1:].ids
    ('evidence-3', 2.5, ['evidence-3', 'evidence-0'], 0, ['evidence-0'])
    """

    ids: list[str]
    scores: list[float]
    rows: list[int]
    titles: list[str | None] | None = None
    texts: list[str] | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return Ranking(self.ids[i], self.scores[i], self.rows[i], None if self.titles is None else self.titles[i],
                           None if self.texts is None else self.texts[i])
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)):
            raise TypeError(f"Ranking indices must be integers or slices, not {type(i).__name__}")
        return Hit(self.rows[i], self.ids[i], float(self.scores[i]), {}, None if self.titles is None else self.titles[i],
                   None if self.texts is None else self.texts[i])

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __contains__(self, item) -> bool:
        # a passage id is "in" a ranking as its hit is (``"evidence-3" in ranking``)
        return item in self.ids if isinstance(item, str) else any(hit == item for hit in self)

    def to_json(self) -> list[str]:
        """The ids, best first."""
        return list(self.ids)


@dataclass
class Selection:
    """What a retriever returns as evidence for one claim (:meth:`Retriever.retrieve`).

    Parameters
    ----------
    hits : list of Hit
        The passages returned, best first.
    path : str
        How they were chosen: ``"filtered"``, ``"ranked"``, ``"reranked"`` or ``"fallback"``.
    details : dict
        What the method records for the whole claim.
    ranking : Ranking or None
        The claim's ranking from the same scoring (:meth:`Retriever.search`).

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
    ranking: Ranking | None = None

    @property
    def ids(self) -> list[str]:
        """The returned passages' ids, best first."""
        return [h.id for h in self.hits]

    def to_json(self) -> dict:
        """The claim's record in the explanations sidecar."""
        return Explanation.of(self).to_json()


@dataclass(frozen=True)
class Explanation:
    """The ``.explain.json`` sidecar's record of one claim: why it got its evidence (and label).

    Parameters
    ----------
    path : str
        How the evidence was chosen (:attr:`Selection.path`).
    hits : list of Hit
        The returned passages, best first (a sidecar's records, :meth:`Hit.to_json`, are read as hits).
    details : dict
        What the method records for the whole claim.
    ranking : list of str or None
        The claim's ranking's ids, when one was kept.
    probabilities : dict of str to float or None
        The classifier's probability of each label.
    classifier_read : dict or None
        ``{"method", "ids"}``: the passages the classifier read.

    Example
    -------
    >>> e = Explanation.of(Selection([Hit(3, "evidence-3", 2.5, {"rank": 1})], "ranked"))
    >>> e.ids, e.to_json()
    (['evidence-3'], {'path': 'ranked', 'hits': [{'id': 'evidence-3', 'score': 2.5, 'rank': 1}]})
    >>> Explanation.from_json(e.to_json()) == e
    True
    """

    path: str
    hits: list[Hit]
    details: dict = field(default_factory=dict)
    ranking: list[str] | None = None
    probabilities: dict[str, float] | None = None
    classifier_read: dict | None = None

    def __post_init__(self):
        if any(isinstance(h, dict) for h in self.hits):
            object.__setattr__(self, "hits", [Hit.from_json(h) if isinstance(h, dict) else h for h in self.hits])

    @classmethod
    def of(cls, selection: Selection, **fields) -> "Explanation":
        """The explanation of a :class:`Selection` (its hits as they are)."""
        ranking = selection.ranking.ids if selection.ranking is not None else None
        return cls(selection.path, selection.hits, selection.details, ranking, **fields)

    @classmethod
    def from_json(cls, record: dict) -> "Explanation":
        """The inverse of :meth:`to_json`."""
        rest = dict(record)
        own = {name: rest.pop(name) for name in ("path", "hits", "ranking", "probabilities", "classifier_read")
               if name in rest}
        return cls(details=rest, **own)

    @property
    def ids(self) -> list[str]:
        """The evidence's ids, best first."""
        return [h.id for h in self.hits]

    def slots(self, n: int) -> list[str]:
        """``n`` evidence ids where there are as many: the returned passages' (at most ``n``), then
        the ranking's next (FEVER's five evidence slots; docs/fever-score.md).

        Example
        -------
        >>> e = Explanation("ranked", [{"id": "evidence-3"}], ranking=["evidence-3", "evidence-0", "evidence-7"])
        >>> e.slots(2), e.slots(5), e.slots(1)
        (['evidence-3', 'evidence-0'], ['evidence-3', 'evidence-0', 'evidence-7'], ['evidence-3'])
        """
        ids = self.ids[:n]
        taken = set(ids)
        for pid in self.ranking or ():
            if len(ids) >= n:
                break
            if pid not in taken:
                ids.append(pid)
                taken.add(pid)
        return ids

    def to_json(self) -> dict:
        """The sidecar's record (fields that are None left out)."""
        out = {"path": self.path, **self.details, "hits": [h.to_json() for h in self.hits]}
        for name in ("ranking", "probabilities", "classifier_read"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        return out


class TopK(NamedTuple):
    """Rows by descending score and their scores."""

    rows: np.ndarray
    scores: np.ndarray


class Scored(NamedTuple):
    """One claim's scored rows (None: every row), their scores, and what the selection reads."""

    rows: np.ndarray | None
    scores: np.ndarray
    state: object = None


class Retriever(BaseEstimator, ABC):
    """Base class of the retrievers: ``fit(index)`` once, then ``rank``/``retrieve``/``search`` claims.

    Subclasses implement ``_fit``, ``_scored`` and ``_explain`` (or ``_select``).

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
    >>> found = bm25.retrieve("Sea levels are rising.", depth=4)
    >>> found.ids, found.ranking.ids
    (['evidence-8', 'evidence-39'], ['evidence-8', 'evidence-39', 'evidence-7', 'evidence-37'])
    """

    name = "retriever"
    #: Each parameter's constraint (:func:`~factcheck.errors.validate_params`; the CLI's options read them).
    _parameter_constraints: dict = {}
    # ``fit``'s ``index`` is the data, not metadata to route: no generated ``set_fit_request``.
    __metadata_request__fit = {"index": metadata_routing.UNUSED}
    # False: derived arrays (BM25's weights, TF-IDF's matrices) are built in memory, not kept in the
    # index directory (see :func:`without_cache`); never changes a result, so no parameter.
    _cache: bool = True

    def fit(self, index, **fit_params) -> "Retriever":
        """Check the parameters and bind the retriever to ``index``.

        Parameters
        ----------
        index : TagIndex or str or path
            The tag index (:func:`factcheck.build_index`), or its directory.
        **fit_params
            Structures already built for ``index`` that a retriever may reuse.

        Returns
        -------
        self
        """
        index = _as_index(index)
        self._check_params()
        self._fit(index, **fit_params)
        self.index_ = index
        return self

    def rank(self, claims, k: int = 100):
        """The passages the method scores for one claim or each of a list, best first, to depth ``k``.

        Parameters
        ----------
        claims : str or sequence of str
        k : int, default 100
            How many passages to rank at most.

        Returns
        -------
        Ranking or list of Ranking
            One for a string; a list of them for a sequence.
        """
        texts, one = self._prepare(claims, k)
        # No selection wanted: the tops straight from the scoring, unless the method orders its
        # own (it overrides _search); _rankings cuts either to k.
        found = self._scored_top(texts, k) if type(self)._search is Retriever._search else self._search(texts, k, False)
        out = self._rankings([top for _, top in found], k)
        return out[0] if one else out

    def retrieve(self, claims, depth: int = 0):
        """The evidence the method returns, with its explanation, for one claim or each of a list.

        Parameters
        ----------
        claims : str or sequence of str
        depth : int, default 0
            > 0: also each claim's top-``depth`` :class:`Ranking` in the selection's ``ranking``,
            from the same scoring (:meth:`rank`'s, without scoring the claim twice).

        Returns
        -------
        Selection or list of Selection
            One for a string; a list of them for a sequence.
        """
        check_number(depth, "depth", integer=True, low=0)
        texts, one = self._prepare(claims, None)
        found = list(self._search(texts, depth, True))
        if depth:
            out = [replace(sel, ranking=r) for (sel, _), r in zip(found, self._rankings([top for _, top in found], depth))]
        else:
            out = [sel for sel, _ in found]
        return out[0] if one else out

    def params(self) -> dict:
        """The parameters that determine the results (:meth:`get_params` in signature order)."""
        values = self.get_params(deep=False)
        return {name: values[name] for name in _signature_order(type(self))}

    @abstractmethod
    def _fit(self, index, **fit_params) -> None:
        """Build the method's state for ``index`` (``self.index_`` is set after it)."""

    @abstractmethod
    def _scored(self, texts: list[str]) -> Iterable[Scored]:
        """Per claim, in order, what the method scores."""

    def _scored_to(self, texts: list[str], depth: int) -> Iterable[Scored]:
        """:meth:`_scored` for a top ``depth`` (a method searching an approximate index asks it for that many)."""
        return self._scored(texts)

    @property
    def _evidence_depth(self) -> int:
        """How deep a top :meth:`_select` reads (0: it reads the scores themselves)."""
        return self.k

    def _select(self, claim: str, scored: Scored, top: TopK) -> Selection:
        """The top ``k`` that scored above 0, explained by :meth:`_explain`."""
        rows, scores = top.rows[:self.k], top.scores[:self.k]
        matched = scores != 0  # a passage scoring 0 matched nothing of the claim: it is no evidence
        rows, scores = rows[matched], scores[matched]
        hits = [self._hit(r, s, e) for r, s, e in
                zip(rows.tolist(), scores.tolist(), self._explain(claim, rows, scores, scored.state))]
        return Selection(hits, "ranked", {"params": self.params()})

    def _explain(self, claim: str, rows: np.ndarray, scores: np.ndarray, state) -> list[dict]:
        raise NotImplementedError

    def _search(self, texts: list[str], k: int, select: bool) -> Iterable[tuple[Selection | None, TopK | None]]:
        """Per claim, from one scoring: its selection (if ``select``) and its top, at least ``k``
        deep (:meth:`_rankings` cuts it to ``k``)."""
        depth = max(k, self._evidence_depth if select else 0)
        for text, (scored, top) in zip(texts, self._scored_top(texts, depth)):
            yield (self._select(text, scored, top) if select else None), top

    def _scored_top(self, texts: list[str], depth: int) -> Iterable[tuple[Scored, TopK]]:
        """Per claim, what the method scores and its top ``depth`` (a method that ranks without
        scoring every passage returns its top as what it scored)."""
        from factcheck.scoring.topk import top_k
        for scored in self._scored_to(texts, depth):
            yield scored, TopK(*top_k(scored.scores, depth, scored.rows))

    def _check_params(self) -> None:
        """Raise an InputError naming the parameter of a bad value (those ``_parameter_constraints``
        declares; a subclass adds what one value cannot say alone)."""
        validate_params(self)

    def _hit(self, row: int, score: float, explanation: dict) -> Hit:
        index = self.index_
        title = index.title(row) if getattr(index, "has_titles", False) else None
        return Hit(row, index.ids[row], float(score), explanation, title)

    def _rankings(self, tops: list[TopK], k: int | None = None) -> list[Ranking]:
        """Each top (cut to ``k``) as a :class:`Ranking`."""
        # Ids (and titles) of every ranking in one vectorised take, and every score and row
        # converted in one call: a lookup or a conversion per ranking cost more than the scoring.
        if not tops:
            return []
        index = self.index_
        lengths = np.fromiter(map(len, (top.rows for top in tops)), dtype=np.int64, count=len(tops))
        if k is not None and lengths.max() > k:
            tops, lengths = [TopK(top.rows[:k], top.scores[:k]) for top in tops], np.minimum(lengths, k)
        rows = np.concatenate([top.rows for top in tops])
        distinct, where = _distinct_rows(rows, len(index))
        take = getattr(index.ids, "take", None)
        ids = np.asarray(take(distinct) if take is not None else [index.ids[r] for r in distinct.tolist()],
                         dtype=object)[where]
        fields = [ids, np.concatenate([top.scores for top in tops]), rows]
        if getattr(index, "has_titles", False):
            fields.append(np.asarray(index.titles_of(distinct), dtype=object)[where])
        return list(map(Ranking, *(_split_lists(f, lengths) for f in fields)))

    def _prepare(self, claims, k) -> tuple[list[str], bool]:
        self._check_fitted()
        texts, one = as_texts(claims)
        if k is not None:
            check_number(k, "k", integer=True, low=1)
        return texts, one

    def _check_fitted(self) -> None:
        if not self.__sklearn_is_fitted__():
            raise NotFittedError(f"This {type(self).__name__} is not fitted yet: call fit(index) first.")

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "index_")


def without_cache(retriever: "Retriever") -> "Retriever":
    """``retriever``, building its derived arrays in memory instead of keeping them in the index
    directory: for a sweep that would leave one cache per setting, or a shared index in tests."""
    retriever._cache = False
    return retriever


def _distinct_rows(rows: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(rows, return_inverse=True)`` of rows below ``n``: rankings share most rows on a
    small collection, so each distinct row is decoded once; where the rows are many beside
    ``n``, a mark over the collection finds them without sorting every row.

    Example
    -------
    >>> [a.tolist() for a in _distinct_rows(np.array([4, 1, 4, 0]), 5)]
    [[0, 1, 4], [2, 1, 2, 0]]
    """
    if len(rows) * 8 < n:
        return np.unique(rows, return_inverse=True)
    mark = np.zeros(n, dtype=bool)
    mark[rows] = True
    return np.flatnonzero(mark), (np.cumsum(mark) - 1)[rows]


def _split_lists(values: np.ndarray, lengths: np.ndarray) -> list[list]:
    """``values`` as consecutive lists of ``lengths``. Most rankings reach their depth: the
    values padded to a 2-d array make every list in one ``tolist``, the short ones then cut;
    where most are short, slices of one list.

    Example
    -------
    >>> _split_lists(np.arange(5), np.array([2, 0, 3])), _split_lists(np.arange(4), np.array([2, 2]))
    ([[0, 1], [], [2, 3, 4]], [[0, 1], [2, 3]])
    """
    n = int(lengths.max()) if len(lengths) else 0
    if len(values) * 2 < len(lengths) * n:
        flat, ends = values.tolist(), np.cumsum(lengths).tolist()
        return [flat[a:b] for a, b in zip([0] + ends[:-1], ends)]
    padded = np.empty((len(lengths), n), dtype=values.dtype)
    padded[np.arange(n) < lengths[:, None]] = values  # row by row, as the values come
    out = padded.tolist()
    for i in np.flatnonzero(lengths < n).tolist():
        del out[i][lengths[i]:]
    return out


def _signature_order(cls) -> list[str]:
    return [p.name for p in inspect.signature(cls.__init__).parameters.values()
            if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def as_texts(claims, param: str = "claims") -> tuple[list[str], bool]:
    """``(texts, one)``: one string as a list of one (``one`` True), or a sequence's strings;
    anything else is an InputError naming ``param``."""
    if isinstance(claims, str):
        return [claims], True
    what = "a claim string" if param == "claims" else "a string"
    if isinstance(claims, (bytes, bytearray)) or not hasattr(claims, "__iter__"):
        raise InputError(None, None, f"expected {what} or a list of them, got {type(claims).__name__}", param=param)
    texts = list(claims)
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise InputError(None, f"[{i}]", f"expected {what}, got {type(text).__name__}", param=param)
    return texts, False


def require_directory(index, method: str) -> None:
    """An InputError if ``index`` is held in memory: ``method`` reads files kept beside an index."""
    if getattr(index, "root", "") is None:
        raise InputError(None, None, f"the {method} retriever reads the passage vectors kept in an index "
                         "directory: save this in-memory index (index.save(path)), build its vectors "
                         "(factcheck.tagging.vectors.PassageVectorJob) and fit to the saved index", param="index")


def _as_index(index):
    if isinstance(index, (str, os.PathLike)):
        from factcheck.tagging.index import TagIndex
        return TagIndex.load(index)
    if not hasattr(index, "ids"):
        raise InputError(None, None, f"expected a TagIndex (factcheck.build_index or TagIndex.load) or its "
                         f"directory, got {type(index).__name__}", param="index")
    return index


class TermRetriever(Retriever):
    """A retriever scoring claims by one term-matrix product (BM25, TF-IDF): its top ``k`` by
    :meth:`~factcheck.scoring.matrix.TermMatrix.rank`, the product's top with the same bits,
    without the product where it can. Subclasses implement ``_term_queries``."""

    @abstractmethod
    def _term_queries(self, texts: list[str]):
        """``(matrix, queries)``: the fitted :class:`~factcheck.scoring.matrix.TermMatrix` and the
        claims' rows over its terms."""

    def scores(self, claim: str) -> np.ndarray:
        """The score of every passage for one claim, zeros where it shares no term, in the
        matrix's dtype (BM25's float32, TF-IDF's cosine float64)."""
        self._check_fitted()
        matrix, queries = self._term_queries([claim])
        (units, scores), = matrix.products(queries)
        return matrix.full(units, scores)

    def _scored(self, texts):
        matrix, queries = self._term_queries(texts)
        return (Scored(rows, scores) for rows, scores in matrix.products(queries))

    def _scored_top(self, texts, depth):
        matrix, queries = self._term_queries(texts)
        for rows, scores in matrix.rank(queries, depth):
            yield Scored(rows, scores), TopK(rows, scores)


def run_retrieval(retriever: Retriever, claims: list, depth: int = DEPTH) -> dict[str, Explanation]:
    """Each claim's :class:`~factcheck.retrieval.base.Explanation`, by claim id, from one scoring of each claim.

    Parameters
    ----------
    retriever : Retriever
        Fitted.
    claims : list of Claim
        Anything with ``id`` and ``text``.
    depth : int, default 100
        > 0 also keeps each claim's top-``depth`` ranking as ``ranking``.

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
    texts = [c.text for c in claims]
    # A duck-typed reader (a test's stand-in) may offer ``retrieve(texts)`` only.
    selections = retriever.retrieve(texts, depth) if depth > 0 else retriever.retrieve(texts)
    return {c.id: Explanation.of(sel) for c, sel in zip(claims, selections)}


def evidence_of(explained: dict[str, Explanation]) -> dict[str, list[str]]:
    """Claim id -> evidence ids, from :func:`run_retrieval`'s explanations."""
    return {cid: e.ids for cid, e in explained.items()}


def retriever_spec(retriever: Retriever) -> dict:
    """What rebuilds ``retriever``: ``{"method", "params"}``, plus the chunk window and overlap,
    and the passage vectors' checksum where there are any."""
    # a chunked retriever's inner one: fitted (``inner_``, it holds the vectors' checksum) or not
    inner = getattr(retriever, "inner_", None) or getattr(retriever, "inner", retriever)
    spec = {"method": inner.name, "params": inner.params()}
    if getattr(inner, "vectors_sha256_", None):
        spec["vectors_sha256"] = inner.vectors_sha256_
    if getattr(inner, "embedder_", None) is not None and inner.name == "pool":  # what orders its pools
        from factcheck.text.onnx_embedding import NOT_COMPARED
        spec["pool_model"] = {k: v for k, v in inner.embedder_.identity.items() if k not in NOT_COMPARED}
    if hasattr(retriever, "inner"):
        spec["chunk_window"], spec["chunk_overlap"] = retriever.window, retriever.overlap
    return spec
