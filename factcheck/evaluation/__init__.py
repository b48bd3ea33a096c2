"""Scoring, kept apart from retrievers and classifiers (BEIR-style: metrics never know
the model).

``course_metric`` (the course's evidence F, label accuracy, harmonic mean: the one
implementation of evidence F), ``retrieval_metrics`` (recall@k, MRR), ``intervals``
(bootstrap and Wilson intervals, paired differences, McNemar, the one interval
formatter), ``ablation`` (gold versus retrieved evidence) and ``evaluate`` (all of it
for a predictions file).
"""
