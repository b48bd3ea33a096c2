from nltk.stem.porter import PorterStemmer

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
    assert a._memo
    b = pickle.loads(pickle.dumps(a))
    assert b._memo == {}
    assert pickle.dumps(a) == pickle.dumps(TextAnalyzer())
    assert b("glaciers melting glaciers") == a("glaciers melting glaciers") == ["glacier", "melt", "glacier"]


def test_empty_and_symbol_only_text():
    assert analyze("") == []
    assert analyze("!!! 123 ... ---") == []
