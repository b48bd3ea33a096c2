"""Property-based tests (hypothesis) of tagging and of the 2024 tag rule.

Corpora are drawn from a small alphabet of words -- inflections that share a stem, stop
words, numbers, mixed case, punctuation -- so tied weights, shared tags and vocabulary
cuts happen often. Every example builds a real index with ``TagJob`` in a temporary
directory, so these also exercise sharding (shard sizes down to one passage).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from unittest import mock

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import sklearn_tag_vectorizer
from factcheck.formats.evidence import source_spec
from factcheck.retrieval.tag_rule import TagRuleRetriever
from factcheck.tagging.index import TagIndex
from factcheck.tagging.job import TagJob
from factcheck.text.analyzer import analyze

WORDS = ["ice", "ices", "Ice", "sea", "seas", "heat", "heated", "heating", "carbon", "ocean",
         "oceans", "warm", "warming", "glacier", "melt", "melting", "rise", "the", "and", "of",
         "co2", "1998", "CO2,", "sea-ice", "ocean."]

passage = st.lists(st.sampled_from(WORDS), min_size=0, max_size=10).map(" ".join)
# At least one word to tag (a corpus without any is refused: see test_bad_input.py).
corpus = st.lists(passage, min_size=1, max_size=10).filter(lambda ts: any(analyze(t) for t in ts))
PROFILE = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def build(texts: list[str], tmp: str, **params) -> TagIndex:
    src = Path(tmp) / "e.json"
    src.write_text(json.dumps({f"p{i}": t for i, t in enumerate(texts)}), encoding="utf-8")
    out = Path(tmp) / "idx"
    with mock.patch.object(os, "fsync"):  # durability is not under test here; ~50 fsyncs a build
        TagJob(progress=False, jobs=1, **params).run(source_spec(src), out)
    return TagIndex.load(out)


# ---------------------------------------------------------------------- tagging

@PROFILE
@given(texts=corpus, top_k=st.integers(1, 6), max_features=st.integers(1, 15), shard_size=st.integers(1, 4))
def test_tags_are_the_top_k_stems_by_weight_ties_by_stem(texts, top_k, max_features, shard_size):
    with tempfile.TemporaryDirectory() as tmp:
        idx = build(texts, tmp, top_k=top_k, max_features=max_features, shard_size=shard_size)
        vocab = set(idx.vocabulary)
        assert len(idx) == len(texts) and idx.ids == [f"p{i}" for i in range(len(texts))]
        assert len(vocab) <= max_features
        empty = 0
        for row, text in enumerate(texts):
            tags, weights = idx.tags(row), idx.weights(row)
            stems = set(analyze(text))
            assert set(tags) <= stems & vocab                      # tags are the passage's own stems
            assert len(set(tags)) == len(tags) == len(weights)
            assert len(tags) == min(top_k, len(stems & vocab))     # at most k; never padded, never short
            assert all(w > 0 for w in weights)
            assert all(a >= b for a, b in zip(weights, weights[1:]))          # non-increasing
            for (t1, w1), (t2, w2) in zip(zip(tags, weights), zip(tags[1:], weights[1:])):
                assert w1 > w2 or t1 < t2                                       # ties by stem
            empty += not tags
        assert idx.manifest.data["empty_tags"] == empty


@PROFILE
@given(texts=corpus, shard_a=st.integers(1, 4), shard_b=st.integers(5, 12))
def test_tags_do_not_depend_on_the_shard_size(texts, shard_a, shard_b):
    with tempfile.TemporaryDirectory() as tmp_a, tempfile.TemporaryDirectory() as tmp_b:
        a, b = build(texts, tmp_a, shard_size=shard_a), build(texts, tmp_b, shard_size=shard_b)
        assert a.vocabulary == b.vocabulary
        assert [a.tags(r) for r in range(len(a))] == [b.tags(r) for r in range(len(b))]
        assert np.array_equal(a.tag_weights, b.tag_weights)  # bit-identical floats


# ---------------------------------------------------------------------- the tag rule

EPS = 1e-9
threshold = st.one_of(st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.55, 0.9, 1.0]), st.floats(0.0, 1.0))


def reference_scores(idx: TagIndex, claim: str):
    """Cosine and overlap of every passage, straight from the rule's definition."""
    tags = sorted(analyze(claim))
    distinct = set(tags)
    tv = sklearn_tag_vectorizer(idx)
    q = tv.transform([" ".join(tags)])
    cosine = (tv.transform(idx.tag_strings) @ q.T).toarray().ravel()
    overlap = np.zeros(len(idx))
    for row in range(len(idx)):
        passage_tags = set(idx.tags(row))
        if passage_tags & distinct:
            overlap[row] = len(passage_tags & distinct) / min(len(distinct), len(passage_tags))
    return cosine, overlap


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=corpus, claims=st.lists(passage, min_size=1, max_size=4), t_sim=threshold, t_overlap=threshold,
       k=st.integers(1, 6), top_k=st.integers(1, 6))
def test_tag_rule_thresholds_k_and_fallback(texts, claims, t_sim, t_overlap, k, top_k):
    with tempfile.TemporaryDirectory() as tmp:
        idx = build(texts, tmp, top_k=top_k, shard_size=3)
        rule = TagRuleRetriever(t_sim=t_sim, t_overlap=t_overlap, k=k).fit(idx)
        for claim, sel in zip(claims, rule.retrieve(claims)):
            cosine, overlap = reference_scores(idx, claim)
            hits = sel.hits
            assert len(hits) <= k
            assert len({h.row for h in hits}) == len(hits)
            for h in hits:  # the explanation tells the truth about the scores
                assert abs(h.explanation["cosine"] - cosine[h.row]) < EPS
                assert abs(h.explanation["overlap"] - overlap[h.row]) < EPS
                assert h.explanation["combined"] == h.explanation["cosine"] + h.explanation["overlap"]
            combined = [h.explanation["combined"] for h in hits]
            assert all(a >= b for a, b in zip(combined, combined[1:]))
            if sel.path == "filtered":
                assert hits and sel.details["passed_filter"] >= len(hits)
                for h in hits:  # every filtered result passes both thresholds
                    assert h.explanation["cosine"] > t_sim and h.explanation["overlap"] > t_overlap
            else:  # fallback only when nothing passes; then the k of the whole corpus scoring above 0
                assert sel.path == "fallback" and sel.details["passed_filter"] == 0
                assert not np.any((cosine > t_sim + EPS) & (overlap > t_overlap + EPS))
                assert len(hits) == min(k, int(np.sum(overlap > 0)))
                assert all(h.score > 0 for h in hits)
