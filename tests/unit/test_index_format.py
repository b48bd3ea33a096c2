"""The tag index format: arrays only, read memory-mapped; rows to strings in bulk; passages
by id or row; an index of another format version refused in one line."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from helpers import DEMO, DEMO_PASSAGES, assert_one_line_error, in_process, needs_smaps, resident_kb
from factcheck.errors import IntegrityError
from factcheck.tagging import store
from factcheck.tagging.index import PackedStrings, TagIndex, TitledTexts
from factcheck.tagging.packing import pack_strings


@given(st.lists(st.text(max_size=12), max_size=40), st.integers(1, 5), st.lists(st.integers(-60, 60), max_size=30))
@settings(max_examples=80, deadline=None)
def test_take_equals_reading_row_by_row(strings, parts, asked):
    cuts = np.linspace(0, len(strings), parts + 1).astype(int)
    packed = PackedStrings([pack_strings(strings[a:b]) for a, b in zip(cuts[:-1], cuts[1:])])
    rows = [r for r in asked if -len(strings) <= r < len(strings)]
    assert packed.take(rows) == [strings[r] for r in rows]
    assert packed.take(np.array(rows, dtype=np.int32)) == [strings[r] for r in rows]
    assert packed[1:7:2] == strings[1:7:2]
    if len(rows) < len(asked):
        with pytest.raises(IndexError):
            packed.take(asked)
    titled = TitledTexts(packed, packed)
    assert titled.take(rows) == [store.indexed_text(strings[r], strings[r]) for r in rows]


@pytest.fixture(scope="module")
def titled_index(tmp_path_factory) -> TagIndex:
    from factcheck.tagging.job import build_index
    folder = tmp_path_factory.mktemp("titled")
    pages = [{"id": "Glacier", "text": "", "lines": "0\tA glacier is a body of ice.\n1\tIt moves slowly."},
             {"id": "Sea_level", "text": "", "lines": "0\tSea level rises as oceans warm."}]
    src = folder / "wiki-001.jsonl"
    src.write_text("".join(json.dumps(p) + "\n" for p in pages), "utf-8")
    return build_index(src, folder / "index", progress=False)


def test_title_body_and_text_take_a_passage_id_or_a_row(titled_index):
    """A newcomer called ``index.title("evidence-3")``: it took a row only."""
    index = titled_index
    assert list(index.ids) == ["Glacier:0", "Glacier:1", "Sea_level:0"]
    assert index.title("Glacier:1") == index.title(1) == "Glacier"
    assert index.body("Sea_level:0") == index.body(np.int64(2)) == "Sea level rises as oceans warm."
    assert index.text("Glacier:0") == index.text(0)
    with pytest.raises(KeyError, match="no passage 'Glacier:7'"):
        index.title("Glacier:7")
    with pytest.raises(TypeError, match="passage must be a passage id"):
        index.body(1.5)


def test_the_arrays_and_vocabularies_are_exposed(demo_index):
    index = TagIndex.load(demo_index)
    assert index.passage_idf.dtype == np.float64 and len(index.passage_idf) == len(index.vocabulary)
    assert len(index.tag_idf) == len(index.tag_vocabulary) and set(index.tag_vocabulary) <= set(index.vocabulary)
    assert index.passage_vectorizer.vocabulary_ == {t: j for j, t in enumerate(index.vocabulary)}
    np.testing.assert_array_equal(index.tag_vectorizer.idf_, index.tag_idf)
    assert index.ids.take([0, -1]) == [index.ids[0], index.ids[len(index) - 1]]


def test_an_index_holds_arrays_and_json_only(demo_index):
    """No pickle anywhere: every file is JSON or an ``.npy`` file numpy reads without pickle."""
    manifest = store.read_manifest(demo_index)
    for name in manifest.files():
        assert name.endswith(".npy")
        a = np.load(demo_index / name, mmap_mode="r", allow_pickle=False)
        assert not a.dtype.hasobject and a.ndim == 1
    shards = {p.relative_to(demo_index).as_posix() for p in demo_index.rglob("*")
              if p.is_file() and p.parts[len(demo_index.parts)] in ("passages", "tags", "vocabulary", "ids")}
    assert shards == set(manifest.files())


@pytest.mark.parametrize("found, says", [("factcheck-tag-index/3", "manifest of an older format"),
                                         ("factcheck-tag-index/2", "manifest of an older format"),
                                         ("factcheck-tag-index/1", "manifest of an older format"),
                                         ("factcheck-tag-index/5", "manifest of a newer format"),
                                         ("factcheck-tag-index/x", "not a factcheck-tag-index/4 manifest")])
def test_another_format_version_is_one_line(demo_index, tmp_path, found, says):
    index = tmp_path / "index"
    shutil.copytree(demo_index, index)
    data = json.loads((index / "manifest.json").read_text("utf-8"))
    data["format"] = found
    (index / "manifest.json").write_text(json.dumps(data), "utf-8")
    line = assert_one_line_error(in_process("verify", index), str(index / "manifest.json"), says)
    if "older" in says:
        assert f"`factcheck tag evidence.json --out {index} --force`" in line
    if "newer" in says:
        assert "upgrade factcheck" in line and "rebuild" not in line
    with pytest.raises(IntegrityError, match=says):
        TagIndex.load(index)


def test_tag_into_an_index_of_an_older_format_names_the_command_and_force_rebuilds_it(demo_index, tmp_path):
    index = tmp_path / "index"
    shutil.copytree(demo_index, index)
    data = json.loads((index / "manifest.json").read_text("utf-8"))
    data["format"] = "factcheck-tag-index/2"
    (index / "manifest.json").write_text(json.dumps(data), "utf-8")
    for name in ("passages/passages-00000.joblib", "tags/tags-00000.joblib", "models/tag_tfidf.joblib"):
        (index / name).parent.mkdir(exist_ok=True)
        (index / name).write_bytes(b"\x80\x04an old shard")
    assert_one_line_error(in_process("tag", DEMO / "evidence.json", "--out", index), "older format", "--force")
    assert in_process("tag", DEMO / "evidence.json", "--out", index, "--force").returncode == 0
    assert not list(index.rglob("*.joblib")) and not (index / "models").exists()
    assert in_process("verify", index).returncode == 0


@pytest.mark.parametrize("block", [4, 5, 6, 7])
def test_the_utf8_check_reads_blocks_that_cut_characters(block, monkeypatch):
    """Every open decodes the texts block by block: a character cut by a block's end is read
    with the next block, and a bad byte is reported where it is, whatever the block size."""
    monkeypatch.setattr(store, "_UTF8_BLOCK", block)
    texts = ["a\u00e9\u20ac\U0001f600b", "\u00e9\u00e9", "", "z\U0001f600"]
    data, offsets = pack_strings(texts)
    store._packed({"texts": data, "text_offsets": offsets}, "texts")  # valid: no error
    bad = data.copy()
    bad[3] = 0xFF  # in place of the euro sign's first byte
    with pytest.raises(store._Bad, match="near byte 3"):
        store._packed({"texts": bad, "text_offsets": offsets}, "texts")


@needs_smaps
def test_the_open_and_a_pass_over_the_texts_leave_none_of_their_pages_resident(demo_index):
    """The open's check reads every text through its map and BM25's counting pass reads them all
    again: each drops the pages it read from the process's resident set (kept, they were most of
    a command's peak), and a later read maps them again with the same bytes."""
    index = TagIndex.load(demo_index)
    shard = index._arrays.passages[0]
    mapped = [shard[name] for name in ("texts", "text_offsets", "ids", "id_offsets")]
    assert [resident_kb(a) for a in mapped] == [0] * len(mapped)
    batches = [t for _, texts in index.text_batches() for t in texts]
    assert resident_kb(shard["texts"]) == resident_kb(shard["text_offsets"]) == 0
    assert batches == [DEMO_PASSAGES[i] for i in index.ids.take(range(len(index)))]
    assert [index.text(row) for row in range(len(index))] == batches
    assert resident_kb(shard["texts"]) > 0  # read again through the map


