"""The tag index on disk: shard files, the manifest, and their verification.

Layout of an index directory::

    manifest.json              written last, atomically: its presence means "complete"
    passages/passages-NNNNN.joblib   ids + texts (+ titles, when the source has them) of shard N (packed UTF-8)
    tags/tags-NNNNN.joblib           top-k tags of shard N (CSR: indptr, terms, weights)
    models/passage_tfidf.joblib      the fitted 20K-term TF-IDF vectoriser
    models/tag_tfidf.joblib          the fitted 1K-term tag vectoriser
    work/                            resumable intermediate state (removed when done)
    vectors/                         open mode only: passage vectors with their own manifest
                                     (:mod:`factcheck.tagging.vectors`); not in this manifest
    bm25/<method>-k1_<k1>-b_<b>/     derived caches (optional, rebuilt when missing or damaged,
    rerank/terms-<key>/              each with its own factcheck-key.json of sha256s; see
    chunks/w<window>-o<overlap>/     :mod:`factcheck.tagging.derived`); not in the manifest

Every file of the index proper is listed in the manifest with its sha256, so loading an
index can prove it is whole: a truncated, bit-flipped, missing or extra shard is named
in a one-line error. Checksums cannot prove a file was written *by us* (whoever can write
the directory can recompute them), so every array is also checked for the structure the
code after it relies on before anything uses it (:func:`load_shard`): dtypes and lengths
as the manifest's counts say, CSR ``indptr`` from 0, monotone, ending at the number of
terms, term ids inside the vocabulary, string offsets monotone, inside their buffer and
on UTF-8 character starts, finite weights. Why: scipy's sparse code trusts those
invariants; a crafted shard that broke them passed ``verify`` and then aborted the
process (``double free``, exit 134) or crashed it (SIGSEGV in ``tocsc``).
Nothing in the manifest depends on the number of jobs, the backend, time or paths, so
the same input and parameters give the same bytes.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from factcheck.errors import FactcheckWarning, InputError, IntegrityError
from factcheck.formats.files import dump_joblib_atomic, dumps_json, sha256_bytes, sha256_file, write_json_atomic
from factcheck.formats.safe_load import UnsafeFile, load_joblib_arrays
from factcheck.tagging.derived import DerivedCache
from factcheck.tagging.packing import pack_strings, unpack_strings

MANIFEST = "manifest.json"
# /2: the vectorisers are stored as arrays + vocabulary (restricted loader), not pickled
# scikit-learn objects as in /1. A /1 index is refused with a "rebuild" message, and
# `factcheck tag ... --force` replaces it (its plan key differs, so it is never reused).
MANIFEST_FORMAT = "factcheck-tag-index/2"
FORMAT_FAMILY = "factcheck-tag-index/"
MANIFEST_CHECKSUM = "manifest_sha256"
PASSAGES_DIR, TAGS_DIR, MODELS_DIR, WORK_DIR = "passages", "tags", "models", "work"
VECTORS_DIR = "vectors"  # the open mode's passage vectors (factcheck.tagging.vectors)
MODEL_FILES = ("passage_tfidf.joblib", "tag_tfidf.joblib")


def passages_name(shard: int) -> str:
    return f"{PASSAGES_DIR}/passages-{shard:05d}.joblib"


def tags_name(shard: int) -> str:
    return f"{TAGS_DIR}/tags-{shard:05d}.joblib"


def counts_name(shard: int) -> str:
    return f"{WORK_DIR}/counts-{shard:05d}.joblib"


# --------------------------------------------------------------------------- shard files

def write_passages_shard(path: Path, start: int, ids: list[str], texts: list[str],
                         titles: list[str] | None = None, index_titles: bool = False) -> str:
    """A passages shard; ``titles`` (``""`` for none) only for a source that has them, so a
    source without titles gives the same bytes as before titles existed."""
    id_buf, id_off = pack_strings(ids)
    text_buf, text_off = pack_strings(texts)
    shard = {
        "kind": "passages", "start": int(start), "count": len(ids),
        "id_bytes": id_buf, "id_offsets": id_off,
        "text_bytes": text_buf, "text_offsets": text_off,
    }
    if titles is not None:
        title_buf, title_off = pack_strings(titles)
        shard.update(title_bytes=title_buf, title_offsets=title_off, index_titles=bool(index_titles))
    return dump_joblib_atomic(path, shard)


def indexed_text(title: str | None, text: str) -> str:
    """What is tagged and retrieved when titles are indexed: the title, a newline, the text."""
    return f"{title}\n{text}" if title else text


def shard_texts(p: dict, start: int = 0, stop: int | None = None) -> list[str]:
    """The texts of a loaded passages shard as the index reads them: with the titles in
    front when the source's titles are indexed (:func:`indexed_text`)."""
    texts = unpack_strings(p["text_bytes"], p["text_offsets"], start, stop)
    if p.get("index_titles"):
        titles = unpack_strings(p["title_bytes"], p["title_offsets"], start, stop)
        texts = [indexed_text(t, x) for t, x in zip(titles, texts)]
    return texts


