"""The TF-IDF retriever against a slow per-document reference, scikit-learn, its own
batching and cache; the plain analyzer; chunk collapse."""

import json
import math
import re
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import factcheck

from helpers import DEMO
from factcheck.errors import InputError
from factcheck.formats.evidence import source_spec
from factcheck.retrieval.chunking import ChunkedRetriever, chunk_passages
from factcheck.retrieval.base import without_cache
from factcheck.retrieval.tfidf import TfidfModel, TfidfRetriever
from factcheck.scoring import matrix as matrix_module
from factcheck.scoring.counting import count_terms
from factcheck.tagging.index import TagIndex
from factcheck.tagging.job import TagJob
from factcheck.text.analyzer import analyze, plain_terms, word_tokens_of_texts
from factcheck.text.stopwords import ENGLISH_STOP_WORDS

# ---------------------------------------------------------------- the slow reference

TOKEN = re.compile(r"[^\W_]+")


def reference_terms(text, analyzer):
    """The analyzers as their documentation states them, written out again."""
    if analyzer == "stems":
        return analyze(text)
    return [t for t in TOKEN.findall(text.lower()) if len(t) >= 2 and t not in ENGLISH_STOP_WORDS]


def reference_vector(counts: Counter, idf: dict) -> dict:
    weights = {t: (1 + math.log(c)) * idf[t] for t, c in counts.items() if t in idf}
    norm = math.sqrt(sum(w * w for w in weights.values()))
    return {t: w / norm for t, w in weights.items()} if norm else {}


def reference_ranking(texts, query, analyzer, depth):
    """Per document, with dicts: (row, cosine) by score descending, ties by row; rows
    sharing no term with the query are not ranked."""
    docs = [Counter(reference_terms(t, analyzer)) for t in texts]
    n = len(texts)
    df = Counter(t for d in docs for t in d)
    idf = {t: math.log((1 + n) / (1 + f)) + 1 for t, f in df.items()}
    q = reference_vector(Counter(reference_terms(query, analyzer)), idf)
    scored = []
    for row, d in enumerate(docs):
        v = reference_vector(d, idf)
        if set(q) & set(v):
            scored.append((row, sum(w * v.get(t, 0.0) for t, w in q.items())))
    # Ties by row, as the index breaks them; scores equal but for the reference's summation order
    # (one ulp) are ties, or the reference would order them by its rounding.
    scored.sort(key=lambda rs: (-round(rs[1], 12), rs[0]))
    return scored[:depth]


def make_index(tmp_path, texts, name="idx"):
    src = tmp_path / f"{name}.jsonl"
    src.write_text("".join(json.dumps({"id": f"p{i}", "text": t}) + "\n" for i, t in enumerate(texts)), "utf-8")
    TagJob(progress=False).run(source_spec(src), tmp_path / name)
    return TagIndex.load(tmp_path / name)


_WORDS = ["sea", "level", "levels", "rise", "rising", "ice", "sheet", "co2", "1998", "niño", "élan", "the", "a",
          "of", "x", "2", "well-known", "snake_case", "CO2", "Sea", "λ", "q", "Q", "ice-sheets", "melt", "melting"]
# The tagging job refuses a corpus without one taggable word: every corpus ends with one.
TEXTS = st.lists(st.lists(st.sampled_from(_WORDS), max_size=14).map(" ".join), max_size=25).map(
    lambda texts: texts + ["melting sea ice"])


def _assert_same(ranking, expected, ids):
    assert [ids[r] for r in ranking.rows] == [f"p{r}" for r, _ in expected]
    assert np.allclose(ranking.scores, [s for _, s in expected], rtol=0, atol=1e-12)


@settings(max_examples=25, deadline=None)
@given(texts=TEXTS, queries=st.lists(st.lists(st.sampled_from(_WORDS), max_size=6).map(" ".join), min_size=1,
                                     max_size=4), analyzer=st.sampled_from(["plain", "stems"]))
def test_tfidf_equals_the_slow_per_document_reference(tmp_path_factory, texts, queries, analyzer):
    # Duplicated texts make exact ties (corpus order must decide); empty and stop-word-only
    # texts and queries share no term and are not ranked.
    texts = texts + texts[:2]
    index = make_index(tmp_path_factory.mktemp("t"), texts)
    retriever = without_cache(TfidfRetriever(analyzer=analyzer)).fit(index)
    depth = len(texts) + 3
    for query, ranking in zip(queries, retriever.rank(queries, depth)):
        _assert_same(ranking, reference_ranking(texts, query, analyzer, depth), index.ids)
        dense = np.zeros(len(texts))
        for row, score in reference_ranking(texts, query, analyzer, depth):
            dense[row] = score
        assert np.allclose(retriever.scores(query), dense, rtol=0, atol=1e-12)


