"""sha256 of bytes and files, the one implementation: formats and text both record files by
their digest and may not import each other, so it sits in the lowest layer."""

from __future__ import annotations

import hashlib
from pathlib import Path

__all__ = ["sha256_bytes", "sha256_file", "sha256_fileobj"]


def sha256_bytes(data: bytes) -> str:
    """The hex sha256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    """The hex sha256 of the file at ``path``."""
    with open(path, "rb") as fh:
        return sha256_fileobj(fh)


def sha256_fileobj(fh) -> str:
    """sha256 of an open binary file from its start (the descriptor is what is hashed)."""
    fh.seek(0)
    return hashlib.file_digest(fh, "sha256").hexdigest()
