"""A full disk (or any OS error while writing) is one line naming the path and the system's
message, exit 2, in every command; it leaves no partial file, and the rerun gives the
bytes an uninterrupted run gives.

Two ways to fail a write without filling the machine's disk: the ``FACTCHECK_ENOSPC_AT``
hook raises ``OSError(ENOSPC)`` at a named write (in any process: the driver, a loky or
Dask worker), and ``RLIMIT_FSIZE`` makes the kernel itself refuse writes past a size
(``EFBIG``) in the real write path. Before: a 44-49-line OSError traceback, exit 1.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from harness.crashpoints import fault_env
from helpers import DEMO, ROOT, assert_one_line_error, run_cli

pytestmark = pytest.mark.slow  # every test runs a command in a child process (faults are injected there)
FULL = "No space left on device (ENOSPC)"


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _no_temporaries(folder: Path) -> None:
    left = [p for p in folder.rglob(".tmp-*")] if folder.exists() else []
    assert left == [], left


@pytest.fixture(scope="module")
def reference_index(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ref") / "index"
    proc = run_cli("tag", DEMO / "evidence.json", "--out", out, "--jobs", "1", "--shard-size", "10")
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.mark.parametrize("point, jobs", [("mid-write:passages-00001", "1"),
                                         ("mid-write:counts-00002", "2"),   # in a loky worker
                                         ("mid-write:tags-00003", "2"),
                                         ("mid-write:manifest.json", "1")])
def test_tag_on_a_full_disk_is_one_line_and_the_rerun_is_identical(tmp_path, reference_index, point, jobs):
    out = tmp_path / "index"
    proc = run_cli("tag", DEMO / "evidence.json", "--out", out, "--jobs", jobs, "--shard-size", "10",
                   env=fault_env(point))
    assert_one_line_error(proc, str(out / point.split(":")[1].replace("counts-", "work/counts-")
                                     .replace("passages-", "passages/passages-").replace("tags-", "tags/tags-")), FULL)
    _no_temporaries(out)
    assert not (out / "manifest.json").exists()
    assert run_cli("tag", DEMO / "evidence.json", "--out", out, "--jobs", jobs, "--shard-size", "10").returncode == 0
    assert _files(out) == _files(reference_index)


def test_tag_on_a_full_disk_with_the_dask_backend_is_one_line(tmp_path, reference_index):
    out = tmp_path / "index"
    proc = run_cli("tag", DEMO / "evidence.json", "--out", out, "--jobs", "2", "--shard-size", "10",
                   "--backend", "dask", env=fault_env("mid-write:counts-00001"), timeout=300)
    assert_one_line_error(proc, "work/counts-00001", FULL)
    _no_temporaries(out)
    assert not (out / "manifest.json").exists()


@pytest.mark.parametrize("point", ["mid-write:classifier.skops", "mid-write:confusion.png"])
def test_run_on_a_full_disk_is_one_line(tmp_path, point):
    """skops's dump and matplotlib's savefig (the demo's one warning line aside)."""
    out = tmp_path / "run"
    proc = run_cli("run", "--data-dir", DEMO, "--out", out, "--quiet", "--jobs", "1", env=fault_env(point))
    proc.stderr = "".join(l for l in proc.stderr.splitlines(True) if not l.startswith("factcheck run: warning:"))
    assert_one_line_error(proc, point.split(":")[1], FULL)
    _no_temporaries(out)
    assert not list(out.rglob(point.split(":")[1]))
    assert (out / "run-in-progress.json").is_file()  # and the directory is refused until a run completes


def test_retrieve_and_export_tags_on_a_full_disk_are_one_line(tmp_path, reference_index):
    dest = tmp_path / "p.json"
    proc = run_cli("retrieve", "--index", reference_index, "--claims", DEMO / "dev-claims.json", "--out", dest,
                   env=fault_env("mid-write:p.json"))
    assert_one_line_error(proc, str(dest), FULL)
    assert not dest.exists() and not (tmp_path / "p.explain.json").exists()
    dest = tmp_path / "t.jsonl"
    proc = run_cli("export-tags", reference_index, "--out", dest, env=fault_env("mid-write:t.jsonl"))
    assert_one_line_error(proc, str(dest), FULL)
    assert not dest.exists()
    _no_temporaries(tmp_path)


def test_a_file_size_limit_the_kernel_enforces_is_one_line_too(tmp_path, reference_index):
    """A real write failure (EFBIG from the kernel, not a hook): export-tags past 4 KiB."""
    dest = tmp_path / "t.jsonl"

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
    proc = subprocess.run([sys.executable, "-m", "factcheck", "export-tags", str(reference_index), "--out", str(dest)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, preexec_fn=limit,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert_one_line_error(proc, str(dest), "File too large (EFBIG)")
    assert not dest.exists()
    _no_temporaries(tmp_path)


def _tag_under_a_file_size_limit(tmp_path, limit: int, *args):
    """``tag`` of 4,000 made-up passages with ``RLIMIT_FSIZE``: the kernel refuses writes past
    ``limit`` bytes in the command and in its loky workers, as a full disk refuses them."""
    import json
    import random
    rng = random.Random(0)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9))) for _ in range(3000)]
    source = tmp_path / "e.json"
    source.write_text(json.dumps({f"evidence-{i}": " ".join(rng.choice(words) for _ in range(25))
                                  for i in range(4000)}), "utf-8")

    def apply():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return subprocess.run([sys.executable, "-m", "factcheck", "tag", str(source), "--out", str(tmp_path / "index"),
                           *args], cwd=ROOT, capture_output=True, text=True, timeout=300, preexec_fn=apply,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_an_array_the_kernel_refuses_to_write_is_one_line_naming_it(tmp_path):
    """A real short write of an .npy array (numpy's tofile: a passages shard's 70 kB of texts),
    with --jobs 2. Before: "69601 requested and 59872 written", no file named, no errno."""
    proc = _tag_under_a_file_size_limit(tmp_path, 60_000, "--jobs", "2", "--shard-size", "400")
    line = assert_one_line_error(proc, f"{tmp_path / 'index' / 'passages' / 'passages-00000'}: File too large (EFBIG)")
    assert "requested and" not in line
    _no_temporaries(tmp_path / "index")
