"""BM25 weights for any (k1, b) from one term-count matrix: tuning without re-indexing.

bm25s precomputes every (passage, term) weight when it builds an index, so an index is
tied to one ``k1``/``b``, and rebuilding it for every pair of a tuning sweep costs ~47 s
a build at 1.2M passages, 6 builds per run (docs/decisions.md).
The weights are a closed form of three things that do not depend on (k1, b) -- term
counts, passage lengths and document frequencies -- so :class:`TermCounts` counts once
(a sparse passage x term matrix) and :meth:`TermCounts.bm25` derives one setting's
weights with a few vectorised operations over the non-zeros (well under a second at
1.2M passages) and hands them to a ``bm25s.BM25`` object, which then scores queries as
usual. One BM25 (bm25s's scoring) whatever the parameters; only the build is ours.

The arithmetic mirrors bm25s's ``lucene`` variant operation for operation, in the same
dtypes (float64 intermediates, float32 weights, ``math.log`` for the IDF), so the
weights -- and every query's scores -- are bit-identical to an index bm25s builds itself;
``tests/unit/test_bm25_weights.py`` compares them on real passages.
"""

from __future__ import annotations

import array
import itertools
import math

import bm25s
import numpy as np
import scipy.sparse as sp

__all__ = ["TermCounts"]