def write_tags_shard(path: Path, start: int, indptr: np.ndarray, terms: np.ndarray,
                     weights: np.ndarray) -> str:
    return dump_joblib_atomic(path, {
        "kind": "tags", "start": int(start), "count": int(len(indptr) - 1),
        "indptr": indptr.astype(np.int64), "terms": terms.astype(np.int32),
        "weights": weights.astype(np.float64),
    })


def load_shard(path: Path, kind: str, mmap: bool = False, expect: dict | None = None) -> dict:
    """Load a shard file we wrote; anything unreadable is an IntegrityError naming it.

    Read with the restricted unpickler: a shard naming anything but numpy arrays and
    plain containers is refused before any of it is imported (a crafted index cannot
    run code, even one whose manifest checksums were recomputed to match). Its arrays are
    then checked for the structure the readers rely on (:func:`check_structure`);
    ``expect`` holds what the manifest says of it (``start``, ``count``, ``columns``: the
    vocabulary size term ids must stay below, ``top_k``).
    """
    try:
        obj = load_joblib_arrays(path, mmap=mmap)
    except FileNotFoundError:
        raise IntegrityError(path, None, "missing shard") from None
    except UnsafeFile as exc:
        raise IntegrityError(path, None, f"refusing to load: it names {exc}, which could run code "
                             "(only numpy arrays and plain containers are loaded; an index built by "
                             "an older factcheck must be rebuilt with `factcheck tag ... --force`)") from None
    except Exception as exc:  # joblib/pickle raise many types on corrupt files
        raise IntegrityError(path, None, f"unreadable shard ({type(exc).__name__})") from None
    if not isinstance(obj, dict) or obj.get("kind") != kind:
        raise IntegrityError(path, None, f"not a {kind} shard")
    check_structure(path, obj, expect or {})
    return obj


# --------------------------------------------------------------------------- structure

class _Bad(Exception):
    """A structural violation (the message says which array and how)."""


def _int(obj: dict, key: str) -> int:
    value = obj.get(key)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 0:
        raise _Bad(f"{key!r} is not a count")
    return int(value)


def _array(obj: dict, key: str, kinds: str, length: int | None = None) -> np.ndarray:
    """``obj[key]``: a 1-D numpy array whose dtype kind is one of ``kinds`` (and, if given,
    of ``length`` items)."""
    a = obj.get(key)
    if not isinstance(a, np.ndarray) or a.ndim != 1 or a.dtype.kind not in kinds or a.dtype.hasobject:
        found = f"{a.dtype} array of {a.ndim} dimensions" if isinstance(a, np.ndarray) else type(a).__name__
        raise _Bad(f"{key!r} is not a 1-D array of the expected type (found {found})")
    if length is not None and len(a) != length:
        raise _Bad(f"{key!r} has {len(a)} items, expected {length}")
    return a


