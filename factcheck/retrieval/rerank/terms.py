"""Term statistics of the whole corpus: postings, bigrams, numbers, flexible BM25.

Why not reuse the bm25s index: bm25s bakes one ``k1``/``b`` into its precomputed
float32 scores and scores integer bags of tokens, while the reranker wants weighted
queries (RM3 expansion) in float64 and the term bags of candidate passages for its
features. The formula is the same (see :meth:`TermIndex.bm25`). One pass over the corpus gives:

* ``postings`` (CSC, term -> passages with term frequency): scores any weighted query
  with any ``k1``/``b`` by touching only the query terms' postings, then one
  ``np.bincount`` -- no Python loop over passages;
* ``forward`` (CSR, passage -> terms): the term bags of candidate passages;
* ``bigrams`` (per passage, sorted codes of consecutive stem pairs) and ``numbers``
  (CSR, passage -> digit runs): phrase and number matches for a whole candidate pool
  in a few vectorised operations, instead of re-analysing passages per request.

Analysis is :func:`factcheck.text.tokens.split_stems` (the project's stems after
splitting letter/digit runs, so a claim's ``CO2`` matches a passage's ``CO 2``) and
:func:`factcheck.text.tokens.standalone_numbers`; ``stems`` and ``numbers`` here are
those two, under the names the reranker uses. Everything is computed from the
lower-cased word stream with punctuation dropped, so nothing here can see a passage's
format -- a ``headword:`` prefix, brackets, semicolons or capital letters.

The arrays are cached next to the tag index (``DIR/rerank/terms-<key>/terms.npz``, a
:class:`~factcheck.tagging.derived.DerivedCache` entry: sha256-checked before every load,
rebuilt when damaged, skipped when the index is read-only), keyed by the index's plan
key and :data:`ANALYSIS_VERSION`.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from factcheck.tagging.derived import DerivedCache
from factcheck.text.tokens import split_stems as stems
from factcheck.text.tokens import standalone_numbers as numbers

ANALYSIS_VERSION = "stems+alnum-split+bigrams+numbers/1"
CACHE_FILE = "terms.npz"


def multi_arange(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Concatenated ``arange(s, e)`` for each pair, and which pair each element came from."""
    lens = (ends - starts).astype(np.int64)
    owner = np.repeat(np.arange(len(lens)), lens)
    if not len(owner):
        return owner, owner
    offsets = np.cumsum(lens) - lens
    return starts[owner] + (np.arange(len(owner)) - offsets[owner]), owner


