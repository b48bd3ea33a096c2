"""JsonObjectStream writes, entry by entry, exactly the bytes of dumps_json on the whole
object: predictions and explanations streamed batch by batch keep their bytes."""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from factcheck.formats.files import JsonObjectStream, dumps_json

keys = st.text(max_size=8)
leaves = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12)
values = st.recursive(leaves, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
                      max_leaves=12)


def streamed(entries: dict, head: dict | None = None, key: str | None = None) -> str:
    fh = io.StringIO()
    stream = JsonObjectStream(fh, head, key)
    for k, v in entries.items():
        stream.add(k, v)
    stream.close()
    return fh.getvalue()


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(keys, values, max_size=5))
def test_entries_alone_are_dumps_json(entries):
    assert streamed(entries) == dumps_json(entries)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(keys.filter(lambda k: k != "claims"), values, max_size=4),
       st.dictionaries(keys, values, max_size=5))
def test_entries_under_a_key_after_a_head_are_dumps_json(head, entries):
    assert streamed(entries, head, "claims") == dumps_json({**head, "claims": entries})


def test_newlines_and_non_ascii_in_keys_and_values():
    entries = {"a\nb": {"x": ["é\n", "\u2028"]}, "": [], "c": {}}
    assert streamed(entries, {"m": "\n"}, "claims") == dumps_json({"m": "\n", "claims": entries})


def test_a_head_that_holds_the_key_is_refused():
    with pytest.raises(ValueError, match="head"):
        JsonObjectStream(io.StringIO(), {"claims": 1}, "claims")
