"""Text analysis: the one definition of 'the stems of a text' every stage shares."""

from factcheck.text.analyzer import TextAnalyzer, analyze

__all__ = ["TextAnalyzer", "analyze"]
