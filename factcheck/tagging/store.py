"""The tag index on disk (layout: docs/tagging.md): its arrays, the manifest, done records,
and the checks. Checksums cannot prove who wrote a file, so :func:`open_index` also checks
what numpy, scipy and the decoders trust (dtypes, shapes, offsets, UTF-8, term ids, weights).
"""

from __future__ import annotations

import codecs
import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from factcheck.errors import InputError, IntegrityError
from factcheck.formats.files import (SYMLINK_READ_REFUSED, atomic_dir, check_no_symlinks, holds_files, keyed_record,
                                     read_record, save_npy, sha256_bytes, sha256_file, write_record)
from factcheck.formats.npy import open_npy, release
from factcheck.tagging.derived import DerivedCache
from factcheck.tagging.packing import hash_packed, offsets_fault, pack_strings, unpack_strings

MANIFEST = "manifest.json"
FORMAT_FAMILY = "factcheck-tag-index/"
FORMAT_VERSION = 4  # /1 pickled vectorisers, /2 joblib shards, /3 .npy arrays, /4 the ids' sorted hashes
MANIFEST_FORMAT = f"{FORMAT_FAMILY}{FORMAT_VERSION}"
MANIFEST_CHECKSUM = "manifest_sha256"
PASSAGES_DIR, TAGS_DIR, VOCABULARY_DIR, WORK_DIR = "passages", "tags", "vocabulary", "work"
IDS_DIR = "ids"  # every passage id's hash, sorted, and its row: the id lookup, written at tag time
VECTORS_DIR = "vectors"  # the open mode's passage vectors (factcheck.tagging.vectors)
POOL_VECTORS_DIR = "pool-vectors"  # its candidate pools' second-stage vectors (factcheck.tagging.pool_vectors)
REBUILD = "rebuild the index with `factcheck tag ... --force`"

_I8, _I4, _F8, _U1, _U8 = (np.dtype(t) for t in ("<i8", "<i4", "<f8", "|u1", "<u8"))
#: Every array of each kind of folder, with its dtype (all are 1-D).
ARRAYS = {
    "passages": {"ids": _U1, "id_offsets": _I8, "texts": _U1, "text_offsets": _I8,
                 "titles": _U1, "title_offsets": _I8},
    "tags": {"indptr": _I8, "terms": _I4, "weights": _F8},
    "vocabulary": {"terms": _U1, "term_offsets": _I8, "idf": _F8,
                   "tag_terms": _U1, "tag_term_offsets": _I8, "tag_idf": _F8},
    "ids": {"hashes": _U8, "rows": _I8},
    "counts": {"terms": _U1, "term_offsets": _I8, "totals": _I8, "doc_freq": _I8,
               "indptr": _I8, "indices": _I4, "data": _I4},
}


def passages_name(shard: int) -> str:
    return f"{PASSAGES_DIR}/passages-{shard:05d}"


def tags_name(shard: int) -> str:
    return f"{TAGS_DIR}/tags-{shard:05d}"


def counts_name(shard: int) -> str:
    return f"{WORK_DIR}/counts-{shard:05d}"


def write_arrays(dest: Path, kind: str, arrays: dict) -> dict[str, dict]:
    """Write ``arrays`` as the folder ``dest`` of ``kind``, atomically; each file's ``{"sha256", "shape"}``."""
    files = {}
    with atomic_dir(dest, suffix=".npy") as tmp:
        for name, a in sorted(typed(kind, arrays).items()):
            save_npy(tmp / f"{name}.npy", a)
            files[f"{name}.npy"] = {"sha256": sha256_file(tmp / f"{name}.npy"), "shape": list(a.shape)}
    return files


def typed(kind: str, arrays: dict) -> dict[str, np.ndarray]:
    """``arrays`` as a folder of ``kind`` stores them: contiguous, each with its dtype."""
    spec = ARRAYS[kind]
    return {name: np.ascontiguousarray(a, dtype=spec[name]) for name, a in arrays.items()}


def indexed_text(title: str | None, text: str) -> str:
    """What is tagged and retrieved when titles are indexed: the title, a newline, the text."""
    return f"{title}\n{text}" if title else text


