"""Turn text into Porter stems: the hot path of tagging at 1.2M passages.

Rule (the 2024 notebook's, made explicit): lower-case; split punctuation off words and
drop it (a token is a maximal run of word characters); keep alphabetic tokens only
(``co2`` and ``1998`` are dropped, ``niño`` is kept); drop NLTK English stop words;
Porter-stem what is left with nltk's ``PorterStemmer`` (default NLTK_EXTENSIONS mode).

A second analyzer, ``"plain"``, is the minimal retrieval pipeline's own (the TF-IDF
retriever's default): lower-case; a token is a maximal run of letters and digits (the
underscore separates, unlike in the stems' word runs); drop NLTK English stop words and
single-character tokens; no stemming (``co2`` and ``1998`` are kept, ``models`` is not
``model``). :data:`ANALYZERS` names both; :func:`analyzer_of` gives one as a callable.

Stemming costs ~15 µs a word, and a 1.2M-passage dump has ~20M tokens but only
~200K distinct ones, so every analyzer memoises token -> stem. The memo is private to a
process and is never pickled (pickles stay small and byte-stable).
"""

from __future__ import annotations

import itertools
import re

from factcheck.errors import check_choice
from factcheck.text.porter import porter_stemmer
from factcheck.text.stopwords import ENGLISH_STOP_WORDS

_WORD_RUNS = re.compile(r"\w+")
_LETTER_DIGIT_RUNS = re.compile(r"[^\W_]+")  # \w without the underscore

#: The analyzers by name: ``"plain"`` (lower-cased letter/digit tokens, no stemming: the
#: TF-IDF retriever's default) and ``"stems"`` (the project's Porter stems, what tagging
#: and BM25 read).
ANALYZERS = ("plain", "stems")


def stem_token(token: str) -> str:
    """The stem of one lower-cased token, or '' when the token is not kept."""
    if not token.isalpha() or token in ENGLISH_STOP_WORDS:
        return ""
    return porter_stemmer().stem(token)


def plain_term(token: str) -> str:
    """The ``"plain"`` analyzer's term for one lower-cased letter/digit token: the token
    itself, or '' for a stop word or a single character."""
    return token if len(token) > 1 and token not in ENGLISH_STOP_WORDS else ""


def plain_terms(text: str) -> list[str]:
    """The ``"plain"`` analyzer: lower-cased letter/digit runs minus stop words and single
    characters, in text order (duplicates kept).

    Example
    -------
    >>> plain_terms("CO2 levels rose in 1998; the El Niño year (a_b).")
    ['co2', 'levels', 'rose', '1998', 'el', 'niño', 'year']
    """
    return [t for t in _LETTER_DIGIT_RUNS.findall(text.lower()) if plain_term(t)]


def word_tokens(text: str) -> list[str]:
    """Lower-cased runs of word characters, before filtering."""
    return _WORD_RUNS.findall(text.lower())


# Upper case: no lower-cased text holds it, and the spaces keep it a token of its own.
_TEXT_BREAK = " Q "

# For ASCII text, ``\w`` (Unicode mode) is exactly [A-Za-z0-9_] and ``lower()`` only maps
# A-Z: one ``str.translate`` lower-cases, blanks every other character and turns the
# joining NUL into the marker. Texts holding a NUL (it would become a marker) or any
# non-ASCII character take the regex path.
_ASCII_WORDS = {i: (chr(i).lower() if chr(i).isalnum() or chr(i) == "_" else " ") for i in range(128)}
_ASCII_WORDS[0] = _TEXT_BREAK.strip()
_ASCII_LETTERS_DIGITS = {**_ASCII_WORDS, ord("_"): " "}  # the "plain" analyzer's runs
_ASCII_JOIN = " \0 "


def _ascii_fast(text: str) -> bool:
    return text.isascii() and "\0" not in text


