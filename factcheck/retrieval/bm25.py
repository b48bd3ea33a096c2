"""BM25 over the full passage text, scored by bm25s and fed the project's own stems.

bm25s precomputes every (term, passage) score at index time, so an index is tied to its
``k1``/``b``/``method``. For the ``lucene`` variant the weights are derived from one
term-count matrix per tag index (:mod:`factcheck.retrieval.bm25_weights`, bit-identical
to bm25s's own build and ~100x faster), so a sweep over (k1, b) never re-indexes. The
chosen index is saved next to the tags (``DIR/bm25/<params>/``) and reused when the tag
index and parameters match, so a served index need not re-analyse every passage. The
cache's own record (``factcheck-key.json``) lists the sha256 of every file in it and is
checked on every load: a tampered or truncated cache is rebuilt, never used (issue 15: an
edited cache changed the evidence of 6 of 8 dev claims without a word). A read-only
index directory is served without a cache. Queries are the claim's stems (duplicates
kept, as a bag of words). bm25s's own top-k selection uses ``argpartition``, which
breaks ties arbitrarily; we take its full score vector and select with
:func:`~factcheck.retrieval.base.stable_top` so equal scores keep corpus order.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import weakref
from pathlib import Path

import bm25s
import numpy as np

from factcheck.formats.files import current_umask, sha256_file
from factcheck.retrieval.base import Hit, Ranking, Retriever, Selection, stable_top
from factcheck.retrieval.bm25_weights import TermCounts
from factcheck.text.analyzer import analyze

logging.getLogger("bm25s").setLevel(logging.WARNING)
log = logging.getLogger(__name__)


class BM25Retriever(Retriever):
    name = "bm25"

    def __init__(self, k1: float = 1.2, b: float = 0.75, k: int = 5, method: str = "lucene",
                 cache: bool = True):
        self.k1 = k1
        self.b = b
        self.k = k
        self.method = method
        self.cache = cache

    def params(self) -> dict:
        return {"k1": self.k1, "b": self.b, "k": self.k, "method": self.method}

    def _cache_dir(self, index) -> Path:
        return index.root / "bm25" / f"{self.method}-k1_{self.k1:g}-b_{self.b:g}"

    def fit(self, index) -> "BM25Retriever":
        self.index = index
        key = {"plan_key": index.manifest.data.get("plan_key"), "k1": self.k1, "b": self.b,
               "method": self.method, "bm25s": bm25s.__version__}
        cache = self._cache_dir(index)
        if self.cache and _cache_matches(cache, key):
            try:
                self._bm25 = bm25s.BM25.load(cache, mmap=False)
                return self
            except Exception as exc:  # checksums matched but bm25s still refused: rebuild
                log.warning("%s: unreadable BM25 cache (%s); rebuilding it", cache, type(exc).__name__)
        if self.method == "lucene":
            self._bm25 = term_counts(index).bm25(self.k1, self.b)
        else:
            self._bm25 = bm25s.BM25(k1=self.k1, b=self.b, method=self.method)
            token_ids, vocab = index.stem_ids
            self._bm25.index((token_ids, dict(vocab)), show_progress=False)
        if self.cache:
            try:
                _save_atomic(self._bm25, cache, key)
            except OSError as exc:  # a read-only index directory: do without the cache
                log.info("%s: BM25 cache not saved (%s)", cache, exc.strerror or exc)
        return self

    def scores(self, claim: str) -> np.ndarray:
        """BM25 score of every passage for one claim (float32, zeros for an empty query)."""
        ids = self._bm25.get_tokens_ids(analyze(claim))
        if not ids:
            return np.zeros(len(self.index), dtype=np.float32)
        return self._bm25.get_scores_from_ids(ids)

    def rank(self, claims: list[str], depth: int = 100) -> list[Ranking]:
        return [stable_top(self.scores(c), depth) for c in claims]

    def retrieve(self, claims: list[str]) -> list[Selection]:
        out = []
        for claim, ranking in zip(claims, self.rank(claims, self.k)):
            stems = set(analyze(claim))
            hits = []
            for rank, (row, score) in enumerate(zip(ranking.rows.tolist(), ranking.scores.tolist()), 1):
                passage_stems = analyze(self.index.text(row))
                hits.append(Hit(row, self.index.ids[row], float(score), {
                    "bm25": float(score), "rank": rank,
                    "shared_tags": sorted(stems & set(passage_stems)),
                }))
            out.append(Selection(hits, "ranked", {"params": self.params()}))
        return out


_TERM_COUNTS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def term_counts(index) -> TermCounts:
    """The index's term-count matrix, built once per loaded index and shared by every fit."""
    counts = _TERM_COUNTS.get(index)
    if counts is None:
        counts = _TERM_COUNTS[index] = TermCounts.from_index(index)
    return counts


KEY_FILE = "factcheck-key.json"


def _cache_files(directory: Path) -> dict[str, str]:
    return {p.relative_to(directory).as_posix(): sha256_file(p)
            for p in sorted(directory.rglob("*")) if p.is_file() and p.name != KEY_FILE}


def _cache_matches(cache: Path, key: dict) -> bool:
    """The record names these parameters and every file's bytes still match it."""
    try:
        record = json.loads((cache / KEY_FILE).read_text("utf-8"))
        if not isinstance(record, dict) or record.get("key") != key:
            return False
        if _cache_files(cache) == record.get("files"):
            return True
    except (OSError, ValueError):
        return False
    log.warning("%s: BM25 cache does not match its checksums (damaged or edited); rebuilding it", cache)
    return False


def _save_atomic(model, cache: Path, key: dict) -> None:
    """Save into a temporary sibling directory, then rename it into place."""
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-" + cache.name, dir=cache.parent))
    try:
        os.chmod(tmp, 0o777 & ~current_umask())  # mkdtemp makes 0700: honour the umask, like every output
        model.save(tmp)
        (tmp / KEY_FILE).write_text(json.dumps({"key": key, "files": _cache_files(tmp)}))
        if cache.exists():
            shutil.rmtree(cache)
        tmp.rename(cache)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
