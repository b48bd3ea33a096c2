"""Integrity of a tag index on disk: a truncated, bit-flipped, missing or extra
shard -- or a damaged manifest -- is a one-line error naming the file, exit status 2, for
`factcheck verify`; every command that loads an index refuses the same damage but a bit
flipped inside an array's values (found by the structural checks of every open; only
`verify` reads every byte, docs/trust-model.md); and `factcheck tag` with the same
arguments repairs a damaged shard to the original bytes."""

from __future__ import annotations

import json
import os
import random
import shutil

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from helpers import DEMO, assert_one_line_error, in_process, reseal_index, run_cli
from factcheck.errors import IntegrityError
from factcheck.formats.evidence import source_spec
from factcheck.tagging import store
from factcheck.tagging.index import TagIndex
from factcheck.tagging.job import TagJob

SHARD = 10  # the 40 demo passages in 4 shards


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    out = tmp_path_factory.mktemp("integrity") / "index"
    TagJob(progress=False, jobs=1, shard_size=SHARD).run(source_spec(DEMO / "evidence.json"), out)
    return out


def flip_bit(path, at=None, bit=2):
    data = bytearray(path.read_bytes())
    at = len(data) // 2 if at is None else at
    data[at] ^= 1 << bit
    path.write_bytes(bytes(data))


def truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def add_extra(index, name):
    shutil.copytree(index / "tags" / "tags-00000", index / name)


# damage -> (file it must name, words the message must contain)
DAMAGE = {
    "truncated shard": (lambda ix: truncate(ix / "passages/passages-00001/texts.npy"),
                        "passages/passages-00001/texts.npy", "truncated"),
    "bit-flipped shard": (lambda ix: flip_bit(ix / "tags/tags-00002/weights.npy"),
                          "tags/tags-00002/weights.npy", "checksum mismatch"),
    "missing shard": (lambda ix: shutil.rmtree(ix / "tags/tags-00003"),
                      "tags/tags-00003/indptr.npy", "missing"),
    "extra shard": (lambda ix: add_extra(ix, "tags/tags-00004"),
                    "tags/tags-00004/indptr.npy", "extra"),
    "extra array": (lambda ix: shutil.copyfile(ix / "tags/tags-00000/terms.npy", ix / "tags/tags-00000/more.npy"),
                    "tags/tags-00000/more.npy", "extra"),
    "bit-flipped vocabulary": (lambda ix: flip_bit(ix / "vocabulary/tag_idf.npy"),
                               "vocabulary/tag_idf.npy", "checksum mismatch"),
    "truncated manifest": (lambda ix: truncate(ix / "manifest.json"), "manifest.json", "corrupt manifest"),
    "bit-flipped manifest count": (
        lambda ix: (ix / "manifest.json").write_text(
            (ix / "manifest.json").read_text().replace('"passages": 40', '"passages": 41'), "utf-8"),
        "manifest.json", "manifest checksum mismatch"),
}
SHARD_DAMAGE = ["truncated shard", "bit-flipped shard", "missing shard", "extra shard", "extra array"]
STRUCTURAL_DAMAGE = [d for d in SHARD_DAMAGE if d != "bit-flipped shard"]  # found on every open


def damaged_copy(pristine, tmp_path, damage):
    index = tmp_path / "index"
    shutil.copytree(pristine, index)
    DAMAGE[damage][0](index)
    return index


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_verify_names_the_damaged_file(pristine, tmp_path, damage):
    index = damaged_copy(pristine, tmp_path, damage)
    proc = in_process("verify", index)
    _, name, words = DAMAGE[damage]
    line = assert_one_line_error(proc, str(index / name), words)
    assert line.startswith("factcheck verify: error: ")
    assert proc.stdout == ""


@pytest.mark.parametrize("damage", STRUCTURAL_DAMAGE + ["bit-flipped manifest count"])
def test_export_tags_refuses_a_damaged_index(pristine, tmp_path, damage):
    index = damaged_copy(pristine, tmp_path, damage)
    dest = tmp_path / "tags.jsonl"
    proc = in_process("export-tags", index, "--out", dest)
    _, name, words = DAMAGE[damage]
    assert_one_line_error(proc, str(index / name), words)
    assert not dest.exists()


@pytest.mark.parametrize("damage", ["truncated shard", "extra shard"])  # all of them: verify, export-tags
def test_retrieve_refuses_a_damaged_index(pristine, tmp_path, damage):
    index = damaged_copy(pristine, tmp_path, damage)
    out = tmp_path / "pred.json"
    proc = in_process("retrieve", "--index", index, "--claims", DEMO / "dev-claims.json", "--out", out,
                      "--method", "tags")
    _, name, words = DAMAGE[damage]
    assert_one_line_error(proc, str(index / name), words)
    assert not out.exists() and not (tmp_path / "pred.explain.json").exists()