@pytest.mark.parametrize("damage", ["none", "json", "key", "bytes", "extra", "link"])
def test_a_done_record_vouches_for_its_shard_only_while_it_reads_and_matches(tmp_path, damage):
    name = store.tags_name(0)
    files = store.write_arrays(tmp_path / name, "tags", {"indptr": [0, 1], "terms": [0], "weights": [1.0]})
    store.mark_done(tmp_path, name, "k", files)
    record = tmp_path / store.WORK_DIR / "done" / "tags__tags-00000.json"
    if damage == "json":
        record.write_text("{not json", "utf-8")
    elif damage == "key":
        store.mark_done(tmp_path, name, "another", files)
    elif damage == "bytes":
        np.save(tmp_path / name / "weights.npy", np.array([2.0]))
    elif damage == "extra":
        (tmp_path / name / "other.npy").write_bytes(b"x")
    elif damage == "link":  # the same record behind a link: refused as every record read
        record.rename(tmp_path / "elsewhere.json")
        record.symlink_to(tmp_path / "elsewhere.json")
    assert store.is_done(tmp_path, name, "k") == (files if damage == "none" else None)
    if damage in ("json", "link"):  # read without the check (this run wrote it): still one line
        with pytest.raises(IntegrityError, match=re.escape(str(record))):
            store.recorded_files(tmp_path, name)
    else:
        assert store.recorded_files(tmp_path, name) == files
