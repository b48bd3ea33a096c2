"""Long passages as overlapping word windows, tagged into a derived index, for any retriever;
a passage ranks as its best chunk."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from factcheck.errors import InputError, check_number
from factcheck.formats.files import atomic_path, dumps_json
from factcheck.retrieval.base import Retriever, Selection, TopK, require_directory
from factcheck.scoring.matrix import load_array, save_arrays
from factcheck.scoring.topk import first_per_group, top_k


@dataclass
class Chunks:
    """Passages cut into word windows: each chunk's text, owning passage and word span."""

    texts: Sequence[str]
    owner: np.ndarray   # chunk -> passage row
    spans: np.ndarray   # (chunks, 2) int64: word range [start, end) within the passage


def check_window(window: int, overlap: int) -> None:
    """A chunk window of at least one word, and an overlap smaller than it."""
    check_number(window, "chunk_window", integer=True, low=1)
    check_number(overlap, "chunk_overlap", integer=True, low=0)
    if overlap >= window:
        raise InputError(None, None, f"need window >= 1 and 0 <= overlap < window, got {window}/{overlap}",
                         param="chunk_overlap")


def chunk_passages(texts: list[str], window: int, overlap: int) -> Chunks:
    """Windows of ``window`` words, consecutive ones sharing ``overlap``; a passage of at
    most ``window`` words is one chunk, unchanged."""
    check_window(window, overlap)
    step = window - overlap
    out_texts, owner, spans = [], [], []
    for row, text in enumerate(texts):
        words = text.split()
        if len(words) <= window:
            out_texts.append(text)
            owner.append(row)
            spans.append((0, len(words)))
            continue
        for start in range(0, len(words) - window + step, step):  # until a window reaches the end
            end = min(start + window, len(words))
            out_texts.append(" ".join(words[start:end]))
            owner.append(row)
            spans.append((start, end))
    return Chunks(out_texts, np.asarray(owner, dtype=np.int64), np.asarray(spans, dtype=np.int64).reshape(-1, 2))


def _chunk_ids(chunks: Chunks, ids) -> list[str]:
    """Each chunk's id: ``<passage id>#<chunk number within the passage>``."""
    counter: dict[int, int] = {}
    out = []
    for row in chunks.owner.tolist():
        k = counter[row] = counter.get(row, -1) + 1
        out.append(f"{ids[row]}#{k}")
    return out


def _tag_chunks(chunks: Chunks, ids: list[str], tag_params: dict, folder: Path) -> None:
    """The offline tagging job over the chunks (ids ``<passage id>#<chunk>``), into ``folder``."""
    from factcheck.formats.evidence import source_spec
    from factcheck.tagging.job import TagJob

    source = folder / "chunks.jsonl"
    with atomic_path(source) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        for text, cid in zip(chunks.texts, _chunk_ids(chunks, ids)):
            fh.write(dumps_json({"id": cid, "text": text}, indent=None))
    TagJob(**tag_params, progress=False).run(source_spec(source), folder / "index")


def _chunks_in_memory(chunks: Chunks, ids, tag_params: dict):
    """The chunk index of an index held in memory: tagged in memory too."""
    from factcheck.tagging.job import TagParams
    from factcheck.tagging.memory import build_in_memory

    chunk_ids, texts = _chunk_ids(chunks, ids), list(chunks.texts)
    from factcheck.tagging.index import TagIndex
    return TagIndex(None, *build_in_memory(chunk_ids, texts, None, False, TagParams(**tag_params)))


CACHE_LAYOUT = 2  # /2: each chunk's passage and word span saved beside the chunk index


@dataclass
class _Cut:
    """A cached chunk index and its chunks (mapped)."""

    index: object
    chunks: Chunks


def _load_cut(folder: Path) -> _Cut:
    from factcheck.tagging.index import TagIndex

    index = TagIndex.load(folder / "index")
    owner, spans = load_array(folder, "owner"), load_array(folder, "spans")
    if owner.dtype != np.int64 or spans.dtype != np.int64 or not len(owner) == len(index) == len(spans) // 2 \
            or len(spans) % 2:
        raise ValueError("inconsistent chunk arrays")
    return _Cut(index, Chunks(index.texts, owner, spans.reshape(-1, 2)))