def _bounds(key: str, offsets: np.ndarray, end: int) -> None:
    """Offsets (CSR ``indptr`` or string offsets): from 0, never decreasing, ending at ``end``."""
    if len(offsets) == 0 or offsets[0] != 0 or offsets[-1] != end:
        raise _Bad(f"{key!r} must start at 0 and end at {end}")
    if len(offsets) > 1 and np.any(offsets[1:] < offsets[:-1]):
        raise _Bad(f"{key!r} decreases")


def _packed(obj: dict, prefix: str, count: int) -> None:
    """``<prefix>_bytes`` (UTF-8) and ``<prefix>_offsets`` (``count + 1`` boundaries)."""
    buf = _array(obj, f"{prefix}_bytes", "u")
    if buf.dtype != np.uint8:
        raise _Bad(f"'{prefix}_bytes' is not a byte array")
    offsets = _array(obj, f"{prefix}_offsets", "i", count + 1)
    _bounds(f"{prefix}_offsets", offsets, len(buf))
    inner = np.asarray(offsets[:-1])
    inner = inner[inner < len(buf)]
    # Every string starts on a character (not on a UTF-8 continuation byte), and the whole
    # buffer decodes: then every string between two offsets decodes too.
    if np.any((np.asarray(buf)[inner] & 0xC0) == 0x80):
        raise _Bad(f"'{prefix}_offsets' cut a UTF-8 character")
    if len(buf) and np.asarray(buf).max() >= 0x80:
        try:
            codecs.utf_8_decode(memoryview(np.ascontiguousarray(buf)), "strict", True)
        except UnicodeDecodeError as exc:
            raise _Bad(f"'{prefix}_bytes' is not UTF-8 (byte {exc.start})") from None


def _csr(obj: dict, rows: int, columns: int | None, indptr_key: str, index_key: str,
         value_key: str, value_kinds: str) -> np.ndarray:
    indptr = _array(obj, indptr_key, "i", rows + 1)
    indices = _array(obj, index_key, "i")
    _array(obj, value_key, value_kinds, len(indices))
    _bounds(indptr_key, indptr, len(indices))
    if len(indices) and indices.min() < 0:
        raise _Bad(f"{index_key!r} holds negative ids")
    if len(indices) and columns is not None and indices.max() >= columns:
        raise _Bad(f"{index_key!r} holds ids of {columns} or more (the vocabulary has {columns} terms)")
    return indptr


def check_structure(path: Path, obj: dict, expect: dict) -> None:
    """Raise an IntegrityError naming ``path`` unless the shard ``obj`` has the structure
    the readers of its kind rely on (see the module docstring) and what ``expect`` says."""
    try:
        _check(obj, expect)
    except _Bad as exc:
        raise IntegrityError(path, None, f"damaged or crafted {obj.get('kind')} file: {exc}; rebuild the "
                             "index with `factcheck tag ... --force`") from None


def _check(obj: dict, expect: dict) -> None:
    kind = obj["kind"]
    if kind == "vectorizer":
        n = len(_array(obj, "term_offsets", "i")) - 1
        _packed(obj, "term", n)
        idf = _array(obj, "idf", "f", n)
        if not np.all(np.isfinite(idf)) or np.any(idf <= 0):
            raise _Bad("'idf' holds values that are not positive finite numbers")
        if "columns" in expect and n != expect["columns"]:
            raise _Bad(f"{n} terms, the manifest says {expect['columns']}")
        return
    count = _int(obj, "count")
    for key in ("start", "count"):
        if key in expect and _int(obj, key) != expect[key]:
            raise _Bad(f"{key} {obj[key]}, the manifest says {expect[key]}")
    if kind == "passages":
        _int(obj, "start")
        _packed(obj, "id", count)
        _packed(obj, "text", count)
        if "title_bytes" in obj or "title_offsets" in obj:  # a source with titles
            _packed(obj, "title", count)
            if not isinstance(obj.get("index_titles"), (bool, np.bool_)):
                raise _Bad("'index_titles' is not true or false")
    elif kind == "tags":
        _int(obj, "start")
        indptr = _csr(obj, count, expect.get("columns"), "indptr", "terms", "weights", "f")
        if not np.all(np.isfinite(obj["weights"])):
            raise _Bad("'weights' holds values that are not finite")
        if "top_k" in expect and count and int(np.diff(indptr).max()) > expect["top_k"]:
            raise _Bad(f"a passage has more than top_k = {expect['top_k']} tags")
    elif kind == "counts":
        n_terms = len(_array(obj, "term_offsets", "i")) - 1
        _packed(obj, "term", n_terms)
        _array(obj, "totals", "iu", n_terms)
        _array(obj, "doc_freq", "iu", n_terms)
        _csr(obj, count, n_terms, "indptr", "indices", "data", "iu")


