"""The retriever interface every method implements (tags, bm25, rerank, chunked).

A retriever is fitted on a tag index (which carries ids, texts and tags) and answers
two questions per claim:

* ``rank(claims, depth)`` -- passages ordered by the method's score, for measuring
  retrieval on its own (recall@k, MRR) independently of any cut-off;
* ``retrieve(claims)`` -- the passages the method actually returns as evidence, each
  with an explanation of why it was picked.

Ties are always broken by corpus order (a stable sort), so results never depend on the
platform's sort or on thread timing.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import numpy as np


@dataclass
class Hit:
    """One passage picked for a claim, with the evidence of why."""

    row: int
    id: str
    score: float
    explanation: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"id": self.id, "score": float(self.score), **self.explanation}


@dataclass
class Selection:
    """What a retriever returns for one claim."""

    hits: list[Hit]
    path: str  # how the hits were chosen: "filtered", "fallback", "ranked", "reranked"
    details: dict = field(default_factory=dict)

    @property
    def ids(self) -> list[str]:
        return [h.id for h in self.hits]

    def to_json(self) -> dict:
        return {"path": self.path, **self.details, "hits": [h.to_json() for h in self.hits]}


@dataclass
class Ranking:
    """Rows by descending score (ties by corpus order), truncated to a depth."""

    rows: np.ndarray
    scores: np.ndarray


class Retriever(ABC):
    """fit(index) once; then rank/retrieve any number of claims."""

    name = "retriever"

    @abstractmethod
    def fit(self, index) -> "Retriever":
        ...

    @abstractmethod
    def rank(self, claims: list[str], depth: int = 100) -> list[Ranking]:
        ...

    @abstractmethod
    def retrieve(self, claims: list[str]) -> list[Selection]:
        ...

    def params(self) -> dict:
        return {}


def stable_top(scores: np.ndarray, depth: int) -> Ranking:
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
    return Ranking(order, scores[order])
