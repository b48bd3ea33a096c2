"""Low-level file plumbing: opening (gzip-aware), atomic writes, checksums.

Every output is written to a ``.tmp-*`` name beside it and renamed into place (a crash
never leaves a half-written file under the real name); no writer here follows a symbolic
link at the name it writes (:func:`check_no_symlinks` checks a tree's names).
"""

from __future__ import annotations

import csv
import errno
import fnmatch
import gzip
import io
import json
import os
import re
import shutil
import stat
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

from factcheck.errors import InputError
from factcheck.hashing import sha256_bytes, sha256_file, sha256_fileobj  # noqa: F401 (re-exported)

TMP_PREFIX = ".tmp-"
SYMLINK_REFUSED = ("is a symbolic link; refusing to write or delete through it (remove the link, "
                   "or choose another output path)")
SYMLINK_READ_REFUSED = ("is a symbolic link; refusing to read through it (a directory factcheck wrote holds "
                        "its own files: copy the target in place of the link)")


def crashpoint(name: str, partial: str | os.PathLike | None = None) -> None:
    """Announce a named point of a write as the audit event ``factcheck.crashpoint``
    (``partial``: the half-written file), where crash tests kill the process."""
    sys.audit("factcheck.crashpoint", name, None if partial is None else os.fspath(partial))


def read_error(path: Path, exc: OSError) -> InputError:
    """The one-line error for an input that could not be read (stat, open or read)."""
    if isinstance(exc, FileNotFoundError):
        return InputError(path, None, "no such file")
    if isinstance(exc, IsADirectoryError):
        return InputError(path, None, "is a directory, expected a file")
    if isinstance(exc, PermissionError):
        return InputError(path, None, "permission denied")
    return InputError(path, None, f"cannot read: {exc.strerror or exc}")


