"""Scoring, kept apart from retrievers and classifiers (BEIR-style): the course metric,
retrieval metrics, intervals and paired tests."""
