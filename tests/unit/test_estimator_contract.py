"""The estimator contract every retriever keeps, the scikit-learn way.

Parameters live in ``__init__`` and are stored unchanged under the same names (so
``get_params``/``set_params``/``clone``/``repr`` come from ``BaseEstimator``), they are
checked at ``fit`` with a one-line :class:`~factcheck.InputError` naming the parameter,
fitted state ends in ``_``, an unfitted retriever says which method to call, and
``rank``/``retrieve`` answer one string with one result and a list with a list.
"""

from __future__ import annotations

import inspect
import pickle
import shutil

import numpy as np
import pytest
from sklearn.base import BaseEstimator, clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

import factcheck
from factcheck.formats.claims import read_claims
from factcheck.formats.splits import train_holdout_split
from factcheck.retrieval.rerank.candidates import CandidateConfig
from factcheck.retrieval.rerank.cutoff import Cutoff
from factcheck.retrieval.rerank.memory import ClaimMemory
from factcheck.retrieval.rerank.model import ModelConfig
from factcheck.tagging.index import TagIndex
from factcheck.training.rerank import train_reranker

from helpers import DEMO, needs_open

RETRIEVERS = [factcheck.TagRuleRetriever, factcheck.BM25Retriever, factcheck.RerankRetriever,
              factcheck.ChunkedRetriever, factcheck.DenseRetriever, factcheck.HybridRetriever,
              factcheck.TfidfRetriever]
CLAIMS = ["Sea levels are rising.", "The Arctic is cooling.", "", "CO2 is a greenhouse gas."]


class _Model:
    """Stands in for a trained relevance model where only the parameters are looked at."""

    config = ModelConfig()
    features = ["bm25"]

    def predict(self, X):
        return np.zeros(len(X))

    def __repr__(self):
        return "_Model()"


def non_default(cls):
    """Constructor arguments differing from every default (objects, so identity shows)."""
    return {
        factcheck.TagRuleRetriever: dict(t_sim=0.25, t_overlap=0.125, k=3),
        factcheck.BM25Retriever: dict(k1=0.9, b=0.4, k=3),
        factcheck.RerankRetriever: dict(candidates={"memory_k": 5}, model=_Model(), cutoff=Cutoff(max_k=3),
                                        memory=ClaimMemory(["c"], ["sea ice"], [["evidence-1"]]), report={"x": 1}),
        factcheck.ChunkedRetriever: dict(inner=factcheck.BM25Retriever(k=2), window=12, overlap=4),
        factcheck.DenseRetriever: dict(k=2, exact=True),
        factcheck.HybridRetriever: dict(k=2, alpha=0.25, fusion="rrf", k1=1.5, b=0.5, rrf_depth=50),
        factcheck.TfidfRetriever: dict(analyzer="stems", k=3),
    }[cls]


@pytest.fixture(scope="module")
def index(demo_index):
    return TagIndex.load(demo_index)


@pytest.fixture(scope="module")
def fitted(index):
    """One fitted retriever per course-mode method (the open ones: ``fitted_open``)."""
    fit, holdout = train_holdout_split(read_claims(DEMO / "train-claims.json"))
    grid = (ModelConfig(learning_rate=0.1, max_iter=20, max_leaf_nodes=7, min_samples_leaf=5, negative_rate=1.0),)
    return {
        "tags": factcheck.TagRuleRetriever(t_sim=0.1, t_overlap=0.1).fit(index),
        "bm25": factcheck.BM25Retriever(k=3).fit(index),
        "rerank": train_reranker(index, fit, holdout, configs=(CandidateConfig(memory_k=5),), grid=grid,
                                 progress=False),
        "chunked": factcheck.ChunkedRetriever(factcheck.BM25Retriever(k=2), window=10, overlap=3).fit(index),
        "tfidf": factcheck.TfidfRetriever(k=3).fit(index),
        "tfidf+chunks": factcheck.ChunkedRetriever(factcheck.TfidfRetriever(k=2), window=10, overlap=3).fit(index),
    }


