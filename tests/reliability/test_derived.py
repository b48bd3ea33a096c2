"""Derived caches inside an index directory: one owner (factcheck/tagging/derived.py).

Every cache (bm25/, rerank/, chunks/) is checked against its own record before use (its
key and file names; its files' sha256 by ``factcheck verify``, which refuses a damaged
one: a missing cache is fine), rebuilt when its loader refuses it, written atomically, and
skipped when the index is read-only.
"""

from __future__ import annotations

import gc
import json
import shutil

import numpy as np
import pytest

from factcheck.formats import files
from factcheck.tagging import derived
from factcheck.tagging.derived import CACHE_FOLDERS, RECORD, DerivedCache
from helpers import assert_one_line_error, in_process

KEY = {"plan_key": "k", "n": 2}


def _build(folder):
    np.save(folder / "values.npy", np.arange(3))


def _load(folder):
    return np.load(folder / "values.npy", allow_pickle=False)


def test_entry_is_built_recorded_and_reused(tmp_path):
    cache = DerivedCache(tmp_path)
    calls = []
    build = lambda folder: (calls.append(folder), _build(folder))  # noqa: E731
    assert cache.load_or_build("rerank/x", KEY, build, _load).tolist() == [0, 1, 2]
    record = json.loads((tmp_path / "rerank" / "x" / RECORD).read_text())
    assert record["key"] == KEY and set(record["files"]) == {"values.npy"}
    assert cache.load_or_build("rerank/x", KEY, build, _load).tolist() == [0, 1, 2]
    assert len(calls) == 1
    assert not [p for p in (tmp_path / "rerank").iterdir() if p.name.startswith(".tmp-")]
    cache.load_or_build("rerank/x", {**KEY, "n": 3}, build, _load)  # another key: rebuilt
    assert len(calls) == 2


def test_an_entry_is_used_without_hashing_its_files_and_verify_finds_an_edit(tmp_path, monkeypatch):
    cache = DerivedCache(tmp_path)
    cache.load_or_build("bm25/x", KEY, _build, _load)
    np.save(tmp_path / "bm25" / "x" / "values.npy", np.arange(3) * 7)  # same header and size
    monkeypatch.setattr(files, "sha256_file", lambda path: pytest.fail(f"{path} hashed before use"))
    assert cache.load_or_build("bm25/x", KEY, _build, _load).tolist() == [0, 7, 14]
    monkeypatch.undo()
    assert [s.state for s in cache.check()] == ["damaged"]


def test_a_record_listing_bare_sha256_as_older_caches_did_is_still_used_and_verified(tmp_path):
    cache = DerivedCache(tmp_path)
    cache.load_or_build("bm25/x", KEY, _build, _load)
    path = tmp_path / "bm25" / "x" / RECORD
    record = json.loads(path.read_text())
    assert set(record["files"]["values.npy"]) == {"sha256"}  # the entry every record's files have
    path.write_text(json.dumps({**record, "files": {n: e["sha256"] for n, e in record["files"].items()}}))
    calls = []
    assert cache.load_or_build("bm25/x", KEY, calls.append, _load).tolist() == [0, 1, 2]
    assert not calls and [s.state for s in cache.check()] == ["ok"]
    np.save(tmp_path / "bm25" / "x" / "values.npy", np.arange(3) * 7)
    assert [s.state for s in cache.check()] == ["damaged"]


@pytest.mark.parametrize("damage", ["extra", "missing", "record", "header"])
def test_damaged_entry_is_reported_then_rebuilt(tmp_path, damage):
    cache = DerivedCache(tmp_path)
    cache.load_or_build("bm25/x", KEY, _build, _load)
    entry = tmp_path / "bm25" / "x"
    if damage == "header":  # the loader refuses it
        (entry / "values.npy").write_bytes(b"\x93NUMPY broken")
    elif damage == "extra":
        (entry / "other.npy").write_bytes(b"x")
    elif damage == "missing":
        (entry / "values.npy").unlink()
    else:
        (entry / RECORD).write_text("{not json")
    assert [s.state for s in cache.check()] == ["unrecorded" if damage == "record" else "damaged"]
    assert cache.load_or_build("bm25/x", KEY, _build, _load).tolist() == [0, 1, 2]
    assert [s.state for s in cache.check()] == ["ok"]


def test_read_only_index_builds_privately_and_saves_nothing(tmp_path, monkeypatch):
    def refuse(*a, **k):
        raise PermissionError(13, "Read-only file system")
    monkeypatch.setattr(derived.tempfile, "mkdtemp", refuse)
    seen = []

    def load(folder):
        seen.append(folder)
        return _load(folder)

    values = DerivedCache(tmp_path / "index").load_or_build("rerank/x", KEY, _build, load)
    assert values.tolist() == [0, 1, 2]
    assert not (tmp_path / "index" / "rerank" / "x").exists()
    assert seen[0].is_dir()
    del values
    gc.collect()
    assert not seen[0].exists()  # the private folder lives as long as the object


def test_nested_cache_is_not_part_of_its_parents_record(tmp_path):
    cache = DerivedCache(tmp_path)

    def build(folder):
        _build(folder)
        (folder / "index").mkdir()

    cache.load_or_build("chunks/w1-o0", KEY, build, _load)
    DerivedCache(tmp_path / "chunks" / "w1-o0" / "index").load_or_build("bm25/y", KEY, _build, _load)
    assert [s.state for s in cache.check()] == ["ok"]