def write_passages(dest: Path, ids: list[str], texts: list[str], titles: list[str] | None = None) -> dict:
    """A passages shard; ``titles`` (``""`` for none) only for a source that has them."""
    return write_arrays(dest, "passages", passage_arrays(ids, texts, titles))


def passage_arrays(ids: list[str], texts: list[str], titles: list[str] | None = None) -> dict:
    """The arrays of a passages folder."""
    arrays = {}
    for name, strings in (("ids", ids), ("texts", texts), ("titles", titles)):
        if strings is not None:
            arrays[name], arrays[f"{name[:-1]}_offsets"] = pack_strings(strings)
    return arrays


def shard_texts(p: dict, index_titles: bool, start: int = 0, stop: int | None = None) -> list[str]:
    """Texts of an opened passages shard as the index reads them (:func:`indexed_text`)."""
    texts = unpack_strings(p["texts"], p["text_offsets"], start, stop)
    if index_titles:
        titles = unpack_strings(p["titles"], p["title_offsets"], start, stop)
        texts = [indexed_text(t, x) for t, x in zip(titles, texts)]
    return texts


class _Bad(Exception):
    """A violation of what the readers rely on: ``(array name, what is wrong)``."""


def open_arrays(root: Path, rel: str, kind: str, files: dict, opened: list | None = None) -> dict[str, np.ndarray]:
    """The arrays of folder ``rel`` of ``root`` memory-mapped (:func:`~factcheck.formats.npy.open_npy`:
    no link followed, no pickle, dtype and shape as ``files`` says, size as the header says);
    with ``opened``, each :class:`~factcheck.formats.npy.NpyArray` is appended to it, its
    descriptor left open (for its sha256; the caller closes it)."""
    out = {}
    for fname, entry in files.items():
        name = fname.removesuffix(".npy")
        npy = open_npy(root, f"{rel}/{fname}", dtype=ARRAYS[kind][name], shape=entry["shape"], error=IntegrityError,
                       hint=REBUILD, missing="missing array listed in the manifest", keep_open=opened is not None)
        if opened is not None:
            opened.append(npy)
        out[name] = npy.array
    return out


def _offsets(name: str, off: np.ndarray, end: int) -> None:
    """CSR ``indptr`` or string offsets: from 0, never decreasing, ending at ``end``."""
    fault = offsets_fault(off, end)
    if fault:
        raise _Bad(name, fault)


_UTF8_BLOCK = 1 << 24


def _packed(arrays: dict, name: str) -> None:
    """``arrays[name]`` (UTF-8) cut by its offsets on character starts, and decoding."""
    buf, off_name = arrays[name], f"{name.removesuffix('s')}_offsets"
    off = arrays[off_name]
    _offsets(off_name, off, len(buf))
    starts = off[:-1][off[:-1] < len(buf)]
    if np.any((buf[starts] & 0xC0) == 0x80):
        raise _Bad(off_name, "cuts a UTF-8 character")
    # Block by block straight from the mapping: a character a block cuts is decoded with the next
    # (``used`` stops before it). The incremental decoder copied every block first, most of this
    # check's cost, which every open of an index pays over all its texts.
    at, end = 0, len(buf)
    while at < end:
        final = at + _UTF8_BLOCK >= end
        try:
            _, used = codecs.utf_8_decode(memoryview(buf[at:at + _UTF8_BLOCK]), "strict", final)
        except UnicodeDecodeError as exc:
            raise _Bad(name, f"is not UTF-8 (near byte {at + exc.start})") from None
        at += used


