import gzip
import json

import pytest

from factcheck.errors import InputError
from factcheck.formats import course_json
from factcheck.formats import utf8_stream as ev  # where CHUNK_BYTES lives
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
    ('{"a": "x", "b": null}', "line 1", "got null"),
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


# ---------------------------------------------------------------- fast path == careful path
# The course reader decodes runs of members with the C decoder (the fast path) and falls
# back to one member at a time (the careful path) for anything it cannot take whole. The
# two must agree on every passage and on every error, wherever the buffer is cut.

def _read_both(path, monkeypatch):
    """(result or one-line error) with the fast path, and with the careful path alone."""
    out = []
    for fast in (True, False):
        with monkeypatch.context() as m:
            if not fast:
                m.setattr(course_json, "_fast_run", lambda buf, pos: None)
            try:
                out.append(read_passages(source_spec(path)))
            except InputError as exc:
                out.append(exc.one_line())
    return out


def _engaged(path):
    """How many passages the fast path took (so a test knows it exercised it)."""
    taken = []
    real = course_json._fast_run

    def spy(buf, pos):
        run = real(buf, pos)
        if isinstance(run, tuple):
            taken.append(len(run[0]))
        return run
    course_json._fast_run = spy
    try:
        read_passages(source_spec(path))
    except InputError:
        pass
    finally:
        course_json._fast_run = real
    return sum(taken)


# JSON source text: escaped quotes followed by commas (`\",`) trip the fast path's guess.
GOOD = [(f"evidence-{i}", rf'text {i} with \", quotes \"x\", and more') for i in range(40)]


@pytest.mark.parametrize("bad", [
    '"b1": "control \x01 character"',           # raw control character in a text
    r'"b2": "bad \q escape"',                   # invalid escape
    r'"b3": "lone \ud800 surrogate"',           # escaped lone surrogate
    '"": "empty id"',
    '"b5": null', '"b6": 3', '"b7": ["x"]', '"b8": {"a": "b"}',
    '"evidence-3": "a repeated id"',
    '"b10" "missing colon"',
    '"b11": "x" "missing comma"',
    '"b12": "ok", }',                           # trailing comma
    r'"b13": "pair \ud83d\ude00 is fine"',      # escaped surrogate pair: valid
    r'"b14": "text ending in a backslash \\", "b15": "next"',
])
@pytest.mark.parametrize("chunk", [5, 97, 1 << 22])
def test_fast_and_careful_paths_agree(tmp_path, monkeypatch, bad, chunk):
    monkeypatch.setattr(ev, "CHUNK_BYTES", chunk)
    members = [f'"{i}": "{t}"' for i, t in GOOD[:20]] + [bad] + [f'"{i}": "{t}"' for i, t in GOOD[20:]]
    p = write(tmp_path, "e.json", "{" + ",\n ".join(members) + "}")
    fast, careful = _read_both(p, monkeypatch)
    assert fast == careful
    if chunk > 1000 and isinstance(fast, tuple):  # valid: only the last member (before '}') is careful
        assert _engaged(p) == len(fast[0]) - 1


def test_fast_path_takes_a_whole_buffer_of_ordinary_passages(tmp_path):
    data = {f"evidence-{i}": f"sentence {i}: \"quoted\", a\\b, caf\u00e9" for i in range(5000)}
    p = write(tmp_path, "e.json", json.dumps(data))
    assert _engaged(p) >= 4999 and read_passages(source_spec(p)) == (list(data), list(data.values()))


from hypothesis import given, settings, strategies as st  # noqa: E402

_TEXT = st.lists(st.characters(blacklist_categories=("Cs",)).map(str)
                 | st.sampled_from(['"', "\\", '",', '\\",', "\n", "\x01", "\U0001f600"]),
                 max_size=15).map("".join)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(_TEXT.filter(bool), _TEXT, min_size=1, max_size=25), st.booleans(),
       st.sampled_from([None, 1]), st.sampled_from([7, 64, 1 << 22]))
def test_any_valid_course_file_reads_the_same_both_ways(tmp_path_factory, data, ascii_only, indent, chunk):
    p = tmp_path_factory.mktemp("prop") / "e.json"
    p.write_text(json.dumps(data, ensure_ascii=ascii_only, indent=indent), encoding="utf-8")
    old = ev.CHUNK_BYTES
    ev.CHUNK_BYTES = chunk
    try:
        assert read_passages(source_spec(p)) == (list(data), list(data.values()))
    finally:
        ev.CHUNK_BYTES = old


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
