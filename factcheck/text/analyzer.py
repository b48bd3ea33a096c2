"""The analyzers: text -> Porter stems (``"stems"``) or plain terms (``"plain"``).

``"stems"`` (the 2024 rule): lower-cased runs of word characters, alphabetic ones that are
not stop words, stemmed (memoised per distinct token). ``"plain"``: lower-cased runs of
letters and digits minus stop words and single characters, unstemmed.

Below them, the token views besides the stems: the reranker's and the classifier's (whose
number views differ on purpose: each model was fitted with its own).

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

import itertools
import operator
import re
import threading
from collections.abc import Iterator

import numpy as np

from factcheck.errors import check_choice
from factcheck.text.porter import porter_stemmer
from factcheck.text.stopwords import ENGLISH_STOP_WORDS

_WORD_RUNS = re.compile(r"\w+")
_LETTER_DIGIT_RUNS = re.compile(r"[^\W_]+")  # \w without the underscore

ANALYZERS = ("plain", "stems")


def _stem_rule(token: str) -> str:
    """The stem of one lower-cased token, or '' when the token is not kept (not memoised)."""
    if not token.isalpha() or token in ENGLISH_STOP_WORDS:
        return ""
    return porter_stemmer().stem(token)


def stem_token(token: str) -> str:
    """The stem of one lower-cased token, or '' when the token is not kept (the process's memo)."""
    return token_ids("stems").term(token)


def plain_term(token: str) -> str:
    """The ``"plain"`` term of one lower-cased token, or '' when the token is not kept."""
    return token if len(token) > 1 and token not in ENGLISH_STOP_WORDS else ""


def plain_terms(text: str) -> list[str]:
    """The ``"plain"`` analyzer: its terms in text order (duplicates kept).

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

# For ASCII, ``\w`` is exactly [A-Za-z0-9_]: one ``str.translate`` lower-cases, blanks the
# other characters and turns the joining NUL into the marker.
_ASCII_WORDS = {i: (chr(i).lower() if chr(i).isalnum() or chr(i) == "_" else " ") for i in range(128)}
_ASCII_WORDS[0] = _TEXT_BREAK.strip()
_ASCII_LETTERS_DIGITS = {**_ASCII_WORDS, ord("_"): " "}  # the "plain" analyzer's runs
_ASCII_JOIN = " \0 "


def _ascii_fast(text: str) -> bool:
    return text.isascii() and "\0" not in text


def word_tokens_of_texts(texts: list[str], underscore: bool = True) -> tuple[list[str], str]:
    """``word_tokens`` of many texts in a few C calls: (the tokens, each text followed by the
    marker; the marker). ``underscore=False`` splits at underscores too."""
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
    """The word runs of the original text as ``re.Match`` objects (offsets for highlighting)."""
    return _WORD_RUNS.finditer(text)


# token ids below 0: no term, and the marker that ends a text in a batch
DROPPED, BREAK = -1, -2
UNSEEN = -3  # not looked up yet


class TokenIds:
    """Token -> id of its term (or DROPPED) under one per-token rule, ids in first-seen order:
    the one memo of the analysis (:func:`token_ids` holds the process's, one per analyzer)."""

    def __init__(self, term_of=None):
        self.term_of = term_of or _stem_rule
        self.of: dict[str, int] = {}
        self.stems: list[str] = []       # term of each id
        self.stem_id: dict[str, int] = {}  # term -> id
        self._adding = threading.Lock()  # a server's threads share the memo: ids stay one per term

    def __getstate__(self):  # the lock cannot be pickled; the tables are plain
        return {k: v for k, v in self.__dict__.items() if k != "_adding"}

    def __setstate__(self, state):
        self.__dict__.update(state, _adding=threading.Lock())

    def _add(self, tokens) -> None:
        with self._adding:
            for token in tokens:
                if token in self.of:
                    continue
                s = self.term_of(token)
                if not s:
                    self.of[token] = DROPPED
                    continue
                if s not in self.stem_id:
                    self.stem_id[s] = len(self.stems)
                    self.stems.append(s)
                self.of[token] = self.stem_id[s]

    def term(self, token: str) -> str:
        """The term of one token ('' when it is dropped)."""
        i = self.of.get(token)
        if i is None:
            self._add((token,))
            i = self.of[token]
        return self.stems[i] if i >= 0 else ""

    def ids(self, tokens: list[str], marker: str) -> np.ndarray:
        """The id of each token; ``marker`` (closing each text) gets BREAK."""
        self.of.setdefault(marker, BREAK)
        ids = np.fromiter(map(self.of.get, tokens, itertools.repeat(UNSEEN)), dtype=np.int64, count=len(tokens))
        unseen = np.flatnonzero(ids == UNSEEN)
        if unseen.size:
            # gathered and looked up in C: a corpus's first batch has most tokens unseen
            picked = [tokens[unseen[0]]] if unseen.size == 1 else operator.itemgetter(*unseen.tolist())(tokens)
            self._add(dict.fromkeys(picked))
            ids[unseen] = np.fromiter(map(self.of.__getitem__, picked), dtype=np.int64, count=len(picked))
        return ids


MAX_MEMO = 4_000_000  # distinct tokens a process's memo holds before it starts afresh
_TOKEN_IDS: dict[str, TokenIds] = {}


def token_ids(analyzer: str = "stems") -> TokenIds:
    """The process's memo for ``analyzer``, a fresh one once it is full (a caller holding the
    old one keeps consistent ids)."""
    memo = _TOKEN_IDS.get(analyzer)
    if memo is None or len(memo.of) > MAX_MEMO:
        memo = _TOKEN_IDS[analyzer] = TokenIds(term_of_token(analyzer))
    return memo


class TextAnalyzer:
    """Callable text -> list of stems (the ``"stems"`` analyzer as an object, e.g. for
    scikit-learn's ``analyzer=``), through the process's memo."""

    MAX_MEMO = MAX_MEMO

    @staticmethod
    def stem(token: str) -> str:
        return stem_token(token)

    def __call__(self, text: str) -> list[str]:
        memo = token_ids("stems")
        return [stem for stem in map(memo.term, word_tokens(text)) if stem]

    # Stateless: pickles small and identical across runs (older ones held an empty memo).
    def __getstate__(self):
        return {}

    def __setstate__(self, state):
        pass

    def __eq__(self, other):
        return isinstance(other, TextAnalyzer)

    def __hash__(self):
        return hash(TextAnalyzer)

    def __repr__(self):
        return "TextAnalyzer()"


_DEFAULT = TextAnalyzer()


def analyze(text: str) -> list[str]:
    """Stems of ``text`` through the process's memo."""
    return _DEFAULT(text)


def analyzer_of(name: str):
    """The analyzer called ``name`` (one of :data:`ANALYZERS`) as a text -> terms callable."""
    return {"stems": analyze, "plain": plain_terms}[check_analyzer(name)]


def term_of_token(name: str):
    """The analyzer's per-token rule (token -> term, '' when dropped)."""
    return {"stems": _stem_rule, "plain": plain_term}[check_analyzer(name)]


def check_analyzer(name: str) -> str:
    """``name`` if it is one of :data:`ANALYZERS`, else an InputError."""
    return check_choice(name, "analyzer", ANALYZERS)


def shared_stems(claim_stems: set[str], passage: str) -> list[str]:
    """The claim's stems that ``passage`` also has, sorted.

    Example
    -------
    >>> shared_stems(set(analyze("Sea levels are rising")), "The sea rose; its level rises")
    ['level', 'rise', 'sea']
    """
    return sorted(claim_stems & set(analyze(passage)))


def split_tags(tag_string: str) -> list[str]:
    """Analyzer for tag strings: tags are already stems, separated by spaces."""
    return tag_string.split()


# The token views besides the stems.
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
