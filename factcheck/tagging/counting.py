"""Text -> per-shard term counts (the map step of the two-pass job).

Tokenising is the expensive part of tagging, so it happens once: each shard's counts are
kept (with the shard's own local vocabulary, sorted) and the second pass only re-indexes
columns. Stemming happens once per distinct token per process (see
:mod:`factcheck.text.analyzer`).

Why whole-batch array work instead of a loop over passages: a per-passage loop is
Python-bound, and counting is most of a tagging worker's time. So: one tokenising pass
over 10,000 passages at a time (:func:`factcheck.text.analyzer.word_tokens_of_texts`),
one dict lookup per token through ``map``, and numpy for rows and counts (less than half
the time of the loop: docs/decisions.md). ``tests/unit/test_tagging.py`` compares the
counts with the analyzer applied passage by passage.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from factcheck.text.analyzer import TextAnalyzer, check_analyzer, term_of_token, word_tokens_of_texts

# token ids of a batch's stream below 0: not looked up yet, no stem, the end of a text
UNSEEN, DROPPED, BREAK = -3, -1, -2


class _TokenIds:
    """Per process: token -> id of its stem (or DROPPED), kept across shards, so a shard
    only stems (and looks up) the tokens no earlier shard had -- why: building the
    token table anew for every shard is a quarter of the shard's counting. It is the memo of
    :func:`~factcheck.text.analyzer.stem_token` here (a TextAnalyzer's would hold every
    token a second time); one table per analyzer (``term_of``: its per-token rule)."""

    def __init__(self, term_of=None):
        self.term_of = term_of or term_of_token("stems")
        self.of: dict[str, int] = {}
        self.stems: list[str] = []       # stem of each id
        self._stem_id: dict[str, int] = {}

    MAX_TOKENS = TextAnalyzer.MAX_MEMO

    def limit_memory(self) -> None:
        """Start afresh between shards once the table is full (a long-lived in-process
        caller would otherwise keep every token it ever counted)."""
        if len(self.of) > self.MAX_TOKENS:
            self.of, self.stems, self._stem_id = {}, [], {}

    def ids(self, tokens: list[str], marker: str) -> np.ndarray:
        self.of.setdefault(marker, BREAK)
        ids = np.fromiter(map(self.of.get, tokens, itertools.repeat(UNSEEN)), dtype=np.int64, count=len(tokens))
        unseen = np.flatnonzero(ids == UNSEEN)
        if unseen.size:
            stem_id = self._stem_id
            for token in {tokens[i] for i in unseen.tolist()}:
                s = self.term_of(token)
                if not s:
                    self.of[token] = DROPPED
                    continue
                if s not in stem_id:
                    stem_id[s] = len(self.stems)
                    self.stems.append(s)
                self.of[token] = stem_id[s]
            ids[unseen] = [self.of[tokens[i]] for i in unseen.tolist()]
        return ids


_TOKEN_IDS = {"stems": _TokenIds()}  # per analyzer, one per worker process, reused across shards


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


def count_terms(texts: list[str], analyzer: str = "stems") -> ShardCounts:
    """The term counts of ``texts`` under ``analyzer`` (one row each; the stems by default,
    ``"plain"`` for letter/digit tokens, see :data:`~factcheck.text.analyzer.ANALYZERS`);
    local terms sorted (deterministic).

    Texts are tokenised ``BATCH`` at a time: the token list and its arrays cost ~100 bytes
    a token, so a whole shard of long passages at once would not be bounded by much.
    """
    token_ids = _TOKEN_IDS.get(check_analyzer(analyzer))
    if token_ids is None:
        token_ids = _TOKEN_IDS[analyzer] = _TokenIds(term_of_token(analyzer))
    token_ids.limit_memory()
    underscore = analyzer == "stems"
    pieces = [_count_ids(texts[at:at + BATCH], token_ids, underscore) for at in range(0, max(len(texts), 1), BATCH)]
    lengths, ids, counts = (np.concatenate(part) for part in zip(*pieces))
    # Stem ids are the process's; the shard's own columns are its terms, sorted.
    present = np.flatnonzero(np.bincount(ids, minlength=len(token_ids.stems)))  # np.unique(ids), 10x faster
    terms = [token_ids.stems[i] for i in present.tolist()]
    order = sorted(range(len(terms)), key=terms.__getitem__)
    column = np.empty(len(token_ids.stems), dtype=np.int64)
    column[present[order]] = np.arange(len(order))
    indptr = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    matrix = sp.csr_matrix((counts.astype(np.int32), column[ids].astype(np.int32), indptr),
                           shape=(len(texts), len(terms)))
    matrix.sort_indices()  # canonical: no duplicates (ids were distinct in a row), sorted columns
    return ShardCounts([terms[i] for i in order], matrix)


BATCH = 10_000


def token_cells(ids: np.ndarray, n_ids: int):
    """A batch's stream of token ids -- one per token of
    :func:`~factcheck.text.analyzer.word_tokens_of_texts`, ``BREAK`` for the marker closing
    each text, other negatives for tokens without a stem -- as ``(rows, ids, cell_rows,
    cell_ids, counts)``: the row and id of every kept token in order, and the distinct
    (row, id) cells with their counts, sorted by row, then id (``n_ids`` bounds the ids)."""
    ends = ids == BREAK
    rows = np.cumsum(ends) - ends  # the marker after text r closes row r
    kept = ids >= 0
    rows, ids = rows[kept], ids[kept]
    n_ids = max(n_ids, 1)
    cells, counts = np.unique(rows * n_ids + ids, return_counts=True)
    return rows, ids, cells // n_ids, cells % n_ids, counts


def _count_ids(texts: list[str], token_ids: _TokenIds, underscore: bool = True):
    """(stems per row, stem ids, counts) of ``texts``, row by row, ids ascending in a row."""
    tokens, marker = word_tokens_of_texts(texts, underscore)
    ids = token_ids.ids(tokens, marker)
    del tokens
    _, _, cell_rows, cell_ids, counts = token_cells(ids, len(token_ids.stems))
    return np.bincount(cell_rows, minlength=len(texts)), cell_ids, counts
