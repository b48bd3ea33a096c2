"""Term statistics of the corpus under the reranker's analysis (:func:`~factcheck.text.analyzer.split_stems`,
standalone numbers): term-major ``postings``, ``forward`` (passage -> terms), each passage's
stem bigram codes and ``numbers``; cached in the index directory.
"""

from __future__ import annotations

import hashlib
import json
import re
from functools import cached_property
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from factcheck.retrieval.bm25 import SPILL, cached_weights
from factcheck.scoring.bm25 import bm25_weight, length_norm, lucene_idf, mean_length
from factcheck.scoring.counting import count_corpus
from factcheck.scoring.matrix import TermMatrix, load_array, save_arrays
from factcheck.tagging.derived import DerivedCache
from factcheck.tagging.index import multi_arange
from factcheck.text.analyzer import split_letter_digit_runs
from factcheck.text.analyzer import standalone_numbers as numbers

ANALYSIS_VERSION = "stems+alnum-split+bigrams+numbers/1"
CACHE_LAYOUT = "npy-mmap/2"


class TermIndex:
    """Sparse term statistics of a corpus (see the module docstring)."""

    def __init__(self, vocab: dict[str, int], forward: sp.csr_matrix, bigram_ptr: np.ndarray,
                 bigram_codes: np.ndarray, number_vocab: dict[str, int], numbers: tuple[np.ndarray, np.ndarray],
                 postings: TermMatrix, doc_len: np.ndarray, stored_terms: np.ndarray | None = None):
        """``numbers``: ``(indptr, indices)``, each passage's standalone numbers' ids (repeats
        kept); ``stored_terms``: the cache's terms by id (mapped), read by :meth:`names`."""
        self.vocab = vocab
        self._stored_terms = stored_terms
        self.forward = forward
        self.postings = postings
        self.bigram_ptr = bigram_ptr
        self.bigram_codes = bigram_codes
        self.number_vocab = number_vocab
        # Kept as they are stored (mapped when loaded): a matrix of them needs a value a number.
        self.num_indptr, self.num_indices = numbers
        self.n_docs = forward.shape[0]
        self.doc_len = np.asarray(doc_len, dtype=np.float64)
        self.idf = lucene_idf(self.postings.df, self.n_docs)
        self._weights: dict = {}  # (k1, b) -> BM25 weights
        self._avgdl = None  # the mean passage length (a norm is computed for the rows scored only)
        self._cache = None  # (DerivedCache, key): where the BM25 weights of each (k1, b) are kept

    @classmethod
    def build_batches(cls, batches, spill=None) -> "TermIndex":
        """The term index of ``(first row, texts)`` batches in corpus order, ids in first-seen order;
        ``spill``: :func:`~factcheck.scoring.counting.count_corpus`'s folder for each batch's counts."""
        number_vocab, per_row, cols = {}, [], []
        counted = count_corpus(_split_digits(batches, number_vocab, per_row, cols), first_seen=True, pairs=True,
                               spill=spill)
        nums = sp.csr_matrix((np.ones(len(cols), dtype=np.float32), np.asarray(cols, dtype=np.int32),
                              np.cumsum([0, *per_row], dtype=np.int64)), shape=(len(per_row), len(number_vocab)))
        return cls({t: j for j, t in enumerate(counted.terms)}, counted.counts.csr.T.tocsr(), *counted.pairs,
                   number_vocab, (nums.indptr, nums.indices), counted.counts, counted.lengths)

    @classmethod
    def for_index(cls, index, cache: bool = True) -> "TermIndex":
        """Build (or load from the index directory's cache) the term index of a tag index."""
        if not cache or index.root is None:  # an index in memory has no directory to cache in
            return cls.build_batches(index.text_batches(desc="reranker term statistics"))
        key = {"plan_key": index.manifest.data.get("plan_key"), "n": len(index), "analysis": ANALYSIS_VERSION,
               "layout": CACHE_LAYOUT}
        digest = hashlib.sha256(json.dumps(key).encode()).hexdigest()[:16]
        store = DerivedCache(index.root)

        def build(folder):  # each batch's counts and pairs on disk, not in memory, until merged (as BM25's)
            cls.build_batches(index.text_batches(desc="reranker term statistics"), spill=folder / SPILL)._save(folder)
        out = store.load_or_build(f"rerank/terms-{digest}", key, build, cls._load)
        out._cache = (store, key, digest)
        return out

    def _save(self, folder: Path) -> None:
        terms = self.term_of
        nums = sorted(self.number_vocab, key=self.number_vocab.get)
        arrays = {"terms": np.array(terms, dtype=str), "shape": np.array(self.forward.shape),
                  "forward_indptr": self.forward.indptr, "forward_indices": self.forward.indices,
                  "forward_data": self.forward.data, "doc_len": self.doc_len, "bigram_ptr": self.bigram_ptr,
                  "bigram_codes": self.bigram_codes, "number_terms": np.array(nums, dtype=str),
                  "num_indptr": self.num_indptr, "num_indices": self.num_indices}
        save_arrays(folder, arrays)
        self.postings.save(folder, "postings_")

    @classmethod
    def _load(cls, folder: Path) -> "TermIndex":
        def arr(name, mmap=True):
            return load_array(folder, name, mmap)
        shape = tuple(int(x) for x in arr("shape", False))
        forward = sp.csr_matrix((arr("forward_data"), arr("forward_indices"), arr("forward_indptr")), shape=shape)
        forward.has_sorted_indices = True  # saved sorted: no scan of every entry
        nums = arr("number_terms").tolist()
        num_indptr, num_indices = arr("num_indptr"), arr("num_indices")
        if len(num_indptr) != shape[0] + 1:
            raise ValueError("inconsistent number arrays")
        stored = arr("terms")
        vocab = {t: j for j, t in enumerate(stored.tolist())}
        if len(vocab) != len(stored):
            raise ValueError("a term stored twice")
        return cls(vocab, forward, arr("bigram_ptr"),
                   arr("bigram_codes"), {t: j for j, t in enumerate(nums)}, (num_indptr, num_indices),
                   TermMatrix.load(folder, "postings_"), arr("doc_len"), stored)

    def bm25(self, k1: float, b: float) -> TermMatrix:
        """The core's BM25 weights for ``k1``, ``b`` (cached)."""
        weights = self._weights.get((k1, b))
        if weights is None:
            store, key, digest = self._cache or (None, None, None)
            weights = self._weights[(k1, b)] = cached_weights(store, f"rerank/bm25-{digest}",
                                                              {"terms": key, "k1": k1, "b": b}, self.postings,
                                                              self.doc_len, k1, b)
        return weights

    @cached_property
    def term_of(self) -> list[str]:
        """The term of each id."""
        return sorted(self.vocab, key=self.vocab.get)

    def names(self, ids) -> list[str]:
        """The terms of ``ids``: read from the cache's mapped terms when loaded (no list of
        every term sorted by id at the first explanation)."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        if self._stored_terms is not None:
            return self._stored_terms[ids].tolist()
        term_of = self.term_of
        return [term_of[i] for i in ids.tolist()]

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
        # Each of a passage's numbers counts once for every time the claim names it (the sum
        # over a (rows, cols) slice of the passages' number counts), read from the stored ids.
        wanted, times = np.unique(np.asarray(cols, dtype=np.int64), return_counts=True)
        rows = np.asarray(rows, dtype=np.int64)
        pos, owner = multi_arange(self.num_indptr[rows], self.num_indptr[rows + 1])
        ids = np.asarray(self.num_indices[pos], dtype=np.int64)
        at = np.minimum(np.searchsorted(wanted, ids), len(wanted) - 1)
        hits = np.where(wanted[at] == ids, times[at], 0)
        return np.bincount(owner, weights=hits, minlength=len(rows)).astype(np.float64)

    def number_columns(self, row: int) -> np.ndarray:
        """The ids (of ``number_vocab``) of the standalone numbers of passage ``row``."""
        return np.asarray(self.num_indices[self.num_indptr[row]:self.num_indptr[row + 1]])

    def query(self, term_ids: np.ndarray, counts: np.ndarray) -> sp.csr_matrix:
        """A claim's counts (distinct term ids ascending) as one query row for :meth:`bm25`."""
        return sp.csr_matrix((np.asarray(counts, dtype=np.float32), np.asarray(term_ids, dtype=np.int32),
                              np.array([0, len(term_ids)], dtype=np.int32)), shape=(1, len(self.vocab)))

    def bm25_rows(self, rows: np.ndarray, term_ids: np.ndarray, weights: np.ndarray,
                  k1: float, b: float) -> np.ndarray:
        """The BM25 of a few passages for a weighted bag of terms, summed in float64."""
        tf = self.tf_matrix(rows, term_ids)
        if not tf.size:
            return np.zeros(len(rows))
        if self._avgdl is None:
            self._avgdl = mean_length(self.doc_len)
        norm = length_norm(self.doc_len, k1, b, rows=rows, avgdl=self._avgdl)
        w = bm25_weight(tf, norm[:, None], self.idf[term_ids][None, :])
        return (w.astype(np.float64) * np.asarray(weights, dtype=np.float64)[None, :]).sum(axis=1)

    def tf_matrix(self, rows: np.ndarray, term_ids: np.ndarray) -> np.ndarray:
        """Dense (len(rows), len(term_ids)) term frequencies."""
        if not len(rows) or not len(term_ids):
            return np.zeros((len(rows), len(term_ids)))
        term_ids = np.asarray(term_ids, dtype=np.int64)
        order = np.argsort(term_ids, kind="stable")
        wanted = term_ids[order]
        if np.any(wanted[1:] == wanted[:-1]):  # a term asked twice: scipy's column slice repeats it
            return self.forward[rows][:, term_ids].toarray().astype(np.float64)
        # The rows' own entries matched against the wanted terms: one gather a pool, not two
        # scipy slices (most of the features' cost a claim, built and dropped each time).
        fwd = self.forward
        rows = np.asarray(rows, dtype=np.int64)
        pos, owner = multi_arange(fwd.indptr[rows], fwd.indptr[rows + 1])
        cols = np.asarray(fwd.indices[pos], dtype=np.int64)
        at = np.minimum(np.searchsorted(wanted, cols), len(wanted) - 1)
        hit = np.flatnonzero(wanted[at] == cols)
        out = np.zeros((len(rows), len(term_ids)))
        out[owner[hit], order[at[hit]]] = fwd.data[pos[hit]]
        return out


_HAS_DIGIT = re.compile(r"\d").search


def _split_digits(batches, number_vocab: dict[str, int], per_row: list[int], cols: list[int]):
    """The batches as the reranker counts them (letter and digit runs split), each passage's
    standalone numbers added to ``number_vocab`` (first-seen ids), ``per_row`` and ``cols``."""
    for first, texts in batches:
        # Splitting and numbers change nothing in a text without a digit (most passages).
        texts, at = list(texts), len(per_row)
        per_row.extend([0] * len(texts))
        for i in [i for i, t in enumerate(texts) if _HAS_DIGIT(t)]:
            values = numbers(texts[i])
            cols.extend(number_vocab.setdefault(x, len(number_vocab)) for x in values)
            per_row[at + i] = len(values)
            texts[i] = split_letter_digit_runs(texts[i])
        yield first, texts
