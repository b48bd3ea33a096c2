"""The tag vectoriser the online retriever uses: TF-IDF over tag strings.

The 2024 retriever compares a claim's stems with a passage's tags in the space of a
1,000-term TF-IDF model fitted on the passages' tag strings. Each tag occurs at most once
in a passage, so a term's document frequency over tag strings is simply how many
passages carry it as a tag; the vocabulary is the ``tag_features`` most frequent tags,
ties by term (see :mod:`factcheck.tagging.vocabulary`).
"""

from __future__ import annotations

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer

from factcheck.tagging.vocabulary import smoothed_idf, top_terms
from factcheck.text.analyzer import TextAnalyzer, split_tags


def make_vectorizer(terms: list[str], idf: np.ndarray, analyzer) -> TfidfVectorizer:
    """A fitted scikit-learn TF-IDF vectoriser from a vocabulary and its IDF."""
    vec = TfidfVectorizer(analyzer=analyzer, vocabulary={t: i for i, t in enumerate(terms)},
                          lowercase=False, dtype=np.float64)
    vec.idf_ = idf
    return vec


def passage_vectorizer(terms: list[str], idf: np.ndarray) -> TfidfVectorizer:
    return make_vectorizer(terms, idf, TextAnalyzer())


def fit_tag_vectorizer(vocab_terms: list[str], tag_counts: np.ndarray, n_docs: int,
                       tag_features: int) -> TfidfVectorizer:
    """``tag_counts[j]`` = passages tagged with ``vocab_terms[j]``."""
    present = np.flatnonzero(tag_counts > 0)
    names = [vocab_terms[j] for j in present]
    kept = top_terms(names, tag_counts[present], tag_features)
    lookup = {t: j for j, t in enumerate(vocab_terms)}
    df = np.array([tag_counts[lookup[t]] for t in kept], dtype=np.int64)
    return make_vectorizer(kept, smoothed_idf(df, n_docs), split_tags)
