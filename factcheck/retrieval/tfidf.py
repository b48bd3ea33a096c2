"""TF-IDF cosine (sublinear tf, L2) over the full text: the minimal retrieval pipeline's scorer."""

from __future__ import annotations

from pathlib import Path

from factcheck.errors import Interval
from factcheck.retrieval.base import TermRetriever
from factcheck.retrieval.bm25 import load_terms, save_terms
from factcheck.scoring.counting import count_terms
from factcheck.scoring.matrix import TermMatrix, load_array
from factcheck.scoring.tfidf import TfidfSpace
from factcheck.tagging.derived import DerivedCache
from factcheck.text.analyzer import ANALYZERS, analyzer_of, check_analyzer

__all__ = ["TfidfModel", "TfidfRetriever"]

CACHE_VERSION = "tfidf-sublinear-smooth-l2/2"


class TfidfModel:
    """A fitted TF-IDF ``space``, its units' vectors term-major (``postings``), and its ``analyzer``.

    Example
    -------
    >>> model = TfidfModel.build(["sea level rise", "sea ice", "ice sheets melt"], "plain")
    >>> model.space.terms
    ['ice', 'level', 'melt', 'rise', 'sea', 'sheets']
    >>> (model.transform(["sea ice"]) @ model.postings.csr).toarray().round(3).tolist()
    [[0.335, 1.0, 0.335]]
    """

    def __init__(self, space: TfidfSpace, postings: TermMatrix, analyzer: str):
        self.space = space
        self.postings = postings
        self.analyzer = analyzer

    @classmethod
    def build(cls, texts: list[str], analyzer: str = "stems") -> "TfidfModel":
        """The model of a corpus."""
        space, units = TfidfSpace.fit(count_terms(list(texts), analyzer), sublinear=True)
        return cls(space, TermMatrix.from_units(units), analyzer)

    def transform(self, texts: list[str]):
        """The TF-IDF vectors of ``texts`` (rows) in this space."""
        return self.space.transform(texts, self.analyzer)

    def save(self, folder: Path) -> None:
        """The model as ``.npy`` files and ``analyzer.txt`` in ``folder``."""
        save_terms(folder, self.space.terms, idf=self.space.idf_)
        self.postings.save(folder)
        (Path(folder) / "analyzer.txt").write_text(f"{self.analyzer}\n")

    @classmethod
    def load(cls, folder: Path) -> "TfidfModel":
        """The model :meth:`save` wrote."""
        terms, postings, idf = load_terms(folder), TermMatrix.load(folder), load_array(folder, "idf", mmap=False)
        if len(terms) != postings.n_terms or len(idf) != postings.n_terms:
            raise ValueError("inconsistent TF-IDF cache")
        analyzer = check_analyzer((Path(folder) / "analyzer.txt").read_text().strip())
        return cls(TfidfSpace(terms, idf, sublinear=True), postings, analyzer)


class TfidfRetriever(TermRetriever):
    """Passages ranked by the TF-IDF cosine of their full text with the claim's.

    Parameters
    ----------
    analyzer : {"stems", "plain"}, default "stems"
        The project's Porter stems (as BM25 and the tags read: "cats" finds "cat"), or
        unstemmed letter/digit tokens (the minimal pipeline's baseline).
    k : int, default 5
        Passages returned per claim by :meth:`retrieve`.

    Example
    -------
    >>> import factcheck
    >>> index = factcheck.build_index("data/demo/evidence.json", "out/demo-index", progress=False)
    >>> tfidf = factcheck.TfidfRetriever(k=3).fit(index)
    >>> selection = tfidf.retrieve("Sea levels are rising.")
    >>> selection.ids
    ['evidence-8', 'evidence-39', 'evidence-7']
    >>> selection.hits[0].explanation
    {'tfidf': 0.4996464701578407, 'rank': 1, 'shared_terms': ['level', 'rise', 'sea']}
    >>> plain = factcheck.TfidfRetriever(analyzer="plain", k=3).fit(index).retrieve("Sea levels are rising.")
    >>> plain.ids, plain.hits[0].explanation["shared_terms"]
    (['evidence-39', 'evidence-27', 'evidence-8'], ['rising', 'sea'])
    """

    name = "tfidf"
    _parameter_constraints = {"analyzer": ANALYZERS, "k": Interval(int, 1)}

    def __init__(self, analyzer: str = "stems", k: int = 5):
        self.analyzer = analyzer
        self.k = k

    def _fit(self, index) -> None:
        analyzer = self.analyzer
        if not self._cache or index.root is None:  # an index in memory has no directory to cache in
            self.model_ = TfidfModel.build(index.texts, analyzer)
            return
        key = {"plan_key": index.manifest.data.get("plan_key"), "passages": len(index), "analyzer": analyzer,
               "version": CACHE_VERSION}
        self.model_ = DerivedCache(index.root).load_or_build(
            f"tfidf/{analyzer}", key, lambda folder: TfidfModel.build(index.texts, analyzer).save(folder),
            TfidfModel.load)

    def _term_queries(self, texts):
        return self.model_.postings, self.model_.transform(texts)

    def _explain(self, claim, rows, scores, state) -> list[dict]:
        terms_of = analyzer_of(self.analyzer)
        query = set(terms_of(claim))
        return [{"tfidf": s, "rank": i, "shared_terms": sorted(query.intersection(terms_of(self.index_.text(r))))}
                for i, (r, s) in enumerate(zip(rows.tolist(), scores.tolist()), 1)]
