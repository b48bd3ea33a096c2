"""Owning an output directory: one run at a time (:class:`DirectoryLock`), what a rerun finds
there (:func:`prepare`), deleting only what we wrote (:func:`wipe`, never through a link),
replacing a complete index only by a complete one (:data:`REPLACEMENT`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from factcheck.errors import InputError, ref
from factcheck.formats.files import (SYMLINK_REFUSED, TMP_PREFIX, check_no_symlinks, crashpoint, read_record,
                                     write_json_atomic)
from factcheck.formats.rundir import MARKER
from factcheck.tagging import store
from factcheck.tagging.derived import CACHE_FOLDERS

LOCK_FILE = ".factcheck-lock"
LEGACY_MODELS_DIR = "models"  # the vectorisers of the joblib format (wiped by --force)
#: Where ``--force`` builds the index that replaces a complete one of other input or settings:
#: the old one stays whole until the new one is complete (:func:`replace_index`).
REPLACEMENT = TMP_PREFIX + "replacement"
#: A :func:`prepare` answer: build in :data:`REPLACEMENT`, then :func:`replace_index`.
REPLACE = object()
#: What a tag index directory holds that this tool writes or deletes (the derived caches too).
INDEX_ENTRIES = (store.MANIFEST, LOCK_FILE, store.PASSAGES_DIR, store.TAGS_DIR, store.VOCABULARY_DIR, store.IDS_DIR,
                 store.WORK_DIR, store.VECTORS_DIR, store.POOL_VECTORS_DIR, LEGACY_MODELS_DIR, REPLACEMENT,
                 *CACHE_FOLDERS)
#: The folders the tagging job writes into (the legacy one too: --force empties it).
WRITTEN = (store.PASSAGES_DIR, store.TAGS_DIR, store.VOCABULARY_DIR, store.IDS_DIR, store.WORK_DIR, LEGACY_MODELS_DIR)

# Every name the tagging and vector jobs write (relative to the output directory), their
# temporary names, and the joblib format's (so that --force replaces an old index).
_TMP = r"\.tmp-[^/]+"
_ARRAY = "(?:%s)\\.npy" % "|".join(sorted({name for spec in store.ARRAYS.values() for name in spec}))
_OURS = re.compile(
    rf"^(?:(?:passages/passages|tags/tags|work/counts)-\d{{5,}}/{_ARRAY}|(?:vocabulary|ids)/{_ARRAY}"
    rf"|(?:passages|tags|work|work/done|models)/{_TMP}(?:/{_ARRAY})?|\.tmp-(?:vocabulary|ids)\.[^/]+(?:/{_ARRAY})?"
    rf"|vectors/(?:manifest\.json|vectors-\d{{5,}}\.npy|work/done/[\w.-]+\.json|\.factcheck-lock|(?:work/|work/done/)?{_TMP})"
    r"|work/(?:plan|split)\.json|work/done/[\w.-]+\.json|\.tmp-manifest\.json\.[^/]+"
    r"|(?:passages|tags|work|models)/[\w.-]+\.joblib)$")


class DirectoryLock:
    """``with DirectoryLock(out):`` -- exclusive use of ``out`` (created if missing; a flock the
    kernel releases when the holder dies). After a failure, ``out`` and the parents made for it
    go if nothing in them is worth keeping."""

    def __init__(self, out: Path):
        self.out = Path(out)
        self._lock = None
        self._created: list[Path] = []

    def __enter__(self) -> "DirectoryLock":
        out = self.out
        if out.exists() and not out.is_dir():
            raise InputError(out, None, "exists and is not a directory")
        self._created = make_dirs(out)
        try:
            self._lock = _acquire(out, out / LOCK_FILE)
        except BaseException:
            remove_empty(self._created)
            raise
        return self

    def __exit__(self, kind, *exc) -> None:
        # The lock file goes while still held (no run can be inside), then the lock.
        lock, self._lock = self._lock, None
        drop = kind is not None and self._created and not worth_keeping(self.out)
        if drop:
            _remove_scratch(self.out)
        (self.out / LOCK_FILE).unlink(missing_ok=True)
        lock.release()
        if drop:
            remove_empty(self._created)


def _acquire(out: Path, path: Path):
    from filelock import FileLock, Timeout
    while True:
        # on_acquired also rules out filelock's soft fallback (a filesystem without flock).
        lock = FileLock(path, timeout=0, on_acquired=_write_pid)
        try:
            lock.acquire()
            return lock
        except Timeout:
            if path.exists():  # else its holder removed it as we came: try again
                raise InputError(out, None, f"in use by another factcheck run (pid {_holder(path)}); "
                                 f"wait for it to finish or choose another {ref('out')}") from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # filelock opens with O_NOFOLLOW: the lock file is a link
                raise InputError(path, None, SYMLINK_REFUSED) from None
            if exc.errno in (errno.ENOSYS, errno.ENOLCK, errno.EOPNOTSUPP):
                raise InputError(out, None, f"cannot lock the directory: {exc.strerror}") from None
            raise InputError(out, None, f"cannot write here: {exc.strerror or exc}") from None


def _write_pid(fd: int) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)


def _holder(path: Path) -> str:
    try:  # (the lock file is no link: filelock opened it with O_NOFOLLOW)
        return path.read_bytes()[:64].decode("ascii", "replace").strip() or "unknown"
    except OSError:
        return "unknown"


def make_dirs(out: Path) -> list[Path]:
    """Create ``out`` and its missing parents; the ones created, deepest first."""
    missing = [p for p in (out, *out.parents) if not p.exists()]
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        why = ("a parent path is not a directory" if isinstance(exc, (FileExistsError, NotADirectoryError))
               else exc.strerror or str(exc))
        raise InputError(out, None, f"cannot write here: {why}") from None
    return missing


#: What a failed run leaves that is not worth keeping (and the ``.tmp-*`` files).
SCRATCH = (LOCK_FILE, MARKER, f"{store.WORK_DIR}/plan.json")


def worth_keeping(out: Path) -> bool:
    """Anything in ``out`` but folders and scratch (a finished shard is: a rerun resumes)."""
    for path in Path(out).rglob("*"):
        rel = path.relative_to(out).as_posix()
        if path.is_symlink() or not (path.is_dir() or rel in SCRATCH or path.name.startswith(TMP_PREFIX)):
            return True
    return False


def _remove_scratch(out: Path) -> None:
    for path in sorted(Path(out).rglob("*"), reverse=True):  # deepest first
        if path.is_dir() and not path.is_symlink():
            path.rmdir()
        elif path.relative_to(out).as_posix() != LOCK_FILE:
            path.unlink()


@contextlib.contextmanager
def scratch_folder(parent: Path, prefix: str):
    """A temporary folder in ``parent``; it goes afterwards, and so do the parents made for it."""
    created = make_dirs(Path(parent))
    try:
        with tempfile.TemporaryDirectory(prefix=prefix, dir=parent, ignore_cleanup_errors=True) as folder:
            yield Path(folder)
    finally:
        remove_empty(created)


def remove_empty(created: list[Path]) -> None:
    """Remove the folders created here, deepest first, each only while empty."""
    for folder in created:
        try:
            folder.rmdir()
        except OSError:
            return


def is_ours(rel: str) -> bool:
    return bool(_OURS.match(rel))


def wipe(out: Path) -> int:
    """``--force``: delete the files our runs wrote, nothing else; the number of files deleted."""
    out = Path(out)
    check_wipeable(out)
    out_real = Path(os.path.realpath(out))
    manifest = out / store.MANIFEST
    removed = 0
    for sub in (*WRITTEN, store.VECTORS_DIR):
        base = out / sub
        if not base.is_dir():
            continue
        files, folders = _walk(base)
        for path in files:
            if is_ours(path.relative_to(out).as_posix()):
                _delete(out_real, out, path, Path.unlink)
                removed += 1
        for d in folders + [base]:
            try:
                _delete(out_real, out, d, Path.rmdir)  # only if empty: a folder holding the user's files stays
            except OSError:
                pass
    if manifest.is_file():
        _delete(out_real, out, manifest, Path.unlink)
        removed += 1
    return removed


def check_wipeable(out: Path) -> None:
    """Refuse, before anything is deleted or built, what :func:`wipe` would refuse: a link
    among our names, or a ``manifest.json`` that is not ours."""
    check_no_symlinks(out, INDEX_ENTRIES)
    manifest = out / store.MANIFEST
    if manifest.is_file():
        try:
            found = read_record(out, store.MANIFEST).get("format")
        except InputError:
            found = None
        if not (isinstance(found, str) and found.startswith(store.FORMAT_FAMILY)):  # any version of ours
            raise InputError(manifest, None, "is not a factcheck tag index manifest; refusing to delete "
                             f"anything here even with {ref('force')} (choose another {ref('out')})")


def _walk(base: Path) -> tuple[list[Path], list[Path]]:
    """Every file and folder below ``base``, deepest first, links never followed."""
    files, folders = [], []
    for dirpath, dirnames, filenames in os.walk(base):
        here = Path(dirpath)
        files += [here / n for n in filenames]
        folders += [here / n for n in dirnames]
    return sorted(files, reverse=True), sorted(folders, reverse=True)


def _delete(out_real: Path, out: Path, path: Path, how) -> None:
    # Checked just before deleting: a path leading outside ``out`` is refused.
    if path.is_symlink() or Path(os.path.realpath(path)) != out_real / path.relative_to(out):
        raise InputError(path, None, SYMLINK_REFUSED)
    how(path)


def remove_temporaries(out: Path) -> int:
    """Delete the ``.tmp-*`` files and folders a killed run of ours left in our folders (never
    through a link: this also runs after a refusal of one)."""
    removed = 0
    out_real = Path(os.path.realpath(out))
    for sub in ("", *WRITTEN, f"{store.WORK_DIR}/done"):
        base = out / sub
        if not base.is_dir() or Path(os.path.realpath(base)) != out_real / sub:
            continue
        for path in base.glob(TMP_PREFIX + "*"):
            if path.is_symlink():
                continue
            if path.is_file() and is_ours(path.relative_to(out).as_posix()):
                path.unlink()
                removed += 1
            elif path.is_dir() and all(is_ours(f.relative_to(out).as_posix()) for f in path.iterdir()):
                shutil.rmtree(path)  # a folder of arrays being built (store.write_arrays)
                removed += 1
    return removed


def prepare(out: Path, plan: dict, plan_key: str, force: bool, report: Callable[[str], None],
            before_write: Callable[[], None] = lambda: None):
    """For a run of ``plan`` into ``out``: the manifest of a complete index, None to run in
    ``out``, or :data:`REPLACE` (``force`` over a complete index of other input or settings)
    to run in :data:`REPLACEMENT` and swap it in when complete. Every refusal comes before
    anything in ``out`` changes; ``before_write()`` is called just before the first change."""
    check_no_symlinks(out, INDEX_ENTRIES)
    check_replacement(out)
    manifest_path = out / store.MANIFEST
    plan_path = out / store.WORK_DIR / "plan.json"
    replacement = out / REPLACEMENT
    if not manifest_path.is_file() and _saved(replacement / store.MANIFEST, "plan_key") == plan_key:
        return REPLACE  # stopped while swapping a complete replacement in: finish it
    if manifest_path.is_file():
        problem = None
        try:
            existing = store.read_manifest(out)
            same = existing.data.get("plan_key") == plan_key
        except InputError as exc:
            existing, same, problem = None, False, exc
        if same:
            try:
                store.verify_index(out, existing)
                shutil.rmtree(out / store.WORK_DIR, ignore_errors=True)
                discard(replacement)
                report(f"{out}: index is complete and verified; nothing to do")
                return existing
            except InputError as exc:
                report(f"{exc.one_line()}; repairing")
                before_write()
                manifest_path.unlink()
        elif not force:
            if problem is not None and "older format" in problem.message:
                raise problem  # names the command that rebuilds it
            raise InputError(manifest_path, None, "the directory holds a different run's index "
                             f"(other input or parameters); use {ref('force')} to replace it")
        else:
            check_wipeable(out)  # now, not after the replacement is built
            return REPLACE  # built beside it: a refused or failed run leaves the old index whole
    elif plan_path.is_file():
        if _saved(plan_path, "plan_key") != plan_key:
            # Without --force, only a run of the same settings whose input was fixed before
            # its split completed starts afresh.
            if not force and (_saved(plan_path, "plan", "params") != plan["params"]
                              or (out / store.WORK_DIR / "split.json").is_file()):
                raise InputError(out, None, "holds an unfinished run with other input or parameters; "
                                 f"use {ref('force')} to discard it")
            before_write()
            wipe(out)
    elif out.exists() and (not out.is_dir() or _has_content(out)):
        if not out.is_dir():
            raise InputError(out, None, "exists and is not a directory")
        if not force:
            raise InputError(out, None, "exists, is not empty and is not a tag index; "
                             f"choose a new directory or use {ref('force')}")
    before_write()
    discard(replacement)
    remove_temporaries(out)
    write_json_atomic(plan_path, {"plan_key": plan_key, "plan": plan})
    return None


def check_replacement(out: Path) -> None:
    """Refuse a :data:`REPLACEMENT` in ``out`` that is not ours: a file, or a folder holding a
    file no tagging job writes (swapped in, it would land in the index; discarded, be lost).
    Ours is a folder of only the names the job writes (its manifest, lock and temporaries too)."""
    replacement = out / REPLACEMENT
    if not os.path.lexists(replacement):
        return
    if replacement.is_symlink() or not replacement.is_dir():
        raise InputError(replacement, None, "is not a folder factcheck wrote (factcheck builds a replacement "
                         "index under this name); move it elsewhere")
    for path in sorted(replacement.rglob("*")):  # rglob follows no link (check_no_symlinks refused them)
        rel = path.relative_to(replacement).as_posix()
        if not path.is_dir() and rel not in (store.MANIFEST, LOCK_FILE) and not is_ours(rel):
            raise InputError(path, None, "holds files factcheck did not write; move them elsewhere")


def discard(replacement: Path) -> None:
    """Delete an unfinished :data:`REPLACEMENT` (the caller checked it holds no link)."""
    if replacement.is_dir() and not replacement.is_symlink():
        shutil.rmtree(replacement)


def replace_index(out: Path, replacement: Path) -> None:
    """Put the complete index built in ``replacement`` in place of the one in ``out``: the old
    index's files go (:func:`wipe`: the user's stay), the new one's move in, its manifest last,
    so a stop part-way leaves no manifest vouching for a mix (:func:`prepare` finishes it: the
    old index's files are gone once its manifest is, as :func:`wipe` deletes it last)."""
    if (out / store.MANIFEST).is_file():
        wipe(out)
    crashpoint("replacing-index")
    for src in sorted(replacement.iterdir(), key=lambda p: (p.name == store.MANIFEST, p.name)):
        _move(src, out / src.name)
    replacement.rmdir()


def _move(src: Path, dst: Path) -> None:
    if src.is_dir() and dst.is_dir() and not dst.is_symlink():  # a folder wipe kept for the user's files
        for child in sorted(src.iterdir()):
            _move(child, dst / child.name)
        src.rmdir()
    elif dst.exists() or dst.is_symlink():
        raise InputError(dst, None, "holds files factcheck did not write; move them elsewhere")
    else:
        os.rename(src, dst)


def _has_content(out: Path) -> bool:
    """Anything but folders, our lock and ``.tmp-*`` files."""
    return any(not (p.is_dir() or p.name.startswith(TMP_PREFIX) or p.name == LOCK_FILE)
               for p in out.rglob("*"))


def _saved(plan_path: Path, *keys):
    """The value at ``keys`` in a saved ``plan.json`` (or manifest), or None."""
    try:
        value = read_record(plan_path.parent, plan_path.name)
        for key in keys:
            value = value[key]
        return value
    except (OSError, InputError, LookupError, TypeError):
        return None