def word_tokens_of_texts(texts: list[str], underscore: bool = True) -> tuple[list[str], str]:
    """``word_tokens`` of many texts in a few C calls: (the tokens of every text in order,
    with the marker ``"Q"`` after each text; the marker). ``underscore=False`` splits at
    underscores too: the letter/digit runs of the ``"plain"`` analyzer.

    Why: one ``findall`` per passage is 100K Python calls per shard. Runs of ASCII texts
    are joined, translated and split (a third of the time of one regex pass over the
    lower-cased texts: docs/decisions.md); other texts are lower-cased one by one,
    joined with the marker and matched in one regex pass (a run of word characters never
    crosses the marker's spaces). The tokens are ``word_tokens``'s either way.
    """
    marker = _TEXT_BREAK.strip()
    table, runs = (_ASCII_WORDS, _WORD_RUNS) if underscore else (_ASCII_LETTERS_DIGITS, _LETTER_DIGIT_RUNS)
    tokens: list[str] = []
    for fast, run in itertools.groupby(texts, key=_ascii_fast):
        if fast:
            tokens += (_ASCII_JOIN.join(run) + _ASCII_JOIN.rstrip()).translate(table).split()
        else:
            tokens += runs.findall("".join(text.lower() + _TEXT_BREAK for text in run))
    return tokens, marker


def word_runs(text: str):
    """The same runs found in the original text, as ``re.Match`` objects whose offsets
    point at the characters a reader sees (for highlighting)."""
    return _WORD_RUNS.finditer(text)


class TextAnalyzer:
    """Callable text -> list of stems, memoised per distinct token.

    Usable directly as scikit-learn's ``analyzer=`` so saved vectorisers analyse new
    text (claims) exactly as the passages were analysed. The memo is capped (a
    long-running server sees unbounded user vocabulary); a full memo is simply cleared.
    """

    MAX_MEMO = 4_000_000

    def __init__(self):
        self._memo: dict[str, str] = {}

    def stem(self, token: str) -> str:
        stem = self._memo.get(token)
        if stem is None:
            if len(self._memo) >= self.MAX_MEMO:
                self._memo.clear()
            stem = self._memo[token] = stem_token(token)
        return stem

    def __call__(self, text: str) -> list[str]:
        memo_get = self._memo.get
        out = []
        for token in word_tokens(text):
            stem = memo_get(token)
            if stem is None:
                stem = self.stem(token)
            if stem:
                out.append(stem)
        return out

    # The memo is a cache, not state: keep pickles small and identical across runs.
    def __getstate__(self):
        return {}

    def __setstate__(self, state):
        self._memo = {}

    def __eq__(self, other):
        return isinstance(other, TextAnalyzer)

    def __hash__(self):
        return hash(TextAnalyzer)

    def __repr__(self):
        return "TextAnalyzer()"


_DEFAULT = TextAnalyzer()


def analyze(text: str) -> list[str]:
    """Stems of ``text`` with the process-wide memo."""
    return _DEFAULT(text)


def analyzer_of(name: str):
    """The analyzer called ``name`` (one of :data:`ANALYZERS`) as a text -> terms callable."""
    return {"stems": analyze, "plain": plain_terms}[check_analyzer(name)]


def term_of_token(name: str):
    """The analyzer's per-token rule (token -> term, '' when dropped), for tokens from
    ``word_tokens_of_texts(texts, underscore=(name == "stems"))``."""
    return {"stems": stem_token, "plain": plain_term}[check_analyzer(name)]


def check_analyzer(name: str) -> str:
    """``name`` if it is one of :data:`ANALYZERS`, else an InputError naming ``analyzer``."""
    return check_choice(name, "analyzer", ANALYZERS)


def shared_stems(claim_stems: set[str], passage: str) -> list[str]:
    """The claim's stems that ``passage`` also has, sorted: what a hit's explanation shows
    and the app highlights (the claim is analysed once by the caller, who scores many
    passages for it).

    Example
    -------
    >>> shared_stems(set(analyze("Sea levels are rising")), "The sea rose; its level rises")
    ['level', 'rise', 'sea']
    """
    return sorted(claim_stems & set(analyze(passage)))


def split_tags(tag_string: str) -> list[str]:
    """Analyzer for tag strings: tags are already stems, separated by spaces."""
    return tag_string.split()
