"""Scoring, kept apart from retrievers and classifiers (BEIR-style: metrics never know
the model). Every metric is an :class:`~factcheck.evaluation.intervals.Metric`.

``course_metric`` (the course's evidence F, label accuracy, harmonic mean: the one
implementation of evidence F), ``evaluate`` (all of it for a predictions file, with
recall@k and MRR), ``fever`` (the FEVER score), ``ir_metrics`` (trec_eval's metrics of
judged queries), ``intervals`` (the metric type, bootstrap and Wilson intervals, paired
tests, the one interval formatter), ``ablation`` (gold versus retrieved evidence).
"""
