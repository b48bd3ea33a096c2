"""Moved to :mod:`factcheck.pipeline.fact_checker`; this name stays only until
``factcheck/serve/check.py`` (being reworked in parallel) imports from there."""

from factcheck.pipeline.fact_checker import FactChecker, available_methods, load_retriever

__all__ = ["FactChecker", "available_methods", "load_retriever"]