def _check(kind: str, a: dict, expect: dict) -> None:
    """Raise :class:`_Bad` unless the arrays hold what readers rely on (``expect``: ``columns``, ``top_k``)."""
    if kind == "passages":
        for name in ("ids", "texts", "titles"):
            if name in a:
                _packed(a, name)
    elif kind in ("tags", "counts"):
        indptr, terms = a["indptr"], a["terms" if kind == "tags" else "indices"]
        _offsets("indptr", indptr, len(terms))
        columns = expect["columns"] if kind == "tags" else len(a["term_offsets"]) - 1
        if len(terms) and (terms.min() < 0 or terms.max() >= columns):
            raise _Bad("terms" if kind == "tags" else "indices", f"holds negative ids or ids of {columns} or more "
                       f"(the vocabulary has {columns} terms)")
        if kind == "counts":
            _packed(a, "terms")
            if not (len(a["data"]) == len(terms) and len(a["totals"]) == len(a["doc_freq"]) == columns):
                raise _Bad("data", "does not hold one count per entry, or totals one per term")
        elif not np.all(np.isfinite(a["weights"])):
            raise _Bad("weights", "holds values that are not finite")
        elif len(indptr) > 1 and int(np.diff(indptr).max()) > expect["top_k"]:
            raise _Bad("indptr", f"gives a passage more than top_k = {expect['top_k']} tags")
    elif kind == "ids":
        hashes, rows = a["hashes"], a["rows"]
        if np.any(hashes[1:] < hashes[:-1]):
            raise _Bad("hashes", "is not sorted")
        if len(rows) and (rows.min() < 0 or rows.max() >= len(rows)):
            raise _Bad("rows", f"holds rows outside 0..{len(rows) - 1}")
        seen = np.zeros(len(rows), dtype=bool)
        seen[rows] = True
        if not seen.all():
            raise _Bad("rows", "does not list every row once")
    elif kind == "vocabulary":
        for prefix in ("", "tag_"):
            _packed(a, f"{prefix}terms")
            idf = a[f"{prefix}idf"]
            if not np.all(np.isfinite(idf)) or np.any(idf <= 0):
                raise _Bad(f"{prefix}idf", "holds values that are not positive finite numbers")


def read_checked(root: Path, rel: str, kind: str, files: dict, **expect) -> dict[str, np.ndarray]:
    """The arrays of folder ``rel`` of ``root``, opened and checked."""
    arrays = open_arrays(root, rel, kind, files)
    check_values(root, rel, kind, arrays, **expect)
    return arrays


def check_values(root: Path, rel: str, kind: str, arrays: dict, **expect) -> None:
    """An :class:`IntegrityError` naming the array unless ``arrays`` hold what readers rely on.
    The pages the check read are released (:func:`~factcheck.formats.npy.release`): an open
    reads every text, and kept they were most of a command's resident memory."""
    try:
        _check(kind, arrays, expect)
    except _Bad as exc:
        name, what = exc.args
        raise IntegrityError(Path(root) / rel / f"{name}.npy", None, f"damaged or crafted array: {name} {what}; "
                             f"{REBUILD}") from None
    finally:
        release(*arrays.values())


@dataclass
class IndexArrays:
    """Every array of an index, memory-mapped and checked (:func:`open_index`); ``id_hashes``
    (sorted) and ``id_rows`` (the row of each) find a passage by id."""

    passages: list[dict]
    tags: list[dict]
    vocabulary: dict
    terms: list[str]
    tag_terms: list[str]
    id_hashes: np.ndarray
    id_rows: np.ndarray


