"""The open-mode reranker: dense candidates and features on the demo data.

Determinism, the saved model loading through the skops allow-list, the course path left
exactly as it was, and the classifier's optional embedding features. Tests that need the
optional extra skip with a reason when ``wordllama`` is not installed.
"""

from __future__ import annotations

import importlib.util
import shutil

import numpy as np
import pytest

from helpers import DEMO
from factcheck.formats.claims import read_claims
from factcheck.formats.splits import train_holdout_split
from factcheck.training.rerank import train_reranker
from factcheck.retrieval.rerank import features as F
from factcheck.retrieval.rerank.candidates import CandidateConfig
from factcheck.retrieval.rerank.model import ModelConfig
from factcheck.retrieval.rerank.retriever import RerankRetriever
from factcheck.retrieval.rerank.semantic import ALL_FEATURES, DENSE_FEATURES
from factcheck.tagging.index import TagIndex

needs_open = pytest.mark.skipif(importlib.util.find_spec("wordllama") is None,
                                reason="needs the open extra (pip install -e '.[open]')")
FAST_GRID = (ModelConfig(learning_rate=0.1, max_iter=40, max_leaf_nodes=7, min_samples_leaf=5, negative_rate=1.0),)
DENSE_CONFIG = (CandidateConfig(memory_k=5, dense_depth=10),)


@pytest.fixture(scope="module")
def vector_index(demo_index, tmp_path_factory):
    """A private copy of the demo index with passage vectors."""
    if importlib.util.find_spec("wordllama") is None:
        pytest.skip("needs the open extra (pip install -e '.[open]')")
    from factcheck.tagging.vectors import PassageVectorJob
    root = shutil.copytree(demo_index, tmp_path_factory.mktemp("open-rerank") / "index")
    PassageVectorJob(progress=False).run(root)
    return TagIndex.load(root)


def _split():
    return train_holdout_split(read_claims(DEMO / "train-claims.json"))


def _snapshot(retriever, texts):
    sel = retriever.retrieve(texts)
    ranks = retriever.rank(texts, 20)
    return ([[(h.id, round(h.score, 12), h.explanation.get("dense")) for h in s.hits] for s in sel],
            [(r.rows, [round(x, 12) for x in r.scores]) for r in ranks])


@pytest.fixture(scope="module")
def dense_trained(vector_index):
    fit, holdout = _split()
    return train_reranker(vector_index, fit, holdout, dense=True, configs=DENSE_CONFIG, grid=FAST_GRID,
                          progress=False)


@pytest.fixture(scope="module")
def dev_texts():
    return [c.text for c in read_claims(DEMO / "dev-claims.json")]


def test_feature_lists_extend_the_course_ones():
    assert ALL_FEATURES[:len(F.FEATURES)] == F.FEATURES
    assert ALL_FEATURES[len(F.FEATURES):] == DENSE_FEATURES


def test_course_settings_serialise_as_before():
    assert CandidateConfig().to_json() == {"k1": 0.9, "b": 0.4, "depth": 300, "memory_k": 20}
    assert CandidateConfig(dense_depth=100).to_json()["dense_depth"] == 100


def test_course_reranker_never_loads_a_scorer(demo_index, monkeypatch):
    from factcheck.retrieval.rerank import retriever as R
    from factcheck.training import rerank as T

    def refuse(index):
        raise AssertionError("the course reranker loaded the dense scorer")
    monkeypatch.setattr(R, "load_scorer", refuse)
    monkeypatch.setattr(T, "load_scorer", refuse)
    fit, holdout = _split()
    r = train_reranker(TagIndex.load(demo_index), fit, holdout, configs=(CandidateConfig(memory_k=5),),
                       grid=FAST_GRID, progress=False)
    assert r.model.features == F.FEATURES and r.dense_ is None
    hit = r.retrieve(["Sea levels are rising."])[0].hits[0]
    assert "dense" not in hit.explanation and set(hit.explanation["features"]) == set(F.FEATURES)


@needs_open
@pytest.mark.slow
def test_dense_reranker_uses_dense_features_and_candidates(dense_trained, dev_texts):
    assert set(dense_trained.model.features) > set(F.FEATURES)
    assert dense_trained.candidates_.dense_depth == 10
    cands, X, _, _ = dense_trained.scored(dev_texts[0])
    assert X.shape == (len(cands.rows), len(ALL_FEATURES)) and cands.dense is not None
    hit = dense_trained.retrieve(dev_texts[:1])[0].hits[0]
    assert -1.0 <= hit.explanation["dense"] <= 1.0