def check_regular_file(path: Path) -> None:
    """Refuse what is not a regular file (a FIFO would block, and inputs are read twice)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise read_error(path, exc) from None
    if stat.S_ISDIR(mode):
        raise InputError(path, None, "is a directory, expected a file")
    if not stat.S_ISREG(mode):
        kind = "a FIFO" if stat.S_ISFIFO(mode) else "a device or socket"
        raise InputError(path, None, f"is {kind}, not a regular file (save the input to a file first)")


LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def check_unicode(path, place, value: str, what: str) -> str:
    """A JSON ``\\ud800`` escape decodes to a lone surrogate, which no UTF-8 output can hold."""
    m = LONE_SURROGATE.search(value)
    if m:
        raise InputError(path, place, f"{what} holds a lone surrogate \\u{ord(m.group()):04x} "
                         "(not valid Unicode)")
    return value


def sha256_input(path: Path) -> str:
    """sha256 of an input file, with the errors of reading it as one-line InputErrors."""
    check_regular_file(path)
    try:
        return sha256_file(path)
    except OSError as exc:
        raise read_error(path, exc) from None


def open_binary(path: Path):
    """Open ``path`` for reading bytes, transparently un-gzipping ``*.gz``."""
    path = Path(path)
    check_regular_file(path)
    try:
        if path.suffix == ".gz":
            return gzip.open(path, "rb")
        return open(path, "rb")
    except OSError as exc:
        raise read_error(path, exc) from None


def atomic_path(dest: Path):
    """``with atomic_path(dest) as tmp:`` -- a temporary path next to ``dest``, renamed onto
    ``dest`` on success; an OS error leaves no file and names ``dest``, not the temporary."""
    return _atomic(Path(dest), folder=False)


def atomic_dir(dest: Path, suffix: str = "", replace: bool = False):
    """:func:`atomic_path` for a folder; an older ``dest`` is replaced if it holds only files
    whose names end with ``suffix``, or whole with ``replace`` (the caller's own folder, checked
    for links). A folder another process renamed into place meanwhile is an ``OSError``."""
    return _atomic(Path(dest), folder=True, suffix=suffix, replace=replace)


def check_no_symlinks(out: Path, names, *, error=InputError, refused: str = SYMLINK_REFUSED) -> None:
    """Refuse when any of ``names`` under ``out``, or anything below them, is a symbolic link
    (``error(path, None, refused)``; the readers pass :data:`SYMLINK_READ_REFUSED`)."""
    out = Path(out)
    for name in names:
        top = out / name
        if top.is_symlink():
            raise error(top, None, refused)
        if not top.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(top):  # never descends into a link
            for entry in sorted(dirnames + filenames):
                path = Path(dirpath) / entry
                if path.is_symlink():
                    raise error(path, None, refused)


def open_beneath(root: Path, rel: str, *, error=InputError, missing: str = "no such file") -> int:
    """A read-only descriptor of the regular file ``rel`` (a relative POSIX path) inside the
    directory ``root``, no part of ``rel`` followed if it is a symbolic link (``root`` itself
    may be one: it is the user's to place). Each folder is opened relative to the descriptor
    of the one before, so nothing can be swapped in between; a refusal is ``error(path, None,
    message)``, ``missing`` its message for a file that does not exist."""
    root = Path(root)
    parts = rel.split("/")
    if rel.startswith("/") or any(part in ("", ".", "..") for part in parts):
        raise error(root / rel, None, "is not a path inside its directory")
    at = root
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise error(root, None, "no such directory" if isinstance(exc, FileNotFoundError)
                    else f"cannot read: {exc.strerror or exc}") from None
    try:
        for i, part in enumerate(parts):
            at = at / part
            last = i == len(parts) - 1
            # O_NONBLOCK: opening a FIFO planted here must not hang (it is refused below).
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_NONBLOCK if last else os.O_DIRECTORY)
            try:
                child = os.open(part, flags, dir_fd=fd)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise error(at, None, SYMLINK_READ_REFUSED) from None
                if isinstance(exc, FileNotFoundError):
                    raise error(root / rel, None, missing) from None
                if isinstance(exc, NotADirectoryError):  # O_DIRECTORY's answer to a link, too
                    raise error(at, None, SYMLINK_READ_REFUSED if os.path.islink(at) else "is not a directory") from None
                raise error(at, None, f"cannot read: {exc.strerror or exc}") from None
            os.close(fd)
            fd = child
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise error(at, None, "is not a regular file")
        os.set_blocking(fd, True)
        return fd
    except BaseException:
        os.close(fd)
        raise


def read_beneath(root: Path, rel: str, *, error=InputError, missing: str = "no such file") -> bytes:
    """The bytes of ``rel`` inside ``root``, read as :func:`open_beneath` opens it."""
    with os.fdopen(open_beneath(root, rel, error=error, missing=missing), "rb") as fh:
        return fh.read()


@contextmanager
def _atomic(dest: Path, folder: bool, suffix: str = "", replace: bool = False):
    if dest.is_symlink():  # replacing it would drop the user's link; writing through it, escape
        raise InputError(dest, None, SYMLINK_REFUSED)
    try:
        mode = os.stat(dest).st_mode
    except OSError:
        mode = None
    if mode is not None and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):  # the rename would replace /dev/tty
        raise InputError(dest, None, "is a device, FIFO or socket, not a file: outputs are written whole and "
                         "renamed into place (write to a file)")
    if dest.is_dir() and not folder:
        raise InputError(dest, None, "is a directory, expected a file name")
    if folder and mode is not None and not stat.S_ISDIR(mode):  # found only at the final rename, after the work
        raise InputError(dest, None, "is a file, expected a directory")
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        prefix = TMP_PREFIX + dest.name + "."
        if folder:
            tmp = Path(tempfile.mkdtemp(prefix=prefix, dir=dest.parent))
        else:
            fd, name = tempfile.mkstemp(prefix=prefix, dir=dest.parent)
            os.close(fd)
            tmp = Path(name)
    except OSError as exc:  # e.g. a parent is a file, or no permission: the user's path, not a bug
        why = ("a parent path is not a directory" if isinstance(exc, (FileExistsError, NotADirectoryError))
               else exc.strerror or str(exc))
        raise InputError(dest, None, f"cannot write here: {why}") from None
    try:
        # mkstemp/mkdtemp create 0600/0700; an output is shared like any other file: honour the umask.
        os.chmod(tmp, (0o777 if folder else 0o666) & ~current_umask())
        yield tmp
        files = sorted(tmp.iterdir()) if folder else [tmp]
        crashpoint(f"mid-write:{dest.name}", partial=files[-1] if files else None)
        for path in files:
            if path.is_dir():  # a nested folder was written (and synced) by its own atomic write
                continue
            with open(path, "rb+") as fh:
                os.fsync(fh.fileno())
        crashpoint(f"before-rename:{dest.name}")
        if folder and replace and dest.is_dir() and not dest.is_symlink():
            shutil.rmtree(dest)
        elif folder and dest.is_dir() and not dest.is_symlink():  # an earlier copy no done record vouches for
            for path in dest.iterdir():
                if suffix and path.name.endswith(suffix) and path.is_file() and not path.is_symlink():
                    path.unlink()
            try:
                dest.rmdir()
            except OSError:
                raise InputError(dest, None, "holds files factcheck did not write; move them elsewhere") from None
        os.replace(tmp, dest)
        crashpoint(f"after-rename:{dest.name}")
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True) if folder else tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.errno is not None and \
                (exc.filename is None or str(exc.filename).startswith(str(tmp))):
            raise OSError(exc.errno, exc.strerror or os.strerror(exc.errno), str(dest)) from None
        raise


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text_atomic(dest: Path, text: str) -> None:
    with atomic_path(dest) as tmp:
        tmp.write_bytes(text.encode("utf-8"))


def write_csv_atomic(dest: Path, fieldnames: list[str], rows) -> None:
    """Rows (dicts) as a CSV file with a header, written atomically like every output."""
    buf = io.StringIO(newline="")
    writer = csv.DictWriter(buf, fieldnames=fieldnames)
    writer.writeheader()
    writer.writerows(rows)
    write_text_atomic(dest, buf.getvalue())


def loads_json(text: str | bytes):
    """:func:`json.loads`, JSON nested too deeply a :class:`ValueError` like any invalid JSON."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def dumps_json(obj, *, indent: int | None = 2) -> str:
    """Canonical JSON for files we write: sorted only where we sort, UTF-8, trailing newline."""
    return json.dumps(obj, indent=indent, ensure_ascii=False) + "\n"


def write_json_atomic(dest: Path, obj, *, indent: int | None = 2) -> None:
    write_text_atomic(dest, dumps_json(obj, indent=indent))


# The one record every artefact keeps beside its files (an index's manifest, a shard's done
# record, a derived cache's factcheck-key.json, the passage vectors' manifest): a JSON object
# with a ``key`` or ``format``, its ``files`` ({name: {"sha256", ...}}) and what its writer adds.

def record_digest(record: dict) -> str:
    """sha256 of a record's canonical JSON: the checksum a manifest ends with."""
    return sha256_bytes(dumps_json(record).encode("utf-8"))


def write_record(dest: Path, record: dict, checksum: str | None = None) -> None:
    """``record`` written atomically; with ``checksum``, ending with that field, the
    :func:`record_digest` of the rest (a manifest vouches for itself)."""
    write_json_atomic(dest, {**record, checksum: record_digest(record)} if checksum else record)


def read_record(root: Path, rel: str, *, error=InputError, missing: str = "no such file", fmt: str | None = None,
                checksum: str | None = None, what: str = "record", hint="") -> dict:
    """The record ``rel`` inside ``root`` (read as :func:`read_beneath` reads), or ``error``
    naming it in one line: not a JSON object, not of the format ``fmt`` (``family/version``: an
    older or a newer version said so), or not of its own ``checksum``. ``hint`` (a string, or
    a function of the record, None if unreadable) says how to repair it."""
    path = Path(root) / rel

    def refused(message: str, data=None) -> InputError:
        fix = hint(data) if callable(hint) else hint
        return error(path, None, f"{message}; {fix}" if fix else message)

    raw = read_beneath(root, rel, error=error, missing=missing)
    try:
        data = loads_json(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise refused(f"corrupt {what} ({type(exc).__name__})") from None
    if not isinstance(data, dict):
        raise refused(f"corrupt {what} (not a JSON object)")
    found = data.get("format")
    if fmt is not None and found != fmt:
        family, _, version = fmt.rpartition("/")
        old = found.removeprefix(family + "/") if isinstance(found, str) and found.startswith(family + "/") else ""
        if not (old.isascii() and old.isdigit() and len(old) < 10):  # '²' is a digit int() refuses
            raise refused(f"not a {fmt} {what}", data)
        if int(old) > int(version):
            raise error(path, None, f"{what} of a newer format ({found}) than this factcheck reads ({fmt}): "
                        "upgrade factcheck")
        raise refused(f"{what} of an older format ({found}; this version reads {fmt})", data)
    if checksum is not None and data.pop(checksum, None) != record_digest(data):
        raise refused(f"{what} checksum mismatch (corrupted or edited)", data)
    return data


def keyed_record(root: Path, rel: str, key=None) -> dict | None:
    """The record ``rel`` if it names ``key`` (any, if None) and its ``files``, else None (the
    record of a cache or a done shard missing, stale or damaged: that work is done again)."""
    try:
        record = read_record(root, rel)
    except InputError:
        return None
    return record if key in (None, record.get("key")) and isinstance(record.get("files"), dict) else None


def listed_files(path: Path, skip=lambda path: False) -> list[str] | None:
    """The names a record of ``path`` lists: ``[""]`` for a file, for a folder every file below it
    (sorted) but in temporaries and what ``skip`` refuses; None if ``path`` is neither (or a link)."""
    path = Path(path)
    if path.is_symlink() or not path.exists():
        return None
    if not path.is_dir():
        return [""]
    out = []
    for dirpath, dirnames, filenames in os.walk(path):  # never descends into a link
        here = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(TMP_PREFIX) and not skip(here / d))
        out.extend((here / name).relative_to(path).as_posix() for name in filenames if not skip(here / name))
    return sorted(out)


def holds_files(path: Path, files: dict, verify: bool = False, skip=lambda folder: False) -> bool:
    """Whether ``path`` holds exactly the files a record lists, and with ``verify`` each with its
    sha256 (an entry ``{"sha256", ...}``, or the sha256 alone, as older derived caches wrote it)."""
    if listed_files(path, skip) != sorted(files):
        return False
    try:
        return not verify or all(sha256_file(Path(path) / name) == (e.get("sha256") if isinstance(e, dict) else e)
                                 for name, e in files.items())
    except OSError:
        return False


class JsonObjectStream:
    """Writes to the text file ``fh``, one entry at a time, the bytes :func:`dumps_json` gives
    for ``{**head, key: {entries}}`` (for the entries alone when ``key`` is None): an output
    of many entries is never held whole. Call :meth:`close` once, after the last entry.

    Example
    -------
    >>> import io
    >>> fh = io.StringIO()
    >>> stream = JsonObjectStream(fh, {"method": "bm25"}, "claims")
    >>> stream.add("claim-1", {"ids": ["evidence-8"]})
    >>> stream.close()
    >>> fh.getvalue() == dumps_json({"method": "bm25", "claims": {"claim-1": {"ids": ["evidence-8"]}}})
    True
    """

    def __init__(self, fh, head: dict | None = None, key: str | None = None):
        if head and key is None:
            raise ValueError("head: only with key")
        if head and key in head:
            raise ValueError(f"head: holds {key!r}, the key of the entries")
        self.fh, self.key, self.n = fh, key, 0
        self._keys: set[str] = set()  # ids only: a repeat would be a file whose reader keeps one of two
        self.depth = 1 if key is None else 2
        fh.write("{")
        if key is not None:
            for k, v in (head or {}).items():
                fh.write("\n  " + self._dump(k, 1) + ": " + self._dump(v, 1) + ",")
            fh.write("\n  " + self._dump(key, 1) + ": {")

    @staticmethod
    def _dump(value, depth: int) -> str:
        # JSON strings hold no raw newline: every newline starts a line to indent one level deeper.
        return dumps_json(value).rstrip("\n").replace("\n", "\n" + "  " * depth)

    def add(self, key: str, value) -> None:
        """The next entry (keys must be distinct strings, as a JSON object's are)."""
        if not isinstance(key, str):  # json.dumps would write 1 as "1"; written raw it is not JSON
            raise TypeError(f"key: must be a string, got {type(key).__name__}")
        if key in self._keys:
            raise ValueError(f"key: {key!r} was already written (keys must be distinct)")
        self._keys.add(key)
        self.fh.write(("," if self.n else "") + "\n" + "  " * self.depth + self._dump(key, self.depth) + ": "
                      + self._dump(value, self.depth))
        self.n += 1

    def close(self) -> None:
        """The closing brackets and the final newline."""
        entries = "\n" + "  " * (self.depth - 1) + "}" if self.n else "}"
        self.fh.write(entries + ("\n}" if self.key is not None else "") + "\n")


def dump_model_atomic(dest: Path, obj) -> str:
    """A trained model to ``dest`` in skops format (loading it cannot run code); its sha256."""
    from factcheck.formats.safe_load import dump_model
    with atomic_path(dest) as tmp:
        dump_model(obj, tmp)
        digest = sha256_file(tmp)
    return digest


class _Writes:
    """A file as numpy's ``save`` sees an object with only ``write``: it writes in chunks
    through Python, whose failed write carries its errno, not ``ndarray.tofile``, whose
    short write on a full disk says only "N requested and M written"."""

    def __init__(self, fh):
        self.write = fh.write


def save_npy(path: Path, array) -> None:
    """``array`` as the ``.npy`` file ``path``: ``np.save``'s bytes (no pickle); a full disk
    is ``OSError(ENOSPC)`` (in an atomic write, naming the destination)."""
    import numpy as np
    with open(path, "wb") as fh:
        np.save(_Writes(fh), array, allow_pickle=False)


#: A temporary of ours: ``.tmp-`` + the destination's name + ``.`` + tempfile's 8 random characters.
TEMPORARY = re.compile(re.escape(TMP_PREFIX) + r"(?P<dest>.+)\.[a-z0-9_]{8}")


def remove_stale_temporaries(directory: Path, names=("*",), recursive: bool = True) -> int:
    """Delete the temporaries a killed run left in ``directory`` (and below, with ``recursive``):
    only :data:`TEMPORARY` names whose destination matches a glob of ``names``, never a link;
    returns how many were deleted."""
    removed = 0
    directory = Path(directory)
    if not directory.is_dir() or directory.is_symlink():
        return 0
    for dirpath, dirnames, filenames in os.walk(directory):  # never descends into a link
        here = Path(dirpath)
        for name in dirnames + filenames:
            m = TEMPORARY.fullmatch(name)
            path = here / name
            if not m or path.is_symlink() or not any(fnmatch.fnmatchcase(m["dest"], n) for n in names):
                continue
            if path.is_dir():
                shutil.rmtree(path)
                dirnames.remove(name)
            else:
                path.unlink()
            removed += 1
        if not recursive:
            break
    return removed