@pytest.fixture(scope="module")
def fitted_open(demo_index, tmp_path_factory):
    # A copy: the session's demo index must stay without vectors (other tests rely on it).
    root = tmp_path_factory.mktemp("open") / "index"
    shutil.copytree(demo_index, root)
    from factcheck.tagging.vectors import PassageVectorJob
    PassageVectorJob(progress=False).run(root)
    index = TagIndex.load(root)
    return index, {"dense": factcheck.DenseRetriever(k=3).fit(index), "hybrid": factcheck.HybridRetriever(k=3).fit(index)}


# ---------------------------------------------------------------- parameters

@pytest.mark.parametrize("cls", RETRIEVERS, ids=lambda c: c.__name__)
def test_parameters_are_stored_unchanged_and_come_back_from_get_params(cls):
    assert issubclass(cls, BaseEstimator) and issubclass(cls, factcheck.Retriever)
    kwargs = non_default(cls)
    names = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
    assert sorted(kwargs) == sorted(names)  # the test covers every parameter
    r = cls(**kwargs)
    params = r.get_params(deep=False)
    assert sorted(params) == sorted(names)
    for name, value in kwargs.items():
        assert params[name] is value and getattr(r, name) is value, name
    assert not [k for k in vars(r) if k not in names]  # __init__ sets the parameters and nothing else


@pytest.mark.parametrize("cls", RETRIEVERS, ids=lambda c: c.__name__)
def test_clone_set_params_and_repr_follow_scikit_learn(cls):
    r = cls(**non_default(cls))
    copy = clone(r)
    assert type(copy) is cls and copy is not r
    assert repr(copy) == repr(r) and repr(r).startswith(f"{cls.__name__}(")
    defaults = cls() if cls is not factcheck.ChunkedRetriever else cls(factcheck.BM25Retriever())
    assert defaults.set_params(**{k: v for k, v in non_default(cls).items()}) is defaults
    assert repr(defaults) == repr(r)


def test_repr_shows_only_the_parameters_changed_from_their_defaults():
    assert repr(factcheck.BM25Retriever(k=3)) == "BM25Retriever(k=3)"
    assert repr(factcheck.TagRuleRetriever()) == "TagRuleRetriever()"
    chunked = factcheck.ChunkedRetriever(factcheck.BM25Retriever(k=2), window=8)
    assert repr(chunked) == "ChunkedRetriever(inner=BM25Retriever(k=2), window=8)"
    assert chunked.get_params()["inner__k"] == 2  # deep parameters, as for a scikit-learn meta-estimator
    assert chunked.set_params(inner__k=4).inner.k == 4


def test_params_record_is_derived_from_get_params_in_signature_order():
    """The record in explanations and model directories: the same keys, in the same order,
    as the hand-written dicts it replaced (the bytes of those files depend on it)."""
    assert list(factcheck.TagRuleRetriever().params()) == ["t_sim", "t_overlap", "k"]
    assert factcheck.BM25Retriever(k=3).params() == {"k1": 1.2, "b": 0.75, "k": 3}
    assert factcheck.DenseRetriever(k=2).params() == {"k": 2}
    assert factcheck.DenseRetriever(k=2, exact=True).params() == {"k": 2, "exact": True}
    assert factcheck.TfidfRetriever(k=3).params() == {"analyzer": "stems", "k": 3}
    # Settings that never changed a result are no parameters (BM25 has one variant, Lucene's).
    for cls, knob in [(factcheck.BM25Retriever, {"method": "lucene"}), (factcheck.BM25Retriever, {"cache": False}),
                      (factcheck.TfidfRetriever, {"cache": False}), (factcheck.DenseRetriever, {"block_rows": 7})]:
        with pytest.raises(TypeError, match=next(iter(knob))):
            cls(**knob)
    assert list(factcheck.HybridRetriever().params()) == ["k", "alpha", "fusion", "k1", "b"]
    assert list(factcheck.HybridRetriever(fusion="rrf").params()) == ["k", "alpha", "fusion", "k1", "b", "rrf_depth"]
    chunked = factcheck.ChunkedRetriever(factcheck.BM25Retriever(), window=50, overlap=5)
    assert list(chunked.params()) == ["k1", "b", "k", "chunk_window", "chunk_overlap"]
    assert chunked.params()["chunk_window"] == 50
    rerank = factcheck.RerankRetriever({"memory_k": 5}, _Model(), {"max_k": 3})
    assert list(rerank.params()) == ["candidates", "cutoff", "model", "features", "memory_claims"]
    assert rerank.params()["candidates"]["memory_k"] == 5 and rerank.params()["cutoff"]["max_k"] == 3
    r = factcheck.BM25Retriever(k=3)
    assert r.set_params(k=7).params()["k"] == 7  # params() follows set_params: nothing cached


