"""Fixtures shared by every test folder: the real course data (when present) and the demo index.
Helpers (paths, CLI runners, checks) are in ``helpers.py``."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from helpers import DEMO, shared_file


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
