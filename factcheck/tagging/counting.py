"""Text -> per-shard term counts (the map step of the two-pass job).

Tokenising is the expensive part of tagging, so it happens once: each shard's counts are
kept (with the shard's own local vocabulary, in first-seen order) and the second pass
only re-indexes columns. Per token the hot loop does one dict lookup; stemming happens
once per distinct token per process (see :mod:`factcheck.text.analyzer`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from factcheck.text.analyzer import TextAnalyzer, word_tokens

_ANALYZER = TextAnalyzer()  # one memo per worker process, reused across shards


@dataclass
class ShardCounts:
    """Counts of one shard: rows are passages, columns index ``terms`` (local)."""

    terms: list[str]
    matrix: sp.csr_matrix  # int32 counts, canonical (sorted indices, no duplicates)

    @property
    def totals(self) -> np.ndarray:
        return np.asarray(self.matrix.sum(axis=0), dtype=np.int64).ravel()

    @property
    def doc_freq(self) -> np.ndarray:
        return np.bincount(self.matrix.indices, minlength=len(self.terms)).astype(np.int64)


def count_terms(texts: list[str], analyzer: TextAnalyzer = _ANALYZER) -> ShardCounts:
    local: dict[str, int] = {}          # stem -> local column
    token_col: dict[str, int] = {}      # token -> local column, -1 when dropped
    cols: list[int] = []
    indptr = np.zeros(len(texts) + 1, dtype=np.int64)
    extend = cols.extend
    lookup = token_col.__getitem__
    stem = analyzer.stem
    for row, text in enumerate(texts):
        tokens = word_tokens(text)
        for token in tokens:
            if token not in token_col:
                s = stem(token)
                token_col[token] = local.setdefault(s, len(local)) if s else -1
        extend(map(lookup, tokens))
        indptr[row + 1] = len(cols)
    col_arr = np.array(cols, dtype=np.int32)
    kept = col_arr >= 0
    kept_before = np.zeros(len(col_arr) + 1, dtype=np.int64)
    np.cumsum(kept, out=kept_before[1:])
    matrix = sp.csr_matrix(
        (np.ones(int(kept_before[-1]), dtype=np.int32), col_arr[kept], kept_before[indptr]),
        shape=(len(texts), len(local)),
    )
    matrix.sum_duplicates()  # sorts indices and merges repeats into counts
    return ShardCounts(list(local), matrix)
