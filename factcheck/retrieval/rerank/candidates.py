"""Candidate generation: BM25's top ``depth`` passages and the gold passages of the
``memory_k`` most similar training claims, ordered by BM25 relative to the best plus the
neighbours' summed similarity (ties by row).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import scipy.sparse as sp

from factcheck.errors import Interval
from factcheck.retrieval.base import TopK
from factcheck.retrieval.rerank.memory import ClaimMemory, Neighbours
from factcheck.retrieval.rerank.terms import TermIndex
from factcheck.scoring.topk import top_k
from factcheck.text.analyzer import split_stems as stems

# Open mode: the dense side's weight in the pool's order (docs/decisions.md, "Hybrid fusion").
FUSION_ALPHA = 0.4


@dataclass(frozen=True)
class CandidateConfig:
    """The candidate stage's settings (chosen in training; saved with the model)."""

    _parameter_constraints = {"k1": Interval(float, 0), "b": Interval(float, 0, 1), "depth": Interval(int, 1),
                              "memory_k": Interval(int, 0), "dense_depth": Interval(int, 0)}
    k1: float = 0.9
    b: float = 0.4
    depth: int = 300        # BM25 candidates per claim
    memory_k: int = 20      # nearest training claims whose gold passages join the pool
    dense_depth: int = 0    # open mode: the dense scorer's top passages also join the pool

    def to_json(self) -> dict:
        """The settings as a dict (``dense_depth`` only when set)."""
        out = asdict(self)
        if not self.dense_depth:
            del out["dense_depth"]
        return out


@dataclass
class Query:
    """A claim, analysed once and shared by candidate generation and features."""

    text: str
    stems: list[str]
    term_ids: np.ndarray   # distinct known terms, ascending
    counts: np.ndarray     # their counts in the claim
    idf: np.ndarray


@dataclass
class Candidates:
    """One claim's candidate pool with the scores the features and explanations read."""

    query: Query
    rows: np.ndarray        # pool, in the candidate stage's fused order
    fused: np.ndarray       # fusion score per pool row
    bm25: np.ndarray        # BM25 score per pool row (0 if no shared term)
    bm25_top: float         # the claim's best BM25 score
    bm25_list: np.ndarray   # the BM25 list's rows, best first (the PRF feedback source)
    bm25_list_scores: np.ndarray
    memory: Neighbours | None
    dense: np.ndarray | None = None              # cosine per pool row (dense pools only)
    dense_top: float = 0.0                       # the claim's best cosine
    dense_list_scores: np.ndarray | None = None  # the dense list's cosines, best first
    dense_memory: Neighbours | None = None       # memory neighbours by claim embedding


