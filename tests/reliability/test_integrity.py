"""Integrity of a tag index on disk: a truncated, bit-flipped, missing or extra
shard -- or a damaged manifest -- is a one-line error naming the file, exit status 2, for
`factcheck verify` and for every command that loads an index; and `factcheck tag` with the
same arguments repairs a damaged shard to the original bytes."""

from __future__ import annotations

import json
import random
import shutil

import pytest

from helpers import DEMO, assert_one_line_error, in_process, run_cli
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
                        "passages/passages-00001/texts.npy", "checksum mismatch"),
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


@pytest.mark.parametrize("damage", SHARD_DAMAGE + ["bit-flipped manifest count"])
def test_export_tags_refuses_a_damaged_index(pristine, tmp_path, damage):
    index = damaged_copy(pristine, tmp_path, damage)
    dest = tmp_path / "tags.jsonl"
    proc = in_process("export-tags", index, "--out", dest)
    _, name, words = DAMAGE[damage]
    assert_one_line_error(proc, str(index / name), words)
    assert not dest.exists()


@pytest.mark.parametrize("damage", ["bit-flipped shard", "extra shard"])  # all four: verify, export-tags
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
    assert "OK (40 passages, 4 shards, 34 files verified)" in proc.stdout


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


def test_any_damaged_file_fails_loading_in_process(pristine, tmp_path):
    index = tmp_path / "index"
    shutil.copytree(pristine, index)
    for name in store.read_manifest(index).files():
        original = (index / name).read_bytes()
        flip_bit(index / name, at=len(original) - 1, bit=0)  # the very last byte
        with pytest.raises(IntegrityError, match=name):
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
