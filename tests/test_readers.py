import gzip
import json

import pytest

from factcheck.errors import InputError
from factcheck.formats import evidence as ev
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
    with pytest.raises(InputError, match=r"needs columns 'id' and 'text'; found 'key', 'body'"):
        read_passages(source_spec(csv))


def test_truncated_gzip_is_an_input_error(tmp_path):
    blob = gzip.compress(json.dumps({f"e{i}": "text " * 50 for i in range(2000)}).encode())
    p = tmp_path / "cut.json.gz"
    p.write_bytes(blob[: len(blob) // 2])
    with pytest.raises(InputError, match="cut.json.gz"):
        read_passages(source_spec(p))


def test_unknown_extension_needs_format(tmp_path):
    p = write(tmp_path, "e.txt", "x")
    with pytest.raises(InputError, match="--format"):
        source_spec(p)
