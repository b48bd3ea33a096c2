"""Owning an output directory: one run at a time (a lock), what a rerun finds there,
deleting only what we wrote, and no directory left behind that a failed command created.

The lock is an exclusive ``flock`` (filelock's) for the whole run: two ``factcheck tag``
runs into one ``--out`` interleaved their shards into an index that passed ``verify``
(docs/decisions.md); the kernel releases it when the holder dies. :func:`prepare` tells a
complete index (nothing to do), an unfinished one (resume), another run's or the user's
files (refused without ``force``); ``--force`` deletes only names this tool writes. No
symbolic link among our names is followed (:func:`check_no_symlinks`), and :func:`wipe`
checks that every path it deletes resolves inside the directory; ``--out`` itself may be
a link: it is the directory the user named.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from factcheck.errors import InputError, ref
from factcheck.formats.files import TMP_PREFIX, write_json_atomic
from factcheck.formats.rundir import MARKER
from factcheck.tagging import store
from factcheck.tagging.derived import CACHE_FOLDERS

LOCK_FILE = ".factcheck-lock"
LEGACY_MODELS_DIR = "models"  # the vectorisers of the joblib format (wiped by --force)
#: What a tag index directory holds that this tool writes or deletes (the derived caches too).
INDEX_ENTRIES = (store.MANIFEST, LOCK_FILE, store.PASSAGES_DIR, store.TAGS_DIR, store.VOCABULARY_DIR,
                 store.WORK_DIR, store.VECTORS_DIR, LEGACY_MODELS_DIR, *CACHE_FOLDERS)
#: The folders the tagging job writes into (the legacy one too: --force empties it).
WRITTEN = (store.PASSAGES_DIR, store.TAGS_DIR, store.VOCABULARY_DIR, store.WORK_DIR, LEGACY_MODELS_DIR)
SYMLINK_REFUSED = ("is a symbolic link; refusing to write or delete through it (remove the link, "
                   "or choose another output directory)")

# Every file name the tagging job and the open mode's vector job write (relative to the
# output directory), the temporary names they are built under, and the joblib format's
# (so that --force replaces an old index). The vectors belong to the index.
_TMP = r"\.tmp-[^/]+"
_ARRAY = "(?:%s)\\.npy" % "|".join(sorted({name for spec in store.ARRAYS.values() for name in spec}))
_OURS = re.compile(
    rf"^(?:(?:passages/passages|tags/tags|work/counts)-\d{{5,}}/{_ARRAY}|vocabulary/{_ARRAY}"
    rf"|(?:passages|tags|work|work/done|models)/{_TMP}(?:/{_ARRAY})?|\.tmp-vocabulary\.[^/]+(?:/{_ARRAY})?"
    rf"|vectors/(?:manifest\.json|vectors-\d{{5,}}\.npy|work/done/[\w.-]+\.json|\.factcheck-lock|(?:work/|work/done/)?{_TMP})"
    r"|work/(?:plan|split)\.json|work/done/[\w.-]+\.json|\.tmp-manifest\.json\.[^/]+"
    r"|(?:passages|tags|work|models)/[\w.-]+\.joblib)$")


class DirectoryLock:
    """``with DirectoryLock(out):`` -- exclusive use of ``out`` (created if missing): a
    second run fails at once, naming the holder's pid, which the lock file records. The
    lock file goes while still held; after a failure, ``out`` and the parents made for it
    go too if nothing in them is worth keeping (:func:`worth_keeping`)."""

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

    def release(self, failed: bool = False) -> None:
        """Remove the lock file (still held: no run can be inside), then unlock."""
        if self._lock is None:
            return
        lock, self._lock = self._lock, None
        drop = failed and self._created and not worth_keeping(self.out)
        if drop:
            _remove_scratch(self.out)
        (self.out / LOCK_FILE).unlink(missing_ok=True)
        lock.release()
        if drop:
            remove_empty(self._created)

    def __exit__(self, kind, *exc) -> None:
        self.release(failed=kind is not None)


def _acquire(out: Path, path: Path):
    from filelock import FileLock, Timeout
    while True:
        # on_acquired also rules out filelock's soft fallback: a filesystem without flock
        # is one line, not a lock file that a killed run would leave behind.
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


def check_no_symlinks(out: Path, names=INDEX_ENTRIES) -> None:
    """Refuse (one line, naming the link) when any of ``names`` directly under ``out``, or
    anything below those of them that are folders, is a symbolic link."""
    out = Path(out)
    for name in names:
        top = out / name
        if top.is_symlink():
            raise InputError(top, None, SYMLINK_REFUSED)
        if not top.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(top):  # never descends into a link
            for entry in sorted(dirnames + filenames):
                path = Path(dirpath) / entry
                if path.is_symlink():
                    raise InputError(path, None, SYMLINK_REFUSED)


def _inside(out_real: Path, out: Path, path: Path) -> bool:
    """``path`` (under ``out``) resolves to the same place under ``out``'s real path: no
    component of it is a link to elsewhere."""
    return Path(os.path.realpath(path)) == out_real / path.relative_to(out)


def wipe(out: Path) -> int:
    """``--force``: delete the files a previous run of this tool wrote, nothing else, and
    nothing outside ``out`` (a symbolic link is refused, never followed).

    A ``manifest.json`` that is not a factcheck index is the user's: refuse to touch the
    directory at all rather than guess. Returns the number of files deleted.
    """
    out = Path(out)
    check_no_symlinks(out)
    out_real = Path(os.path.realpath(out))
    manifest = out / store.MANIFEST
    if manifest.is_file():
        try:
            found = json.loads(manifest.read_text("utf-8")).get("format")
            ours = isinstance(found, str) and found.startswith(store.FORMAT_FAMILY)  # any version of ours
        except (ValueError, UnicodeDecodeError, AttributeError):
            ours = False
        if not ours:
            raise InputError(manifest, None, "is not a factcheck tag index manifest; refusing to delete "
                             f"anything here even with {ref('force')} (choose another {ref('out')})")
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


def _walk(base: Path) -> tuple[list[Path], list[Path]]:
    """Every file and folder below ``base``, deepest first, links never followed."""
    files, folders = [], []
    for dirpath, dirnames, filenames in os.walk(base):
        here = Path(dirpath)
        files += [here / n for n in filenames]
        folders += [here / n for n in dirnames]
    return sorted(files, reverse=True), sorted(folders, reverse=True)


def _delete(out_real: Path, out: Path, path: Path, how) -> None:
    # Checked path by path, just before deleting: whatever changed since the walk, a
    # path leading outside ``out`` is refused rather than deleted.
    if path.is_symlink() or not _inside(out_real, out, path):
        raise InputError(path, None, SYMLINK_REFUSED)
    how(path)


def remove_temporaries(out: Path) -> int:
    """Delete the ``.tmp-*`` files and folders a killed run of ours left in ``out``'s own
    folders (never a user's file elsewhere in ``out``)."""
    removed = 0
    for sub in ("", *WRITTEN, f"{store.WORK_DIR}/done"):
        base = out / sub
        if not base.is_dir():
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


def prepare(out: Path, plan: dict, plan_key: str, force: bool, report: Callable[[str], None]):
    """Decide between 'already complete' (returns its manifest), 'resume', 'fresh' and
    'refuse' (an InputError) for a run of ``plan`` into ``out``; ``report`` receives the
    one-line messages about what was found."""
    check_no_symlinks(out)
    manifest_path = out / store.MANIFEST
    plan_path = out / store.WORK_DIR / "plan.json"
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
                report(f"{out}: index is complete and verified; nothing to do")
                return existing
            except InputError as exc:
                report(f"{exc.one_line()}; repairing")
                manifest_path.unlink()
        elif not force:
            if problem is not None and "older format" in problem.message:
                raise problem  # names the command that rebuilds it
            raise InputError(manifest_path, None, "the directory holds a different run's index "
                             f"(other input or parameters); use {ref('force')} to replace it")
        else:
            wipe(out)
    elif plan_path.is_file():
        try:
            previous = json.loads(plan_path.read_text("utf-8")).get("plan_key")
        except (ValueError, AttributeError):
            previous = None
        if previous != plan_key:
            # Other settings never replace a run without --force (the lock rules out a
            # run still in progress). Only a run of the same settings whose input was
            # fixed after it stopped at bad input, before its split completed, holds
            # nothing worth keeping and starts afresh.
            if not force and (_plan_params(plan_path) != plan["params"]
                              or (out / store.WORK_DIR / "split.json").is_file()):
                raise InputError(out, None, "holds an unfinished run with other input or parameters; "
                                 f"use {ref('force')} to discard it")
            wipe(out)
    elif out.exists() and (not out.is_dir() or _has_content(out)):
        if not out.is_dir():
            raise InputError(out, None, "exists and is not a directory")
        if not force:
            raise InputError(out, None, "exists, is not empty and is not a tag index; "
                             f"choose a new directory or use {ref('force')}")
    remove_temporaries(out)
    write_json_atomic(plan_path, {"plan_key": plan_key, "plan": plan})
    return None


def _has_content(out: Path) -> bool:
    """Anything but folders, our lock and the ``.tmp-*`` files of a run killed at its first write."""
    return any(not (p.is_dir() or p.name.startswith(TMP_PREFIX) or p.name == LOCK_FILE)
               for p in out.rglob("*"))


def _plan_params(plan_path: Path):
    try:
        return json.loads(plan_path.read_text("utf-8"))["plan"]["params"]
    except (ValueError, KeyError, TypeError):
        return None