# ---------------------------------------------------------------- validation at fit

BAD = [
    (factcheck.TagRuleRetriever, dict(t_sim=1.5), "t_sim", "must be in [0, 1], got 1.5"),
    (factcheck.TagRuleRetriever, dict(t_overlap=-0.1), "t_overlap", "must be in [0, 1], got -0.1"),
    (factcheck.TagRuleRetriever, dict(k=0), "k", "must be at least 1, got 0"),
    (factcheck.TagRuleRetriever, dict(k=2.5), "k", "expected an integer, got 2.5"),
    (factcheck.BM25Retriever, dict(k=0), "k", "must be at least 1, got 0"),
    (factcheck.BM25Retriever, dict(k=True), "k", "expected an integer, got True"),
    (factcheck.BM25Retriever, dict(k1=-1.0), "k1", "must be finite and at least 0, got -1.0"),
    (factcheck.BM25Retriever, dict(k1=float("nan")), "k1", "must be finite and at least 0, got nan"),
    (factcheck.BM25Retriever, dict(b="0.5"), "b", "expected a number, got '0.5'"),
    (factcheck.RerankRetriever, dict(), "rerank_model", "the rerank method needs a trained model"),
    (factcheck.RerankRetriever, dict(model="model.skops"), "model", "expected a trained relevance model, got str"),
    (factcheck.RerankRetriever, dict(model=_Model(), cutoff={"top": 3}), "cutoff", "unknown Cutoff field(s) 'top'"),
    (factcheck.RerankRetriever, dict(model=_Model(), cutoff=Cutoff(min_k=0)), "cutoff.min_k", "must be at least 1, got 0"),
    (factcheck.RerankRetriever, dict(model=_Model(), cutoff={"min_k": 3, "max_k": 2}), "cutoff.max_k",
     "must be at least 3, got 2"),
    (factcheck.RerankRetriever, dict(model=_Model(), candidates={"depth": 0}), "candidates.depth",
     "must be at least 1, got 0"),
    (factcheck.RerankRetriever, dict(model=_Model(), candidates=[300]), "candidates",
     "expected a CandidateConfig or a dict, got list"),
    (factcheck.ChunkedRetriever, dict(inner="bm25"), "inner", "expected a retriever, got str"),
    (factcheck.ChunkedRetriever, dict(inner=factcheck.BM25Retriever(), window=0), "chunk_window",
     "must be at least 1, got 0"),
    (factcheck.ChunkedRetriever, dict(inner=factcheck.BM25Retriever(), window=5, overlap=5), "chunk_overlap",
     "need window >= 1 and 0 <= overlap < window, got 5/5"),
    (factcheck.DenseRetriever, dict(k=-1), "k", "must be at least 1, got -1"),
    (factcheck.HybridRetriever, dict(fusion="sum"), "fusion", "unknown fusion 'sum'; expected one of max, rrf"),
    (factcheck.HybridRetriever, dict(alpha=2), "alpha", "must be in [0, 1], got 2"),
    (factcheck.HybridRetriever, dict(rrf_depth=0), "rrf_depth", "must be at least 1, got 0"),
    (factcheck.TfidfRetriever, dict(analyzer="porter"), "analyzer",
     "unknown analyzer 'porter'; expected one of plain, stems"),
    (factcheck.TfidfRetriever, dict(k=0), "k", "must be at least 1, got 0"),
]


@pytest.mark.parametrize("cls, kwargs, param, message", BAD, ids=[f"{c.__name__}-{p}" for c, _, p, _ in BAD])
def test_bad_parameters_are_one_line_input_errors_at_fit_naming_the_parameter(cls, kwargs, param, message,
                                                                              index):
    r = cls(**kwargs)  # construction never checks: set_params may still change the value
    with pytest.raises(factcheck.InputError) as err:
        r.fit(index)
    line = err.value.one_line()
    assert err.value.param == param and line.startswith(f"{param}: ") and message in line, line
    assert "\n" not in str(err.value) and isinstance(err.value, ValueError)
    assert not hasattr(r, "index_")  # nothing fitted
    # The CLI renders the same error with its flag's name.
    assert err.value.one_line({param: "--" + param.replace("_", "-")}).startswith(f"--{param.replace('_', '-')}")


