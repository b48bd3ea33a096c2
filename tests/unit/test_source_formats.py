"""Knowledge sources beyond the course's: FEVER wiki pages, Climate-FEVER's sentences, BEIR
corpora; detection, titles in the index, and the one-line errors."""

import gzip
import json

import pytest

from helpers import DEMO
from factcheck.errors import InputError
from factcheck.formats.evidence import detect_format, read_passages, source_spec
from factcheck.tagging.index import TagIndex
from factcheck.tagging.job import TagJob, build_index

DATA = DEMO.parent.parent / "tests" / "data"
WIKI = DATA / "fever" / "wiki-pages"
CLIMATE = DATA / "climate-fever" / "climate-fever.jsonl"


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def page(pid, *lines):
    return json.dumps({"id": pid, "text": " ".join(lines),
                       "lines": "\n".join(f"{i}\t{s}" for i, s in enumerate(lines))}, ensure_ascii=False) + "\n"


def test_fever_wiki_pages_one_passage_per_non_empty_line(tmp_path):
    p = write(tmp_path, "wiki-001.jsonl", '{"id": "", "text": "", "lines": ""}\n'
              + json.dumps({"id": "Savages_-LRB-2012_film-RRB-", "text": "...",
                            "lines": "0\tSavages is a film.\tcrime film\tfilm\n1\t\n2\tIt stars Taylor Kitsch."
                                     "\tTaylor Kitsch\n3\t   "}) + "\n" + page("Ice", "Ice is cold."))
    assert detect_format(p) == "fever"
    ids, texts, titles = read_passages(source_spec(p), titles=True)
    assert ids == ["Savages_-LRB-2012_film-RRB-:0", "Savages_-LRB-2012_film-RRB-:2", "Ice:0"]
    assert texts == ["Savages is a film.", "It stars Taylor Kitsch.", "Ice is cold."]  # links are not text
    assert titles == ["Savages (2012 film)", "Savages (2012 film)", "Ice"]


def test_fever_wiki_pages_directory_and_gzip(tmp_path):
    spec = source_spec(WIKI)
    assert spec.format == "fever" and [f.name for f in spec.files()] == ["wiki-001.jsonl", "wiki-002.jsonl"]
    ids, texts = read_passages(spec)
    assert len(ids) == 43 and ids[0] == "Antarctic_ice_sheet:0" and "Antarctic_ice_sheet:2" not in ids
    gz = tmp_path / "wiki.jsonl.gz"
    gz.write_bytes(gzip.compress(b"".join(f.read_bytes() for f in spec.files())))
    assert read_passages(source_spec(gz)) == (ids, texts)


@pytest.mark.parametrize("content, words", [
    (page("P", "a") + page("P", "b"), "line 2: duplicate passage id 'P:0' (first seen at line 1)"),
    ('{"id": "P", "lines": "zero\\tsentence"}\n', "line 1: page 'P': a line must start with its number"),
    ('{"id": "P", "lines": "0 no tab"}\n', "a line must start with its number and a tab"),
    ('{"id": "P", "text": "x"}\n', "missing 'lines'"),
    ('{"id": 3, "lines": "0\\tx"}\n', "'id' must be a string, got a number"),
    ('{"id": "", "lines": "0\\tx"}\n', "empty page 'id'"),
    ('{"id": "P", "lines": "0\\tx", "lines": "1\\ty"}\n', "duplicate key 'lines'"),
    ('{"id": "P", "lines": "0\\tbad \\ud800"}\n', "lone surrogate"),
    (page("P", "a") + "not json\n", "line 2, column 1: invalid JSON"),
])
def test_fever_wiki_errors_name_the_place(tmp_path, content, words):
    p = write(tmp_path, "wiki.jsonl", content)
    with pytest.raises(InputError) as err:
        read_passages(source_spec(p, format="fever"))
    assert words in err.value.one_line() and str(p) in err.value.one_line()


def test_fever_reader_reads_non_ascii_pages_plain_and_gzipped(tmp_path):
    p = write(tmp_path, "w.jsonl", "".join(page(f"Pa\u00e9ge_{i}", *(f"s\u00e9ntence {j} \u2014 {i}" for j in range(4)))
                                         for i in range(30)))
    whole = read_passages(source_spec(p), titles=True)
    gz = tmp_path / "w.jsonl.gz"
    gz.write_bytes(gzip.compress(p.read_bytes()))
    assert read_passages(gz, titles=True) == whole
    assert len(whole[0]) == 120 and whole[2][0] == "Pa\u00e9ge 0"


