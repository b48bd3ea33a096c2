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
in a one-line error.
Nothing in the manifest depends on the number of jobs, the backend, time or paths, so
the same input and parameters give the same bytes.
"""

from __future__ import annotations

import hashlib
import json
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


def load_shard(path: Path, kind: str, mmap: bool = False) -> dict:
    """Load a shard file we wrote; anything unreadable is an IntegrityError naming it.

    Read with the restricted unpickler: a shard naming anything but numpy arrays and
    plain containers is refused before any of it is imported (a crafted index cannot
    run code, even one whose manifest checksums were recomputed to match).
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
    return obj


VECTORIZER_ANALYZERS = ("text", "tags")


def write_vectorizer(path: Path, terms: list[str], idf: np.ndarray, analyzer: str) -> str:
    """A fitted TF-IDF vectoriser as arrays (its terms, IDF and analyzer name), not a pickle."""
    term_buf, term_off = pack_strings(list(terms))
    return dump_joblib_atomic(path, {"kind": "vectorizer", "analyzer": analyzer, "term_bytes": term_buf,
                                     "term_offsets": term_off, "idf": np.asarray(idf, dtype=np.float64)})


def load_vectorizer(path: Path):
    """The scikit-learn vectoriser stored by :func:`write_vectorizer`."""
    from factcheck.tagging.tag_model import make_vectorizer
    from factcheck.text.analyzer import TextAnalyzer, split_tags
    obj = load_shard(path, "vectorizer")
    terms = unpack_strings(obj["term_bytes"], obj["term_offsets"])
    if obj.get("analyzer") not in VECTORIZER_ANALYZERS or len(terms) != len(obj["idf"]):
        raise IntegrityError(path, None, "not a vectoriser file")
    return make_vectorizer(terms, np.asarray(obj["idf"], dtype=np.float64),
                           TextAnalyzer() if obj["analyzer"] == "text" else split_tags)


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
    return Manifest(data)


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
    for s in manifest.shards:
        load_shard(root / s["passages_file"], "passages", mmap=True)
        load_shard(root / s["tags_file"], "tags", mmap=True)
    for name in manifest.data["models"]:
        load_shard(root / MODELS_DIR / name, "vectorizer", mmap=True)
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