def test_fit_accepts_an_index_directory_and_refuses_other_things(demo_index, index):
    by_path = factcheck.BM25Retriever(k=2).fit(demo_index)
    assert by_path.retrieve(CLAIMS[0]).ids == factcheck.BM25Retriever(k=2).fit(index).retrieve(CLAIMS[0]).ids
    with pytest.raises(factcheck.InputError) as err:
        factcheck.BM25Retriever().fit(["a passage"])
    assert err.value.one_line().startswith("index: expected a TagIndex")


# ---------------------------------------------------------------- fitted state

@pytest.mark.parametrize("cls", RETRIEVERS, ids=lambda c: c.__name__)
def test_an_unfitted_retriever_says_to_call_fit(cls):
    r = cls(**non_default(cls))
    with pytest.raises(NotFittedError):
        check_is_fitted(r)  # scikit-learn's own check agrees
    for call in (lambda: r.rank(CLAIMS[0]), lambda: r.retrieve(CLAIMS), lambda: r.rank(CLAIMS, 5)):
        with pytest.raises(NotFittedError) as err:
            call()
        assert str(err.value) == f"This {cls.__name__} is not fitted yet: call fit(index) first."
        assert isinstance(err.value, ValueError)


def test_fitted_state_ends_in_an_underscore_and_fit_leaves_the_parameters_alone(fitted, index):
    for name, r in fitted.items():
        check_is_fitted(r)
        assert r.index_ is index, name
        public = [k for k in vars(r) if not k.startswith("_")]
        params = set(r.get_params(deep=False))
        assert all(k in params or k.endswith("_") for k in public), (name, public)
    chunked = fitted["chunked"]
    assert not hasattr(chunked.inner, "index_")  # the parameter stays unfitted; the clone is fitted
    assert chunked.inner_.index_ is chunked.chunk_index_ and chunked.inner_ is not chunked.inner
    rerank = fitted["rerank"]
    assert not hasattr(rerank.memory, "gold") and rerank.memory_.gold.shape == (len(rerank.memory), len(index))


def test_a_fitted_retriever_refits_after_set_params(index):
    r = factcheck.BM25Retriever(k=2).fit(index)
    assert len(r.retrieve(CLAIMS[0]).hits) == 2
    assert len(r.set_params(k=4).retrieve(CLAIMS[0]).hits) == 4  # k is read at retrieve time
    assert clone(r).get_params() == r.get_params() and not hasattr(clone(r), "index_")


# ---------------------------------------------------------------- one string or a list

def _check_one_or_many(r, index):
    many = r.retrieve(CLAIMS)
    assert isinstance(many, list) and len(many) == len(CLAIMS)
    for text, sel in zip(CLAIMS, many):
        one = r.retrieve(text)
        assert isinstance(one, factcheck.Selection)
        assert one.to_json() == sel.to_json()  # alone or in a list: the same answer
    assert [s.to_json() for s in r.retrieve(tuple(CLAIMS))] == [s.to_json() for s in many]
    assert [s.to_json() for s in r.retrieve(t for t in CLAIMS)] == [s.to_json() for s in many]
    assert r.retrieve([]) == [] and r.rank([], 5) == []
    rankings = r.rank(CLAIMS, 7)
    for text, ranking in zip(CLAIMS, rankings):
        one = r.rank(text, 7)
        assert isinstance(one, factcheck.Ranking) and len(one) <= 7
        assert one.ids == ranking.ids == [index.ids[row] for row in one.rows]
        assert one.scores == ranking.scores and len(set(one.ids)) == len(one)
        assert all(type(x) is int for x in one.rows) and all(type(x) is float for x in one.scores)
        assert all(a >= b for a, b in zip(one.scores, one.scores[1:]))
    assert len(rankings[0]) >= 5  # a claim that shares words with the demo passages
    assert r.rank(CLAIMS[0]).ids == r.rank([CLAIMS[0]], 100)[0].ids and len(r.rank(CLAIMS[0])) <= len(index)
    found = r.retrieve(CLAIMS, depth=7)
    for sel, alone, ranking in zip(found, many, rankings):  # one scoring: the same evidence and ranking
        assert sel.ids == alone.ids and sel.ranking == ranking
        assert sel.to_json() == {**alone.to_json(), "ranking": ranking.ids}


