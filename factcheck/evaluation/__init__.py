"""Scoring from predictions and gold, never a model; every figure is a ``Metric``."""
