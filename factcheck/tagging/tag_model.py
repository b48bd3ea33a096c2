"""The tag vectoriser the online retriever uses: TF-IDF over tag strings.

The 2024 retriever compares a claim's stems with a passage's tags in the space of a
1,000-term TF-IDF model fitted on the passages' tag strings. Each tag occurs at most once
in a passage, so a term's document frequency over tag strings is simply how many
passages carry it as a tag; the vocabulary is the ``tag_features`` most frequent tags,
ties by term (:func:`factcheck.tagging.vocabulary.tag_vocabulary`, computed without
scikit-learn so the tagging driver never imports it).
"""

from __future__ import annotations

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer

from factcheck.text.analyzer import TextAnalyzer


def make_vectorizer(terms: list[str], idf: np.ndarray, analyzer) -> TfidfVectorizer:
    """A fitted scikit-learn TF-IDF vectoriser from a vocabulary and its IDF."""
    vec = TfidfVectorizer(analyzer=analyzer, vocabulary={t: i for i, t in enumerate(terms)},
                          lowercase=False, dtype=np.float64)
    vec.idf_ = idf
    return vec


def passage_vectorizer(terms: list[str], idf: np.ndarray) -> TfidfVectorizer:
    return make_vectorizer(terms, idf, TextAnalyzer())