def test_pristine_index_verifies(pristine):
    proc = in_process("verify", pristine)
    assert proc.returncode == 0, proc.stderr
    assert "OK (40 passages, 4 shards, 36 files verified)" in proc.stdout


def test_single_bit_flips_of_the_manifest_are_caught(pristine, tmp_path):
    index = tmp_path / "index"
    shutil.copytree(pristine, index)
    manifest = index / "manifest.json"
    original = manifest.read_bytes()
    rng = random.Random(0)
    # 300 random bytes (opening a file costs ~1 ms here; before the manifest had its own
    # checksum about a fifth of all single-bit flips went unnoticed or crashed with a KeyError).
    for at in sorted(rng.sample(range(len(original)), 300)):
        damaged = bytearray(original)
        damaged[at] ^= 1 << rng.randrange(8)
        manifest.write_bytes(bytes(damaged))
        with pytest.raises(IntegrityError, match="manifest.json"):
            store.read_manifest(index)  # caught by the manifest alone, before any shard is read


def test_any_damaged_file_fails_verified_loading_in_process(pristine, tmp_path):
    index = tmp_path / "index"
    shutil.copytree(pristine, index)
    for name in store.read_manifest(index).files():
        original = (index / name).read_bytes()
        flip_bit(index / name, at=len(original) - 1, bit=0)  # the very last byte
        with pytest.raises(IntegrityError, match=name):
            TagIndex.load(index, verify=True)
        (index / name).write_bytes(original)
    TagIndex.load(index, verify=True)


def test_any_file_cut_or_grown_by_one_byte_fails_every_load(pristine, tmp_path):
    """No checksum is read on an ordinary open: the header and the file's size refuse it."""
    index = tmp_path / "index"
    shutil.copytree(pristine, index)
    for name in store.read_manifest(index).files():
        original = (index / name).read_bytes()
        for damaged in (original[:-1], original + b"\0"):
            (index / name).write_bytes(damaged)
            with pytest.raises(IntegrityError, match=f"{name}: truncated or damaged"):
                TagIndex.load(index)
        (index / name).write_bytes(original)
    TagIndex.load(index)


@pytest.mark.parametrize("damage", SHARD_DAMAGE)
def test_rerunning_tag_repairs_a_damaged_shard_to_the_original_bytes(pristine, tmp_path, damage):
    index = damaged_copy(pristine, tmp_path, damage)
    TagJob(progress=False, jobs=1, shard_size=SHARD).run(source_spec(DEMO / "evidence.json"), index)
    store.verify_index(index)
    expected = {p.relative_to(pristine) for p in pristine.rglob("*") if p.is_file()}
    assert {p.relative_to(index) for p in index.rglob("*") if p.is_file()} == expected
    for name in expected:
        assert (index / name).read_bytes() == (pristine / name).read_bytes(), name


@pytest.mark.slow
def test_a_damaged_manifest_is_refused_by_tag_without_force_and_rebuilt_with_it(pristine, tmp_path):
    index = damaged_copy(pristine, tmp_path, "bit-flipped manifest count")
    proc = run_cli("tag", DEMO / "evidence.json", "--out", index, "--shard-size", SHARD, "--jobs", 1)
    assert_one_line_error(proc, str(index / "manifest.json"), "--force")
    TagJob(progress=False, jobs=1, shard_size=SHARD).run(source_spec(DEMO / "evidence.json"), index, force=True)
    assert (index / "manifest.json").read_bytes() == (pristine / "manifest.json").read_bytes()
    assert json.loads((index / "manifest.json").read_text())["passages"] == 40


# ------------------------------------------------------------------ what the index trusts
# docs/trust-model.md: every open checks the structure of every file (no link, headers and
# sizes, unique ids); `verify` also reads every byte; what is checked is what is mapped.

def _copy(pristine, tmp_path):
    index = tmp_path / "index"
    shutil.copytree(pristine, index)
    return index


def _shard_ids(index, shard):
    from factcheck.tagging.packing import unpack_strings
    folder = index / store.passages_name(shard)
    return unpack_strings(np.load(folder / "ids.npy"), np.load(folder / "id_offsets.npy"))


