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
        self.vocab = dict(vocab)
        lengths = np.asarray(lengths, dtype=np.int64)
        n_docs, n_vocab = len(lengths), len(self.vocab)
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
        self.n_docs = n_docs
        self.tf = counts.data  # float32 counts: small integers, exact
        self.indices = counts.indices.astype(np.int32)
        self.indptr = counts.indptr.astype(np.int64)
        self.lengths = lengths
        # bm25s: np.array([len(doc) for doc in corpus]).mean() -- the same pairwise sum.
        self.avg_length = lengths.mean() if n_docs else np.float64(0.0)
        doc_freq = np.diff(counts.indptr).tolist()
        # bm25s computes each IDF with math.log into a float32 array; np.log may differ
        # from libm in the last bit, so the same scalar loop is kept (vocabulary-sized).
        self.idf = np.array([_lucene_idf(df, n_docs) if df else 0.0 for df in doc_freq], dtype=np.float32)
        self._term_of_entry = np.repeat(np.arange(n_vocab, dtype=np.int32), np.diff(counts.indptr))

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
        """The full-text stems of every passage of a tag index (what BM25 reads)."""
        from factcheck.text.analyzer import analyze
        return cls.from_texts(index.texts, analyze)

    def weights(self, k1: float, b: float) -> np.ndarray:
        """Every non-zero's BM25 (lucene) weight, float32, in the matrix's entry order."""
        rows = self.indices
        # Same expression and evaluation order as bm25s's _score_tfc_robertson, per passage
        # in float64: k1 * ((1 - b) + b * l_d / l_avg) + tf, then tf / that, times idf.
        norm = k1 * ((1 - b) + b * self.lengths.astype(np.float64) / self.avg_length)
        tf = self.tf.astype(np.float64)
        tfc = tf / (norm[rows] + tf)
        idf = self.idf[self._term_of_entry].astype(np.float64)
        return (idf * tfc).astype(np.float32)

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


def _lucene_idf(df: int, n_docs: int) -> float:
    return math.log(1 + (n_docs - df + 0.5) / (df + 0.5))
