import gzip
import json

import pytest

from factcheck.errors import InputError
from factcheck.formats import course as ev  # where CHUNK_BYTES lives
from factcheck.formats.evidence import read_passages, source_spec


def write(tmp_path, name, data):
    p = tmp_path / name
    p.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return p


def test_course_json_and_gzip_round_trip(tmp_path):
    data = {"evidence-1": "Alpha beta.", "evidence-2": "", "evidence-3": "Gamma \u00e9 \"quoted\" \\ done"}
    p = write(tmp_path, "e.json", json.dumps(data, indent=1))
    g = tmp_path / "e.json.gz"
    g.write_bytes(gzip.compress(json.dumps(data).encode()))
    for path in (p, g):
        ids, texts = read_passages(source_spec(path))
        assert ids == list(data) and texts == list(data.values())


def test_course_parser_across_tiny_buffers(tmp_path, monkeypatch):
    # Records, escapes and multi-byte characters cut at every possible buffer boundary.
    data = {f"evidence-{i}": f"t\u00e9xt {i} \\u00e9 \"q\" \u2014 " * (i % 5) for i in range(60)}
    p = write(tmp_path, "e.json", json.dumps(data, ensure_ascii=False))
    q = write(tmp_path, "f.json", json.dumps(data, ensure_ascii=True, indent=2))
    for chunk in (1, 2, 3, 7, 64):
        monkeypatch.setattr(ev, "CHUNK_BYTES", chunk)
        for path in (p, q):
            ids, texts = read_passages(source_spec(path))
            assert ids == list(data) and texts == list(data.values())


def test_jsonl_and_csv_with_configurable_columns(tmp_path):
    jl = write(tmp_path, "e.jsonl", '{"id": "a", "text": "one"}\n\n{"id": 7, "text": "two"}\n')
    assert read_passages(source_spec(jl)) == (["a", "7"], ["one", "two"])
    csv = write(tmp_path, "e.csv", 'pid,body,other\na,"multi\nline, text",x\nb,plain,y\n')
    assert read_passages(source_spec(csv, id_column="pid", text_column="body")) == (
        ["a", "b"], ["multi\nline, text", "plain"])


def test_one_megabyte_passage_is_read_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(ev, "CHUNK_BYTES", 4096)
    big = "warming " * 131072
    p = write(tmp_path, "e.json", json.dumps({"a": "x", "big": big, "c": "y"}))
    ids, texts = read_passages(source_spec(p))
    assert ids == ["a", "big", "c"] and texts[1] == big


@pytest.mark.parametrize("content, place, words", [
    ('{"a": "x", "b": "y"', "line 1", "truncated"),
    ('["a", "b"]', "line 1, column 1", "JSON object"),
    ('{"a": "x", "b": null}', "line 1, column 17", "got null"),
    ('{"a": "x",\n "b": 3}', "line 2", "got a number"),
    ('{"a": ["x"]}', "line 1", "got a list"),
    ('{"a": "x", "a": "y"}', "passage 2", "duplicate passage id 'a'"),
    ("", None, "empty file"),
    ("{}", None, "no passages"),
    ('{"a": "x",}', "line 1", "trailing comma"),
    ('{"a": "x"} extra', "line 1", "unexpected data"),
])
def test_course_json_errors_name_the_place(tmp_path, content, place, words):
    p = write(tmp_path, "bad.json", content)
    with pytest.raises(InputError) as err:
        read_passages(source_spec(p))
    msg = err.value.one_line()
    assert str(p) in msg and words in msg
    if place:
        assert place in msg
    assert "\n" not in msg


