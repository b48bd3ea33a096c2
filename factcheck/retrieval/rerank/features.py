"""Candidate features, in named groups (:data:`GROUPS`) so each group can be ablated.

Every feature measures how a passage relates to the claim (or to evidence its neighbours
cited), never what the passage looks like alone, so the model cannot learn the corpus's
style (docs/decisions.md); products are row sums, never BLAS calls.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from factcheck.retrieval.rerank.candidates import Candidates
from factcheck.retrieval.rerank.memory import pool_similarities
from factcheck.scoring.tfidf import tfidf_rows
from factcheck.scoring.topk import top_k
from factcheck.tagging.index import multi_arange
from factcheck.text.analyzer import analyze
from factcheck.text.stopwords import ENGLISH_STOP_WORDS
from factcheck.text.analyzer import letter_runs, split_stems, standalone_numbers

GROUPS: dict[str, list[str]] = {
    "bm25": ["bm25", "bm25_rel_top", "bm25_log_rank"],
    "coverage": ["cov_idf", "cov_terms", "cov_rare3", "best_idf_rel", "n_matched"],
    "phrases": ["bigram_frac", "bigram_count"],
    "entities": ["number_frac", "claim_has_numbers", "name_frac", "claim_has_names"],
    "tags": ["tag_cosine", "tag_overlap"],
    "prf": ["prf_cosine", "rm3_rel"],
    "memory": ["mem_max_sim", "mem_sum_sim", "mem_passage_cos", "mem_centroid_cos", "mem_nearest_sim"],
    "claim": ["claim_terms", "claim_top_bm25"],
}
FEATURES: list[str] = [f for group in GROUPS.values() for f in group]

PRF_DOCS = 10         # feedback passages (top of the BM25 list)
RM3_TERMS = 20        # expansion terms taken from their centroid
MEMORY_PASSAGES = 30  # memory passages the paraphrase cosine compares against

_SENTENCE_START = ("", ".", "!", "?", "\"", "\u201c", "'", "\u2018", "(")


def claim_names(text: str) -> list[str]:
    """Stems of the claim's capitalised words: acronyms anywhere, others unless sentence-initial."""
    out = set()
    for m in letter_runs(text):
        w = m.group()
        if not w[0].isupper() or w.lower() in ENGLISH_STOP_WORDS:
            continue
        initial = text[:m.start()].rstrip()[-1:] in _SENTENCE_START
        if initial and not (len(w) > 1 and w.isupper()):
            continue
        out.update(split_stems(w))
    return sorted(out)


class UnitRows:
    """The TF-IDF unit vectors (Lucene IDF) of any passages, computed when asked."""

    def __init__(self, forward: sp.csr_matrix, idf: np.ndarray):
        self.forward = forward
        self.idf = idf

    def __getitem__(self, rows) -> sp.csr_matrix:
        return tfidf_rows(self.forward[np.asarray(rows, dtype=np.int64)], self.idf)


class FeatureContext:
    """Corpus-wide structures the features read, built once per index."""

    def __init__(self, index, terms):
        self.terms = terms
        self.index = index
        self.tag_col = {t: j for j, t in enumerate(index.vocabulary)}
        self.tag_vectorizer = index.tag_vectorizer
        self.unit = UnitRows(terms.forward, terms.idf)  # idf-weighted, L2-normalised passages

    def n_tags(self, rows: np.ndarray, tags=None) -> np.ndarray:
        """How many tags each passage of ``rows`` has (float64), read from the index's shards
        (every passage's, kept, was 8 bytes a passage in every process); ``tags``: the rows'
        :meth:`~factcheck.tagging.index.TagIndex.tag_rows`, when already read."""
        if tags is not None:
            return np.diff(tags[0]).astype(np.float64)
        return self.index.tag_counts(rows).astype(np.float64)

    def shared_tags(self, rows: np.ndarray, cols: list[int], tags=None) -> np.ndarray:
        """How many of the tag columns ``cols`` each passage of ``rows`` has."""
        indptr, terms = self.index.tag_rows(rows) if tags is None else tags
        _, owner = multi_arange(indptr[:-1], indptr[1:])
        hit = np.isin(terms, np.asarray(cols, dtype=np.int64))
        return np.bincount(owner[hit], minlength=len(rows)).astype(np.float64)

    def tag_space(self, rows: np.ndarray, tags=None) -> sp.csr_matrix:
        return self.index.tag_space_rows(rows, tags)


class _PoolRows:
    """Unit rows, from the pool's own matrix when all are in it."""

    def __init__(self, unit: UnitRows, rows: np.ndarray, vecs: sp.csr_matrix):
        self.unit, self.vecs = unit, vecs
        self.order = np.argsort(rows, kind="stable")
        self.sorted = rows[self.order]

    def __getitem__(self, wanted) -> sp.csr_matrix:
        wanted = np.asarray(wanted, dtype=np.int64)
        at = np.minimum(np.searchsorted(self.sorted, wanted), max(len(self.sorted) - 1, 0))
        if len(self.sorted) and np.array_equal(self.sorted[at], wanted):
            return self.vecs[self.order[at]]
        return self.unit[wanted]


