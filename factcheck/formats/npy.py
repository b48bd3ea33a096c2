"""Reading ``.npy`` arrays as every index reader does (docs/trust-model.md): the file is
opened once, without following a symbolic link (:func:`~factcheck.formats.files.open_beneath`);
its header is checked against what the caller expects and against the file's size as the
descriptor reports it; then that same descriptor is mapped. The path is never opened again,
so what was checked is what is used.

The mapping holds its own duplicate of that descriptor as long as the array lives (one
descriptor a file, as ``np.load`` held): :func:`check_mapped` compares each live mapping's
file with what was checked (its size through that descriptor, its mtime through its path
while the path still names it), so a server can refuse in one line, before a request reads
it, a file cut short or edited in place under it (reading a page past a cut-short file's
end would be a ``SIGBUS``).
"""

from __future__ import annotations

import math
import mmap
import os
import threading
import weakref
from pathlib import Path

import numpy as np

from factcheck.errors import InputError
from factcheck.formats.files import open_beneath, sha256_fileobj

__all__ = ["MappedFile", "NpyArray", "check_mapped", "open_npy", "read_header", "release", "release_mapped"]

_HEADER_READERS = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
MAX_HEADER = 10_000


class NpyProblem(ValueError):
    """A ``.npy`` header that is not one factcheck reads."""


def read_header(fh) -> tuple[tuple[int, ...], np.dtype, int]:
    """``(shape, dtype, offset of the data)`` of the ``.npy`` file ``fh`` (read from its start):
    a :class:`NpyProblem` for an unknown version, an object array or a Fortran-ordered one
    (a model's arrays, inside a skops archive, are read by ``safe_load._check_archive``)."""
    try:
        version = np.lib.format.read_magic(fh)
        reader = _HEADER_READERS.get(version)
        if reader is None:
            raise NpyProblem(f"an unknown .npy version {version}")
        shape, fortran, dtype = reader(fh, max_header_size=MAX_HEADER)
    except NpyProblem:
        raise
    except Exception as exc:  # numpy says ValueError or EOFError, whatever the damage
        raise NpyProblem(f"not a readable .npy header ({type(exc).__name__})") from None
    if dtype.hasobject:
        raise NpyProblem("an array of Python objects (it would be unpickled)")
    if fortran and len(shape) > 1:
        raise NpyProblem("a Fortran-ordered array (factcheck writes none)")
    return tuple(shape), dtype, fh.tell()


class MappedFile(mmap.mmap):
    """A read-only map of a whole file (it holds its own duplicate of the descriptor that was
    checked), with what was checked: :meth:`check` says whether the file changed since."""

    path: Path
    _seen: tuple[int, int, int, int]  # size, device, inode, mtime

    def check(self) -> None:
        """An :class:`InputError` (the opener's ``error``) if the mapped file was cut short or
        grown (the mapping's own descriptor says), or edited in place (its path still names
        the same file, with another modification time)."""
        size, dev, ino, mtime = self._seen
        now = self.size()  # fstat of the mapping's descriptor, not of the path
        if now != size:
            raise self._error(self.path, None, f"was cut to {now:,} bytes (from {size:,}) after it was opened; "
                              "reading it now could crash the process (restart to read the new file)")
        try:
            st = os.stat(self.path, follow_symlinks=False)
        except OSError:  # renamed or removed: the mapped file lives on as it was
            return
        if (st.st_dev, st.st_ino) == (dev, ino) and st.st_mtime_ns != mtime:
            raise self._error(self.path, None, "was changed in place after it was opened (restart to read the "
                              "new file)")


_LIVE: "weakref.WeakSet[MappedFile]" = weakref.WeakSet()
_LIVE_LOCK = threading.Lock()  # a server's threads map lazily built caches while another checks


def check_mapped(root=None) -> None:
    """Raise the first live mapping's :meth:`MappedFile.check` error (none: every mapped file
    is as it was checked), of the files inside the directory ``root`` only if given: an
    ``fstat`` and a ``stat`` a mapping, cheap enough before every request."""
    for mapped in _live(root):
        mapped.check()


def _live(root=None) -> list[MappedFile]:
    """The live mappings, of the files inside the directory ``root`` only if given."""
    inside = None if root is None else os.path.join(os.path.abspath(root), "")
    with _LIVE_LOCK:
        live = list(_LIVE)
    return [m for m in live if inside is None or os.path.abspath(m.path).startswith(inside)]


def release_mapped(root=None) -> None:
    """Drop the pages of every live mapping (of the files inside the directory ``root`` only if
    given) from this process's resident set, as :func:`release` drops an array's: they stay in
    the page cache, and a later read maps them again (a minor fault)."""
    advice = getattr(mmap, "MADV_DONTNEED", None)
    if advice is None:
        return
    for mapped in _live(root):
        if not mapped.closed:
            mapped.madvise(advice)


