"""Term statistics of the whole corpus under the reranker's analysis: counts, bigrams, numbers.

The reranker reads passages through its own analysis (below), so it keeps its own
counts; its BM25 is the core's (:mod:`factcheck.scoring.bm25`) over them. One pass over
the corpus gives:

* ``postings`` (a term-major :class:`~factcheck.scoring.matrix.TermMatrix` of counts): the
  core's BM25 weights for any ``k1``/``b`` (:meth:`TermIndex.bm25`), scored by one product;
* ``forward`` (CSR, passage -> terms): the term bags of candidate passages;
* ``bigrams`` (per passage, sorted codes of consecutive stem pairs) and ``numbers``
  (CSR, passage -> digit runs): phrase and number matches for a whole candidate pool
  in a few vectorised operations, instead of re-analysing passages per request.

Analysis is :func:`factcheck.text.tokens.split_stems` (the project's stems after
splitting letter/digit runs, so a claim's ``CO2`` matches a passage's ``CO 2``) and
:func:`factcheck.text.tokens.standalone_numbers` (``numbers`` here). Everything is computed from the
lower-cased word stream with punctuation dropped, so nothing here can see a passage's
format -- a ``headword:`` prefix, brackets, semicolons or capital letters.

The arrays are cached next to the tag index (``DIR/rerank/terms-<key>/*.npy``, a
:class:`~factcheck.tagging.derived.DerivedCache` entry: sha256-checked before every load,
rebuilt when damaged, skipped when the index is read-only), keyed by the index's plan
key and :data:`ANALYSIS_VERSION`.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from factcheck.scoring.bm25 import bm25_weight, bm25_weights, length_norm, lucene_idf
from factcheck.scoring.counting import BREAK, DROPPED, UNSEEN, token_cells
from factcheck.scoring.matrix import TermMatrix
from factcheck.tagging.derived import DerivedCache
from factcheck.tagging.index import multi_arange
from factcheck.text.analyzer import stem_token, word_tokens_of_texts
from factcheck.text.tokens import split_letter_digit_runs
from factcheck.text.tokens import standalone_numbers as numbers

ANALYSIS_VERSION = "stems+alnum-split+bigrams+numbers/1"
# One .npy per array, memory-mapped when loaded (the earlier single terms.npz was read
# whole into memory and its column-major copy rebuilt at every load).
CACHE_LAYOUT = "npy-mmap/2"


class TermIndex:
    """Sparse term statistics of a corpus (see the module docstring)."""

    def __init__(self, vocab: dict[str, int], forward: sp.csr_matrix, bigram_ptr: np.ndarray,
                 bigram_codes: np.ndarray, number_vocab: dict[str, int], numbers: sp.csr_matrix,
                 postings: TermMatrix | None = None, doc_len: np.ndarray | None = None):
        self.vocab = vocab
        self.forward = forward
        self.postings = TermMatrix.from_units(forward) if postings is None else postings
        self.bigram_ptr = bigram_ptr
        self.bigram_codes = bigram_codes
        self.number_vocab = number_vocab
        self.numbers = numbers
        self.n_docs = forward.shape[0]
        self.doc_len = (np.asarray(forward.sum(axis=1)).ravel().astype(np.float64) if doc_len is None
                        else np.asarray(doc_len, dtype=np.float64))
        self.idf = lucene_idf(self.postings.df, self.n_docs)
        self._weights: dict = {}  # (k1, b) -> BM25 weights
        self._norms: dict = {}    # (k1, b) -> each passage's length norm
        self._cache = None  # (DerivedCache, key): where the BM25 weights of each (k1, b) are kept

    # ------------------------------------------------------------------ building
    @classmethod
    def build(cls, texts: list[str]) -> "TermIndex":
        """The statistics of a list of passage texts (an index's are :meth:`for_index`)."""
        return cls.build_batches([(0, list(texts))])

    @classmethod
    def build_batches(cls, batches) -> "TermIndex":
        """The term index of texts given as ``(first row, texts)`` batches in corpus order
        (a tag index's shards: :meth:`~factcheck.tagging.index.TagIndex.text_batches`).

        Each batch is analysed with a few C passes (:class:`_BatchAnalysis`), not a
        Python loop per passage; the result is what :func:`~factcheck.text.tokens.split_stems`
        and :func:`numbers` give passage by passage, ids in first-seen order
        (``tests/unit/test_sparse_scores.py``): the features read their order (query terms
        are summed in ascending id order, ties among expansion terms go to the lower id)."""
        analysis = _BatchAnalysis()
        parts = [analysis.add(texts) for _, texts in batches]
        n = sum(p[0] for p in parts)
        v = len(analysis.vocab)
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.int64), out=indptr[1:])
        forward = sp.csr_matrix((np.concatenate([p[3] for p in parts]) if parts else np.zeros(0, np.float32),
                                 np.concatenate([p[2] for p in parts]) if parts else np.zeros(0, np.int32),
                                 indptr), shape=(n, v))
        bigram_ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.concatenate([p[4] for p in parts]) if parts else np.zeros(0, np.int64), out=bigram_ptr[1:])
        firsts = np.concatenate([p[5] for p in parts]) if parts else np.zeros(0, np.int64)
        seconds = np.concatenate([p[6] for p in parts]) if parts else np.zeros(0, np.int64)
        bigram_codes = firsts.astype(np.int64) * v + seconds
        num_ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.concatenate([p[7] for p in parts]) if parts else np.zeros(0, np.int64), out=num_ptr[1:])
        num_cols = np.concatenate([p[8] for p in parts]) if parts else np.zeros(0, np.int32)
        nums = sp.csr_matrix((np.ones(len(num_cols), dtype=np.float32), num_cols.astype(np.int32), num_ptr),
                             shape=(n, len(analysis.number_vocab)))
        return cls(analysis.vocab, forward, bigram_ptr, bigram_codes, analysis.number_vocab, nums)

    @classmethod
    def for_index(cls, index, cache: bool = True) -> "TermIndex":
        """Build (or load from the index directory's cache) the term index of a tag index."""
        if not cache:
            return cls.build_batches(index.text_batches(desc="reranker term statistics"))
        key = {"plan_key": index.manifest.data.get("plan_key"), "n": len(index), "analysis": ANALYSIS_VERSION,
               "layout": CACHE_LAYOUT}
        digest = hashlib.sha256(json.dumps(key).encode()).hexdigest()[:16]
        store = DerivedCache(index.root)

        def build(folder):
            cls.build_batches(index.text_batches(desc="reranker term statistics"))._save(folder)
        out = store.load_or_build(f"rerank/terms-{digest}", key, build, cls._load)
        out._cache = (store, key, digest)
        return out

    def _save(self, folder: Path) -> None:
        """One ``.npy`` file per array (see :meth:`_load` for why)."""
        terms = sorted(self.vocab, key=self.vocab.get)
        nums = sorted(self.number_vocab, key=self.number_vocab.get)
        arrays = {"terms": np.array(terms, dtype=str), "shape": np.array(self.forward.shape),
                  "forward_indptr": self.forward.indptr, "forward_indices": self.forward.indices,
                  "forward_data": self.forward.data, "doc_len": self.doc_len, "bigram_ptr": self.bigram_ptr,
                  "bigram_codes": self.bigram_codes, "number_terms": np.array(nums, dtype=str),
                  "num_indptr": self.numbers.indptr, "num_indices": self.numbers.indices}
        for name, array in arrays.items():
            with open(folder / f"{name}.npy", "wb") as fh:
                np.save(fh, np.ascontiguousarray(array), allow_pickle=False)
        self.postings.save(folder, "postings_")

    @classmethod
    def _load(cls, folder: Path) -> "TermIndex":
        """Memory-mapped, read-only: a query reads its terms' postings and its pool's rows,
        and loading converts nothing (the term-major copy and the lengths are stored)."""
        def arr(name, mmap=True):
            return np.load(folder / f"{name}.npy", mmap_mode="r" if mmap else None, allow_pickle=False)
        shape = tuple(int(x) for x in arr("shape", False))
        forward = sp.csr_matrix((arr("forward_data"), arr("forward_indices"), arr("forward_indptr")), shape=shape)
        forward.has_sorted_indices = True  # saved sorted: no scan of every entry
        nums = arr("number_terms", False).tolist()
        num_indices = arr("num_indices", False)
        numbers_m = sp.csr_matrix((np.ones(len(num_indices), dtype=np.float32), num_indices, arr("num_indptr", False)),
                                  shape=(shape[0], len(nums)))
        return cls({t: j for j, t in enumerate(arr("terms", False).tolist())}, forward, arr("bigram_ptr"),
                   arr("bigram_codes"), {t: j for j, t in enumerate(nums)}, numbers_m,
                   TermMatrix.load(folder, "postings_"), arr("doc_len"))

    def bm25(self, k1: float, b: float) -> TermMatrix:
        """The core's BM25 weights of every (term, passage) for ``k1``, ``b`` (kept next to
        the tag index when this term index is, memory-mapped)."""
        weights = self._weights.get((k1, b))
        if weights is None:
            def derive():
                return bm25_weights(self.postings, self.doc_len, k1, b).data
            if self._cache is None:
                data = derive()
            else:
                store, key, digest = self._cache
                data = store.load_or_build(f"rerank/bm25-{digest}-k1_{k1:g}-b_{b:g}", {"terms": key, "k1": k1, "b": b},
                                           lambda folder: np.save(folder / "data.npy", derive(), allow_pickle=False),
                                           lambda folder: np.load(folder / "data.npy", mmap_mode="r",
                                                                  allow_pickle=False))
            weights = self._weights[(k1, b)] = self.postings.with_data(data)
        return weights

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

    def query(self, term_ids: np.ndarray, counts: np.ndarray) -> sp.csr_matrix:
        """A claim's counts (distinct term ids ascending) as one query row for :meth:`bm25`."""
        return sp.csr_matrix((np.asarray(counts, dtype=np.float32), np.asarray(term_ids, dtype=np.int32),
                              np.array([0, len(term_ids)], dtype=np.int32)), shape=(1, len(self.vocab)))

    def bm25_rows(self, rows: np.ndarray, term_ids: np.ndarray, weights: np.ndarray,
                  k1: float, b: float) -> np.ndarray:
        """The BM25 of a few passages for a weighted bag of terms (the RM3 expansion's): the
        core's weights, from their term bags, summed in float64."""
        tf = self.tf_matrix(rows, term_ids)
        if not tf.size:
            return np.zeros(len(rows))
        norm = self._norms.get((k1, b))
        if norm is None:
            norm = self._norms[(k1, b)] = length_norm(self.doc_len, k1, b)
        w = bm25_weight(tf, norm[rows][:, None], self.idf[term_ids][None, :])
        return (w.astype(np.float64) * np.asarray(weights, dtype=np.float64)[None, :]).sum(axis=1)

    def tf_matrix(self, rows: np.ndarray, term_ids: np.ndarray) -> np.ndarray:
        """Dense (len(rows), len(term_ids)) term frequencies: small, for candidate features."""
        if not len(rows) or not len(term_ids):
            return np.zeros((len(rows), len(term_ids)))
        return self.forward[rows][:, term_ids].toarray().astype(np.float64)