def _centroid(vecs: sp.csr_matrix, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Weighted mean of some unit rows, as (terms, L2-normalised weights)."""
    rows = np.repeat(np.arange(vecs.shape[0]), np.diff(vecs.indptr))
    nz, inv = np.unique(vecs.indices, return_inverse=True)
    w = np.bincount(inv, weights=vecs.data * np.asarray(weights, dtype=np.float64)[rows], minlength=len(nz))
    norm = float(np.sqrt(np.sum(w * w)))
    if norm == 0:
        return nz[:0], w[:0]
    return nz, w / norm


def _cosines(pool_vecs: sp.csr_matrix, nz: np.ndarray, weight: np.ndarray) -> np.ndarray:
    dense = np.zeros(pool_vecs.shape[1])
    dense[nz] = weight
    return pool_vecs @ dense


def competition_rank(sorted_desc: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Number of list scores strictly above each value (ties share a rank)."""
    return np.searchsorted(-sorted_desc, -values, side="left")


def compute(ctx: FeatureContext, cands: Candidates, k1: float, b: float) -> np.ndarray:
    """Feature matrix (len(cands.rows), len(FEATURES)) in :data:`FEATURES` order."""
    rows, q = cands.rows, cands.query
    n = len(rows)
    out = np.zeros((n, len(FEATURES)))
    if n == 0:
        return out
    col = {f: j for j, f in enumerate(FEATURES)}
    terms = ctx.terms

    # bm25 (ranks are competition ranks within the BM25 list)
    out[:, col["bm25"]] = cands.bm25
    out[:, col["bm25_rel_top"]] = cands.bm25 / max(cands.bm25_top, 1e-9)
    out[:, col["bm25_log_rank"]] = np.log1p(competition_rank(cands.bm25_list_scores, cands.bm25))

    # coverage of the claim's terms
    present = terms.tf_matrix(rows, q.term_ids) > 0
    if len(q.term_ids):
        idf = q.idf
        out[:, col["cov_idf"]] = (present * idf[None, :]).sum(axis=1) / idf.sum()
        out[:, col["cov_terms"]] = present.mean(axis=1)
        rare = top_k(idf, 3)[0]  # term ids ascend: ties by id
        out[:, col["cov_rare3"]] = present[:, rare].mean(axis=1)
        out[:, col["best_idf_rel"]] = (present * idf[None, :]).max(axis=1) / idf.max()
        out[:, col["n_matched"]] = present.sum(axis=1)

    # phrases and entities: claim items found in the passage
    codes = terms.bigram_code_of(q.stems)
    if len(codes):
        k = terms.bigram_matches(rows, codes)
        out[:, col["bigram_count"]] = k
        out[:, col["bigram_frac"]] = k / len(codes)
    nums = standalone_numbers(q.text)
    if nums:
        out[:, col["claim_has_numbers"]] = 1.0
        out[:, col["number_frac"]] = terms.number_matches(rows, nums) / len(nums)
    names = claim_names(q.text)
    if names:
        out[:, col["claim_has_names"]] = 1.0
        ids = terms.term_ids(names)
        if len(ids):
            out[:, col["name_frac"]] = (terms.tf_matrix(rows, ids) > 0).sum(axis=1) / len(names)

    # the 2024 tag rule's scoring, restricted to the pool
    claim_tags = sorted(analyze(q.text))
    distinct = sorted(set(claim_tags))
    cols = [ctx.tag_col[t] for t in distinct if t in ctx.tag_col]
    tags = ctx.index.tag_rows(rows)  # the pool's tags read once for the three uses
    if cols:
        shared = ctx.shared_tags(rows, cols, tags)
        denom = np.minimum(len(distinct), ctx.n_tags(rows, tags))
        out[:, col["tag_overlap"]] = np.divide(shared, denom, out=np.zeros(n), where=denom > 0)
    qv = ctx.tag_vectorizer.transform([q.text])
    out[:, col["tag_cosine"]] = np.asarray((ctx.tag_space(rows, tags) @ qv.T).todense()).ravel()

    # pseudo-relevance feedback from the top of the BM25 list
    pool_vecs = ctx.unit[rows]
    unit_of = _PoolRows(ctx.unit, rows, pool_vecs)
    fb = cands.bm25_list[:PRF_DOCS]
    if len(fb):
        nz, weight = _centroid(unit_of[fb], np.ones(len(fb)))
        if len(nz):
            out[:, col["prf_cosine"]] = _cosines(pool_vecs, nz, weight)
            exp_at = top_k(weight, RM3_TERMS)[0]  # nz ascends: ties by term
            exp, w = nz[exp_at], weight[exp_at]
            rm3 = terms.bm25_rows(rows, exp, w / w.sum(), k1, b)
            out[:, col["rm3_rel"]] = rm3 / max(rm3.max(), 1e-9)

    # label memory
    nb = cands.memory
    if nb is not None and len(nb.sims):
        nearest, max_sim, sum_sim = pool_similarities(nb, rows)
        out[:, col["mem_nearest_sim"]] = nearest
        if len(nb.rows):
            out[:, col["mem_max_sim"]] = max_sim
            out[:, col["mem_sum_sim"]] = sum_sim
            best = top_k(nb.sum_sim, MEMORY_PASSAGES, nb.rows)[0]
            out[:, col["mem_passage_cos"]] = (pool_vecs @ unit_of[best].T).toarray().max(axis=1)
            nz, weight = _centroid(unit_of[nb.rows], nb.sum_sim)
            if len(nz):
                out[:, col["mem_centroid_cos"]] = _cosines(pool_vecs, nz, weight)

    out[:, col["claim_terms"]] = len(q.term_ids)
    out[:, col["claim_top_bm25"]] = cands.bm25_top
    return out
