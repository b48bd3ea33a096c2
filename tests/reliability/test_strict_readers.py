"""Readers: a passage length cap checked while streaming, and duplicate CSV header names.

Before: one 64/128/256 MB passage took 8.5/24/71 s and 0.5-1.9 GB (the course reader
re-joined its growing buffer at every chunk, the line reader re-split its growing line);
a .json.gz inflating to one huge string ran past 300 s; a CSV header ``id,text,text``
kept the first ``text`` silently.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from factcheck.formats.records import MAX_PASSAGE_CHARS
from helpers import assert_one_line_error, in_process, run_cli


def _tag(path: Path, tmp_path: Path, *extra, out="out"):
    return in_process("tag", path, "--out", tmp_path / out, "--jobs", "1", *extra)


@pytest.mark.parametrize("name", ["e.json", "e.jsonl", "e.csv"])
def test_a_passage_over_the_cap_is_refused_naming_the_option(tmp_path, name):
    path = tmp_path / name
    long, ok = "glacier " * 30, "ice melts"  # 240 characters
    if name == "e.json":
        path.write_text(json.dumps({"a": ok, "b": long, "c": ok}), "utf-8")
    elif name == "e.jsonl":
        path.write_text("".join(json.dumps({"id": k, "text": v}) + "\n" for k, v in (("a", ok), ("b", long))), "utf-8")
    else:
        path.write_text(f"id,text\na,{ok}\nb,{long}\n", "utf-8")
    line = assert_one_line_error(_tag(path, tmp_path, "--max-passage-chars", "200"), str(path),
                                 "--max-passage-chars 200")
    assert "passage 2" in line or "line 3" in line or "line 2" in line, line
    assert not (tmp_path / "out" / "manifest.json").exists()
    assert _tag(path, tmp_path, "--max-passage-chars", "240").returncode == 0  # at the cap: accepted


def test_the_cap_counts_characters_not_json_escapes(tmp_path):
    """200 characters written as \\uXXXX escapes (1,200 characters of JSON) are 200 characters."""
    path = tmp_path / "e.json"
    path.write_text('{"a": "' + "\\u00e9" * 200 + '", "b": "ice"}', "utf-8")
    assert _tag(path, tmp_path, "--max-passage-chars", "200").returncode == 0
    assert_one_line_error(_tag(path, tmp_path, "--max-passage-chars", "199", out="other"), "--max-passage-chars 199")


def test_escaped_text_across_many_chunks_is_measured_in_characters(tmp_path, monkeypatch):
    """100,000 characters as 600,000 characters of \\u escapes, read 4 KiB at a time: within a
    cap of 100,000 (the streaming bound counts each escape's worth), over one of 99,999."""
    from factcheck.formats import course
    monkeypatch.setattr(course, "CHUNK_BYTES", 4096)
    path = tmp_path / "e.json"
    path.write_text('{"a": "ice", "b": "' + "\\u00e9" * 100_000 + '", "c": "sea"}', "utf-8")
    assert _tag(path, tmp_path, "--max-passage-chars", "100000").returncode == 0
    assert_one_line_error(_tag(path, tmp_path, "--max-passage-chars", "99999", out="other"), "passage 2")


@pytest.mark.slow
def test_a_huge_course_passage_is_refused_while_reading(tmp_path):
    """64 MB in one string: refused after ~8 MB of it (twice the default cap, plus a chunk)."""
    path = tmp_path / "e.json"
    with open(path, "w", encoding="utf-8") as fh:
        fh.write('{"a": "ice", "b": "')
        for _ in range(64):
            fh.write("x" * (1 << 20))
        fh.write('"}')
    proc = run_cli("tag", path, "--out", tmp_path / "out", "--jobs", "1", timeout=120)
    assert_one_line_error(proc, str(path), f"--max-passage-chars {MAX_PASSAGE_CHARS}", "passage 2", "still unfinished")


@pytest.mark.slow
@pytest.mark.parametrize("suffix", [".json.gz", ".jsonl.gz", ".csv.gz"])
def test_a_small_gzip_file_inflating_to_one_huge_passage_is_refused_in_seconds(tmp_path, suffix):
    """512 MB of one string in ~0.5 MB of gzip. Before, the reading alone ran for minutes
    (a timeout of 60 s here fails the old code)."""
    path = tmp_path / f"e{suffix}"
    head, tail = {".json.gz": ('{"a": "', '"}'), ".jsonl.gz": ('{"id": "a", "text": "', '"}\n'),
                  ".csv.gz": ('id,text\na,"', '"\n')}[suffix]
    block = "x" * (1 << 24)
    with gzip.open(path, "wt", encoding="utf-8", compresslevel=1) as fh:
        fh.write(head)
        for _ in range(32):
            fh.write(block)
        fh.write(tail)
    assert path.stat().st_size < 4 << 20
    proc = run_cli("tag", path, "--out", tmp_path / "out", "--jobs", "1", timeout=60)
    assert_one_line_error(proc, str(path), f"--max-passage-chars {MAX_PASSAGE_CHARS}")


def test_a_csv_header_naming_a_column_twice_is_refused(tmp_path):
    path = tmp_path / "e.csv"
    path.write_text("id,text,text\na,first,second\n", "utf-8")
    assert_one_line_error(_tag(path, tmp_path), str(path), "line 1 (header)", "names the column 'text' twice")
    path.write_text("id,id,text\na,b,ice\n", "utf-8")
    assert_one_line_error(_tag(path, tmp_path), str(path), "names the column 'id' twice")


def test_the_cap_is_a_library_keyword_too(tmp_path):
    from factcheck.errors import InputError
    from factcheck.formats.evidence import read_passages, source_spec
    path = tmp_path / "e.jsonl"
    path.write_text(json.dumps({"id": "a", "text": "x" * 50}) + "\n", "utf-8")
    assert read_passages(source_spec(path, max_passage_chars=50)) == (["a"], ["x" * 50])
    with pytest.raises(InputError, match="max_passage_chars 49: line 1"):
        read_passages(source_spec(path, max_passage_chars=49))
    with pytest.raises(InputError, match="max_passage_chars"):
        source_spec(path, max_passage_chars=0)


def _wiki_page(page: str, sentences: list[str]) -> str:
    lines = "\n".join(f"{i}\t{s}" for i, s in enumerate(sentences))
    return json.dumps({"id": page, "text": " ".join(sentences), "lines": lines}) + "\n"


@pytest.mark.parametrize("fmt", ["fever", "beir", "climate-fever", "jsonl-title", "csv-title"])
def test_every_format_and_the_titles_are_under_the_cap(tmp_path, fmt):
    """The cap is one reader option for every format: a FEVER sentence, a BEIR text, a
    Climate-FEVER evidence sentence, a JSONL/CSV title over it is refused, naming it."""
    from factcheck.errors import InputError
    from factcheck.formats.evidence import read_passages, source_spec
    long = "x" * 60
    options = {}
    if fmt == "fever":
        path = tmp_path / "wiki-001.jsonl"
        path.write_text(_wiki_page("Ice", ["Ice is cold.", long]), "utf-8")
    elif fmt == "beir":
        path = tmp_path / "corpus.jsonl"
        path.write_text(json.dumps({"_id": "d1", "title": "Ice", "text": long}) + "\n", "utf-8")
    elif fmt == "climate-fever":
        path = tmp_path / "climate-fever.jsonl"
        ev = {"evidence_id": "Ice:1", "evidence": long, "article": "Ice"}
        path.write_text(json.dumps({"claim_id": "1", "claim": "c", "claim_label": "SUPPORTS",
                                    "evidences": [ev]}) + "\n", "utf-8")
    elif fmt == "jsonl-title":
        path = tmp_path / "e.jsonl"
        path.write_text(json.dumps({"id": "a", "text": "ice", "title": long}) + "\n", "utf-8")
        options = {"title_column": "title"}
    else:
        path = tmp_path / "e.csv"
        path.write_text(f"id,text,title\na,ice,{long}\n", "utf-8")
        options = {"title_column": "title"}
    assert len(read_passages(source_spec(path, max_passage_chars=60, **options))[0]) >= 1
    with pytest.raises(InputError, match="max_passage_chars 59: ") as err:
        read_passages(source_spec(path, max_passage_chars=59, **options))
    line = err.value.one_line()
    assert str(path) in line and ("60 characters" in line or "longer than this limit" in line), line


def test_a_huge_fever_page_is_refused_while_it_streams(tmp_path):
    """A wiki-pages line is read in pieces and refused past the streaming bound, before it is
    held whole or decoded (the bound: 12 times the cap plus 64K characters)."""
    from factcheck.errors import InputError
    from factcheck.formats.evidence import read_passages, source_spec
    path = tmp_path / "wiki-001.jsonl"
    path.write_text(_wiki_page("Ice", ["Ice is cold.", "x" * 400_000]), "utf-8")
    with pytest.raises(InputError, match="line 1 is longer than 77,536 characters"):
        read_passages(source_spec(path, max_passage_chars=1000))


def test_a_claims_csv_naming_a_column_twice_is_refused(tmp_path):
    """The duplicate-header rule lives in the one CSV primitive: claims files have it too."""
    from factcheck.errors import InputError
    from factcheck.formats.claims import read_claims
    path = tmp_path / "claims.csv"
    path.write_text("id,claim,claim\nc1,Ice melts.,Ice grows.\n", "utf-8")
    with pytest.raises(InputError, match=r"line 1 \(header\): names the column 'claim' twice"):
        read_claims(path)


def _limited(gib: float):
    import resource
    return lambda: resource.setrlimit(resource.RLIMIT_AS, (int(gib * (1 << 30)),) * 2)


@pytest.mark.slow
@pytest.mark.parametrize("what", ["claims", "source"])
def test_a_gzip_bomb_line_is_refused_within_bounded_memory_in_any_file_read_by_lines(tmp_path, what, demo_index):
    """512 MB in one JSON line of a claims file (line 2), or of a knowledge source (line 1,
    read by format detection). Before: read whole (about 1.5 GB; under a 1.5 GiB address
    space limit, 'out of memory'); now refused after a bounded read, naming the line."""
    import subprocess
    import sys

    from helpers import ROOT
    path = tmp_path / ("claims.jsonl.gz" if what == "claims" else "e.jsonl.gz")
    key = "claim" if what == "claims" else "text"
    with gzip.open(path, "wt", encoding="utf-8", compresslevel=1) as fh:
        fh.write(json.dumps({"id": "c1", key: "Seas rise."}) + "\n" if what == "claims" else "")
        fh.write(f'{{"id": "c2", "{key}": "')
        for _ in range(32):
            fh.write("x" * (1 << 24))
        fh.write('"}\n')
    args = (["retrieve", "--index", demo_index, "--claims", path, "--out", tmp_path / "p.json", "--method", "bm25"]
            if what == "claims" else ["tag", path, "--out", tmp_path / "out", "--jobs", "1"])
    proc = subprocess.run([sys.executable, "-m", "factcheck", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, preexec_fn=_limited(1.5))
    line = assert_one_line_error(proc, str(path), "line 2" if what == "claims" else "line 1", "longer than")
    assert "out of memory" not in line


def test_a_course_claims_file_read_whole_has_a_bound(tmp_path, monkeypatch):
    from factcheck.errors import InputError
    from factcheck.formats import course
    from factcheck.formats.claims import read_claims
    path = tmp_path / "claims.json"
    path.write_text(json.dumps({f"c{i}": {"claim_text": "Seas rise."} for i in range(50)}, indent=1), "utf-8")
    monkeypatch.setattr(course, "MAX_WHOLE_BYTES", 1000)
    with pytest.raises(InputError, match="holds more than 1,000 bytes"):
        read_claims(path)
