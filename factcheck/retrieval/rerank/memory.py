"""Label memory: the passages the most similar training claims (TF-IDF cosine) cited.

A claim never sees its own gold: ``exclude=`` and memory claims of the same text are left
out (docs/decisions.md, "The label memory never shows a claim its own gold").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from factcheck.scoring.matrix import TermMatrix
from factcheck.scoring.tfidf import TfidfSpace
from factcheck.scoring.topk import top_k
from factcheck.text.analyzer import split_letter_digit_runs, split_stems


@dataclass
class Neighbours:
    """A claim's nearest memory claims and the passages they cite."""

    claims: np.ndarray       # memory claim positions, by similarity desc (ties by position)
    sims: np.ndarray
    rows: np.ndarray         # passage rows cited by those claims (ascending)
    max_sim: np.ndarray      # per row: similarity of the closest citing neighbour
    sum_sim: np.ndarray      # per row: summed similarity of the citing neighbours
    best_claim: np.ndarray   # per row: memory position of the closest citing neighbour


def pool_similarities(nb: Neighbours, rows: np.ndarray):
    """The nearest neighbour's similarity, and each pool row's max and summed similarity over
    the neighbours citing it (both None when they cite nothing)."""
    if not len(nb.rows):
        return nb.sims[0], None, None
    at = np.minimum(np.searchsorted(nb.rows, rows), len(nb.rows) - 1)
    hit = nb.rows[at] == rows
    return nb.sims[0], np.where(hit, nb.max_sim[at], 0.0), np.where(hit, nb.sum_sim[at], 0.0)


class ClaimMemory:
    """Training claims (text + gold ids) as a similarity-searchable table."""

    def __init__(self, claim_ids: list[str], texts: list[str], evidences: list[list[str]],
                 stems: list[list[str]] | None = None):
        """``stems``: each text's :func:`split_stems`, as a saved memory records them (None: analysed now)."""
        self.claim_ids = list(claim_ids)
        self.texts = list(texts)
        self.evidences = [sorted(set(e)) for e in evidences]
        self.stems = [split_stems(t) for t in self.texts] if stems is None else [list(s) for s in stems]
        if len(self.stems) != len(self.texts):
            raise ValueError("the memory's stems do not line up with its texts")
        self.space, rows = TfidfSpace.fit(self.stems, sublinear=True)
        self.matrix = TermMatrix.from_units(rows)
        self._position_of_text: dict[str, list[int]] = {}
        for i, t in enumerate(self.texts):
            self._position_of_text.setdefault(t, []).append(i)

    @classmethod
    def from_claims(cls, claims) -> "ClaimMemory":
        """A memory of labelled :class:`~factcheck.Claim` objects."""
        return cls([c.id for c in claims], [c.text for c in claims], [c.evidences for c in claims])

    def __len__(self) -> int:
        return len(self.claim_ids)

    def __repr__(self) -> str:
        return f"ClaimMemory({len(self)} claims)"

    def bind(self, row_of, n_rows: int) -> "ClaimMemory":
        """Map gold ids to the rows of one index (ids the index lacks are dropped); ``row_of``
        is the index's :attr:`~factcheck.tagging.index.TagIndex.row_of`."""
        # One vectorised lookup of every id: one lookup an id was most of loading a reranker
        # on a large index.
        found = row_of.rows([e for ev in self.evidences for e in ev]).tolist()
        indptr, cols, at = [0], [], 0
        for ev in self.evidences:
            cols.extend(sorted({r for r in found[at:at + len(ev)] if r >= 0}))
            at += len(ev)
            indptr.append(len(cols))
        self.gold = sp.csr_matrix((np.ones(len(cols)), np.asarray(cols, dtype=np.int64),
                                   np.asarray(indptr, dtype=np.int64)), shape=(len(self.evidences), n_rows))
        return self

    def similarities(self, text: str) -> np.ndarray:
        """TF-IDF cosine of ``text`` with every memory claim."""
        return self.similarities_of([text])[0]

    def similarities_of(self, texts: list[str]) -> list[np.ndarray]:
        """:meth:`similarities` of each text, the texts analysed and multiplied at once (each
        row's cosines are its own: the same bits)."""
        if not len(self):
            return [np.zeros(0) for _ in texts]
        queries = self.space.transform([split_letter_digit_runs(t) for t in texts])
        return [self.matrix.full(rows, sims) for rows, sims in self.matrix.products(queries)]

    def neighbours(self, text: str, k: int, exclude: int | None = None, sims: np.ndarray | None = None) -> Neighbours:
        """The ``k`` most similar memory claims and the passages they cite (``sims``: given similarities)."""
        sims = self.similarities(text) if sims is None else np.array(sims, dtype=np.float64)
        if exclude is not None and len(sims):
            sims[exclude] = 0.0
        for same in self._position_of_text.get(text, ()):
            sims[same] = 0.0
        pos = np.flatnonzero(sims > 0)
        order = pos[top_k(sims[pos], k)[0]]
        top = sims[order]
        sub = self.gold[order]  # (k, n_rows) sparse
        coo = sub.tocoo()
        if coo.nnz == 0:
            empty = np.zeros(0)
            return Neighbours(order, top, empty.astype(np.int64), empty, empty, empty.astype(np.int64))
        rows, inv = np.unique(coo.col, return_inverse=True)
        s = top[coo.row]
        sum_sim = np.bincount(inv, weights=s, minlength=len(rows))
        # the closest citing neighbour of a row is its smallest neighbour rank
        first = np.full(len(rows), len(order), dtype=np.int64)
        np.minimum.at(first, inv, coo.row.astype(np.int64))
        return Neighbours(order, top, rows.astype(np.int64), top[first], sum_sim, order[first])