def _write_ids(index, shard, ids, rehash=True):
    """Write a shard's ids; with ``rehash``, the id lookup's sorted hashes as the tagging job
    computes them (as whoever crafted the ids could), else the old ones stay (stale)."""
    from factcheck.tagging.packing import pack_strings
    folder = index / store.passages_name(shard)
    buf, off = pack_strings(ids)
    np.save(folder / "ids.npy", buf)
    np.save(folder / "id_offsets.npy", off)
    if rehash:
        _rehash(index)


def _rehash(index):
    shards = sorted((index / store.PASSAGES_DIR).iterdir())
    hashes, rows = store.sorted_id_hashes([{name: np.load(folder / f"{name}.npy") for name in ("ids", "id_offsets")}
                                           for folder in shards])
    np.save(index / store.IDS_DIR / "hashes.npy", hashes)
    np.save(index / store.IDS_DIR / "rows.npy", rows)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(source=st.tuples(st.integers(0, 3), st.integers(0, SHARD - 1)),
       dest=st.tuples(st.integers(0, 3), st.integers(0, SHARD - 1)))
def test_an_id_listed_twice_is_refused_by_every_open_and_by_verify(pristine, tmp_path_factory, source, dest):
    """One passage's id given to another (any two rows, in one shard or two), the manifest
    resealed: a lookup would find one passage and never the other."""
    assume(source != dest)
    index = _copy(pristine, tmp_path_factory.mktemp("dup"))
    pid = _shard_ids(index, source[0])[source[1]]
    ids = _shard_ids(index, dest[0])
    ids[dest[1]] = pid
    _write_ids(index, dest[0], ids)
    reseal_index(index, shapes=True)
    files = {index / store.passages_name(s) / "ids.npy" for s in (source[0], dest[0])}
    for proc in (in_process("verify", index), in_process("export-tags", index, "--out", index.parent / "t.jsonl")):
        line = assert_one_line_error(proc, f"passage id {pid!r} is listed twice", *map(str, files))
    assert not (index.parent / "t.jsonl").exists()
    with pytest.raises(IntegrityError, match="listed twice"):
        TagIndex.load(index)


def test_ids_edited_under_their_stored_hashes_are_refused_by_verify_and_never_give_a_wrong_row(pristine, tmp_path):
    """The id lookup's hashes are written at tag time: an ordinary open checks their structure
    and the ids of equal hashes, not that they are the ids' (a sort of every id); ``verify``
    computes them again. Until then a stale hash is a miss, never another passage."""
    index = _copy(pristine, tmp_path)
    ids = _shard_ids(index, 1)
    pid, lost = ids[0], ids[3]
    ids[3] = pid  # row 13 takes row 10's id: two rows with one id, the stored hashes stale
    _write_ids(index, 1, ids, rehash=False)
    reseal_index(index, shapes=True)
    line = assert_one_line_error(in_process("verify", index), f"passage id {pid!r} is listed twice")
    assert str(index / store.passages_name(1) / "ids.npy") in line
    opened = TagIndex.load(index)
    assert opened.rows_of([pid, lost]).tolist() == [10, -1]
    assert opened.ids[opened.row_of[pid]] == pid and lost not in opened.row_of
    ids[3] = "another-id"  # no repeat, only a stale hash: verify names the ids' hashes
    _write_ids(index, 1, ids, rehash=False)
    reseal_index(index, shapes=True)
    assert_one_line_error(in_process("verify", index), str(index / store.IDS_DIR / "hashes.npy"),
                          "not those of the passage ids")


@pytest.mark.parametrize("name, content, says", [
    ("hashes.npy", lambda h, r: (h[::-1].copy(), r), "hashes is not sorted"),
    ("rows.npy", lambda h, r: (h, np.where(r == 0, 1, r)), "rows does not list every row once"),
    ("rows.npy", lambda h, r: (h, r + 1), "rows holds rows outside 0..39")])
def test_the_ids_stored_hashes_are_checked_by_every_open(pristine, tmp_path, name, content, says):
    index = _copy(pristine, tmp_path)
    h, r = np.load(index / store.IDS_DIR / "hashes.npy"), np.load(index / store.IDS_DIR / "rows.npy")
    h, r = content(h, r)
    np.save(index / store.IDS_DIR / "hashes.npy", h)
    np.save(index / store.IDS_DIR / "rows.npy", r)
    reseal_index(index)
    assert_one_line_error(in_process("search", "--index", index, "sea level"), str(index / store.IDS_DIR / name), says)