def test_tfidf_on_the_demo_corpus_equals_the_reference(tmp_path):
    TagJob(progress=False).run(source_spec(DEMO / "evidence.json"), tmp_path / "idx")
    index = TagIndex.load(tmp_path / "idx")
    claims = ["Sea levels are rising.", "The Arctic is cooling.", "CO2 emissions in 2019", "the of a"]
    for analyzer in ("plain", "stems"):
        rankings = TfidfRetriever(analyzer=analyzer).fit(index).rank(claims, 25)
        for claim, ranking in zip(claims, rankings):
            expected = reference_ranking(index.texts, claim, analyzer, 25)
            assert ranking.rows == [r for r, _ in expected]
            assert np.allclose(ranking.scores, [s for _, s in expected], rtol=0, atol=1e-12)


def test_the_vectors_are_scikit_learns_sublinear_tfidf_bit_for_bit():
    from sklearn.feature_extraction.text import TfidfVectorizer
    texts = [t for t in json.loads((DEMO / "evidence.json").read_text("utf-8")).values()]
    vec = TfidfVectorizer(analyzer=plain_terms, sublinear_tf=True).fit(texts)
    model = TfidfModel.build(texts, "plain")
    assert model.space.terms == vec.get_feature_names_out().tolist()
    assert model.space.idf_.tobytes() == vec.idf_.tobytes()
    want = vec.transform(texts).tocsc()
    got = model.postings.csr.T.tocsc()
    got.sort_indices(), want.sort_indices()
    assert np.array_equal(got.indptr, want.indptr) and np.array_equal(got.indices, want.indices)
    assert got.data.tobytes() == want.data.tobytes()
    queries = ["Sea levels are rising fast, sea ice too", "nothing known zzz", ""]
    q_want, q_got = vec.transform(queries), model.transform(queries)
    assert (q_want != q_got).nnz == 0 and q_got.data.tobytes() == q_want.tocsr().data.tobytes()


def test_batches_never_change_a_querys_bits(tmp_path, monkeypatch):
    index = make_index(tmp_path, [" ".join(np.random.default_rng(i).choice(_WORDS, 12)) for i in range(300)])
    retriever = without_cache(TfidfRetriever()).fit(index)
    queries = [" ".join(np.random.default_rng(1000 + i).choice(_WORDS, 4)) for i in range(60)]
    together = retriever.rank(queries, 50)
    monkeypatch.setattr(matrix_module, "PRODUCT_BUDGET", 1)  # one query per product
    alone = retriever.rank(queries, 50)
    assert [(a.rows, a.scores) for a in together] == [(b.rows, b.scores) for b in alone]
    assert [retriever.rank([q], 50)[0].scores for q in queries] == [r.scores for r in together]


def test_the_cache_is_reused_and_a_damaged_one_rebuilt(tmp_path, caplog):
    index = make_index(tmp_path, ["sea level rise", "ice sheets melt", "coral reefs bleach", "sea ice"])
    first = TfidfRetriever(analyzer="plain").fit(index)
    entry = tmp_path / "idx" / "tfidf" / "plain"
    assert (entry / "factcheck-key.json").is_file()
    assert without_cache(TfidfRetriever(analyzer="plain")).fit(index).rank(["sea ice"], 4)[0].scores == \
        first.rank(["sea ice"], 4)[0].scores
    data = entry / "data.npy"
    data.write_bytes(data.read_bytes()[:-4])  # cut short: its reader refuses it
    again = TfidfRetriever(analyzer="plain").fit(index)
    assert "rebuilding" in caplog.text
    assert again.rank(["sea ice"], 4)[0].scores == first.rank(["sea ice"], 4)[0].scores
    assert TfidfRetriever().fit(index).model_.analyzer == "stems"  # the default
    assert (tmp_path / "idx" / "tfidf" / "stems" / "factcheck-key.json").is_file()


def test_the_default_analyzer_stems_as_bm25s_does(tmp_path):
    index = make_index(tmp_path, ["The cat sat on the mat.", "Dogs bark at night.", "Birds sing."])
    assert TfidfRetriever().get_params()["analyzer"] == "stems"
    for retriever in (TfidfRetriever(), factcheck.BM25Retriever()):
        assert retriever.fit(index).rank("cats", 3).ids == ["p0"], retriever
    assert TfidfRetriever(analyzer="plain").fit(index).rank("cats", 3).ids == []  # the baseline's analysis


def test_an_unknown_analyzer_is_one_line_naming_the_parameter(tmp_path):
    index = make_index(tmp_path, ["sea level rise"])
    with pytest.raises(InputError, match="analyzer: unknown analyzer 'snowball'; expected one of plain, stems"):
        TfidfRetriever(analyzer="snowball").fit(index)