@pytest.mark.parametrize("chunk", [3, 11, 1 << 22])
def test_invalid_utf8_names_byte_offset(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(ev, "CHUNK_BYTES", chunk)
    p = write(tmp_path, "bad.json", b'{"a": "caf\xc3\xa9", "b": "bad \xff byte"}')
    with pytest.raises(InputError, match=r"byte 25: invalid UTF-8"):
        read_passages(source_spec(p))


def test_jsonl_duplicate_and_csv_missing_columns(tmp_path):
    jl = write(tmp_path, "e.jsonl", '{"id": "a", "text": "x"}\n{"id": "b", "text": "y"}\n{"id": "a", "text": "z"}\n')
    with pytest.raises(InputError, match=r"line 3: duplicate passage id 'a' \(first seen at line 1\)"):
        read_passages(source_spec(jl))
    csv = write(tmp_path, "e.csv", "key,body\n1,x\n")
    with pytest.raises(InputError, match=r"id_column: no column 'id' in the header \(line 1; found 'key', 'body'\)"):
        read_passages(source_spec(csv))


def test_truncated_gzip_is_an_input_error(tmp_path):
    blob = gzip.compress(json.dumps({f"e{i}": "text " * 50 for i in range(2000)}).encode())
    p = tmp_path / "cut.json.gz"
    p.write_bytes(blob[: len(blob) // 2])
    with pytest.raises(InputError, match="cut.json.gz"):
        read_passages(source_spec(p))


def test_unknown_extension_needs_format(tmp_path):
    p = write(tmp_path, "e.txt", "x")
    with pytest.raises(InputError, match="format: cannot tell the format") as err:  # the parameter, not a flag
        source_spec(p)
    assert "--format" not in str(err.value)


# ---------------------------------------------------------------- the streaming parser at any buffer size
# The course reader hands ijson one buffer at a time and checks what it does not (lone
# surrogate escapes, the place of an error) on the bytes it hands over: every passage and
# every error must be the same wherever the buffers are cut.

def _read(path):
    try:
        return read_passages(source_spec(path))
    except InputError as exc:
        return exc.one_line()


# JSON source text: escaped quotes followed by commas, backslashes before quotes.
GOOD = [(f"evidence-{i}", rf'text {i} with \", quotes \"x\", and more') for i in range(40)]


@pytest.mark.parametrize("bad, words", [
    ('"b1": "control \x01 character"', "line 21, column 17: invalid JSON: invalid character inside string"),
    (r'"b2": "bad \q escape"', "line 21, column 14: invalid JSON: inside a string, '\\' occurs before a character"),
    (r'"b3": "lone \ud800 surrogate"', "passage 21 (line 21, column 14): the id or text holds a lone surrogate"),
    ('"": "empty id"', "passage 21: the passage id is empty"),
    ('"b5": null', "line 21, column 8: passage 21 (id 'b5'): text must be a string, got null"),
    ('"b6": 3', "line 21, column 8: passage 21 (id 'b6'): text must be a string, got a number"),
    ('"b7": ["x"]', "line 21, column 8: passage 21 (id 'b7'): text must be a string, got a list"),
    ('"b8": {"a": "b"}', "line 21, column 8: passage 21 (id 'b8'): text must be a string, got an object"),
    ('"evidence-3": "a repeated id"', "passage 21: duplicate passage id 'evidence-3' (first seen at passage 4)"),
    ('"b10" "missing colon"', "line 21, column 22: invalid JSON: object key and value must be separated by a colon"),
    ('"b11": "x" "missing comma"', "line 21, column 27: invalid JSON: after key and value, inside map, I expect"),
    ('"b12": "ok", }', "line 21, column 15: trailing comma before '}'"),
    (r'"b13": "pair \ud83d\ude00 is fine"', None),      # escaped surrogate pair: valid
    (r'"b14": "text ending in a backslash \\", "b15": "next"', None),
    (r'"b16": "an escaped backslash, then \\ud800 as text"', None),
])
@pytest.mark.parametrize("chunk", [5, 97, 1 << 16])
def test_every_buffer_size_reads_the_same_passages_and_errors(tmp_path, monkeypatch, bad, words, chunk):
    monkeypatch.setattr(ev, "CHUNK_BYTES", chunk)
    members = [f'"{i}": "{t}"' for i, t in GOOD[:20]] + [bad] + [f'"{i}": "{t}"' for i, t in GOOD[20:]]
    text = "{" + ",\n ".join(members) + "}"
    p = write(tmp_path, "e.json", text)
    got = _read(p)
    if words is None:
        pairs = json.loads(text, object_pairs_hook=list)
        assert got == ([k for k, _ in pairs], [v for _, v in pairs])
    else:
        assert isinstance(got, str) and got.startswith(f"{p}: ") and words in got, got


def test_a_syntax_error_after_buffers_that_cut_characters_is_no_utf8_error(tmp_path, monkeypatch):
    text = "{" + ", ".join(f'"e{i}": "caf\u00e9 \u2014 {i}"' for i in range(3000)) + ", }"
    p = write(tmp_path, "e.json", text)
    for chunk in (5, 7, 1 << 16):
        monkeypatch.setattr(ev, "CHUNK_BYTES", chunk)
        assert _read(p).endswith(f"line 1, column {len(text)}: trailing comma before '}}'")


def test_a_lone_surrogate_cut_by_a_buffer_end_is_found(tmp_path, monkeypatch):
    # every cut through the escape and the pair around it
    for chunk in range(1, 20):
        monkeypatch.setattr(ev, "CHUNK_BYTES", chunk)
        for text, ok in ((r"x\ud83d\ude00", True), (r"x\ud83d y", False), (r"x\ude00", False),
                         (r"\\\\ud800", True), (r"\\\ud800", False)):
            p = write(tmp_path, "e.json", '{"a": "b", "c": "' + text + '"}')
            got = _read(p)
            assert isinstance(got, tuple) if ok else "passage 2" in got and "lone surrogate" in got, (chunk, text, got)


from hypothesis import given, settings, strategies as st  # noqa: E402

_TEXT = st.lists(st.characters(blacklist_categories=("Cs",)).map(str)
                 | st.sampled_from(['"', "\\", '",', '\\",', "\n", "\x01", "\U0001f600", "\\ud800"]),
                 max_size=15).map("".join)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(_TEXT.filter(bool), _TEXT, min_size=1, max_size=25), st.booleans(),
       st.sampled_from([None, 1]), st.sampled_from([7, 64, 1 << 16]))
def test_any_valid_course_file_reads_as_json_reads_it(tmp_path_factory, data, ascii_only, indent, chunk):
    p = tmp_path_factory.mktemp("prop") / "e.json"
    p.write_text(json.dumps(data, ensure_ascii=ascii_only, indent=indent), encoding="utf-8")
    old = ev.CHUNK_BYTES
    ev.CHUNK_BYTES = chunk
    try:
        assert read_passages(source_spec(p)) == (list(data), list(data.values()))
    finally:
        ev.CHUNK_BYTES = old


@settings(max_examples=40, deadline=None)
@given(st.lists(_TEXT, min_size=1, max_size=10), st.data(), st.sampled_from([7, 64, 1 << 16]))
def test_a_lone_surrogate_anywhere_names_its_passage(tmp_path_factory, texts, data, chunk):
    at = data.draw(st.integers(0, len(texts) - 1))
    cut = data.draw(st.integers(0, len(texts[at])))
    members = [json.dumps(f"e{i}") + ": " + json.dumps(t) for i, t in enumerate(texts)]
    inner = json.dumps(texts[at][:cut])[:-1] + "\\udc05" + json.dumps(texts[at][cut:])[1:]
    members[at] = json.dumps(f"e{at}") + ": " + inner
    p = tmp_path_factory.mktemp("lone") / "e.json"
    p.write_text("{" + ", ".join(members) + "}", encoding="utf-8")
    old = ev.CHUNK_BYTES
    ev.CHUNK_BYTES = chunk
    try:
        got = _read(p)
    finally:
        ev.CHUNK_BYTES = old
    assert isinstance(got, str) and f"passage {at + 1} (" in got and "lone surrogate \\udc05" in got, got


def test_a_number_too_long_for_python_is_a_one_line_error(tmp_path):
    digits = "1" * 5000  # Python refuses to convert integers of over 4,300 digits
    cases = [("e.json", '{"a": "x", "b": ' + digits + '}', "got a number"),
             ("e.jsonl", '{"id": "a", "text": ' + digits + '}\n', "more than 4,300 digits")]
    for name, content, words in cases:
        p = write(tmp_path, name, content)
        with pytest.raises(InputError) as err:
            read_passages(source_spec(p))
        assert words in err.value.one_line() and str(p) in err.value.one_line()
    from factcheck.formats.claims import read_claims
    p = write(tmp_path, "claims.json", '{"c1": {"claim_text": "x", "n": ' + digits + '}}')
    with pytest.raises(InputError, match="more than 4,300 digits"):
        read_claims(p)