_HAS_DIGIT = re.compile(r"\d").search


class _BatchAnalysis:
    """:func:`~factcheck.text.tokens.split_stems` and :func:`numbers` of whole batches of texts, ids in first-seen
    order across batches (see :meth:`TermIndex.build_batches`).

    Per batch: the texts with a digit are split at letter/digit boundaries (the others
    are unchanged by it), all are tokenised in one pass
    (:func:`~factcheck.text.analyzer.word_tokens_of_texts`), and each distinct token is
    stemmed once per build.
    """

    def __init__(self):
        self.vocab: dict[str, int] = {}
        self.number_vocab: dict[str, int] = {}
        self._token: dict[str, int] = {}  # token -> stem id, DROPPED, or BREAK for the marker

    def _stem_ids(self, tokens: list[str], marker: str) -> np.ndarray:
        table = self._token
        table.setdefault(marker, BREAK)
        ids = np.fromiter(map(table.get, tokens, itertools.repeat(UNSEEN)), dtype=np.int64, count=len(tokens))
        unseen = np.flatnonzero(ids == UNSEEN)
        if unseen.size:
            vocab = self.vocab
            # in order of first occurrence: a new stem gets the next id where it first appears
            for token in dict.fromkeys(tokens[i] for i in unseen.tolist()):
                stem = stem_token(token)
                table[token] = vocab.setdefault(stem, len(vocab)) if stem else DROPPED
            ids[unseen] = [table[tokens[i]] for i in unseen.tolist()]
        return ids

    @staticmethod
    def _texts_split(texts: list[str]) -> tuple[list[str], list[list[str]]]:
        """The texts split at letter/digit boundaries, and each text's numbers. Both
        change nothing in a text without a digit (most passages), so only texts with one
        go through :func:`split_letter_digit_runs` and :func:`numbers`, each on its own."""
        split, nums = list(texts), [[] for _ in texts]
        for i in [i for i, t in enumerate(texts) if _HAS_DIGIT(t)]:
            split[i] = split_letter_digit_runs(texts[i])
            nums[i] = numbers(texts[i])
        return split, nums

    def add(self, texts: list[str]):
        """Analyse one batch: (passages, stems per passage, forward columns, forward counts,
        bigrams per passage, bigram first ids, bigram second ids, numbers per passage,
        number columns)."""
        split, nums = self._texts_split(list(texts))
        n = len(split)
        tokens, marker = word_tokens_of_texts(split)
        ids = self._stem_ids(tokens, marker)
        del tokens
        # forward: per passage, distinct stem ids ascending with their counts
        rows, seq, f_rows, f_cols, counts = token_cells(ids, len(self.vocab))
        per_row = np.bincount(f_rows, minlength=n).astype(np.int64)
        # bigrams: consecutive kept stems of one passage, distinct, in (first, second) order
        same = rows[:-1] == rows[1:] if len(rows) > 1 else np.zeros(0, bool)
        b_rows = rows[:-1][same] if len(rows) > 1 else np.zeros(0, np.int64)
        first, second = (seq[:-1][same], seq[1:][same]) if len(rows) > 1 else (np.zeros(0, np.int64),) * 2
        order = np.lexsort((second, first, b_rows))
        b_rows, first, second = b_rows[order], first[order], second[order]
        keep = np.ones(len(first), bool)
        keep[1:] = (first[1:] != first[:-1]) | (second[1:] != second[:-1]) | (b_rows[1:] != b_rows[:-1])
        b_rows, first, second = b_rows[keep], first[keep], second[keep]
        per_row_bigrams = np.bincount(b_rows, minlength=n).astype(np.int64)
        # numbers: each passage's distinct numbers, sorted, ids in first-seen order
        num_cols, per_row_nums = [], np.zeros(n, dtype=np.int64)
        number_vocab = self.number_vocab
        for i, values in enumerate(nums):
            if values:
                num_cols.extend(number_vocab.setdefault(x, len(number_vocab)) for x in values)
                per_row_nums[i] = len(values)
        return (n, per_row, f_cols.astype(np.int32), counts.astype(np.float32), per_row_bigrams, first, second,
                per_row_nums, np.asarray(num_cols, dtype=np.int32))
