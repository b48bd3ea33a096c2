import json

import pytest
from nltk.stem.porter import PorterStemmer

from helpers import run_python
from factcheck.text.analyzer import TextAnalyzer, analyze, word_tokens
from factcheck.text.stopwords import ENGLISH_STOP_WORDS


def test_stop_word_list_is_nltk_english_verbatim():
    assert len(ENGLISH_STOP_WORDS) == 179
    assert {"i", "the", "wouldn't", "ain", "ma", "should've"} <= ENGLISH_STOP_WORDS


def test_lowercase_punctuation_split_and_alphabetic_only():
    # "CO2" and "1998" are not alphabetic; "don't" splits into stop words; "well-known" splits.
    assert word_tokens("CO2, in 1998: well-known!") == ["co2", "in", "1998", "well", "known"]
    assert analyze("CO2, in 1998: well-known!") == ["well", "known"]
    assert analyze("Don't") == []


def test_porter_stems_match_nltk_and_keep_unicode_letters():
    ps = PorterStemmer()
    text = "Warming oceans are absorbing heat; El Niño conditions developed."
    expected = [ps.stem(w) for w in ["warming", "oceans", "absorbing", "heat", "el", "niño",
                                      "conditions", "developed"]]
    assert analyze(text) == expected


def test_memo_is_not_pickled_and_results_are_stable():
    import pickle
    a = TextAnalyzer()
    a("glaciers melting glaciers")
    b = pickle.loads(pickle.dumps(a))
    assert pickle.dumps(a) == pickle.dumps(TextAnalyzer()) and len(pickle.dumps(a)) < 100
    assert b("glaciers melting glaciers") == a("glaciers melting glaciers") == ["glacier", "melt", "glacier"]


def test_empty_and_symbol_only_text():
    assert analyze("") == []
    assert analyze("!!! 123 ... ---") == []


def _python(code: str) -> str:
    proc = run_python(code)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


_STEM_BOTH_WAYS = """
import json, sys
from factcheck.text import porter
{patch}
ours = porter.porter_stemmer()
print(json.dumps(sorted(n for n in sys.modules if n == "nltk" or n.startswith("nltk."))))
from nltk.stem.porter import PorterStemmer
import nltk
print(json.dumps([callable(getattr(nltk, "word_tokenize", None)), type(ours).__module__]))
words = {words!r}
print(json.dumps([ours.stem(w) == PorterStemmer().stem(w) for w in words]))
"""

_WORDS = ["warming", "oceans", "generalizations", "niño", "dying", "skies", "hopping", "agreed", "sensational",
          "conditional", "relational", "happiness", "electrical", "adjustable", "irritant", "fizzed", "feed", "y"]


@pytest.mark.slow
def test_the_stemmer_loaded_without_nltks_package_is_nltks_and_leaves_no_trace():
    from helpers import DEMO
    words = sorted(set(_WORDS) | set(word_tokens((DEMO / "evidence.json").read_text(encoding="utf-8"))))
    left, (full_nltk, module), same = (json.loads(line) for line in
                                       _python(_STEM_BOTH_WAYS.format(patch="", words=words)).splitlines())
    assert left == []  # nothing of the bare load stays in sys.modules ...
    assert full_nltk and module == "nltk.stem.porter"  # ... so a later `import nltk` is the whole package
    assert len(same) > 300 and all(same)


_FAIL_HALFWAY = """
import importlib, types
calls = []
def import_module(name):
    calls.append(name)
    if len(calls) == 1:  # the bare load: get part of nltk in, then fail
        importlib.import_module("nltk.stem.api")
        raise ImportError("a future nltk's stemmer needs its package")
    return importlib.import_module(name)
porter.importlib = types.SimpleNamespace(import_module=import_module, util=importlib.util)
"""


@pytest.mark.slow
@pytest.mark.parametrize("patch", [_FAIL_HALFWAY, "import sys, types; sys.modules['nltk.x'] = types.ModuleType('nltk.x')"],
                         ids=["bare-load-fails-halfway", "part-of-nltk-already-imported"])
def test_the_stemmer_falls_back_to_nltks_normal_import(patch):
    # The fallback must find no stand-in package left: a later `import nltk` is complete.
    left, (full_nltk, _), same = (json.loads(line) for line in
                                  _python(_STEM_BOTH_WAYS.format(patch=patch, words=_WORDS)).splitlines())
    assert "nltk" in left and "nltk.stem.porter" in left and full_nltk and all(same)


from hypothesis import given, settings, strategies as st  # noqa: E402

from factcheck.text.analyzer import BREAK, DROPPED, TokenIds, term_of_token  # noqa: E402

_TOKENS = st.sampled_from(["sea", "seas", "the", "q", "Q", "co2", "1998", "niño", "rising", "rise", "ice", "a"])


@settings(max_examples=80, deadline=None)
@given(st.lists(st.lists(_TOKENS, max_size=15), min_size=1, max_size=4), st.sampled_from(["stems", "plain"]))
def test_token_ids_of_batches_are_the_per_token_rule_in_first_seen_order(batches, analyzer):
    # A fresh memo sees most tokens unseen in its first batch (looked up in bulk), fewer
    # later (one unseen token is the edge case); a token-by-token table is the reference.
    rule, memo = term_of_token(analyzer), TokenIds(term_of_token(analyzer))
    stems: list[str] = []
    for tokens in batches:
        want = []
        for token in tokens:
            if token == "Q":
                want.append(BREAK)
                continue
            term = rule(token)
            if term and term not in stems:
                stems.append(term)
            want.append(stems.index(term) if term else DROPPED)
        assert memo.ids(tokens, "Q").tolist() == want
    assert memo.stems == stems