class TermCounts:
    """Term counts of a tokenised corpus, from which BM25 indexes are derived.

    Parameters
    ----------
    tokens : 1-d integer array
        Every passage's token ids, concatenated in passage order (duplicates kept).
    lengths : 1-d integer array
        Tokens per passage (``lengths.sum() == len(tokens)``).
    vocab : dict
        Token -> id, ids ``0 .. len(vocab) - 1``.

    Build one with :meth:`from_token_ids` (lists of ids) or :meth:`from_texts` (streams
    the texts through an analyser, keeping only the flat id array: at 1.2M passages the
    per-passage Python lists of stems and ids cost ~1 GB more).

    Example
    -------
    >>> counts = TermCounts.from_token_ids([[0, 1, 1], [1, 2]], {"a": 0, "b": 1, "c": 2})
    >>> index = counts.bm25(k1=1.2, b=0.75)
    >>> [round(float(s), 3) for s in index.get_scores_from_ids(index.get_tokens_ids(["a"]))]
    [0.291, 0.0]
    """

    def __init__(self, tokens: np.ndarray, lengths: np.ndarray, vocab: dict):
        lengths = np.asarray(lengths, dtype=np.int64)
        n_docs, n_vocab = len(lengths), len(vocab)
        if int(lengths.sum()) != len(tokens):
            raise ValueError(f"lengths add up to {int(lengths.sum())}, but there are {len(tokens)} tokens")
        # Tokens arrive passage by passage, so they already are a CSR matrix (passage x
        # term); one conversion gives the column-major layout bm25s's scorer reads (one
        # slice per term, passages ascending), duplicates summed.
        indptr = np.zeros(n_docs + 1, dtype=np.int64)
        np.cumsum(lengths, out=indptr[1:])
        by_passage = sp.csr_matrix((np.ones(len(tokens), dtype=np.float32), np.asarray(tokens, np.int32), indptr),
                                   shape=(n_docs, n_vocab))
        by_passage.sum_duplicates()
        counts = by_passage.tocsc()
        del by_passage
        counts.sort_indices()
        self._set(counts.data, counts.indices, counts.indptr, lengths, vocab)

    def _set(self, tf, indices, indptr, lengths, vocab) -> None:
        self.vocab = dict(vocab)
        self.n_docs = len(lengths)
        self.tf = np.asarray(tf, dtype=np.float32)  # float32 counts: small integers, exact
        self.indices = np.asarray(indices, dtype=np.int32)
        self.indptr = np.asarray(indptr, dtype=np.int64)
        self.lengths = np.asarray(lengths, dtype=np.int64)
        # bm25s: np.array([len(doc) for doc in corpus]).mean() -- the same pairwise sum.
        self.avg_length = self.lengths.mean() if self.n_docs else np.float64(0.0)
        doc_freq = np.diff(self.indptr).tolist()
        # bm25s computes each IDF with math.log into a float32 array; np.log may differ
        # from libm in the last bit, so the same scalar loop is kept (vocabulary-sized).
        self.idf = np.array([_lucene_idf(df, self.n_docs) if df else 0.0 for df in doc_freq], dtype=np.float32)

    @classmethod
    def from_token_ids(cls, token_ids: list[list[int]], vocab: dict) -> "TermCounts":
        """From each passage's token ids (``TagIndex.stem_ids``) and the token -> id map."""
        lengths = np.fromiter((len(doc) for doc in token_ids), dtype=np.int64, count=len(token_ids))
        tokens = np.fromiter(itertools.chain.from_iterable(token_ids), dtype=np.int64, count=int(lengths.sum()))
        return cls(tokens, lengths, vocab)

    @classmethod
    def from_texts(cls, texts, analyzer) -> "TermCounts":
        """Count ``analyzer(text)`` for each text; token ids in first-seen order (as bm25s
        numbers a vocabulary built from the same token lists)."""
        vocab: dict[str, int] = {}
        tokens = array.array("i")
        lengths = array.array("q")
        for text in texts:
            stems = analyzer(text)
            tokens.extend([vocab.setdefault(s, len(vocab)) for s in stems])
            lengths.append(len(stems))
        return cls(np.frombuffer(tokens, dtype=np.int32), np.frombuffer(lengths, dtype=np.int64), vocab)

    @classmethod
    def from_index(cls, index) -> "TermCounts":
        """The full-text stems of every passage of a tag index (what BM25 reads), counted a
        shard at a time by the tagging job's vectorised counter
        (:func:`~factcheck.tagging.counting.count_terms`, the analyser's stems exactly),
        with term ids in sorted order. Why not :meth:`from_texts`: its per-passage Python
        lists and id loop took ~22 s and +301 MiB at 1.2M passages; this keeps one shard's
        arrays at a time and writes the column-major matrix in place. Term ids do not move
        a score: bm25s adds a query's term weights in the query's order, whatever the ids."""
        from factcheck.tagging.counting import count_terms
        shards, lengths, column = [], [], {}
        for _, texts in index.text_batches(desc="BM25 term counts"):
            counts = count_terms(texts)
            m = counts.matrix
            lengths.append(np.asarray(m.sum(axis=1), dtype=np.int64).ravel())  # stems per passage
            local = np.array([column.setdefault(t, len(column)) for t in counts.terms], dtype=np.int64)
            shards.append((local[m.indices].astype(np.int32), m.data.astype(np.int32), np.asarray(m.indptr)))
        # Sorted term ids, so that the vocabulary does not depend on the order shards come in.
        names = sorted(column)
        remap = np.empty(len(column), dtype=np.int32)
        remap[[column[t] for t in names]] = np.arange(len(names), dtype=np.int32)
        n_vocab = len(names)
        df = np.zeros(n_vocab, dtype=np.int64)
        for i, (cols, _, _) in enumerate(shards):
            cols = remap[cols]
            shards[i] = (cols,) + shards[i][1:]
            df += np.bincount(cols, minlength=n_vocab)
        indptr = np.zeros(n_vocab + 1, dtype=np.int64)
        np.cumsum(df, out=indptr[1:])
        tf = np.empty(int(indptr[-1]), dtype=np.float32)
        rows_out = np.empty(int(indptr[-1]), dtype=np.int32)
        fill = indptr[:-1].copy()
        base = 0
        while shards:  # each shard's entries go to their columns, after the earlier shards'
            cols, data, row_ptr = shards.pop(0)
            rows = base + np.repeat(np.arange(len(row_ptr) - 1, dtype=np.int64), np.diff(row_ptr))
            order = np.argsort(cols, kind="stable")  # by column, rows ascending within one
            per_col = np.bincount(cols, minlength=n_vocab)
            first = np.cumsum(per_col) - per_col
            sorted_cols = cols[order]
            at = fill[sorted_cols] + (np.arange(len(order)) - first[sorted_cols])
            tf[at] = data[order]
            rows_out[at] = rows[order]
            fill += per_col
            base += len(row_ptr) - 1
        out = cls.__new__(cls)
        out._set(tf, rows_out, indptr, np.concatenate(lengths).astype(np.int64) if lengths else np.zeros(0, np.int64),
                 {t: i for i, t in enumerate(names)})
        return out

    def weights(self, k1: float, b: float) -> np.ndarray:
        """Every non-zero's BM25 (lucene) weight, float32, in the matrix's entry order.

        Computed a block of terms at a time: the float64 intermediates of every entry at
        once were ~40 bytes a non-zero (1.9 GB at 5M passages) for a float32 result;
        each entry's arithmetic is the same in a block as in the whole."""
        # Same expression and evaluation order as bm25s's _score_tfc_robertson, per passage
        # in float64: k1 * ((1 - b) + b * l_d / l_avg) + tf, then tf / that, times idf.
        norm = k1 * ((1 - b) + b * self.lengths.astype(np.float64) / self.avg_length)
        out = np.empty(len(self.tf), dtype=np.float32)
        for t0, t1 in _term_blocks(self.indptr, _BLOCK_ENTRIES):
            a, e = int(self.indptr[t0]), int(self.indptr[t1])
            tf = self.tf[a:e].astype(np.float64)
            tfc = tf / (norm[self.indices[a:e]] + tf)
            idf = np.repeat(self.idf[t0:t1], np.diff(self.indptr[t0:t1 + 1])).astype(np.float64)
            out[a:e] = idf * tfc
        return out

    def bm25(self, k1: float, b: float) -> bm25s.BM25:
        """A ready ``bm25s.BM25`` (lucene) whose index holds the weights for ``k1``, ``b``."""
        model = bm25s.BM25(k1=k1, b=b, method="lucene")
        model.scores = {"data": self.weights(k1, b), "indices": self.indices, "indptr": self.indptr,
                        "num_docs": self.n_docs}
        model.nonoccurrence_array = None
        vocab = dict(self.vocab)
        if "" not in vocab:  # bm25s.BM25.index adds the empty token the same way
            vocab[""] = max(vocab.values(), default=-1) + 1
        model.vocab_dict = vocab
        model.unique_token_ids_set = set(vocab.values())
        return model


_BLOCK_ENTRIES = 1 << 22


def _term_blocks(indptr: np.ndarray, size: int):
    """Consecutive term ranges ``(t0, t1)`` holding about ``size`` entries each."""
    n_terms = len(indptr) - 1
    if n_terms == 0:
        return
    cuts = np.searchsorted(indptr, np.arange(size, int(indptr[-1]), size, dtype=np.int64), side="right") - 1
    bounds = sorted(set([0, *cuts.tolist(), n_terms]))
    for t0, t1 in zip(bounds[:-1], bounds[1:]):
        if t1 > t0:
            yield t0, t1


def _lucene_idf(df: int, n_docs: int) -> float:
    return math.log(1 + (n_docs - df + 0.5) / (df + 0.5))