def open_index(root: Path, manifest: "Manifest", verify: bool = False) -> IndexArrays:
    """Open every array the manifest lists, with the structural checks of every open
    (docs/trust-model.md); with ``verify`` also each file's sha256, read through the
    descriptor that is mapped, after every file's header and size agreed with the manifest,
    and the ids' stored hashes computed again from the ids."""
    root = Path(root)
    files = manifest.folders()
    opened: list | None = [] if verify else None
    try:
        vocab = open_arrays(root, VOCABULARY_DIR, "vocabulary", files[VOCABULARY_DIR], opened)
        ids = open_arrays(root, IDS_DIR, "ids", files[IDS_DIR], opened)
        passages, tags = [], []
        for s in manifest.shards:
            passages.append(open_arrays(root, passages_name(s["shard"]), "passages",
                                        files[passages_name(s["shard"])], opened))
            tags.append(open_arrays(root, tags_name(s["shard"]), "tags", files[tags_name(s["shard"])], opened))
        expected = manifest.files()
        for npy in opened or ():  # only now: a file of the wrong size is refused without reading it whole
            npy.check_sha256(expected[npy.mapped.path.relative_to(root).as_posix()],
                             hint="rerun `factcheck tag` with the same arguments to repair it")
    finally:
        for npy in opened or ():
            npy.close()
    check_values(root, VOCABULARY_DIR, "vocabulary", vocab)
    terms = unpack_strings(vocab["terms"], vocab["term_offsets"])
    tag_terms = unpack_strings(vocab["tag_terms"], vocab["tag_term_offsets"])
    where = root / VOCABULARY_DIR
    if len(set(terms)) != len(terms):  # a vocabulary maps each term to one column
        raise IntegrityError(where / "terms.npy", None, f"damaged or crafted array: a term is listed twice; {REBUILD}")
    if len(set(tag_terms)) != len(tag_terms) or not set(tag_terms) <= set(terms):
        raise IntegrityError(where / "tag_terms.npy", None, "damaged or crafted array: a term listed twice or "
                             f"not in the passage vocabulary; {REBUILD}")
    top_k, columns = manifest.params["top_k"], len(terms)
    for s, p, t in zip(manifest.shards, passages, tags):
        check_values(root, passages_name(s["shard"]), "passages", p)
        check_values(root, tags_name(s["shard"]), "tags", t, columns=columns, top_k=top_k)
    check_values(root, IDS_DIR, "ids", ids)
    if verify:  # the stored hashes are those of the ids (an ordinary open trusts them: a stale one is a miss)
        hashes, rows = unique_ids(root, manifest, passages)
        if not (np.array_equal(hashes, ids["hashes"]) and np.array_equal(rows, ids["rows"])):
            raise IntegrityError(root / IDS_DIR / "hashes.npy", None, "damaged or crafted array: the ids' hashes "
                                 f"are not those of the passage ids; {REBUILD}")
    repeated_ids(root, manifest, passages, ids["hashes"], ids["rows"])
    return IndexArrays(passages, tags, vocab, terms, tag_terms, ids["hashes"], ids["rows"])


