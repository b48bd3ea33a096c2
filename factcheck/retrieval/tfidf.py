"""TF-IDF cosine over the full text: the minimal retrieval pipeline's scorer.

The weighting, for a unit (a passage, or a chunk when chunked) of a corpus of ``N`` units:
each term's weight is ``(1 + ln tf) * idf`` with ``idf = ln((1 + N) / (1 + df)) + 1``
(scikit-learn's ``TfidfVectorizer(sublinear_tf=True)``, smoothed IDF), and the vector is
L2-normalised. A query is embedded the same way with the corpus's IDF (terms the corpus
never saw are dropped, as scikit-learn drops them), so the score -- the dot product -- is
the cosine. No ``max_features`` cut: every term of the corpus counts.

Analysis (:data:`~factcheck.text.analyzer.ANALYZERS`): ``"plain"`` by default --
lower-cased letter/digit runs minus stop words and single characters, no stemming: the
minimal pipeline as described, whose self-retrieval figures on the arXiv collection
this reproduces (``docs/workbench.md``); ``"stems"`` are the project's Porter stems
(what the tag index and BM25 read).

How it scores: the unit vectors are kept term-major (a term's postings: units and
weights, a CSR matrix of terms x units), so a batch of queries is one sparse product
``Q @ postings`` touching only the postings of the query terms (scipy). A row of the
product depends only on its own query -- each entry is the sum over that query's terms
in ascending term order -- so a query's scores are the same bits whatever it is batched
with. Batches are sized so the product stays within :data:`PRODUCT_BUDGET` entries.
Ranking is by score, ties by corpus order (:func:`~factcheck.retrieval.base.stable_top`'s
rule, applied to the product's non-zeros); units sharing no term with the query score 0
and follow in corpus order, as for every retriever.

The matrices are derived once per tag index and cached next to it
(``DIR/tfidf/<analyzer>/``, a :class:`~factcheck.tagging.derived.DerivedCache` entry:
arrays only, sha256-checked before every load).

:class:`TfidfRetriever` has a running example.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse as sp

from factcheck.errors import check_number
from factcheck.retrieval.base import Hit, Retriever, Selection, TopK, stable_top_rows
from factcheck.tagging.counting import count_terms
from factcheck.tagging.derived import DerivedCache
from factcheck.tagging.packing import pack_strings, unpack_strings
from factcheck.tagging.vocabulary import smoothed_idf, tfidf_rows
from factcheck.text.analyzer import analyzer_of, check_analyzer

__all__ = ["TfidfModel", "TfidfRetriever", "PRODUCT_BUDGET"]

#: Entries of one batch's query x unit product (an upper bound from the postings' lengths):
#: ~1M entries (~12 MB of output) keep the product and its top-k in cache; 8M at once
#: was ~3x slower per entry on the arXiv titles (measured).
PRODUCT_BUDGET = 1_000_000
CACHE_VERSION = "tfidf-sublinear-smooth-l2/1"
_FILES = ("terms_utf8", "terms_offsets", "idf", "indptr", "indices", "data")


class TfidfModel:
    """A fitted TF-IDF space: the terms (sorted), their IDF, the units' vectors term-major.

    Parameters
    ----------
    terms : list of str
        The corpus's terms, sorted (column ``j`` is ``terms[j]``).
    idf : ndarray of float64
        ``ln((1 + N) / (1 + df)) + 1`` per term.
    postings : scipy.sparse.csr_matrix of shape (terms, units)
        Row ``j``: the units holding term ``j`` (ascending) and their weight in the unit's
        L2-normalised vector.
    analyzer : str
        The analyzer the terms come from (``"plain"`` or ``"stems"``).

    Example
    -------
    >>> model = TfidfModel.build(["sea level rise", "sea ice", "ice sheets melt"], "plain")
    >>> model.terms
    ['ice', 'level', 'melt', 'rise', 'sea', 'sheets']
    >>> (model.transform(["sea ice"]) @ model.postings).toarray().round(3).tolist()
    [[0.335, 1.0, 0.335]]
    """

    def __init__(self, terms: list[str], idf: np.ndarray, postings: sp.csr_matrix, analyzer: str):
        self.terms = terms
        self.idf = idf
        self.postings = postings
        self.analyzer = analyzer
        self.column = {t: j for j, t in enumerate(terms)}
        self.df = np.diff(postings.indptr)

    @property
    def n_units(self) -> int:
        return self.postings.shape[1]

    @classmethod
    def build(cls, texts: list[str], analyzer: str = "plain") -> "TfidfModel":
        counts = count_terms(texts, analyzer)
        n = len(texts)
        idf = smoothed_idf(np.bincount(counts.matrix.indices, minlength=len(counts.terms)), n)
        units = tfidf_rows(_sublinear(counts.matrix), idf)
        postings = units.T.tocsr()  # terms x units, units ascending within a term
        postings.sort_indices()
        return cls(counts.terms, idf, postings, analyzer)

    def transform(self, texts: list[str]) -> sp.csr_matrix:
        """The L2-normalised TF-IDF vectors of ``texts`` (rows) in this space; terms the
        corpus never saw are dropped before normalising (as scikit-learn's transform)."""
        counts = count_terms(list(texts), self.analyzer)
        column = np.array([self.column.get(t, -1) for t in counts.terms], dtype=np.int64)
        m = counts.matrix.tocoo()
        known = column[m.col] >= 0
        q = sp.csr_matrix((m.data[known], (m.row[known], column[m.col[known]])),
                          shape=(len(texts), len(self.terms)))
        q.sort_indices()
        return tfidf_rows(_sublinear(q), self.idf)

    def save(self, folder: Path) -> None:
        buf, offsets = pack_strings(self.terms)
        arrays = {"terms_utf8": buf, "terms_offsets": offsets, "idf": self.idf,
                  "indptr": self.postings.indptr.astype(np.int64), "indices": self.postings.indices.astype(np.int32),
                  "data": self.postings.data}
        for name in _FILES:
            with open(Path(folder) / f"{name}.npy", "wb") as fh:
                np.save(fh, arrays[name], allow_pickle=False)
        (Path(folder) / "shape.txt").write_text(f"{self.postings.shape[0]} {self.postings.shape[1]} {self.analyzer}\n")

    @classmethod
    def load(cls, folder: Path) -> "TfidfModel":
        a = {name: np.load(Path(folder) / f"{name}.npy", allow_pickle=False) for name in _FILES}
        n_terms, n_units, analyzer = (Path(folder) / "shape.txt").read_text().split()
        postings = sp.csr_matrix((a["data"], a["indices"], a["indptr"]), shape=(int(n_terms), int(n_units)))
        terms = unpack_strings(a["terms_utf8"], a["terms_offsets"])
        if len(terms) != int(n_terms) or len(a["idf"]) != int(n_terms):
            raise ValueError("inconsistent TF-IDF cache")
        return cls(terms, a["idf"], postings, check_analyzer(analyzer))


def _sublinear(counts: sp.csr_matrix) -> sp.csr_matrix:
    """``1 + ln(tf)`` in place of each count (scikit-learn's ``sublinear_tf``)."""
    out = sp.csr_matrix(counts, dtype=np.float64, copy=True)
    np.log(out.data, out=out.data)
    out.data += 1.0
    return out


class TfidfRetriever(Retriever):
    """Passages ranked by the TF-IDF cosine of their full text with the claim's.

    Parameters
    ----------
    analyzer : {"plain", "stems"}, default "plain"
        ``"plain"``: lower-cased letter/digit tokens, stop words and single characters
        dropped, no stemming (the minimal pipeline's analysis); ``"stems"``: the
        project's Porter stems (as BM25 and the tags read).
    k : int, default 5
        Passages returned per claim by :meth:`retrieve`.
    cache : bool, default True
        Keep the derived matrices in the index directory (``tfidf/<analyzer>/``) and
        reuse them on the next fit; never changes a result.

    Attributes
    ----------
    index_ : TagIndex
        The index fitted to.
    model_ : TfidfModel
        The fitted space (terms, IDF, postings).

    See Also
    --------
    BM25Retriever : BM25 over the project's stems.
    ChunkedRetriever : the same retriever over word windows.

    Example
    -------
    >>> import factcheck
    >>> index = factcheck.build_index("data/demo/evidence.json", "out/demo-index", progress=False)
    >>> tfidf = factcheck.TfidfRetriever(k=3).fit(index)
    >>> tfidf
    TfidfRetriever(k=3)
    >>> tfidf.get_params()
    {'analyzer': 'plain', 'cache': True, 'k': 3}
    >>> selection = tfidf.retrieve("Sea levels are rising.")
    >>> selection.ids
    ['evidence-39', 'evidence-27', 'evidence-8']
    >>> selection.hits[0].explanation
    {'tfidf': 0.42814268653648513, 'rank': 1, 'shared_terms': ['rising', 'sea']}
    >>> tfidf.rank("Sea levels are rising.", depth=2).ids
    ['evidence-39', 'evidence-27']
    >>> len(tfidf.model_.terms), round(float(tfidf.model_.idf.max()), 3)  # the fitted space
    (291, 4.02)

    The project's stems match "levels"/"level" and "rising"/"rise", as BM25 does:

    >>> stems = factcheck.TfidfRetriever(analyzer="stems", k=3).fit(index).retrieve("Sea levels are rising.")
    >>> stems.ids, stems.hits[0].explanation["shared_terms"]
    (['evidence-8', 'evidence-39', 'evidence-7'], ['level', 'rise', 'sea'])
    """

    name = "tfidf"
    _unrecorded = ("cache",)

    def __init__(self, analyzer: str = "plain", k: int = 5, cache: bool = True):
        self.analyzer = analyzer
        self.k = k
        self.cache = cache

    def _check_params(self) -> None:
        check_analyzer(self.analyzer)
        check_number(self.k, "k", integer=True, low=1)

    def _fit(self, index) -> None:
        analyzer = self.analyzer
        if not self.cache:
            self.model_ = TfidfModel.build(index.texts, analyzer)
            return
        key = {"plan_key": index.manifest.data.get("plan_key"), "passages": len(index), "analyzer": analyzer,
               "version": CACHE_VERSION}
        self.model_ = DerivedCache(index.root).load_or_build(
            f"tfidf/{analyzer}", key, lambda folder: TfidfModel.build(index.texts, analyzer).save(folder),
            TfidfModel.load)

    def scores(self, claim: str) -> np.ndarray:
        """The cosine of every passage with ``claim`` (float64; zeros for no shared term)."""
        self._check_fitted()
        return (self.model_.transform([claim]) @ self.model_.postings).toarray()[0]

    def _rank(self, texts: list[str], depth: int) -> list[TopK]:
        model = self.model_
        queries = model.transform(texts)
        # Upper bound of each query's product entries: the postings it touches.
        query_of_entry = np.repeat(np.arange(len(texts)), np.diff(queries.indptr))
        sizes = np.bincount(query_of_entry, weights=model.df[queries.indices], minlength=len(texts))
        out: list[TopK] = []
        start = 0
        while start < len(texts):
            stop, total = start + 1, sizes[start]
            while stop < len(texts) and total + sizes[stop] <= PRODUCT_BUDGET:
                total += sizes[stop]
                stop += 1
            out += stable_top_rows(queries[start:stop] @ model.postings, depth)
            start = stop
        return out

    def _retrieve(self, texts: list[str]) -> list[Selection]:
        terms_of = analyzer_of(self.analyzer)
        out = []
        for claim, ranking in zip(texts, self._rank(texts, self.k)):
            query = set(terms_of(claim))
            hits = []
            for rank, (row, score) in enumerate(zip(ranking.rows.tolist(), ranking.scores.tolist()), 1):
                hits.append(Hit(row, self.index_.ids[row], float(score), {
                    "tfidf": float(score), "rank": rank,
                    "shared_terms": sorted(query.intersection(terms_of(self.index_.text(row)))),
                }))
            out.append(Selection(hits, "ranked", {"params": self.params()}))
        return out
