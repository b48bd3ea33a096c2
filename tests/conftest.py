"""Shared fixtures: the demo data, the real course data (when present), CLI runner."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "data" / "demo"
SHARED = Path(os.environ.get("FACTCHECK_SHARED_DATA", ROOT.parent / "shared" / "data"))


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


def assert_one_line_error(proc, *must_contain):
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for needle in must_contain:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


@pytest.fixture(scope="session")
def proxy_corpus() -> dict:
    with gzip.open(shared_file("evidence.json.gz"), "rt", encoding="utf-8") as fh:
        return json.load(fh)


@pytest.fixture(scope="session")
def real_sample_20k(tmp_path_factory, proxy_corpus) -> Path:
    """A real 20K-passage sample (every 15th passage of the proxy corpus), course format."""
    items = list(proxy_corpus.items())[::15][:20000]
    path = tmp_path_factory.mktemp("sample") / "sample-20k.json"
    path.write_text(json.dumps(dict(items), ensure_ascii=False), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def demo_index(tmp_path_factory) -> Path:
    from factcheck.formats.evidence import source_spec
    from factcheck.tagging.job import TagJob
    out = tmp_path_factory.mktemp("demo") / "index"
    TagJob(progress=False).run(source_spec(DEMO / "evidence.json"), out)
    return out