class CandidateGenerator:
    """``dense``: a scorer (:mod:`.semantic`), required when ``config.dense_depth > 0``."""

    def __init__(self, terms: TermIndex, memory: ClaimMemory | None, config: CandidateConfig, dense=None):
        self.terms = terms
        self.memory = memory
        self.config = config
        self.dense = dense if config.dense_depth > 0 else None
        self.memory_vectors = None  # open mode: the memory claims' embeddings (a second neighbour search)
        if self.dense is not None and memory is not None and len(memory):
            self.memory_vectors = self.dense.embedder_.embed(memory.texts, kind="query").astype(np.float64)

    def query(self, text: str) -> Query:
        """The claim analysed once: stems, known term ids, their counts and IDF."""
        s = stems(text)
        ids, counts = self.terms.query_weights(s)
        return Query(text, s, ids, counts, self.terms.idf[ids])

    def first_stage(self, texts: list[str], depth: int | None = None) -> list[tuple[Query, np.ndarray, np.ndarray]]:
        """Each claim analysed, with its BM25 top ``depth`` (default: the config's; rows, scores
        best first): the claims ranked in one :meth:`~factcheck.scoring.matrix.TermMatrix.rank`
        call (the compiled loop where it runs), the product's top, the same bits. A smaller
        depth's top is a prefix of a larger one's (ties are broken by row)."""
        cfg = self.config
        queries = [self.query(t) for t in texts]
        if not queries:
            return []
        batch = sp.vstack([self.terms.query(q.term_ids, q.counts) for q in queries], format="csr")
        tops = self.terms.bm25(cfg.k1, cfg.b).rank(batch, cfg.depth if depth is None else depth)
        return [(q, rows, scores) for q, (rows, scores) in zip(queries, tops)]

    def shares_scores(self, other: "CandidateGenerator") -> bool:
        """Whether :meth:`first_stage` scores alike for ``other`` and this generator (the same terms, ``k1`` and ``b``)."""
        return other.terms is self.terms and (other.config.k1, other.config.b) == (self.config.k1, self.config.b)

    def generate(self, text: str, exclude_memory: int | None = None, first=None,
                 memory_sims=None, dense_scores=None) -> Candidates:
        """The pool for one claim; ``exclude_memory`` hides that training claim from memory;
        ``first``: :meth:`first_stage`'s for this claim at this config's depth (None: ranked
        here), the pool's other rows scored alone; ``memory_sims``: the claim's
        :meth:`ClaimMemory.similarities`, and ``dense_scores`` its ``dense.scores``, when
        already at hand."""
        cfg = self.config
        (q, bm_rows, bm_scores), = [first] if first is not None else self.first_stage([text])
        bm_scores = bm_scores.astype(np.float64)
        nb = None
        mem_rows = np.zeros(0, dtype=np.int64)
        if self.memory is not None and len(self.memory) and cfg.memory_k > 0:
            nb = self.memory.neighbours(text, cfg.memory_k, exclude=exclude_memory, sims=memory_sims)
            mem_rows = nb.rows
        cos = dense_rows = dense_list = dense_nb = None
        if self.dense is not None:
            cos = self.dense.scores(text) if dense_scores is None else dense_scores
            dense_list = TopK(*top_k(cos, cfg.dense_depth))
            dense_rows = dense_list.rows[dense_list.scores > 0]
            if self.memory_vectors is not None and cfg.memory_k > 0:
                claim_vector = self.dense.embedder_.embed([text], kind="query")[0].astype(np.float64)
                dense_nb = self.memory.neighbours(text, cfg.memory_k, exclude_memory,
                                                  np.einsum("jd,d->j", self.memory_vectors, claim_vector))
                dense_rows = np.union1d(dense_rows, dense_nb.rows)
        pool = np.union1d(bm_rows, mem_rows).astype(np.int64)
        if dense_rows is not None:
            pool = np.union1d(pool, dense_rows).astype(np.int64)
        top_score = float(bm_scores[0]) if len(bm_scores) else 0.0
        # the memory's rows outside the top: their scores alone, not every touched passage's
        pool_bm25 = self.terms.bm25(cfg.k1, cfg.b).unit_scores(self.terms.query(q.term_ids, q.counts),
                                                               pool).astype(np.float64)
        fused = pool_bm25 / top_score if top_score > 0 else np.zeros(len(pool))
        dense_top = float(dense_list.scores[0]) if cos is not None and len(dense_list.scores) else 0.0
        if dense_top > 0:  # the hybrid's weighting of the two sides (its CV choice)
            fused = fused + FUSION_ALPHA / (1 - FUSION_ALPHA) * cos[pool].astype(np.float64) / dense_top
        if len(mem_rows):
            fused[np.searchsorted(pool, nb.rows)] += nb.sum_sim
        order, _ = top_k(fused, len(fused))  # pool ascends: ties by row
        pool, fused, pool_bm25 = pool[order], fused[order], pool_bm25[order]
        out = Candidates(q, pool, fused, pool_bm25, top_score, bm_rows, bm_scores, nb)
        if cos is not None:
            out.dense, out.dense_top, out.dense_list_scores = cos[pool], dense_top, dense_list.scores
            out.dense_memory = dense_nb
        return out
