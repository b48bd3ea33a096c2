"""Caches derived from a tag index, kept inside its directory (``bm25/``, ``rerank/``, ...):
one folder per entry with its files and ``factcheck-key.json`` (``{"key", "files": {name:
sha256}}``). An entry is used only when its record names the caller's key and lists exactly
the files the folder holds, and its loader (``.npy`` files through
:func:`~factcheck.formats.npy.open_npy`: header, type and size) accepts them, otherwise it is
rebuilt (docs/decisions.md, "Caches inside an index"). As for the index's own arrays, the
files' sha256 are computed on ``factcheck verify`` (:meth:`DerivedCache.check`), not before
every use (docs/trust-model.md). A symbolic link
anywhere in a cache folder is refused before the entry is read, written or deleted: following
it would read, write or delete outside the index.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import uuid
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, TypeVar

from factcheck.errors import InputError
from factcheck.formats.files import TMP_PREFIX, atomic_dir, check_no_symlinks, loads_json, sha256_file

__all__ = ["CACHE_FOLDERS", "RECORD", "CacheStatus", "DerivedCache"]

log = logging.getLogger(__name__)

RECORD = "factcheck-key.json"
# The passage vectors' layout (store.VECTORS_DIR; named here: store imports this module).
VECTORS_DIR, VECTORS_MANIFEST = "vectors", "manifest.json"
#: The folders of an index directory that hold derived caches (one entry per subfolder).
CACHE_FOLDERS = ("bm25", "rerank", "chunks", "tfidf", "tag-rule")

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
        if self._matches(entry, key):
            try:
                return load(entry)
            except Exception as exc:  # the record matched but the reader refused: rebuild
                log.warning("%s: unreadable cache (%s); rebuilding it", entry, type(exc).__name__)
        step = "open"
        try:
            with atomic_dir(entry, replace=True) as folder:
                step = "build"
                build(folder)
                (folder / RECORD).write_text(json.dumps({"key": key, "files": _files(folder)}), "utf-8")
                step = "rename"
        except (OSError, InputError) as exc:
            if step == "build":
                raise
            # Not writable (read-only index): do without the cache. Or another process renamed
            # its copy into place meanwhile: use it if it is for this key.
            log.info("%s: cache not saved (%s)", entry, getattr(exc, "strerror", None) or exc)
            if step == "rename" and self._matches(entry, key):
                return load(entry)
            return _private(build, load)
        return load(entry)

    def check(self) -> list[CacheStatus]:
        """Every entry of :data:`CACHE_FOLDERS` against its record (``factcheck verify``)."""
        check_no_symlinks(self.index_dir, CACHE_FOLDERS)
        out = []
        for kind in CACHE_FOLDERS:
            base = self.index_dir / kind
            if not base.is_dir():
                continue
            for entry in sorted(p for p in base.iterdir() if p.is_dir() and not p.name.startswith(TMP_PREFIX)):
                record = _read_record(entry)
                if record is None:
                    out.append(CacheStatus(entry, "unrecorded"))
                else:
                    out.append(CacheStatus(entry, "ok" if record.get("files") == _files(entry) else "damaged"))
        return out

    @staticmethod
    def _matches(entry: Path, key) -> bool:
        """The record names ``key`` and lists exactly the files the folder holds (no file is read)."""
        record = _read_record(entry)
        if record is None or record.get("key") != key:
            return False
        files = record.get("files")
        if isinstance(files, dict) and sorted(files) == _names(entry):
            return True
        log.warning("%s: cache does not hold the files its record lists; rebuilding it", entry)
        return False


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


def _read_record(entry: Path) -> dict | None:
    try:
        record = loads_json((entry / RECORD).read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _names(folder: Path) -> list[str]:
    """Every file under ``folder`` but the record, nested caches and temporaries, sorted."""
    out = []
    for dirpath, dirnames, filenames in os.walk(folder):
        here = Path(dirpath)
        # Nested caches and passage vectors vouch for themselves; temporaries are unfinished.
        dirnames[:] = sorted(d for d in dirnames
                             if not d.startswith(TMP_PREFIX) and not (here / d / RECORD).is_file()
                             and not (d == VECTORS_DIR and (here / d / VECTORS_MANIFEST).is_file()))
        out.extend((here / name).relative_to(folder).as_posix() for name in sorted(filenames)
                   if not (here == folder and name == RECORD))
    return sorted(out)


def _files(folder: Path) -> dict[str, str]:
    """sha256 of every file of :func:`_names`."""
    return {name: sha256_file(folder / name) for name in _names(folder)}
