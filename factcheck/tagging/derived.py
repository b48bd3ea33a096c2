"""Caches derived from a tag index, kept inside its directory (``bm25/``, ``rerank/``, ...):
one folder per entry with its files and its record ``factcheck-key.json`` (``{"key", "files"}``,
:func:`~factcheck.formats.files.write_record`). An entry is used only when its record names the
caller's key and lists exactly the files the folder holds, and its loader (``.npy`` files through
:func:`~factcheck.formats.npy.open_npy`: header, type and size) accepts them, otherwise it is
rebuilt (docs/decisions.md, "Caches inside an index"). As for the index's own arrays, the
files' sha256 are computed on ``factcheck verify`` (:meth:`DerivedCache.check`), not before
every use (docs/trust-model.md). A symbolic link anywhere in a cache folder is refused before
the entry is read, written or deleted: following it would read, write or delete outside the index.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
import uuid
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, TypeVar

from factcheck.errors import InputError
from factcheck.formats.files import (TMP_PREFIX, atomic_dir, check_no_symlinks, holds_files, keyed_record,
                                     listed_files, sha256_file, write_record)

__all__ = ["CACHE_FOLDERS", "RECORD", "CacheStatus", "DerivedCache"]

log = logging.getLogger(__name__)

RECORD = "factcheck-key.json"
# The passage vectors' layout (store.VECTORS_DIR; named here: store imports this module).
VECTORS_DIR, VECTORS_MANIFEST = "vectors", "manifest.json"
#: The folders of an index directory that hold derived caches (one entry per subfolder).
CACHE_FOLDERS = ("bm25", "rerank", "chunks", "tfidf", "tag-rule")
# Seconds between reads of an entry another process is replacing with its equal copy.
SETTLE_WAITS = (0.05, 0.1, 0.2, 0.4, 0.8)

T = TypeVar("T")


@dataclass(frozen=True)
class CacheStatus:
    """One cache entry as :meth:`DerivedCache.check` found it: ``ok``, ``damaged`` or ``unrecorded``."""

    path: Path
    state: str


class DerivedCache:
    """The derived caches inside the index directory ``index_dir``."""

    def __init__(self, index_dir):
        self.index_dir = Path(index_dir)

    def load_or_build(self, name: str, key, build: Callable[[Path], None], load: Callable[[Path], T]) -> T:
        """The entry ``name`` (``<kind>/<entry>``) for ``key``: loaded when its record matches,
        else ``build(folder)`` writes it into an empty folder and ``load(folder)`` reads it back
        (from a private folder when the index directory is read-only)."""
        entry = self.index_dir / name
        check_no_symlinks(self.index_dir, (name.split("/")[0],))
        if self._matches(name, key):
            try:
                return load(entry)
            except Exception as exc:  # the record matched but the reader refused: rebuild
                log.warning("%s: unreadable cache (%s); rebuilding it", entry, type(exc).__name__)
        step = "open"
        try:
            with atomic_dir(entry, replace=True) as folder:
                step = "build"
                build(folder)
                write_record(folder / RECORD, {"key": key, "files": {
                    f: {"sha256": sha256_file(folder / f)} for f in listed_files(folder, _own)}})
                step = "rename"
        except (OSError, InputError) as exc:
            if step == "build":
                raise
            # Not writable (read-only index): do without the cache. Or another process renamed
            # its copy into place meanwhile: use it if it is for this key.
            log.info("%s: cache not saved (%s)", entry, getattr(exc, "strerror", None) or exc)
            if step == "rename" and self._matches(name, key):
                return _load_settled(entry, load)
            return _private(build, load)
        return _load_settled(entry, load)

    def check(self) -> list[CacheStatus]:
        """Every entry of :data:`CACHE_FOLDERS` against its record (``factcheck verify``)."""
        check_no_symlinks(self.index_dir, CACHE_FOLDERS)
        out = []
        for kind in CACHE_FOLDERS:
            base = self.index_dir / kind
            if not base.is_dir():
                continue
            for entry in sorted(p for p in base.iterdir() if p.is_dir() and not p.name.startswith(TMP_PREFIX)):
                record = keyed_record(self.index_dir, f"{kind}/{entry.name}/{RECORD}")
                state = "unrecorded" if record is None else \
                    "ok" if holds_files(entry, record["files"], verify=True, skip=_own) else "damaged"
                out.append(CacheStatus(entry, state))
        return out

    def _matches(self, name: str, key) -> bool:
        """The record names ``key`` and lists exactly the files the folder holds (no file is read)."""
        record = keyed_record(self.index_dir, f"{name}/{RECORD}", key)
        if record is None:
            return False
        if holds_files(self.index_dir / name, record["files"], skip=_own):
            return True
        log.warning("%s: cache does not hold the files its record lists; rebuilding it", self.index_dir / name)
        return False


def _load_settled(entry: Path, load: Callable[[Path], T]) -> T:
    """``load(entry)`` of an entry just renamed into place, read again while another process
    fills the same cold cache: its copy for the same key replaces this one (the old folder
    removed, then the new renamed in), and a read in between finds a file missing."""
    for wait in SETTLE_WAITS:
        try:
            return load(entry)
        except (OSError, InputError, ValueError):
            time.sleep(wait)
    return load(entry)


def _private(build: Callable[[Path], None], load: Callable[[Path], T]) -> T:
    """``build`` into a private folder and ``load`` it, the folder living as long as the
    object (which may map its files)."""
    # Not tempfile.mkdtemp: tests simulate a read-only index by patching it.
    folder = Path(tempfile.gettempdir()) / f"factcheck-cache-{os.getpid()}-{uuid.uuid4().hex}"
    folder.mkdir(mode=0o700)
    try:
        build(folder)
        obj = load(folder)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    try:
        weakref.finalize(obj, shutil.rmtree, folder, True)
    except TypeError:  # not weak-referenceable (a plain list): it holds nothing of the folder
        shutil.rmtree(folder, ignore_errors=True)
    return obj


def _own(path: Path) -> bool:
    """Not an entry's own file: its record, and nested caches and passage vectors (each vouches for itself)."""
    return path.name == RECORD or (path / RECORD).is_file() or \
        (path.name == VECTORS_DIR and (path / VECTORS_MANIFEST).is_file())
