"""TagIndex.save of an in-memory index: a forced replacement keeps the old index whole until
the new one is complete (a stop part-way, or the user's file beside it, lost it), and a file
at the path is refused before any work, in one error naming it."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import factcheck
from factcheck.errors import InputError
from factcheck.tagging import store
from factcheck.tagging.index import TagIndex

OLD = {"e1": "sea level rise", "e2": "arctic ice melts"}
NEW = {"e1": "other text", "e2": "arctic ice"}


def _build(passages):
    return factcheck.build_index(passages, progress=False)


def test_a_forced_save_stopped_part_way_leaves_the_old_index_whole(tmp_path, monkeypatch):
    _build(OLD).save(tmp_path / "a")
    before = {p.relative_to(tmp_path).as_posix(): p.read_bytes() for p in (tmp_path / "a").rglob("*") if p.is_file()}

    def stop(*args, **kwargs):
        raise KeyboardInterrupt  # Ctrl-C while the new index is written
    monkeypatch.setattr(store, "write_manifest", stop)
    with pytest.raises(KeyboardInterrupt):
        _build(NEW).save(tmp_path / "a", force=True)
    after = {p.relative_to(tmp_path).as_posix(): p.read_bytes() for p in (tmp_path / "a").rglob("*") if p.is_file()}
    assert after == before
    assert dict(zip(TagIndex.load(tmp_path / "a").ids, OLD)) == {k: k for k in OLD}


def test_a_forced_save_beside_the_users_file_replaces_the_index_and_keeps_the_file(tmp_path):
    _build(OLD).save(tmp_path / "a")
    (tmp_path / "a" / "notes.txt").write_text("mine")
    _build(NEW).save(tmp_path / "a", force=True)  # was: the old index deleted, then refused
    assert (tmp_path / "a" / "notes.txt").read_text() == "mine"
    index = TagIndex.load(tmp_path / "a")
    assert [index.text(i) for i in index.ids] == list(NEW.values())
    assert not (tmp_path / "a" / ".tmp-replacement").exists()


def test_a_file_at_the_path_is_refused_before_any_work(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match=r"file: is a file, expected a directory"):  # was a NotADirectoryError
        _build(OLD).save(tmp_path / "file")
    assert (tmp_path / "file").read_text() == "x"


WORDS = st.sampled_from(["sea", "level", "rise", "ice", "arctic", "warming", "co2", "ocean", "the", "heat"])


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.lists(WORDS, min_size=1, max_size=6).map(" ".join), min_size=1, max_size=6))
def test_an_in_memory_build_saves_the_bytes_tag_writes_for_the_same_corpus(tmp_path_factory, texts):
    import json
    from factcheck.formats.evidence import source_spec
    from factcheck.tagging.job import TagJob
    base = tmp_path_factory.mktemp("same")
    corpus = {f"evidence-{i}": t for i, t in enumerate(texts)}
    (base / "evidence.json").write_text(json.dumps(corpus), "utf-8")
    try:
        TagJob(progress=False).run(source_spec(base / "evidence.json"), base / "disk")
    except InputError as exc:  # e.g. nothing to tag: refused in memory too, for the same reason
        with pytest.raises(InputError) as memory_refusal:
            _build(corpus)
        assert memory_refusal.value.message == exc.message
        return
    _build(corpus).save(base / "memory")
    disk = TagIndex.load(base / "disk")
    memory = TagIndex.load(base / "memory")
    assert list(disk.ids) == list(memory.ids)
    for name in disk.manifest.data["files"]:
        assert (base / "disk" / name).read_bytes() == (base / "memory" / name).read_bytes(), name