def test_retrieve_explains_each_hit_with_the_shared_terms(tmp_path):
    index = make_index(tmp_path, ["Sea levels rose in 1998.", "Ice sheets", "sea ice and sea levels"])
    (sel,) = TfidfRetriever(analyzer="plain", k=2).fit(index).retrieve(["sea levels in 1998"])
    assert sel.ids == ["p0", "p2"] and sel.path == "ranked"
    assert sel.hits[0].explanation["shared_terms"] == ["1998", "levels", "sea"]
    assert sel.hits[0].explanation["rank"] == 1 and sel.hits[0].score == sel.hits[0].explanation["tfidf"]


# ---------------------------------------------------------------- chunk collapse

def test_chunked_tfidf_scores_a_document_by_its_best_chunk(tmp_path):
    # p1's second window is about ice; its first dilutes it. Whole documents rank p0
    # first for "ice sheet melt"; chunks rank p1 first (its best window is all ice).
    filler = " ".join(f"w{i}" for i in range(40))
    texts = ["ice sheet melt and sea level and warming oceans", f"{filler} ice sheet melt ice sheet melt",
             "coral reefs", "ice"]
    index = make_index(tmp_path, texts)
    query = "ice sheet melt"
    whole = TfidfRetriever(analyzer="plain").fit(index).rank([query], 4)[0]
    chunked_retriever = ChunkedRetriever(TfidfRetriever(analyzer="plain"), 20, 5).fit(index)
    chunked = chunked_retriever.rank([query], 4)[0]
    # The reference: every chunk scored on its own in the chunk corpus, each document
    # represented by its best chunk (ties by corpus order of the chunks).
    chunks = chunk_passages(texts, 20, 5)
    best = {}
    for chunk_row, score in sorted(reference_ranking(chunks.texts, query, "plain", len(chunks.texts)),
                                   key=lambda rs: (-rs[1], rs[0])):
        best.setdefault(int(chunks.owner[chunk_row]), score)
    expected = sorted(best.items(), key=lambda rs: (-rs[1], min(i for i, o in enumerate(chunks.owner) if o == rs[0])))
    assert chunked.rows == [r for r, _ in expected]
    assert np.allclose(chunked.scores, [s for _, s in expected], rtol=0, atol=1e-12)
    assert whole.rows[0] == 0 and chunked.rows[0] == 1
    (sel,) = chunked_retriever.retrieve([query])
    assert sel.ids[0] == "p1" and sel.hits[0].explanation["chunk"].startswith("p1#")


@settings(max_examples=15, deadline=None)
@given(texts=TEXTS, query=st.lists(st.sampled_from(_WORDS), min_size=1, max_size=5).map(" ".join))
def test_chunked_ranking_is_the_best_chunk_per_document_at_any_depth(tmp_path_factory, texts, query):
    index = make_index(tmp_path_factory.mktemp("c"), texts)
    chunked = ChunkedRetriever(without_cache(TfidfRetriever()), 3, 1).fit(index)
    inner = chunked.inner_.rank([query], len(chunked.chunks_.owner))[0]
    order, seen = [], set()
    for row, score in zip(inner.rows, inner.scores):
        owner = int(chunked.chunks_.owner[row])
        if owner not in seen:
            seen.add(owner)
            order.append((owner, score))
    for depth in (1, 2, len(texts)):
        got = chunked.rank([query], depth)[0]
        assert got.rows == [o for o, _ in order[:depth]]
        assert got.scores == [s for _, s in order[:depth]]


# ---------------------------------------------------------------- analysis

def test_the_plain_analyzer():
    assert plain_terms("CO2 levels rose in 1998; the El Niño year (a_b), x-ray 2 H2O") == \
        ["co2", "levels", "rose", "1998", "el", "niño", "year", "ray", "h2o"]
    assert plain_terms("") == [] and plain_terms("the of a I 7 _ __") == []


_MIXED = st.text(alphabet=st.sampled_from(list("aZq Q_9\t\n\x00.,-'") + ["é", "İ", "ǅ", "٣", "\u00a0", "λ"]),
                 max_size=30)


@settings(max_examples=300, deadline=None)
@given(st.lists(_MIXED | st.text(max_size=20), max_size=12))
def test_letter_digit_runs_of_many_texts_equal_the_regex_text_by_text(texts):
    tokens, marker = word_tokens_of_texts(texts, underscore=False)
    assert tokens == [t for text in texts for t in TOKEN.findall(text.lower()) + [marker]]


@settings(max_examples=60, deadline=None)
@given(TEXTS)
def test_plain_counts_equal_the_analyzer_passage_by_passage(texts):
    counts = count_terms(texts, "plain")
    assert counts.terms == sorted(counts.terms) and counts.matrix.has_canonical_format
    for row, text in enumerate(texts):
        got = counts.matrix.getrow(row)
        assert {counts.terms[j]: int(v) for j, v in zip(got.indices, got.data)} == Counter(plain_terms(text))