VECTORIZER_ANALYZERS = ("text", "tags")


def write_vectorizer(path: Path, terms: list[str], idf: np.ndarray, analyzer: str) -> str:
    """A fitted TF-IDF vectoriser as arrays (its terms, IDF and analyzer name), not a pickle."""
    term_buf, term_off = pack_strings(list(terms))
    return dump_joblib_atomic(path, {"kind": "vectorizer", "analyzer": analyzer, "term_bytes": term_buf,
                                     "term_offsets": term_off, "idf": np.asarray(idf, dtype=np.float64)})


def load_vectorizer(path: Path, expect: dict | None = None):
    """The scikit-learn vectoriser stored by :func:`write_vectorizer`."""
    from factcheck.tagging.tag_model import make_vectorizer
    from factcheck.text.analyzer import TextAnalyzer, split_tags
    obj = load_shard(path, "vectorizer", expect=expect)
    terms = _vectorizer_terms(path, obj)
    return make_vectorizer(terms, np.asarray(obj["idf"], dtype=np.float64),
                           TextAnalyzer() if obj["analyzer"] == "text" else split_tags)


def _vectorizer_terms(path: Path, obj: dict) -> list[str]:
    terms = unpack_strings(obj["term_bytes"], obj["term_offsets"])
    if obj.get("analyzer") not in VECTORIZER_ANALYZERS:
        raise IntegrityError(path, None, "not a vectoriser file")
    if len(set(terms)) != len(terms):  # a vocabulary maps each term to one column
        raise IntegrityError(path, None, "damaged or crafted vectorizer file: a term is listed twice")
    return terms


# --------------------------------------------------------------------------- done records

def content_key(*parts) -> str:
    """The key a done record or a plan is filed under: sha256 of the parts as canonical JSON.
    Anything that changes an output's bytes goes into its key, so a rerun with other
    inputs or parameters never mistakes an old file for its own."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def done_record_path(root: Path, name: str) -> Path:
    return root / WORK_DIR / "done" / (name.replace("/", "__") + ".json")


def mark_done(root: Path, name: str, key: str, sha256: str, **extra) -> None:
    """Record that ``name`` was completely written for ``key`` (after its rename)."""
    write_json_atomic(done_record_path(root, name), {"key": key, "sha256": sha256, **extra})


def is_done(root: Path, name: str, key: str) -> dict | None:
    """The done record of ``name`` if it matches ``key`` and the file's bytes, else None."""
    rec_path = done_record_path(root, name)
    try:
        rec = json.loads(rec_path.read_text("utf-8"))
    except (FileNotFoundError, ValueError):
        return None
    path = root / name
    if rec.get("key") != key or not path.is_file() or sha256_file(path) != rec.get("sha256"):
        return None
    return rec


def recorded_sha256(root: Path, name: str) -> str:
    """The sha256 a done record holds, without re-reading the file: for the manifest,
    once this run has written the file or :func:`is_done` has checked its bytes (hashing
    the 1.2M corpus's passage and tag shards again costs ~0.45 s)."""
    return json.loads(done_record_path(root, name).read_text("utf-8"))["sha256"]