def test_shard_ids_copied_into_another_shard_are_refused(pristine, tmp_path):
    """A shard's ids and offsets copied over the next shard's, resealed: `search` used to show
    the second shard's texts under the first shard's ids."""
    index = _copy(pristine, tmp_path)
    for name in ("ids.npy", "id_offsets.npy"):
        shutil.copyfile(index / store.passages_name(0) / name, index / store.passages_name(1) / name)
    _rehash(index)  # the id lookup's hashes rewritten to match (stale ones: verify's test above)
    reseal_index(index, shapes=True)
    proc = in_process("search", "--index", index, "sea level")
    assert_one_line_error(proc, "passage id 'evidence-", "is listed twice", str(index / store.passages_name(0) / "ids.npy"),
                          str(index / store.passages_name(1) / "ids.npy"))
    assert proc.stdout == ""


def test_ids_whose_hashes_collide_are_told_apart_and_a_repeat_among_them_found(pristine, tmp_path, monkeypatch):
    """Every id hashed alike (as crafted ids could be): no false alarm, and a repeat that is
    not next to its twin among the colliding rows is still found."""
    from factcheck.tagging import index as index_module
    for module in (store, index_module):
        monkeypatch.setattr(module, "hash_packed", lambda buf, off: np.zeros(len(off) - 1, dtype=np.uint64))
    index = _copy(pristine, tmp_path)
    _rehash(index)  # as the tagging job would have stored them
    reseal_index(index)
    assert TagIndex.load(index).row_of["evidence-8"] == 7
    ids = _shard_ids(index, 0)
    ids[2] = ids[0]  # rows 0, 1, 2: a, b, a
    _write_ids(index, 0, ids)
    reseal_index(index, shapes=True)
    with pytest.raises(IntegrityError, match=f"the passage id {ids[0]!r} is listed twice"):
        TagIndex.load(index)


def _link_outside(index, rel, outside):
    """Move ``rel`` out of the index and leave a symbolic link to it in its place."""
    target = outside / rel.replace("/", "_")
    shutil.move(str(index / rel), target)
    (index / rel).symlink_to(target, target_is_directory=target.is_dir())


@pytest.mark.parametrize("rel", ["passages/passages-00001/texts.npy", "tags/tags-00002", "vocabulary",
                                 "manifest.json"])