@needs_open
@pytest.mark.slow
def test_dense_reranker_is_deterministic(vector_index, dense_trained, dev_texts):
    fit, holdout = _split()
    again = train_reranker(vector_index, fit, holdout, dense=True, configs=DENSE_CONFIG, grid=FAST_GRID,
                           progress=False)
    assert _snapshot(again, dev_texts) == _snapshot(dense_trained, dev_texts)


@needs_open
@pytest.mark.slow
def test_dense_model_saves_and_loads_through_the_allow_list(dense_trained, vector_index, dev_texts, tmp_path):
    path = tmp_path / "rerank.skops"
    dense_trained.save(path)
    loaded = RerankRetriever.load(path).fit(vector_index)  # loads vectors + the bundled model itself
    assert loaded.candidates.dense_depth == 10 and loaded.dense_ is not None
    assert _snapshot(loaded, dev_texts) == _snapshot(dense_trained, dev_texts)


# ---------------------------------------------------------------- the classifier's dense group

def test_course_classifier_never_computes_dense_views(monkeypatch):
    from factcheck.classification import features as CF
    from factcheck.classification.cv import GRID
    from factcheck.training.classifier_cv import open_grid

    def refuse(X):
        raise AssertionError("course features computed embeddings")
    monkeypatch.setattr(CF, "dense_stats", refuse)
    assert "dense" not in CF.ALL_GROUPS and "dense" not in CF.views_of([("a claim", ["a passage"])])
    groups = open_grid(GRID)["groups"]
    assert groups[:len(GRID["groups"])] == GRID["groups"]
    assert all(g[-1] == "dense" for g in groups[len(GRID["groups"]):])


@needs_open
def test_dense_classifier_features_are_cosines():
    from factcheck.classification.features import OPEN_GROUPS, ClaimEvidenceFeatures, dense_stats
    X = [("Sea levels are rising.", ["Sea level rise is accelerating.", "Bananas are yellow."]),
         ("CO2 warms the planet.", [])]
    stats = dense_stats(X)
    assert stats.shape == (2, 4) and np.all(stats[1] == 0)
    assert 1.0 >= stats[0, 0] >= stats[0, 1] >= stats[0, 2] >= -1.0
    assert np.array_equal(dense_stats(X[:1]), stats[:1])  # a pair's values do not depend on the others
    Z = ClaimEvidenceFeatures(groups=OPEN_GROUPS, min_df=1).fit_transform(X * 2)
    plain = ClaimEvidenceFeatures(min_df=1).fit_transform(X * 2)
    assert Z.shape[1] == plain.shape[1] + 4


@needs_open
@pytest.mark.slow
def test_dense_training_chooses_among_the_feature_sets(dense_trained):
    from factcheck.training.rerank import DENSE_FEATURE_SETS
    assert tuple(dense_trained.model.features) in DENSE_FEATURE_SETS
    left_out = {tuple(e["features_left_out"]) for e in dense_trained.report["grid"]}
    assert len(left_out) == len(DENSE_FEATURE_SETS)


def test_candidate_settings_sharing_a_dense_scorer_score_each_claim_once_with_each_settings_own_features(
        vector_index, monkeypatch):
    """The training pass computes a claim's dense scores once for every candidate setting: each
    setting's features must be those it computes alone."""
    from factcheck.retrieval.dense import DenseRetriever
    from factcheck.training.rerank import training_data
    fit, holdout = _split()
    configs = [CandidateConfig(memory_k=5, dense_depth=10), CandidateConfig(memory_k=8, dense_depth=20)]
    calls = []
    scores = DenseRetriever.scores
    monkeypatch.setattr(DenseRetriever, "scores", lambda self, claim: calls.append(claim) or scores(self, claim))
    together = training_data(vector_index, fit, holdout, configs)
    assert len(calls) == len(fit) + len(holdout)
    for config, shared in zip(configs, together, strict=True):
        alone, = training_data(vector_index, fit, holdout, [config])
        for part in ("fit_set", "holdout_set"):
            a, b = getattr(shared, part), getattr(alone, part)
            assert np.array_equal(a.X, b.X) and np.array_equal(a.y, b.y)
            assert all(np.array_equal(x, y) for x, y in zip(a.rows, b.rows, strict=True))
