"""JsonObjectStream (streamed predict writes) gives exactly dumps_json's bytes for any
entries, and refuses what would make those bytes another object: a key that is not a string
(written raw, not JSON) or a repeated key (a reader would keep one of the two, silently)."""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from factcheck.formats.files import JsonObjectStream, dumps_json

VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
                      | st.text(), lambda kids: st.lists(kids, max_size=3)
                      | st.dictionaries(st.text(max_size=5), kids, max_size=3), max_leaves=10)


@settings(max_examples=200, deadline=None)
@given(head=st.dictionaries(st.text(max_size=5), VALUES, max_size=3), key=st.none() | st.text(max_size=5),
       entries=st.dictionaries(st.text(max_size=6), VALUES, max_size=4))
def test_the_stream_writes_dumps_jsons_bytes(head, key, entries):
    head = {k: v for k, v in head.items() if k != key} if key is not None else {}
    fh = io.StringIO()
    stream = JsonObjectStream(fh, head, key)
    for k, v in entries.items():
        stream.add(k, v)
    stream.close()
    assert fh.getvalue() == dumps_json({**head, key: entries} if key is not None else entries)


@pytest.mark.parametrize("key", [1, None, ("a",)])
def test_a_key_that_is_not_a_string_is_refused(key):
    stream = JsonObjectStream(io.StringIO(), {}, "claims")
    with pytest.raises(TypeError, match="key: must be a string"):  # was written raw: `1: {}`
        stream.add(key, {})


def test_a_repeated_key_is_refused():
    stream = JsonObjectStream(io.StringIO(), {}, "claims")
    stream.add("claim-1", {"claim_label": "SUPPORTS"})
    with pytest.raises(ValueError, match="'claim-1' was already written"):  # was two "claim-1" keys
        stream.add("claim-1", {"claim_label": "REFUTES"})
