"""Scoring from predictions and gold, never a model (BEIR-style); every figure is an
:class:`~factcheck.evaluation.intervals.Metric`."""