# --------------------------------------------------------------------------- manifest

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
        out = {}
        for s in self.shards:
            out[s["passages_file"]] = s["passages_sha256"]
            out[s["tags_file"]] = s["tags_sha256"]
        for name, digest in self.data["models"].items():
            out[f"{MODELS_DIR}/{name}"] = digest
        return out


def read_manifest(root: Path) -> Manifest:
    root = Path(root)
    path = root / MANIFEST
    if not root.is_dir():
        raise InputError(root, None, "no such index directory")
    if not path.is_file():
        raise IntegrityError(path, None, "missing: not a complete tag index "
                             "(run `factcheck tag EVIDENCE --out DIR` to build or resume it)")
    try:
        data = json.loads(path.read_text("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise IntegrityError(path, None, f"corrupt manifest ({exc.__class__.__name__})") from None
    if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT:
        found = data.get("format") if isinstance(data, dict) else None
        if isinstance(found, str) and found.startswith(FORMAT_FAMILY):
            raise IntegrityError(path, None, f"an index of an older format ({found}; this version reads "
                                 f"{MANIFEST_FORMAT}): rebuild it with `factcheck tag EVIDENCE --out DIR --force`")
        raise IntegrityError(path, None, f"not a {MANIFEST_FORMAT} manifest")
    if data.pop(MANIFEST_CHECKSUM, None) != _manifest_digest(data):
        raise IntegrityError(path, None, "manifest checksum mismatch (corrupted or edited); "
                             "rebuild the index with `factcheck tag ... --force`")
    try:
        _check_manifest(data)
    except _Bad as exc:
        raise IntegrityError(path, None, f"not a well-formed manifest ({exc}); rebuild the index with "
                             "`factcheck tag ... --force`") from None
    return Manifest(data)


_SHA256 = re.compile(r"[0-9a-f]{64}")


def _check_manifest(data: dict) -> None:
    """The fields readers use, with the types and relations the tagging job writes: shards
    numbered from 0, contiguous, their files named as this module names them (never a
    path outside the index), counts that add up, sizes that are counts."""
    def count(value, what):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise _Bad(f"{what} is not a count")
        return value

    shards = data.get("shards")
    if not isinstance(shards, list) or not all(isinstance(s, dict) for s in shards):
        raise _Bad("'shards' is not a list of shards")
    start = 0
    for i, s in enumerate(shards):
        if s.get("shard") != i or count(s.get("start"), "a shard's start") != start:
            raise _Bad(f"shard {i} is out of order or not contiguous")
        start += count(s.get("passages"), "a shard's passages")
        if s.get("passages_file") != passages_name(i) or s.get("tags_file") != tags_name(i):
            raise _Bad(f"shard {i} names unexpected files")
        if not all(isinstance(s.get(k), str) and _SHA256.fullmatch(s[k]) for k in ("passages_sha256", "tags_sha256")):
            raise _Bad(f"shard {i} has no valid sha256")
    if count(data.get("passages"), "'passages'") != start:
        raise _Bad(f"'passages' is {data.get('passages')}, the shards hold {start}")
    models = data.get("models")
    if not isinstance(models, dict) or sorted(models) != sorted(MODEL_FILES) or \
            not all(isinstance(v, str) and _SHA256.fullmatch(v) for v in models.values()):
        raise _Bad("'models' does not list the two vectorisers with their sha256")
    for key in ("vocabulary", "tag_vocabulary"):
        if not isinstance(data.get(key), dict) or count(data[key].get("size"), f"the {key} size") < 1:
            raise _Bad(f"{key!r} has no size")
    params = data.get("params")
    if not isinstance(params, dict) or count(params.get("top_k"), "top_k") < 1:
        raise _Bad("'params' has no top_k")


def expected(manifest: "Manifest") -> dict[str, tuple[str, dict]]:
    """Each file the manifest lists -> (its kind, what the manifest says of it: the
    ``expect`` of :func:`load_shard`)."""
    vocab = manifest.data["vocabulary"]["size"]
    out = {}
    for s in manifest.shards:
        out[s["passages_file"]] = ("passages", {"start": s["start"], "count": s["passages"]})
        out[s["tags_file"]] = ("tags", {"start": s["start"], "count": s["passages"], "columns": vocab,
                                        "top_k": manifest.params["top_k"]})
    out[f"{MODELS_DIR}/passage_tfidf.joblib"] = ("vectorizer", {"columns": vocab})
    out[f"{MODELS_DIR}/tag_tfidf.joblib"] = ("vectorizer", {"columns": manifest.data["tag_vocabulary"]["size"]})
    return out


def check_vocabularies(root: Path, manifest: "Manifest") -> None:
    """The tag vectoriser's terms are passage-vocabulary terms (the tag space maps one onto
    the other); each vectoriser's size is checked by :func:`load_shard`."""
    root = Path(root)
    exp = expected(manifest)
    terms = {}
    for name in MODEL_FILES:
        rel = f"{MODELS_DIR}/{name}"
        terms[name] = _vectorizer_terms(root / rel, load_shard(root / rel, "vectorizer", mmap=True, expect=exp[rel][1]))
    if not set(terms["tag_tfidf.joblib"]) <= set(terms["passage_tfidf.joblib"]):
        raise IntegrityError(root / MODELS_DIR / "tag_tfidf.joblib", None, "damaged or crafted vectorizer "
                             "file: it holds terms the passage vocabulary does not")


def _manifest_digest(data: dict) -> str:
    return sha256_bytes(dumps_json(data).encode("utf-8"))


def write_manifest(root: Path, data: dict) -> None:
    """The manifest ends with the sha256 of its own other fields, so a flipped bit in a
    count or a parameter is caught as surely as one in a shard."""
    write_json_atomic(Path(root) / MANIFEST, {**data, MANIFEST_CHECKSUM: _manifest_digest(data)})


def verify_index(root: Path, manifest: Manifest | None = None) -> Manifest:
    """Check every file against the manifest; raise IntegrityError naming the first bad one."""
    root = Path(root)
    manifest = manifest or read_manifest(root)
    expected = manifest.files()
    for name, digest in expected.items():
        path = root / name
        if not path.is_file():
            raise IntegrityError(path, None, "missing shard listed in the manifest")
        if sha256_file(path) != digest:
            raise IntegrityError(path, None, "checksum mismatch (truncated or corrupted); "
                                 "rerun `factcheck tag` with the same arguments to repair it")
    for sub in (PASSAGES_DIR, TAGS_DIR, MODELS_DIR):
        for path in sorted((root / sub).glob("*.joblib")):
            if f"{sub}/{path.name}" not in expected:
                raise IntegrityError(path, None, "extra shard not listed in the manifest")
    return manifest


def check_loadable(root: Path, manifest: Manifest) -> None:
    """Open every listed file with the restricted loader (memory-mapped: cheap).

    Checksums prove a file is the one the manifest names, not that the manifest is
    honest: whoever writes the directory can recompute both. This proves nothing in the
    index would run code when loaded. Derived caches are checked too (see
    :func:`check_derived_caches`).
    """
    root = Path(root)
    for name, (kind, expect) in expected(manifest).items():
        load_shard(root / name, kind, mmap=True, expect=expect)
    check_vocabularies(root, manifest)
    check_derived_caches(root)


def check_derived_caches(root: Path) -> list:
    """The derived caches of the index (``bm25/``, ``rerank/``, ``chunks/``) against their
    own records: a damaged one is reported as a :class:`FactcheckWarning` (it is rebuilt,
    never used, when next needed); a missing one is fine. Returns their statuses."""
    statuses = DerivedCache(root).check()
    for status in statuses:
        if status.state == "damaged":
            warnings.warn(f"{status.path}: derived cache does not match its checksums; it will be "
                          "rebuilt when next used", FactcheckWarning, stacklevel=2)
    return statuses