def test_beir_corpus_keeps_titles_and_indexes_them(tmp_path):
    p = write(tmp_path, "corpus.jsonl", '{"_id": "d1", "title": "Sea level rise", "text": "Oceans rise."}\n'
                                        '{"_id": 7, "title": "", "text": "Ice melts."}\n'
                                        '{"_id": "d3", "text": "No title field."}\n')
    spec = source_spec(p)
    assert spec.format == "beir" and spec.index_titles
    assert read_passages(spec, titles=True) == (["d1", "7", "d3"], ["Oceans rise.", "Ice melts.", "No title field."],
                                                ["Sea level rise", "", ""])
    index = build_index(p, tmp_path / "idx", progress=False)
    assert [index.title(r) for r in range(3)] == ["Sea level rise", None, None]
    assert index.body(0) == "Oceans rise." and index.text(0) == "Sea level rise\nOceans rise."
    assert "level" in index.tags(0)  # the title is indexed
    plain = build_index(p, tmp_path / "idx-plain", index_titles=False, progress=False)
    assert plain.text(0) == "Oceans rise." and "level" not in plain.tags(0) and plain.title(0) == "Sea level rise"
    # BEIR read as generic JSONL, as before, when the fields are named
    assert read_passages(source_spec(p, id_column="_id", text_column="text")) == (
        ["d1", "7", "d3"], ["Oceans rise.", "Ice melts.", "No title field."])


def test_climate_fever_sentences_once_each(tmp_path):
    spec = source_spec(CLIMATE)
    assert spec.format == "climate-fever"
    ids, texts, titles = read_passages(spec, titles=True)
    assert len(ids) == len(set(ids)) == 20
    assert ids[0] == "Sea level rise:3" and titles[0] == "Sea level rise"
    bad = write(tmp_path, "cf.jsonl", json.dumps({"claim_id": "1", "claim": "x", "evidences": [
        {"evidence_id": "A:1", "evidence": "one"}, {"evidence_id": "A:1", "evidence": "other"}]}) + "\n")
    with pytest.raises(InputError, match=r"line 1 \(claim '1'\): evidence 'A:1' has another text"):
        read_passages(source_spec(bad))


def test_titles_in_the_index_and_their_absence(tmp_path):
    idx = tmp_path / "fever-idx"
    TagJob(progress=False).run(source_spec(WIKI), idx)
    index = TagIndex.load(idx)
    assert index.has_titles and not index.index_titles
    row = index.row_of["El_Niño:2"]
    assert index.title(row) == "El Niño" and index.text(row) == index.body(row)
    assert index.manifest.data["input"]["format"] == "fever"
    course = TagIndex.load(build_index(DEMO / "evidence.json", tmp_path / "course", progress=False).root)
    assert not course.has_titles and course.title(0) is None
    assert set(course.manifest.data["input"]) == {"name", "format", "sha256", "bytes"}


def test_csv_and_jsonl_with_a_title_column(tmp_path):
    c = write(tmp_path, "papers.csv", 'index,title,abstract\n2501.1,"Line clustering",We cluster lines.\n')
    spec = source_spec(c, id_column="index", text_column="abstract", title_column="title")
    assert read_passages(spec, titles=True) == (["2501.1"], ["We cluster lines."], ["Line clustering"])
    assert not spec.index_titles  # a self-retrieval test queries with titles: not indexed by default
    assert spec.describe()["title_column"] == "title"
    j = write(tmp_path, "p.jsonl", '{"id": "a", "text": "x"}\n')
    with pytest.raises(InputError) as err:
        read_passages(source_spec(j, title_column="heading"))
    assert "line 1: missing 'heading'" in err.value.one_line()


def test_source_options_are_checked_and_errors_name_parameters(tmp_path):
    with pytest.raises(InputError) as err:
        source_spec(DEMO / "evidence.json", id_column="pid")
    assert err.value.param == "id_column" and "JSONL and CSV sources only" in err.value.one_line()
    with pytest.raises(InputError) as err:
        source_spec(DEMO / "evidence.json", format="xml")
    assert err.value.param == "format"
    with pytest.raises(InputError) as err:
        source_spec(DEMO / "evidence.json", index_titles=True)
    assert err.value.param == "index_titles" and "has no titles" in err.value.one_line()
    c = write(tmp_path, "a.csv", "key,body\n1,x\n")
    with pytest.raises(InputError) as err:
        read_passages(source_spec(c))
    assert err.value.param == "id_column" and "--" not in err.value.one_line()


def test_a_wrong_format_is_an_error_not_garbage(tmp_path):
    with pytest.raises(InputError, match="missing 'lines'"):
        read_passages(source_spec(DATA / "fever" / "train.jsonl", format="fever"))
    with pytest.raises(InputError, match="missing '_id'"):
        read_passages(source_spec(WIKI / "wiki-001.jsonl", format="beir"))
    with pytest.raises(InputError, match="missing 'claim_id'"):
        read_passages(source_spec(WIKI / "wiki-001.jsonl", format="climate-fever"))
    first_is_fever = write(tmp_path, "mixed.jsonl", page("P", "a") + '{"id": "Q", "text": "no lines"}\n')
    with pytest.raises(InputError, match="line 2: missing 'lines'"):
        read_passages(source_spec(first_is_fever))
