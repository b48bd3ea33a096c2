"""Load a verified tag index: the API the retrievers, the classifier and the app use.

Loading checks the manifest and every file's sha256 first (``verify=True``), so code
downstream never works on a truncated or corrupted shard. Passages stay packed (UTF-8
buffer + offsets); ids, texts and tag strings are materialised only when asked for.
"""

from __future__ import annotations

import json
from functools import cached_property
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from factcheck.errors import InputError, IntegrityError
from factcheck.formats.files import atomic_path
from factcheck.tagging import store
from factcheck.tagging.packing import unpack_one, unpack_strings
from factcheck.tagging.vocabulary import tfidf_rows


def _concat_packed(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    bufs = [np.asarray(b) for b, _ in parts]
    offsets = [np.zeros(1, dtype=np.int64)]
    base = 0
    for buf, off in parts:
        off = np.asarray(off)
        offsets.append(off[1:] + base)
        base += int(off[-1])
    return np.concatenate(bufs) if bufs else np.zeros(0, np.uint8), np.concatenate(offsets)


class TagIndex:
    """All passages of an index with their tags, in input order: what retrievers ``fit`` to.

    Open one with :meth:`load` (or :func:`factcheck.build_index`); the constructor takes
    the arrays :meth:`load` reads.

    Parameters
    ----------
    root : Path
        The index directory.
    manifest : Manifest
        Its verified manifest.
    id_packed, text_packed : (ndarray, ndarray)
        Passage ids and texts, packed (UTF-8 buffer, offsets).
    tag_indptr, tag_terms, tag_weights : ndarray
        The tags in CSR form: passage ``i``'s tags are ``tag_terms[tag_indptr[i]:tag_indptr[i + 1]]``
        (vocabulary columns), with their TF-IDF weights.
    title_packed : (ndarray, ndarray) or None
        The passages' titles, packed, when the knowledge source has them (FEVER pages,
        BEIR documents, a ``title_column``); None otherwise.
    index_titles : bool, default False
        Whether the titles were indexed with the texts (then :meth:`text` puts them in front).

    Example
    -------
    >>> import factcheck
    >>> _ = factcheck.build_index("data/demo/evidence.json", "out/demo-index", progress=False)
    >>> index = TagIndex.load("out/demo-index")
    >>> row = index.row_of["evidence-8"]
    >>> len(index), row, index.ids[row]
    (40, 7, 'evidence-8')
    >>> index.tags(row)[:3], index.text(row)[:30]
    (['acceler', 'altimetri', 'rate'], 'The rate of sea level rise has')
    >>> page = '{"id": "Savages_-LRB-2012_film-RRB-", "text": "", "lines": "0\\\\tSavages is a film.\\\\n1\\\\tIt is long."}'
    >>> from pathlib import Path
    >>> _ = Path("wiki-001.jsonl").write_text(page + "\\n")
    >>> fever = factcheck.build_index("wiki-001.jsonl", "out/fever-index", progress=False)
    >>> fever.ids, fever.title(0), fever.body(1), index.title(row)
    (['Savages_-LRB-2012_film-RRB-:0', 'Savages_-LRB-2012_film-RRB-:1'], 'Savages (2012 film)', 'It is long.', None)
    """

    def __init__(self, root: Path, manifest: store.Manifest, id_packed, text_packed,
                 tag_indptr, tag_terms, tag_weights, title_packed=None, index_titles: bool = False):
        self.root = Path(root)
        self.manifest = manifest
        self._id_buf, self._id_off = id_packed
        self._text_buf, self._text_off = text_packed
        self._title_buf, self._title_off = title_packed if title_packed is not None else (None, None)
        self.index_titles = bool(index_titles and title_packed is not None)
        self.tag_indptr = tag_indptr
        self.tag_terms = tag_terms
        self.tag_weights = tag_weights

    @classmethod
    def load(cls, root, verify: bool = True) -> "TagIndex":
        """Open the index in ``root`` (an :class:`~factcheck.IntegrityError` if it does not
        match its manifest).

        Parameters
        ----------
        root : str or Path
            The index directory (``factcheck tag ... --out DIR``, or ``OUT/index`` of a run).
        verify : bool, default True
            Check every file's sha256 against the manifest first.

        Returns
        -------
        TagIndex
        """
        root = Path(root)
        manifest = store.verify_index(root) if verify else store.read_manifest(root)
        store.check_vocabularies(root, manifest)  # the small models through the restricted loader too
        expect = store.expected(manifest)  # shards are structure-checked as they load
        ids, texts, titles, indptrs, terms, weights = [], [], [], [np.zeros(1, np.int64)], [], []
        index_titles = False
        base = 0
        for s in manifest.shards:
            p = store.load_shard(root / s["passages_file"], "passages", expect=expect[s["passages_file"]][1])
            t = store.load_shard(root / s["tags_file"], "tags", expect=expect[s["tags_file"]][1])
            ids.append((p["id_bytes"], p["id_offsets"]))
            texts.append((p["text_bytes"], p["text_offsets"]))
            if "title_bytes" in p:
                titles.append((p["title_bytes"], p["title_offsets"]))
                index_titles = bool(p.get("index_titles"))
            indptrs.append(t["indptr"][1:] + base)
            base += int(t["indptr"][-1])
            terms.append(t["terms"])
            weights.append(t["weights"])
        if titles and len(titles) != len(ids):
            raise IntegrityError(root, None, "some passage shards have titles and others not")
        return cls(root, manifest, _concat_packed(ids), _concat_packed(texts),
                   np.concatenate(indptrs), np.concatenate(terms) if terms else np.zeros(0, np.int32),
                   np.concatenate(weights) if weights else np.zeros(0),
                   _concat_packed(titles) if titles else None, index_titles)

    # ------------------------------------------------------------------ passages
    def __len__(self) -> int:
        return len(self._id_off) - 1

    @cached_property
    def ids(self) -> list[str]:
        """Every passage id, in row order."""
        return unpack_strings(self._id_buf, self._id_off)

    @cached_property
    def row_of(self) -> dict[str, int]:
        """Passage id -> row."""
        return {pid: i for i, pid in enumerate(self.ids)}

    @property
    def has_titles(self) -> bool:
        """Whether the knowledge source gave its passages titles (FEVER pages, BEIR, ...)."""
        return self._title_buf is not None

    def title(self, row: int) -> str | None:
        """The passage's title (a FEVER page's, a BEIR document's), None when it has none."""
        if self._title_buf is None:
            return None
        return unpack_one(self._title_buf, self._title_off, row) or None

    def body(self, row: int) -> str:
        """The passage's own text, without its title: what a page shows under the title."""
        return unpack_one(self._text_buf, self._text_off, row)

    def text(self, row: int) -> str:
        """The passage as retrievers and the classifier read it: its body, after its title
        when titles are indexed (``title + "\\n" + body``)."""
        body = unpack_one(self._text_buf, self._text_off, row)
        return store.indexed_text(self.title(row), body) if self.index_titles else body

    def texts_of(self, ids) -> list[str]:
        """Texts of the given passage ids, in order. An id not in this index is an
        InputError naming how many and the first few: numbers computed on passages that
        silently went missing (gold ids of another knowledge source) are not numbers."""
        row_of = self.row_of
        try:
            return [self.text(row_of[i]) for i in ids]
        except KeyError:
            missing = [i for i in ids if i not in row_of]
            raise InputError(self.root, None, f"{_ids_line(missing)} not in this index") from None

    def require_gold(self, claims, path) -> None:
        """The one rule for gold evidence ids (every command that reads them): each must be a
        passage of this index, or an InputError names the claims file, the first claim at
        fault, how many ids are missing and the first few. Why refuse rather than skip: with
        every gold passage missing, the gold-evidence accuracy of the dev claims on the demo
        index read 0.273, and one missing id moved the demo's 0.750 to 0.625, without a word."""
        row_of = self.row_of
        missing = [(c.id, e) for c in claims for e in c.evidences if e not in row_of]
        if missing:
            raise InputError(path, f"claim {missing[0][0]!r}", f"gold evidence {_ids_line([e for _, e in missing])} "
                             f"not in the knowledge source {self.root} (of {len({c for c, _ in missing})} "
                             "claims); is it the knowledge source these claims were written for?")

    @cached_property
    def texts(self) -> list[str]:
        """Every passage's :meth:`text`, in index order."""
        texts = unpack_strings(self._text_buf, self._text_off)
        if self.index_titles:
            titles = unpack_strings(self._title_buf, self._title_off)
            texts = [store.indexed_text(t, x) for t, x in zip(titles, texts)]
        return texts

    @cached_property
    def passage_stems(self) -> list[list[str]]:
        """Every passage's stems (full text, duplicates kept): what BM25 and features read."""
        from factcheck.text.analyzer import analyze
        return [analyze(t) for t in self.texts]

    @cached_property
    def stem_ids(self) -> tuple[list[list[int]], dict[str, int]]:
        """``passage_stems`` as integer ids plus the stem -> id map (first-seen order).

        Indexers that take token ids (bm25s) then skip their own per-token string lookups,
        which dominate an index build; the map is shared by every build over this index.
        """
        vocab: dict[str, int] = {}
        ids = [[vocab.setdefault(s, len(vocab)) for s in stems] for stems in self.passage_stems]
        return ids, vocab

    # ------------------------------------------------------------------ tags
    @cached_property
    def passage_vectorizer(self):
        """The fitted 20,000-term TF-IDF vectoriser the tags were chosen with."""
        name = f"{store.MODELS_DIR}/passage_tfidf.joblib"
        return store.load_vectorizer(self.root / name, store.expected(self.manifest)[name][1])

    @cached_property
    def tag_vectorizer(self):
        """The fitted TF-IDF vectoriser over tag strings (the tag rule's cosine space)."""
        name = f"{store.MODELS_DIR}/tag_tfidf.joblib"
        return store.load_vectorizer(self.root / name, store.expected(self.manifest)[name][1])

    @cached_property
    def vocabulary(self) -> list[str]:
        """The passage vectoriser's terms, by column (what ``tag_terms`` index)."""
        vocab = self.passage_vectorizer.vocabulary_
        terms = [""] * len(vocab)
        for term, j in vocab.items():
            terms[j] = term
        return terms

    def tags(self, row: int) -> list[str]:
        """The tags of the passage in ``row``, best first."""
        a, b = self.tag_indptr[row], self.tag_indptr[row + 1]
        vocab = self.vocabulary
        return [vocab[j] for j in self.tag_terms[a:b]]

    def weights(self, row: int) -> list[float]:
        """The TF-IDF weights of the passage's tags, in :meth:`tags` order."""
        a, b = self.tag_indptr[row], self.tag_indptr[row + 1]
        return self.tag_weights[a:b].tolist()

    @cached_property
    def tag_space(self):
        """Every passage's tags in the tag vectoriser's TF-IDF space (CSR, one row a
        passage): what the tag rule's cosine and the reranker's tag features both read.

        Equal, bit for bit, to ``tag_vectorizer.transform(tag_strings)`` (a test checks
        it), built from the tag arrays instead: the term counts a CountVectorizer would
        make (each tag once: 1.0, columns sorted), then the vectoriser's TF-IDF transform
        with its IDF (:func:`~factcheck.tagging.vocabulary.tfidf_rows`). Why: the string
        round trip through the vectoriser's analyzer costs ~3 s at 1.2M passages, a third
        of the app's start-up.
        """
        vec = self.tag_vectorizer
        tag_column = np.full(len(self.vocabulary), -1, dtype=np.int64)
        passage_column = self.passage_vectorizer.vocabulary_
        for term, j in vec.vocabulary_.items():
            tag_column[passage_column[term]] = j
        cols = tag_column[self.tag_terms]
        kept = cols >= 0
        kept_before = np.zeros(len(kept) + 1, dtype=np.int64)
        np.cumsum(kept, out=kept_before[1:])
        counts = sp.csr_matrix((np.ones(int(kept_before[-1]), dtype=vec.dtype), cols[kept].astype(np.int32),
                                kept_before[self.tag_indptr]), shape=(len(self), len(vec.vocabulary_)))
        counts.sort_indices()  # as CountVectorizer leaves them (a passage's tags are distinct)
        if (vec.norm, vec.use_idf, vec.sublinear_tf, np.dtype(vec.dtype)) != ("l2", True, False, np.float64):
            raise RuntimeError("tag_space computes tag_model.make_vectorizer's TF-IDF settings; they changed")
        return tfidf_rows(counts, vec.idf_)

    @cached_property
    def tag_strings(self) -> list[str]:
        """Each passage's tags joined by spaces (what the tag vectoriser reads)."""
        vocab = np.array(self.vocabulary, dtype=object)
        names = vocab[self.tag_terms].tolist()
        bounds = self.tag_indptr.tolist()
        return [" ".join(names[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]


def _ids_line(ids: list[str], first: int = 3) -> str:
    """``3 ids ('a', 'b', 'c') are`` / ``12 ids ('a', 'b', 'c', ...) are`` / ``1 id ('a') is``."""
    shown = ", ".join(repr(i) for i in ids[:first]) + (", ..." if len(ids) > first else "")
    return f"{len(ids)} id{'' if len(ids) == 1 else 's'} ({shown}) {'is' if len(ids) == 1 else 'are'}"


def export_tags(root, dest, verify: bool = True) -> int:
    """One JSON line per passage, in input order: ``{"id", "tags", "weights"}``."""
    index = TagIndex.load(root, verify=verify)
    vocab = index.vocabulary
    ids = index.ids
    bounds = index.tag_indptr.tolist()
    terms = index.tag_terms.tolist()
    weights = index.tag_weights.tolist()
    with atomic_path(Path(dest)) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        for i, pid in enumerate(ids):
            a, b = bounds[i], bounds[i + 1]
            fh.write(json.dumps({"id": pid, "tags": [vocab[j] for j in terms[a:b]],
                                 "weights": weights[a:b]}, ensure_ascii=False))
            fh.write("\n")
    return len(ids)
