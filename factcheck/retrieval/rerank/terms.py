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

from factcheck.retrieval.sparse_scores import accumulate, postings
from factcheck.tagging.counting import BREAK, DROPPED, UNSEEN, token_cells
from factcheck.tagging.derived import DerivedCache
from factcheck.tagging.index import multi_arange
from factcheck.text.analyzer import stem_token, word_tokens_of_texts
from factcheck.text.tokens import split_letter_digit_runs
from factcheck.text.tokens import standalone_numbers as numbers

ANALYSIS_VERSION = "stems+alnum-split+bigrams+numbers/1"
# One .npy per array, memory-mapped when loaded (the earlier single terms.npz was read
# whole into memory and its column-major copy rebuilt at every load).
CACHE_LAYOUT = "npy-mmap/1"


class TermIndex:
    """Sparse term statistics of a corpus (see the module docstring)."""

    def __init__(self, vocab: dict[str, int], forward: sp.csr_matrix, bigram_ptr: np.ndarray,
                 bigram_codes: np.ndarray, number_vocab: dict[str, int], numbers: sp.csr_matrix,
                 postings: sp.csc_matrix | None = None, doc_len: np.ndarray | None = None):
        self.vocab = vocab
        self.forward = forward
        if postings is None:
            postings = forward.tocsc()
            postings.sort_indices()
        self.postings = postings
        self.bigram_ptr = bigram_ptr
        self.bigram_codes = bigram_codes
        self.number_vocab = number_vocab
        self.numbers = numbers
        self.n_docs = forward.shape[0]
        self.doc_len = (np.asarray(forward.sum(axis=1)).ravel().astype(np.float64) if doc_len is None
                        else np.asarray(doc_len, dtype=np.float64))
        self.avgdl = float(self.doc_len.mean()) if self.n_docs else 0.0
        self.df = np.diff(self.postings.indptr).astype(np.float64)
        n = self.n_docs
        self.idf = np.log(1.0 + (n - self.df + 0.5) / (self.df + 0.5))  # Lucene's BM25 idf

    # ------------------------------------------------------------------ building
    @classmethod
    def build(cls, texts: list[str]) -> "TermIndex":
        """The statistics of a list of passage texts (an index's are :meth:`for_index`)."""
        return cls.build_batches([(0, list(texts))])

    @classmethod
    def build_batches(cls, batches) -> "TermIndex":
        """The term index of texts given as ``(first row, texts)`` batches in corpus order
        (a tag index's shards: :meth:`~factcheck.tagging.index.TagIndex.text_batches`).

        Each batch is analysed with a few C passes (:class:`_BatchAnalysis`) instead of
        three regex calls and a Python loop per passage (~46 us a passage: 87 s wall for
        the 316K proxy corpus on the loaded 2-core machine). The result is the same as
        analysing every passage on its own with :func:`~factcheck.text.tokens.split_stems` and :func:`numbers`, ids
        in first-seen order included (``tests/unit/test_rerank.py`` compares them): the
        reranker's features were fitted on these ids' order (query terms are summed in
        ascending id order, and ties among expansion terms go to the lower id)."""
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
        def build(folder):
            cls.build_batches(index.text_batches(desc="reranker term statistics"))._save(folder)
        return DerivedCache(index.root).load_or_build(f"rerank/terms-{digest}", key, build, cls._load)

    def _save(self, folder: Path) -> None:
        """One ``.npy`` file per array (see :meth:`_load` for why)."""
        terms = sorted(self.vocab, key=self.vocab.get)
        nums = sorted(self.number_vocab, key=self.number_vocab.get)
        arrays = {"terms": np.array(terms, dtype=str), "shape": np.array(self.forward.shape),
                  "forward_indptr": self.forward.indptr, "forward_indices": self.forward.indices,
                  "forward_data": self.forward.data, "postings_indptr": self.postings.indptr,
                  "postings_indices": self.postings.indices, "postings_data": self.postings.data,
                  "doc_len": self.doc_len, "bigram_ptr": self.bigram_ptr, "bigram_codes": self.bigram_codes,
                  "number_terms": np.array(nums, dtype=str), "num_indptr": self.numbers.indptr,
                  "num_indices": self.numbers.indices}
        for name, array in arrays.items():
            with open(folder / f"{name}.npy", "wb") as fh:
                np.save(fh, np.ascontiguousarray(array), allow_pickle=False)

    @classmethod
    def _load(cls, folder: Path) -> "TermIndex":
        """Memory-mapped, read-only: a query reads its terms' postings and its pool's rows,
        so a served corpus of 10M passages does not hold ~2.3 GB of term statistics in its
        own memory, and loading costs no conversion (the column-major copy and the
        passage lengths are stored, not recomputed)."""
        def arr(name, mmap=True):
            return np.load(folder / f"{name}.npy", mmap_mode="r" if mmap else None, allow_pickle=False)
        shape = tuple(int(x) for x in arr("shape", False))
        forward = sp.csr_matrix((arr("forward_data"), arr("forward_indices"), arr("forward_indptr")), shape=shape)
        postings = sp.csc_matrix((arr("postings_data"), arr("postings_indices"), arr("postings_indptr")), shape=shape)
        forward.has_sorted_indices = postings.has_sorted_indices = True  # saved sorted: no scan of every entry
        nums = arr("number_terms", False).tolist()
        num_indices = arr("num_indices", False)
        numbers_m = sp.csr_matrix((np.ones(len(num_indices), dtype=np.float32), num_indices, arr("num_indptr", False)),
                                  shape=(shape[0], len(nums)))
        return cls({t: j for j, t in enumerate(arr("terms", False).tolist())}, forward, arr("bigram_ptr"),
                   arr("bigram_codes"), {t: j for j, t in enumerate(nums)}, numbers_m, postings, arr("doc_len"))

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

    def bm25_touched(self, term_ids: np.ndarray, weights: np.ndarray, k1: float, b: float):
        """:meth:`bm25` where it is not zero: (rows ascending, float64 scores), the same bits
        (each row's terms added in the order given, from zero, as the full ``bincount``
        adds them) from the postings of the query's terms only."""
        P = self.postings
        term_ids = np.asarray(term_ids, dtype=np.int64)
        pos, owner = postings(P.indptr, term_ids)
        if not len(pos):
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        rows = P.indices[pos]
        tf = P.data[pos].astype(np.float64)
        w = np.asarray(weights, dtype=np.float64)
        # per term: (w * idf * (k1 + 1)) * tf / (tf + norm), as :meth:`bm25` evaluates it
        coef = np.array([(wi * self.idf[t] * (k1 + 1.0)) for t, wi in zip(term_ids.tolist(), w.tolist())])
        vals = coef[owner] * tf / (tf + self._length_norm(k1, b)[rows])
        return accumulate(rows, vals, owner, np.float64)

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
