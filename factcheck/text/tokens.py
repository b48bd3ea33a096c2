"""Token views besides the stems: the reranker's and the classifier's (whose number views
differ on purpose: each model was fitted with its own).

Example
-------
>>> split_stems("CO2 levels rose")
['co', 'level', 'rose']
>>> standalone_numbers("1,000 ppm of CO2 in the 1990s")
['1000', '1990']
>>> number_strings("1,000 ppm in 1990s"), cue_words("It isn't so")
(['1,000', '1990'], ['it', "isn't", 'so'])
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from factcheck.text.analyzer import analyze

__all__ = ["cue_words", "letter_runs", "number_strings", "split_letter_digit_runs", "split_stems",
           "standalone_numbers"]

_LETTER_DIGIT_BOUNDARY = re.compile(r"(?<=[^\W\d_])(?=\d)|(?<=\d)(?=[^\W\d_])")
_DIGIT_COMMA = re.compile(r"(?<=\d),(?=\d)")
_STANDALONE_NUMBER = re.compile(r"(?<![^\W\d_])\d+(?:\.\d+)?(?=s\b|(?![^\W\d_]))")
_LETTER_RUN = re.compile(r"[^\W\d_]+")
_CUE_WORD = re.compile(r"[a-z']+")
_WRITTEN_NUMBER = re.compile(r"\d+(?:[.,]\d+)?")


def split_letter_digit_runs(text: str) -> str:
    """``CO2`` -> ``CO 2``, ``CH4`` -> ``CH 4``: letter and digit runs become separate words."""
    return _LETTER_DIGIT_BOUNDARY.sub(" ", text)


def split_stems(text: str) -> list[str]:
    """Stems after :func:`split_letter_digit_runs` (duplicates kept, text order)."""
    return analyze(split_letter_digit_runs(text))


def standalone_numbers(text: str) -> list[str]:
    """Distinct digit runs not glued to letters, sorted (``1,000`` is 1000, ``1990s`` 1990)."""
    return sorted(set(_STANDALONE_NUMBER.findall(_DIGIT_COMMA.sub("", text))))


def letter_runs(text: str) -> Iterator[re.Match]:
    """Maximal runs of letters, as matches."""
    return _LETTER_RUN.finditer(text)


def cue_words(text: str) -> list[str]:
    """Lower-cased runs of letters and apostrophes (``isn't`` stays one word), in order."""
    return _CUE_WORD.findall(text.lower())


def number_strings(text: str) -> list[str]:
    """Numbers as written: digit runs with at most one ``.``/``,`` part, in order."""
    return _WRITTEN_NUMBER.findall(text)