class TermIndex:
    """Sparse term statistics of a corpus (see the module docstring)."""

    def __init__(self, vocab: dict[str, int], forward: sp.csr_matrix, bigram_ptr: np.ndarray,
                 bigram_codes: np.ndarray, number_vocab: dict[str, int], numbers: sp.csr_matrix):
        self.vocab = vocab
        self.forward = forward
        self.postings = forward.tocsc()
        self.postings.sort_indices()
        self.bigram_ptr = bigram_ptr
        self.bigram_codes = bigram_codes
        self.number_vocab = number_vocab
        self.numbers = numbers
        self.n_docs = forward.shape[0]
        self.doc_len = np.asarray(forward.sum(axis=1)).ravel().astype(np.float64)
        self.avgdl = float(self.doc_len.mean()) if self.n_docs else 0.0
        self.df = np.diff(self.postings.indptr).astype(np.float64)
        n = self.n_docs
        self.idf = np.log(1.0 + (n - self.df + 0.5) / (self.df + 0.5))  # Lucene's BM25 idf

    # ------------------------------------------------------------------ building
    @classmethod
    def build(cls, texts: list[str]) -> "TermIndex":
        """The statistics of a list of passage texts (an index's are :meth:`for_index`)."""
        vocab: dict[str, int] = {}
        number_vocab: dict[str, int] = {}
        cols: list[int] = []
        num_cols: list[int] = []
        indptr, num_ptr = [0], [0]
        for text in texts:
            cols.extend(vocab.setdefault(s, len(vocab)) for s in stems(text))
            indptr.append(len(cols))
            num_cols.extend(number_vocab.setdefault(x, len(number_vocab)) for x in numbers(text))
            num_ptr.append(len(num_cols))
        n = len(texts)
        seq = np.asarray(cols, dtype=np.int64)
        ptr = np.asarray(indptr, dtype=np.int64)
        forward = sp.csr_matrix((np.ones(len(seq), dtype=np.float32), seq.astype(np.int32), ptr),
                                shape=(n, len(vocab)))
        forward.sum_duplicates()
        forward.sort_indices()
        bigram_ptr, bigram_codes = _bigrams(seq, ptr, len(vocab))
        nums = sp.csr_matrix((np.ones(len(num_cols), dtype=np.float32), np.asarray(num_cols, dtype=np.int32),
                              np.asarray(num_ptr, dtype=np.int64)), shape=(n, len(number_vocab)))
        return cls(vocab, forward, bigram_ptr, bigram_codes, number_vocab, nums)

    @classmethod
    def for_index(cls, index, cache: bool = True) -> "TermIndex":
        """Build (or load from the index directory's cache) the term index of a tag index."""
        if not cache:
            return cls.build(index.texts)
        key = {"plan_key": index.manifest.data.get("plan_key"), "n": len(index), "analysis": ANALYSIS_VERSION}
        digest = hashlib.sha256(json.dumps(key).encode()).hexdigest()[:16]
        return DerivedCache(index.root).load_or_build(
            f"rerank/terms-{digest}", key, lambda folder: cls.build(index.texts)._save(folder / CACHE_FILE),
            lambda folder: cls._load(folder / CACHE_FILE))

    def _save(self, path: Path) -> None:
        terms = sorted(self.vocab, key=self.vocab.get)
        nums = sorted(self.number_vocab, key=self.number_vocab.get)
        with open(path, "wb") as fh:
            np.savez(fh, terms=np.array(terms, dtype=str), indptr=self.forward.indptr,
                     indices=self.forward.indices, data=self.forward.data, shape=np.array(self.forward.shape),
                     bigram_ptr=self.bigram_ptr, bigram_codes=self.bigram_codes,
                     number_terms=np.array(nums, dtype=str), num_indptr=self.numbers.indptr,
                     num_indices=self.numbers.indices)

    @classmethod
    def _load(cls, path: Path) -> "TermIndex":
        with np.load(path, allow_pickle=False) as z:
            terms = z["terms"].tolist()
            forward = sp.csr_matrix((z["data"], z["indices"], z["indptr"]), shape=tuple(z["shape"]))
            nums = z["number_terms"].tolist()
            numbers_m = sp.csr_matrix((np.ones(len(z["num_indices"]), dtype=np.float32), z["num_indices"],
                                       z["num_indptr"]), shape=(forward.shape[0], len(nums)))
            return cls({t: j for j, t in enumerate(terms)}, forward, z["bigram_ptr"], z["bigram_codes"],
                       {t: j for j, t in enumerate(nums)}, numbers_m)

    # ------------------------------------------------------------------ queries
    def term_ids(self, terms: list[str]) -> np.ndarray:
        """Ids of the known terms, in the given order (unknown terms dropped)."""
        get = self.vocab.get
        return np.array([j for j in (get(t) for t in terms) if j is not None], dtype=np.int64)

    def query_weights(self, terms: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Distinct known term ids (ascending) with their counts in ``terms``."""
        ids = self.term_ids(terms)
        if not len(ids):
            return ids, np.zeros(0)
        uniq, counts = np.unique(ids, return_counts=True)
        return uniq, counts.astype(np.float64)

    def bigram_code_of(self, terms: list[str]) -> np.ndarray:
        """Distinct codes of consecutive known stem pairs (pairs with an unknown stem dropped)."""
        get = self.vocab.get
        ids = [get(t) for t in terms]
        v = len(self.vocab)
        return np.unique(np.array([a * v + b for a, b in zip(ids[:-1], ids[1:])
                                   if a is not None and b is not None], dtype=np.int64))

    def bigram_matches(self, rows: np.ndarray, codes: np.ndarray) -> np.ndarray:
        """How many of ``codes`` each passage contains (vectorised over the pool)."""
        if not len(codes) or not len(rows):
            return np.zeros(len(rows))
        pos, owner = multi_arange(self.bigram_ptr[rows], self.bigram_ptr[rows + 1])
        hit = np.isin(self.bigram_codes[pos], codes)
        return np.bincount(owner[hit], minlength=len(rows)).astype(np.float64)

    def number_matches(self, rows: np.ndarray, values: list[str]) -> np.ndarray:
        """How many of the claim's numbers each passage contains."""
        cols = [self.number_vocab[x] for x in values if x in self.number_vocab]
        if not cols or not len(rows):
            return np.zeros(len(rows))
        return np.asarray(self.numbers[rows][:, cols].sum(axis=1)).ravel().astype(np.float64)

    def bm25(self, term_ids: np.ndarray, weights: np.ndarray, k1: float, b: float) -> np.ndarray:
        """BM25 of every passage for a weighted bag of term ids (float64, length n_docs).

        The formula is bm25s's ``lucene`` variant (:mod:`factcheck.retrieval.bm25_weights`)
        times ``k1 + 1``, evaluated in float64 for fractional (RM3) query weights; it agrees
        with bm25s to float32 precision, not bit for bit, and the reranker's features were
        fitted on these bits (``tests/unit/test_bm25_weights.py`` pins the two together)."""
        P = self.postings
        parts_rows, parts_vals = [], []
        norm = self._length_norm(k1, b)
        for t, w in zip(np.asarray(term_ids).tolist(), np.asarray(weights, dtype=np.float64).tolist()):
            a, e = P.indptr[t], P.indptr[t + 1]
            rows, tf = P.indices[a:e], P.data[a:e].astype(np.float64)
            parts_rows.append(rows)
            parts_vals.append((w * self.idf[t] * (k1 + 1.0)) * tf / (tf + norm[rows]))
        if not parts_rows:
            return np.zeros(self.n_docs)
        return np.bincount(np.concatenate(parts_rows), weights=np.concatenate(parts_vals), minlength=self.n_docs)

    def bm25_rows(self, rows: np.ndarray, term_ids: np.ndarray, weights: np.ndarray,
                  k1: float, b: float) -> np.ndarray:
        """BM25 of a few passages only (same formula as :meth:`bm25`), via their term bags."""
        tf = self.tf_matrix(rows, term_ids)
        if not tf.size:
            return np.zeros(len(rows))
        norm = self._length_norm(k1, b)[rows][:, None]
        w = np.asarray(weights, dtype=np.float64) * self.idf[term_ids] * (k1 + 1.0)
        return (tf / (tf + norm) * w[None, :]).sum(axis=1)  # no BLAS: row sums are position-independent

    def _length_norm(self, k1: float, b: float) -> np.ndarray:
        """``k1 * (1 - b + b * dl / avgdl)`` per passage, computed once per (k1, b)."""
        cache = self.__dict__.setdefault("_norms", {})
        if (k1, b) not in cache:
            rel = self.doc_len / self.avgdl if self.avgdl else np.ones(self.n_docs)
            cache[(k1, b)] = k1 * (1.0 - b + b * rel)
        return cache[(k1, b)]

    def tf_matrix(self, rows: np.ndarray, term_ids: np.ndarray) -> np.ndarray:
        """Dense (len(rows), len(term_ids)) term frequencies: small, for candidate features."""
        if not len(rows) or not len(term_ids):
            return np.zeros((len(rows), len(term_ids)))
        return self.forward[rows][:, term_ids].toarray().astype(np.float64)


def _bigrams(seq: np.ndarray, ptr: np.ndarray, v: int) -> tuple[np.ndarray, np.ndarray]:
    """Per passage, the sorted distinct codes ``a * v + b`` of consecutive stem pairs."""
    n = len(ptr) - 1
    doc = np.repeat(np.arange(n, dtype=np.int64), np.diff(ptr))
    same = doc[:-1] == doc[1:] if len(doc) > 1 else np.zeros(0, bool)
    codes = seq[:-1][same] * v + seq[1:][same] if len(doc) > 1 else np.zeros(0, np.int64)
    owners = doc[:-1][same] if len(doc) > 1 else np.zeros(0, np.int64)
    order = np.lexsort((codes, owners))
    codes, owners = codes[order], owners[order]
    keep = np.ones(len(codes), bool)
    keep[1:] = (codes[1:] != codes[:-1]) | (owners[1:] != owners[:-1])
    codes, owners = codes[keep], owners[keep]
    bptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(owners, minlength=n), out=bptr[1:])
    return bptr, codes