class ChunkedRetriever(Retriever):
    """Wrap a retriever so it searches word windows ("chunks") and answers with passages.

    Parameters
    ----------
    inner : Retriever
        The retriever that searches the chunks (a clone of it is fitted to the chunk index).
    window : int, default 100
        Words per chunk.
    overlap : int, default 20
        Words shared by consecutive chunks.

    Example
    -------
    >>> import factcheck
    >>> index = factcheck.build_index("data/demo/evidence.json", "out/demo-index", progress=False)
    >>> chunked = factcheck.ChunkedRetriever(factcheck.BM25Retriever(k=2), window=8, overlap=2)
    >>> chunked
    ChunkedRetriever(inner=BM25Retriever(k=2), overlap=2, window=8)
    >>> hit = chunked.fit(index).retrieve("Sea levels are rising.").hits[0]
    >>> hit.id, hit.explanation["chunk"], hit.explanation["chunk_words"]
    ('evidence-8', 'evidence-8#0', [0, 8])
    """

    def __init__(self, inner: Retriever, window: int = 100, overlap: int = 20):
        self.inner = inner
        self.window = window
        self.overlap = overlap

    @property
    def name(self) -> str:
        """The inner method's name, ``+chunks``."""
        return f"{self.inner.name}+chunks"

    def params(self) -> dict:
        """The inner retriever's params plus ``chunk_window`` and ``chunk_overlap``."""
        return {**self.inner.params(), "chunk_window": self.window, "chunk_overlap": self.overlap}

    def _check_params(self) -> None:
        if not isinstance(self.inner, Retriever):
            raise InputError(None, None, f"expected a retriever, got {type(self.inner).__name__}", param="inner")
        check_window(self.window, self.overlap)

    def _fit(self, index) -> None:
        from sklearn.base import clone

        from factcheck.tagging.derived import DerivedCache
        from factcheck.tagging.store import MANIFEST_FORMAT

        p = index.manifest.params
        tag_params = {k: p[k] for k in ("top_k", "max_features", "tag_features", "shard_size")}
        key = {"plan_key": index.manifest.data.get("plan_key"), "window": self.window, "overlap": self.overlap,
               "tag_params": tag_params, "format": MANIFEST_FORMAT, "layout": CACHE_LAYOUT}
        if getattr(self.inner, "needs_vectors", False):
            require_directory(index, self.inner.name)
        if index.root is None:
            self.chunks_ = chunk_passages(index.texts, self.window, self.overlap)
            self.chunk_index_ = _chunks_in_memory(self.chunks_, index.ids, tag_params)
        else:
            # The passages are cut once per index: each chunk's passage and words are kept beside
            # the chunk index and mapped (cutting every text again at each fit held every chunk's
            # text and span in Python objects); the chunk index holds the chunks' texts.
            def build(folder):
                chunks = chunk_passages(index.texts, self.window, self.overlap)
                _tag_chunks(chunks, index.ids, tag_params, folder)
                save_arrays(folder, {"owner": chunks.owner, "spans": chunks.spans.reshape(-1)})

            cut = DerivedCache(index.root).load_or_build(f"chunks/w{self.window}-o{self.overlap}", key, build,
                                                         _load_cut)
            self._cut = cut  # kept: a cache built in a private folder lives as long as this object
            self.chunk_index_, self.chunks_ = cut.index, cut.chunks
        if getattr(self.inner, "needs_vectors", False):  # embedded with the passages' model
            from factcheck.tagging.vectors import PassageVectorJob, read_vectors_manifest
            model = read_vectors_manifest(index.root, index.manifest)["model"]
            PassageVectorJob(progress=False, embedding_model=model).run(self.chunk_index_.root,
                                                                       self.chunk_index_.manifest)
        self.inner_ = clone(self.inner).fit(self.chunk_index_)

    def _scored(self, texts):
        return self.inner_._scored(texts)

    def _search(self, texts, k, select):
        owner = self.chunks_.owner
        per_passage = -(-len(owner) // max(len(self.index_), 1))  # chunks a passage has, on average
        # A dense search through a nearest-neighbour index offers windows for this depth.
        scored = self.inner_._scored_to(texts, max(k, getattr(self.inner_, "k", 0)) * per_passage)
        for claim, inner in zip(texts, scored):
            top = None
            if k:  # the best chunks, until their passages are k or every scored chunk is in
                want = k * per_passage
                while True:
                    rows, scores = top_k(inner.scores, want, inner.rows)
                    pos, passages = first_per_group(rows, owner, k)
                    if len(passages) >= k or len(rows) < want:
                        break
                    want *= 2
                top = TopK(passages, scores[pos])
            yield (self._select(claim, inner, None) if select else None), top

    def _select(self, claim, inner, top) -> Selection:
        chunked = self.inner_
        sel = chunked._select(claim, inner, TopK(*top_k(inner.scores, chunked._evidence_depth, inner.rows)))
        rows = np.array([h.row for h in sel.hits], dtype=np.int64)
        pos, passages = first_per_group(rows, self.chunks_.owner, len(rows))
        hits = []
        for p, row in zip(list(pos), list(passages)):
            h = sel.hits[int(p)]
            start, end = self.chunks_.spans[h.row].tolist()
            hits.append(self._hit(int(row), h.score, {**h.explanation, "chunk": h.id, "chunk_words": [start, end]}))
        return Selection(hits, sel.path, sel.details)