def test_a_symbolic_link_inside_the_index_is_refused_by_verify_and_every_open(pristine, tmp_path, rel):
    """The same bytes, reached through a link to a place outside the index: refused, as the
    writers refuse it (an index holds its own files)."""
    index = _copy(pristine, tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    _link_outside(index, rel, outside)
    for proc in (in_process("verify", index), in_process("export-tags", index, "--out", tmp_path / "t.jsonl"),
                 in_process("search", "--index", index, "sea level")):
        assert_one_line_error(proc, "is a symbolic link; refusing to read through it", str(index / rel.split("/")[0]))
        assert proc.stdout == ""
    with pytest.raises(IntegrityError, match="symbolic link"):
        TagIndex.load(index)


def _index_entries(index):
    """Every file and folder of an index but the work area."""
    return sorted(p.relative_to(index).as_posix() for p in index.rglob("*")
                  if not p.relative_to(index).as_posix().startswith("work"))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_entry_of_the_index_as_a_link_to_its_own_copy_is_refused_by_load(pristine, tmp_path_factory, data):
    base = tmp_path_factory.mktemp("link")
    index = _copy(pristine, base)
    rel = data.draw(st.sampled_from(_index_entries(index)))
    _link_outside(index, rel, base)
    with pytest.raises(IntegrityError, match="is a symbolic link; refusing to read through it"):
        TagIndex.load(index)


def test_a_symbolic_link_to_a_vector_shard_is_refused(pristine, tmp_path):
    from factcheck.tagging.vectors import load_vectors
    index = _copy(pristine, tmp_path)
    (index / "vectors").mkdir()
    np.save(tmp_path / "elsewhere.npy", np.ones((40, 4), dtype=np.float16))
    (index / "vectors" / "manifest.json").symlink_to(tmp_path / "elsewhere.npy")
    with pytest.raises(IntegrityError, match="vectors/manifest.json: is a symbolic link"):
        load_vectors(index)
    assert_one_line_error(in_process("verify", index), "vectors/manifest.json", "symbolic link")


def test_a_file_swapped_after_its_checksum_is_never_read(pristine, tmp_path, monkeypatch):
    """The moment a checksum is computed, the file is replaced by one of the same length (as a
    race between check and use could): the index must still read what it checked."""
    import hashlib
    index = _copy(pristine, tmp_path)
    target = index / store.passages_name(1) / "texts.npy"
    original = TagIndex.load(index).texts[SHARD:2 * SHARD]
    data = bytearray(target.read_bytes())
    header = len(data) - store.read_manifest(index).data["files"][f"{store.passages_name(1)}/texts.npy"]["shape"][0]
    data[header:] = b"x" * (len(data) - header)  # valid UTF-8, every offset still on a character
    tampered = tmp_path / "tampered.npy"
    tampered.write_bytes(bytes(data))
    digest, n_files = hashlib.file_digest, len(store.read_manifest(index).files())
    calls = []

    def digest_then_swap(fh, name):
        out = digest(fh, name)
        calls.append(1)
        if len(calls) == n_files:  # every file checked: now swap one
            os.replace(tampered, target)
        return out

    monkeypatch.setattr(hashlib, "file_digest", digest_then_swap)
    index_read = TagIndex.load(index, verify=True)
    assert len(calls) == n_files and not tampered.exists()
    assert index_read.texts[SHARD:2 * SHARD] == original


def test_a_file_edited_or_cut_after_opening_is_refused_before_it_is_read(pristine, tmp_path):
    index_dir = _copy(pristine, tmp_path)
    index = TagIndex.load(index_dir)
    index.check_unchanged()
    texts = index_dir / store.passages_name(2) / "texts.npy"
    st = texts.stat()
    with open(texts, "r+b") as fh:  # in place: the same file, its mapping sees the new bytes
        fh.seek(-1, os.SEEK_END)
        fh.write(b"x")
    os.utime(texts, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # a timestamp one second on
    with pytest.raises(IntegrityError, match=f"{texts}: was changed in place after it was opened"):
        index.check_unchanged()
    os.truncate(texts, 128)  # reading past 128 bytes of the mapping would now be a SIGBUS
    with pytest.raises(IntegrityError, match=f"{texts}: was cut to 128 bytes"):
        index.check_unchanged()


def test_verify_refuses_an_array_of_the_wrong_size_without_reading_it(pristine, tmp_path, monkeypatch):
    """A 4 GiB sparse file behind a valid header: its size says it is wrong; no byte is hashed."""
    import hashlib
    index = _copy(pristine, tmp_path)
    big = index / store.passages_name(3) / "texts.npy"
    os.truncate(big, 4 << 30)
    hashed = []
    digest = hashlib.file_digest
    monkeypatch.setattr(hashlib, "file_digest", lambda fh, name: hashed.append(fh) or digest(fh, name))
    assert_one_line_error(in_process("verify", index), str(big), "truncated or damaged",
                          f"the file holds {4 << 30:,}")
    assert hashed == []


def _served_copy(demo_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(demo_run, run)
    return run


def test_serve_refuses_a_file_edited_in_place_after_start_up(demo_run, tmp_path, caplog):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient
    from factcheck.serve.app import create_app
    run = _served_copy(demo_run, tmp_path)
    client = TestClient(create_app(run, warm_up=False))
    claim = {"claim": "Sea levels are rising.", "method": "tags"}
    assert client.get("/api/check", params=claim).status_code == 200
    texts = run / "index" / store.passages_name(0) / "texts.npy"
    st = texts.stat()
    with open(texts, "r+b") as fh:
        fh.seek(-4, os.SEEK_END)
        fh.write(b"FAKE")
    os.utime(texts, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    with caplog.at_level("ERROR", logger="factcheck"):
        r = client.get("/api/check", params=claim)
        page = client.get("/", params=claim)
    assert r.status_code == 500 and "changed on disk after the server opened it" in r.json()["detail"]
    assert page.status_code == 500 and "restart the server" in page.text and "FAKE" not in page.text
    logged = [rec.getMessage() for rec in caplog.records]
    assert logged and all(m.startswith(f"{texts}: was changed in place") and "\n" not in m for m in logged)


@pytest.mark.slow
def test_serve_refuses_a_file_cut_short_under_it_in_one_line_not_a_signal(demo_run, tmp_path):
    """Reading the mapping of a file cut short is a SIGBUS: the server used to die of it, silent."""
    from helpers import run_python
    run = _served_copy(demo_run, tmp_path)
    proc = run_python(f"""
        import os, warnings
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient
        from factcheck.serve.app import create_app
        client = TestClient(create_app({str(run)!r}, warm_up=False))
        claim = {{"claim": "Sea levels are rising.", "method": "tags"}}
        assert client.get("/api/check", params=claim).status_code == 200
        for shard in sorted(os.listdir({str(run / "index" / "passages")!r})):
            os.truncate(os.path.join({str(run / "index" / "passages")!r}, shard, "texts.npy"), 0)
        r = client.get("/api/check", params=claim)
        print(r.status_code, r.json()["detail"])
    """)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert proc.stdout.startswith("500 a file of the index changed on disk"), proc.stdout