def test_verify_reports_a_damaged_cache_and_accepts_a_missing_one(demo_index, tmp_path):
    index = tmp_path / "index"
    shutil.copytree(demo_index, index, ignore=shutil.ignore_patterns(*CACHE_FOLDERS))
    assert in_process("verify", index).stderr == ""
    DerivedCache(index).load_or_build("rerank/x", KEY, _build, _load)
    np.save(index / "rerank" / "x" / "values.npy", np.arange(4))
    assert_one_line_error(in_process("verify", index), str(index / "rerank" / "x"), "does not match its checksums")


def test_chunk_index_is_a_derived_cache(demo_index, tmp_path, monkeypatch):
    from factcheck.retrieval.bm25 import BM25Retriever
    from factcheck.retrieval.chunking import ChunkedRetriever
    from factcheck.tagging.index import TagIndex
    from factcheck.tagging.job import TagJob

    index_dir = tmp_path / "index"
    shutil.copytree(demo_index, index_dir, ignore=shutil.ignore_patterns(*CACHE_FOLDERS))
    index = TagIndex.load(index_dir)
    first = ChunkedRetriever(BM25Retriever(), window=8, overlap=2).fit(index).rank(["sea ice"], 5)[0]
    assert [s.state for s in DerivedCache(index_dir).check()] == ["ok"]

    def no_tagging(*a, **k):
        raise AssertionError("the chunk index was tagged again")
    monkeypatch.setattr(TagJob, "run", no_tagging)
    again = ChunkedRetriever(BM25Retriever(), window=8, overlap=2).fit(index).rank(["sea ice"], 5)[0]
    assert again.rows == first.rows and again.scores == first.scores


@pytest.mark.parametrize("link", ["bm25", "bm25/counts"])
def test_a_linked_cache_folder_is_refused_and_nothing_behind_it_is_touched(demo_index, tmp_path, link):
    from helpers import assert_one_line_error
    index = tmp_path / "index"
    shutil.copytree(demo_index, index, ignore=shutil.ignore_patterns(*CACHE_FOLDERS))
    victim = tmp_path / "victim"
    (victim / "counts").mkdir(parents=True)
    (victim / "counts" / "thesis.tex").write_text("x")
    (index / link).parent.mkdir(parents=True, exist_ok=True)
    (index / link).symlink_to(victim if link == "bm25" else victim / "counts")
    before = sorted(p.relative_to(victim).as_posix() for p in victim.rglob("*"))
    assert_one_line_error(in_process("search", "--index", index, "sea level"), str(index / link), "symbolic link")
    assert_one_line_error(in_process("verify", index), str(index / link), "symbolic link")
    assert sorted(p.relative_to(victim).as_posix() for p in victim.rglob("*")) == before
    assert (victim / "counts" / "thesis.tex").read_text() == "x"


@pytest.mark.parametrize("kind", CACHE_FOLDERS)
def test_every_cache_folder_refuses_a_link_before_building(tmp_path, kind):
    from factcheck.errors import InputError
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    index = tmp_path / "index"
    index.mkdir()
    (index / kind).symlink_to(elsewhere)
    with pytest.raises(InputError, match="symbolic link"):
        DerivedCache(index).load_or_build(f"{kind}/x", KEY, _build, _load)
    assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize("array, value", [("indices", 99), ("indptr", 5)])
def test_a_term_matrix_of_bad_structure_is_refused_on_load(tmp_path, array, value):
    import scipy.sparse as sp
    from factcheck.scoring.matrix import TermMatrix
    TermMatrix.from_units(sp.csr_matrix(np.eye(3))).save(tmp_path)
    values = np.load(tmp_path / f"{array}.npy").copy()
    values[1] = value  # a unit past the last, or an indptr that decreases
    np.save(tmp_path / f"{array}.npy", values)
    with pytest.raises(ValueError, match="inconsistent term matrix arrays"):
        TermMatrix.load(tmp_path)


def test_a_copy_another_process_put_in_place_meanwhile_is_replaced_whole(tmp_path):
    cache = DerivedCache(tmp_path)

    def build(folder):  # the other process finishes the same entry while this one builds
        _build(folder)
        DerivedCache(tmp_path).load_or_build("bm25/x", KEY, lambda f: np.save(f / "values.npy", np.arange(5)), _load)

    assert cache.load_or_build("bm25/x", KEY, build, _load).tolist() == [0, 1, 2]
    assert [s.state for s in cache.check()] == ["ok"]
    assert not [p for p in (tmp_path / "bm25").iterdir() if p.name.startswith(".tmp-")]


def test_an_entry_replaced_by_another_processs_equal_copy_while_read_is_read_again(tmp_path, monkeypatch):
    # Two processes fill one cold cache: the second's copy replaces the first's (old folder
    # removed, new renamed in) while the first reads it, so a file goes missing in between.
    from factcheck.errors import InputError
    from factcheck.tagging import derived
    monkeypatch.setattr(derived, "SETTLE_WAITS", (0.0, 0.0))
    calls = []

    def build(folder):
        (folder / "x.txt").write_text("1")

    def load(folder):
        calls.append(folder)
        if len(calls) == 1:
            raise InputError(folder / "x.txt", None, "no such file")
        return (folder / "x.txt").read_text()

    assert derived.DerivedCache(tmp_path).load_or_build("bm25/entry", {"k": 1}, build, load) == "1"
    assert len(calls) == 2
    calls.clear()

    def gone(folder):
        calls.append(folder)
        raise InputError(folder / "x.txt", None, "no such file")
    # still missing after every wait: the reader's own error, not a hang
    with pytest.raises(InputError):
        derived.DerivedCache(tmp_path / "other").load_or_build("bm25/entry", {"k": 1}, build, gone)
    assert len(calls) >= 3
