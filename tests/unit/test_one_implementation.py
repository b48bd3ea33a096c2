"""Concepts written once: each check reads the package's source for a second copy."""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "factcheck"


def _sources():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(PACKAGE).as_posix(), path.read_text("utf-8")


def _holding(pattern: str) -> list[str]:
    return [name for name, text in _sources() if re.search(pattern, text)]


def test_files_are_hashed_in_one_place():
    assert _holding(r"hashlib\.file_digest") == ["hashing.py"]
    assert _holding(r"(?m)^def (_?sha256|file_sha256|sha256_(file|fileobj|bytes))\(") == ["hashing.py"]