@pytest.mark.parametrize("name", ["tags", "bm25", "rerank", "chunked", "tfidf", "tfidf+chunks"])
def test_rank_and_retrieve_take_one_string_or_a_list(fitted, index, name):
    _check_one_or_many(fitted[name], index)


@needs_open
@pytest.mark.parametrize("name", ["dense", "hybrid"])
def test_open_retrievers_take_one_string_or_a_list(fitted_open, name):
    index, retrievers = fitted_open
    _check_one_or_many(retrievers[name], index)


@pytest.mark.parametrize("claims, message", [
    (b"Sea levels are rising.", "claims: expected a claim string or a list of them, got bytes"),
    (42, "claims: expected a claim string or a list of them, got int"),
    (["Sea levels are rising.", None], "claims [1]: expected a claim string, got NoneType"),
    ([["Sea levels are rising."]], "claims [0]: expected a claim string, got list"),
])
def test_anything_but_strings_is_a_one_line_error(fitted, claims, message):
    for call in (fitted["bm25"].retrieve, fitted["tags"].rank):
        with pytest.raises(factcheck.InputError) as err:
            call(claims)
        assert err.value.one_line() == message


def test_the_depth_is_k(fitted):
    bm25 = fitted["bm25"]
    assert len(bm25.rank(CLAIMS[0], k=5)) == 5 and bm25.rank(CLAIMS[0], k=5).ids == bm25.rank(CLAIMS[0], 5).ids
    assert len(bm25.retrieve(CLAIMS[0], depth=4).ranking) == 4
    for bad, message in ((0, "k: must be at least 1, got 0"), (2.5, "k: expected an integer, got 2.5")):
        with pytest.raises(factcheck.InputError) as err:
            bm25.rank(CLAIMS, k=bad)
        assert err.value.one_line() == message
    # retrieve's ranking depth is named apart from the retriever's own k (its evidence count)
    for bad, message in ((-1, "depth: must be at least 0, got -1"), (2.5, "depth: expected an integer, got 2.5")):
        with pytest.raises(factcheck.InputError) as err:
            bm25.retrieve(CLAIMS, depth=bad)
        assert err.value.one_line() == message


# ---------------------------------------------------------------- errors

def test_input_errors_are_value_errors_that_survive_pickling():
    for cls in (factcheck.InputError, factcheck.IntegrityError):
        err = cls("claims.json", "line 3", "invalid JSON", param="claims")
        assert isinstance(err, ValueError)
        back = pickle.loads(pickle.dumps(err))
        assert type(back) is cls and back.one_line() == err.one_line() and back.param == "claims"
    with pytest.raises(ValueError) as caught:  # a caller's ``except ValueError`` catches our errors too
        factcheck.make_retriever("nope")
    assert isinstance(caught.value, factcheck.InputError)


def test_make_classifier_checks_its_parameters():
    for kwargs, param in ((dict(C=0), "C"), (dict(C=-1.0), "C"), (dict(stats_weight=-0.1), "stats_weight"),
                          (dict(groups=("claim", "style")), "groups"), (dict(groups="claim"), "groups"),
                          (dict(class_weight="auto"), "class_weight")):
        with pytest.raises(factcheck.InputError) as err:
            factcheck.make_classifier(**kwargs)
        assert err.value.param == param and err.value.one_line().startswith(f"{param}: ")


def test_a_model_directory_recording_former_parameter_names_still_loads(tmp_path):
    from factcheck.system.model_dir import load_retriever
    meta = {"retriever": {"method": "bm25", "params": {"k1": 0.9, "b": 0.4, "k": 3, "method": "lucene"}},
            "retrievers": {"tags": {"method": "tags", "params": {"t_sim": 0.2, "t_overlap": 0.1, "top_n": 4}}}}
    assert load_retriever(tmp_path, meta).params() == {"k1": 0.9, "b": 0.4, "k": 3}
    assert load_retriever(tmp_path, meta, "tags").params() == {"t_sim": 0.2, "t_overlap": 0.1, "k": 4}