def sorted_id_hashes(passages: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """Every passage id's hash (:func:`~factcheck.tagging.packing.hash_packed`), sorted, and
    the row of each (int64): what ``ids/`` stores. O(n log n): done at tag time and by verify."""
    hashes = [hash_packed(p["ids"], p["id_offsets"]) for p in passages]
    h = np.concatenate(hashes) if hashes else np.zeros(0, np.uint64)
    order = np.argsort(h, kind="stable")
    return h[order], order.astype(np.int64)


def unique_ids(root: Path | None, manifest: "Manifest", passages: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """:func:`sorted_id_hashes`, with :func:`repeated_ids`' check."""
    h, order = sorted_id_hashes(passages)
    repeated_ids(root, manifest, passages, h, order)
    return h, order


def repeated_ids(root: Path | None, manifest: "Manifest", passages: list[dict], h: np.ndarray,
                 order: np.ndarray) -> None:
    """An :class:`IntegrityError` naming an id listed twice and the files that hold it (a
    lookup would find one of them, the other never), found among the ids whose sorted hashes
    ``h`` (rows ``order``) are equal: linear, no id decoded but those. ``root`` None: passages
    held in memory, whose repeated id is the caller's input error."""
    same = np.flatnonzero(h[1:] == h[:-1])
    if len(same):  # equal hashes: compare the ids themselves (a collision is not a duplicate)
        starts = np.array([s["start"] for s in manifest.shards], dtype=np.int64)

        def where(row: int) -> tuple[str, Path]:
            shard = int(np.searchsorted(starts, row, side="right")) - 1
            local = row - int(starts[shard])
            off = passages[shard]["id_offsets"]
            pid = bytes(passages[shard]["ids"][off[local]:off[local + 1]]).decode("utf-8")
            return pid, None if root is None else root / passages_name(manifest.shards[shard]["shard"]) / "ids.npy"

        seen: dict[str, Path] = {}
        shared = np.unique(np.concatenate([same, same + 1]))  # every row of a shared hash (equal ones are adjacent)
        for i in shared.tolist():
            pid, file = where(int(order[i]))
            if pid in seen and root is None:
                raise InputError(None, None, f"the passage id {pid!r} is given twice", param="evidence")
            if pid in seen:
                files = str(file) if seen[pid] == file else f"{seen[pid]} and {file}"
                raise IntegrityError(file, None, f"damaged or crafted index: the passage id {pid!r} is listed "
                                     f"twice (in {files}); {REBUILD}")
            seen[pid] = file


def content_key(*parts) -> str:
    """sha256 of the parts as canonical JSON: the key of a done record or a plan."""
    return sha256_bytes(json.dumps(parts, sort_keys=True).encode())


def _done(name: str) -> str:
    return f"{WORK_DIR}/done/{name.replace('/', '__')}.json"


def mark_done(root: Path, name: str, key: str, files: dict) -> None:
    """Record that ``name`` was written whole for ``key``; ``files``: {file name: ``{"sha256", ...}``}."""
    write_record(Path(root) / _done(name), {"key": key, "files": files})


def is_done(root: Path, name: str, key: str) -> dict | None:
    """The ``files`` of ``name``'s done record if it matches ``key`` and the bytes on disk, else None."""
    record = keyed_record(root, _done(name), key)
    return record["files"] if record and holds_files(Path(root) / name, record["files"], verify=True) else None


def recorded_files(root: Path, name: str) -> dict:
    """The ``files`` of a done record, not hashed again (this run wrote or checked them)."""
    return read_record(root, _done(name), error=IntegrityError)["files"]


@dataclass
class Manifest:
    data: dict

    @property
    def shards(self) -> list[dict]:
        return self.data["shards"]

    @property
    def n_passages(self) -> int:
        return self.data["passages"]

    @property
    def params(self) -> dict:
        return self.data["params"]

    def files(self) -> dict[str, str]:
        """Every file the manifest vouches for -> its sha256."""
        return {name: entry["sha256"] for name, entry in self.data["files"].items()}

    def folders(self) -> dict[str, dict]:
        """Folder -> {file name: its manifest entry}."""
        out: dict[str, dict] = {}
        for name, entry in self.data["files"].items():
            folder, _, fname = name.rpartition("/")
            out.setdefault(folder, {})[fname] = entry
        return out


def expected_files(data: dict) -> dict[str, dict[str, int]]:
    """Each file a manifest must list -> its length (-1 when the data decides)."""
    out = {}

    def add(folder, kind, lengths):
        for name in ARRAYS[kind]:
            if kind == "passages" and name in ("titles", "title_offsets") and not data.get("titles"):
                continue
            out[f"{folder}/{name}.npy"] = lengths.get(name, -1)

    for s in data["shards"]:
        n = s["passages"] + 1
        add(passages_name(s["shard"]), "passages", {"id_offsets": n, "text_offsets": n, "title_offsets": n})
        add(tags_name(s["shard"]), "tags", {"indptr": n})
    v, t = data["vocabulary"]["size"], data["tag_vocabulary"]["size"]
    add(VOCABULARY_DIR, "vocabulary", {"term_offsets": v + 1, "idf": v, "tag_term_offsets": t + 1, "tag_idf": t})
    add(IDS_DIR, "ids", {"hashes": data["passages"], "rows": data["passages"]})
    return out


def read_manifest(root: Path) -> Manifest:
    """The index's manifest, checked: its own checksum, its format, the fields readers use."""
    root = Path(root)
    path = root / MANIFEST
    if not root.is_dir():
        raise InputError(root, None, "no such index directory")
    if not path.is_file() and not path.is_symlink():
        if any(True for sub in ("passages", "tags", "models") for _ in (root / sub).glob("*.joblib")):
            raise IntegrityError(root, None, "an unfinished index of an older format (joblib shards): rebuild it "
                                 f"with `factcheck tag EVIDENCE --out {root} --force`")
        raise IntegrityError(path, None, "missing: not a complete tag index "
                             "(run `factcheck tag EVIDENCE --out DIR` to build or resume it)")
    data = read_record(root, MANIFEST, error=IntegrityError, fmt=MANIFEST_FORMAT, checksum=MANIFEST_CHECKSUM,
                       what="manifest", hint=lambda data: _rebuild(root, data))
    try:
        _check_manifest(data)
    except (_Bad, KeyError, TypeError, AttributeError) as exc:
        why = " ".join(map(str, exc.args)) if isinstance(exc, _Bad) else "a field is missing or of the wrong type"
        raise IntegrityError(path, None, f"not a well-formed manifest ({why}); {REBUILD}") from None
    return Manifest(data)


def _rebuild(root: Path, data: dict | None) -> str:
    source = data.get("input") if isinstance(data, dict) else None
    source = source.get("name") if isinstance(source, dict) else None
    return f"rebuild it with `factcheck tag {source if isinstance(source, str) else 'EVIDENCE'} --out {root} --force`"


_SHA256 = re.compile(r"[0-9a-f]{64}")


def _count(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _Bad(what, "is not a count")
    return value


def _check_manifest(data: dict) -> None:
    """The fields readers use, as the tagging job writes them."""
    shards = data["shards"]
    if not isinstance(shards, list):
        raise _Bad("'shards'", "is not a list")
    start = 0
    for i, s in enumerate(shards):
        if s["shard"] != i or _count(s["start"], "a shard's start") != start:
            raise _Bad(f"shard {i}", "is out of order or not contiguous")
        start += _count(s["passages"], "a shard's passages")
    if _count(data["passages"], "'passages'") != start:
        raise _Bad("'passages'", f"is {data['passages']}, the shards hold {start}")
    for key in ("vocabulary", "tag_vocabulary"):
        if _count(data[key]["size"], f"the {key} size") < 1:
            raise _Bad(f"the {key}", "is empty")
    if _count(data["params"]["top_k"], "top_k") < 1 or not isinstance(data.get("titles"), bool) \
            or not isinstance(data.get("index_titles"), bool):
        raise _Bad("'params', 'titles' or 'index_titles'", "is not what the tagging job writes")
    files, expected = data["files"], expected_files(data)
    if not isinstance(files, dict) or sorted(files) != sorted(expected):
        raise _Bad("'files'", "does not list exactly the arrays of the shards and vocabularies")
    for name, length in expected.items():
        entry = files[name]
        shape = entry["shape"]
        if not (isinstance(entry["sha256"], str) and _SHA256.fullmatch(entry["sha256"])):
            raise _Bad(name, "has no valid sha256")
        if not isinstance(shape, list) or len(shape) != 1 or \
                (_count(shape[0], f"{name}'s length") != length and length >= 0):
            raise _Bad(name, f"has the shape {shape}, expected [{length if length >= 0 else 'n'}]")
    for s in shards:
        folder = tags_name(s["shard"])
        if files[f"{folder}/terms.npy"]["shape"] != files[f"{folder}/weights.npy"]["shape"]:
            raise _Bad(folder, "does not hold one weight per term")


def write_manifest(root: Path, data: dict) -> None:
    """Write the manifest, ending with the sha256 of its other fields."""
    write_record(Path(root) / MANIFEST, data, MANIFEST_CHECKSUM)


def verify_index(root: Path, manifest: Manifest | None = None) -> Manifest:
    """Everything :func:`open_index` checks, every file's sha256, and no file or link the
    manifest does not list; an IntegrityError naming the first bad file."""
    root = Path(root)
    manifest = manifest or read_manifest(root)
    check_layout(root, manifest)
    open_index(root, manifest, verify=True)
    return manifest


def check_layout(root: Path, manifest: Manifest) -> None:
    """No symbolic link in the index's folders, no array the manifest does not list (a
    directory walk: cheap, done on every open)."""
    check_no_symlinks(root, (MANIFEST, PASSAGES_DIR, TAGS_DIR, VOCABULARY_DIR, IDS_DIR, VECTORS_DIR),
                      error=IntegrityError, refused=SYMLINK_READ_REFUSED)
    expected = manifest.files()
    for sub in (PASSAGES_DIR, TAGS_DIR, VOCABULARY_DIR, IDS_DIR):
        for path in sorted((root / sub).rglob("*.npy")):
            if path.relative_to(root).as_posix() not in expected:
                raise IntegrityError(path, None, "extra array not listed in the manifest")


def check_loadable(root: Path, manifest: Manifest) -> list:
    """Open every listed array with :func:`open_index`'s checks; the derived caches' statuses
    (:func:`check_caches`)."""
    open_index(root, manifest)
    return check_caches(root)


def check_caches(root: Path) -> list:
    """The derived caches' statuses; a damaged one is an :class:`IntegrityError` (an ordinary
    use reads its files without hashing them: verify is where a changed byte is found)."""
    statuses = DerivedCache(root).check()
    for status in statuses:
        if status.state == "damaged":
            raise IntegrityError(status.path, None, "derived cache does not match its checksums (damaged or "
                                 "edited); delete this folder: it is rebuilt when next used")
    return statuses