def release(*arrays: np.ndarray) -> None:
    """Drop the pages of ``arrays`` (views of :func:`open_npy` maps, or of a ``numpy.memmap``
    shared with its file, as ``numpy.lib.format.open_memmap`` writes one; any other array is
    left alone) from this process's resident set. They stay in the page cache, written ones
    too (they go to the file): a later read maps them again (a minor fault, no disk read). A
    pass over a whole index read through its maps, or an output filled through its map, would
    otherwise keep all of it in the process's RSS for as long as the map is open."""
    advice = getattr(mmap, "MADV_DONTNEED", None)
    for array in arrays:
        base = array
        while isinstance(base, np.ndarray):
            base = base.base
        mapped = base.obj if isinstance(base, memoryview) else base
        # A copy-on-write memmap ("c") holds its writes in private pages: dropping them loses them.
        shared = isinstance(mapped, MappedFile) or (isinstance(array, np.memmap) and array.mode != "c"
                                                    and isinstance(mapped, mmap.mmap))
        if advice is None or not shared or mapped.closed or not array.nbytes or not array.flags.c_contiguous:
            continue
        start = array.ctypes.data - np.frombuffer(mapped, dtype=np.uint8, count=1).ctypes.data
        first = start - start % mmap.PAGESIZE  # madvise takes a page-aligned start
        mapped.madvise(advice, first, min(start + array.nbytes, len(mapped)) - first)


class NpyArray:
    """One opened ``.npy`` file: its ``array`` (a read-only map), its ``mapped`` file and, until
    :meth:`close`, the descriptor it was opened and checked through."""

    def __init__(self, array: np.ndarray, mapped: MappedFile, fh, hint: str = ""):
        self.array, self.mapped, self._fh, self._hint = array, mapped, fh, hint

    def sha256(self) -> str:
        """sha256 of the file, read through the descriptor that was checked and mapped."""
        if self._fh is None:
            raise ValueError("the file was closed: open it with keep_open=True to hash it")
        return sha256_fileobj(self._fh)

    def check_sha256(self, expected: str, why: str = "truncated or corrupted", hint: str | None = None) -> None:
        """The opener's ``error`` unless the file's :meth:`sha256` is ``expected`` (``factcheck
        verify``): "checksum mismatch (``why``)" and ``hint`` (default: the opener's)."""
        if self.sha256() != expected:
            hint = self._hint if hint is None else hint
            raise self.mapped._error(self.mapped.path, None, f"checksum mismatch ({why}){'; ' + hint if hint else ''}")

    def close(self) -> None:
        """Close the descriptor (the mapping holds its own)."""
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def open_npy(root, rel: str, *, dtype=None, shape=None, error=InputError, hint: str = "",
             missing: str = "no such file", keep_open: bool = False) -> NpyArray:
    """The array ``rel`` inside ``root``, memory-mapped read-only through one descriptor.

    Checked in order, each before anything larger is read: no symbolic link (any part of
    ``rel``), a regular file, a header numpy writes, the ``dtype`` and ``shape`` expected
    (``None``: any), then the file's size exactly the header's. A refusal is ``error(path,
    None, message)`` with ``hint`` (what to do) appended. With ``keep_open`` the descriptor
    stays open for :meth:`NpyArray.sha256` until :meth:`NpyArray.close`.
    """
    path = Path(root) / rel
    suffix = f"; {hint}" if hint else ""
    fh = os.fdopen(open_beneath(root, rel, error=error, missing=missing), "rb")
    try:
        st = os.fstat(fh.fileno())
        try:
            found_shape, found_dtype, offset = read_header(fh)
        except NpyProblem as exc:
            raise error(path, None, f"unreadable array: {exc}{suffix}") from None
        want = np.dtype(dtype) if dtype is not None else found_dtype
        if found_dtype != want or (shape is not None and found_shape != tuple(shape)):
            raise error(path, None, f"damaged or crafted array: {found_dtype.str} of shape {found_shape}, expected "
                        f"{want.str} of shape {tuple(shape) if shape is not None else found_shape}{suffix}")
        count = math.prod(found_shape)
        expected = offset + count * found_dtype.itemsize
        if st.st_size != expected:
            raise error(path, None, f"truncated or damaged: its header describes {expected:,} bytes, the file "
                        f"holds {st.st_size:,}{suffix}")
        try:  # mmap itself refuses a length past the end: a file cut since the fstat
            mapped = MappedFile(fh.fileno(), st.st_size, access=mmap.ACCESS_READ)
        except (ValueError, OSError) as exc:
            raise error(path, None, f"changed while it was opened ({exc}){suffix}") from None
        mapped.path, mapped._error = path, error
        mapped._seen = (st.st_size, st.st_dev, st.st_ino, st.st_mtime_ns)
    except BaseException:
        fh.close()
        raise
    if not keep_open:
        fh.close()
        fh = None
    with _LIVE_LOCK:
        _LIVE.add(mapped)
    array = np.frombuffer(mapped, dtype=found_dtype, count=count, offset=offset).reshape(found_shape)
    return NpyArray(array, mapped, fh, hint)
