"""Determinism across --jobs, shard sizes and the Dask backend: the single
cross-cutting test. Same input and parameters -> the same `export-tags` bytes whatever
the jobs, backend or shard size; and for equal shard sizes every file the manifest lists,
and the manifest itself, byte for byte. (The Dask backend's own tests are in
tests/scaleout/test_dask_backend.py.)"""

from __future__ import annotations

import json

import pytest

from helpers import run_cli
from factcheck.formats.evidence import source_spec
from factcheck.tagging import store
from factcheck.tagging.job import TagJob

N_PASSAGES = 5000


def files_of(index):
    return {p.relative_to(index).as_posix() for p in index.rglob("*") if p.is_file()}


@pytest.mark.slow
def test_same_bytes_for_any_jobs_backend_and_shard_size(real_sample_20k, tmp_path):
    items = list(json.loads(real_sample_20k.read_text("utf-8")).items())[:N_PASSAGES]
    src = tmp_path / "sample.json"
    src.write_text(json.dumps(dict(items), ensure_ascii=False), encoding="utf-8")

    runs = {  # name -> (shard size, jobs in-process, or the command's arguments)
        "loky-1job-shard1000": (1000, 1),
        "loky-2jobs-shard1000": (1000, 2),
        "dask-2workers-shard1000": (1000, ("--backend", "dask", "--jobs", "2")),  # a 2-worker LocalCluster
        "loky-1job-shard1700": (1700, 1),
    }
    exports = {}
    for name, (shard, how) in runs.items():
        out = tmp_path / name
        if isinstance(how, int):
            TagJob(progress=False, jobs=how, shard_size=shard).run(source_spec(src), out)
        else:
            proc = run_cli("tag", src, "--out", out, "--shard-size", shard, *how, timeout=300)
            assert proc.returncode == 0, proc.stderr
        dest = tmp_path / f"{name}.jsonl"
        proc = run_cli("export-tags", out, "--out", dest)
        assert proc.returncode == 0, proc.stderr
        exports[name] = dest.read_bytes()

    lines = exports["loky-1job-shard1000"].decode("utf-8").splitlines()
    assert [json.loads(l)["id"] for l in lines] == [pid for pid, _ in items]
    for name, data in exports.items():
        assert data == exports["loky-1job-shard1000"], f"export-tags of {name} differs"

    base = tmp_path / "loky-1job-shard1000"
    listed = ["manifest.json", *store.read_manifest(base).files()]
    # the manifest, 5 shards of passages and tags, the vocabularies, the id lookup (hashes and rows)
    assert len(listed) == 1 + (4 + 3) * 5 + 6 + 2
    for name in ("loky-2jobs-shard1000", "dask-2workers-shard1000"):
        other = tmp_path / name
        assert files_of(other) == files_of(base), name  # nothing more, nothing less
        for f in listed:
            assert (other / f).read_bytes() == (base / f).read_bytes(), f"{name}: {f} differs"
    # A different shard size changes the shard files, but not the vocabulary or the tags.
    m_base = store.read_manifest(base).data
    m_1700 = store.read_manifest(tmp_path / "loky-1job-shard1700").data
    assert len(m_1700["shards"]) == 3
    for key in ("passages", "empty_tags", "vocabulary", "tag_vocabulary"):
        assert m_1700[key] == m_base[key], key
    vocabulary = {name: entry for name, entry in m_base["files"].items() if name.startswith("vocabulary/")}
    assert vocabulary == {name: entry for name, entry in m_1700["files"].items() if name.startswith("vocabulary/")}
