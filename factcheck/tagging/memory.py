"""A tag index built in memory: the tagging job's own steps (count, vocabulary, tag, finish)
on arrays held in this process, no directory written; :func:`save_index` writes one as the
job would (docs/tagging.md).
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict
from pathlib import Path

import numpy as np

from factcheck.errors import InputError, as_path
from factcheck.formats.files import SYMLINK_REFUSED, atomic_dir
from factcheck.scoring.counting import count_terms
from factcheck.tagging import outdir, store
from factcheck.tagging.packing import pack_strings
from factcheck.tagging.tasks import tag_arrays
from factcheck.tagging.vocabulary import TermStats, Vocabulary, tag_vocabulary

__all__ = ["build_in_memory", "collection_record", "index_record", "save_index", "vocabulary_arrays"]

NO_WORD = "no passage contains a word to tag (every text is empty, stop words or numbers)"


def vocabulary_arrays(vocab: Vocabulary, tag_counts: np.ndarray, n: int,
                      tag_features: int) -> tuple[dict, list[str]]:
    """The vocabulary folder's arrays (the passage model's and the tag model's terms and IDF),
    and the tag model's terms in column order (``tag_counts[j]``: passages tagged ``vocab.terms[j]``)."""
    tag_vocab = tag_vocabulary(vocab.terms, tag_counts, n, tag_features)
    arrays = {}
    for prefix, v in (("", vocab), ("tag_", tag_vocab)):
        arrays[f"{prefix}terms"], arrays[f"{prefix}term_offsets"] = pack_strings(v.terms)
        arrays[f"{prefix}idf"] = v.idf
    return arrays, tag_vocab.terms


def index_record(plan: dict, plan_key: str, entries: list[dict], titles: bool, index_titles: bool,
                 vocab: Vocabulary, tag_terms: list[str]) -> dict:
    """The manifest of an index but its ``files`` (``entries``: one per shard, in order)."""
    return {
        **plan,
        "plan_key": plan_key,
        "passages": sum(e["passages"] for e in entries),
        "empty_tags": sum(e["empty_tags"] for e in entries),
        "titles": titles,
        "index_titles": index_titles,
        "vocabulary": {"size": len(vocab.terms), "sha256": vocab.digest(), "analyzer": "text"},
        "tag_vocabulary": {"size": len(tag_terms), "analyzer": "tags",
                           "sha256": hashlib.sha256("\n".join(tag_terms).encode()).hexdigest()},
        "shards": entries,
    }


def collection_record(passages: list[dict], titled: bool, index_titles: bool) -> dict:
    """What a manifest records about passages given in memory: their checksum stands for a
    file's. ``passages``: their passages arrays, shard by shard in order; the checksum is that
    of the ids, texts and titles packed whole (:func:`~factcheck.tagging.packing.pack_strings`),
    whatever the shards."""
    h = hashlib.sha256()
    size = 0
    for name in ("ids", "texts", "titles"):
        if name == "titles" and not titled:
            h.update(b"\0none")
            continue
        for p in passages:  # the whole buffer is the shards' one after another
            h.update(np.ascontiguousarray(p[name], dtype="|u1").tobytes())
            size += len(p[name])
        # the whole offsets: 0, then each shard's ends after the earlier shards' bytes
        h.update(np.zeros(1, dtype="<i8").tobytes())
        base = 0
        for p in passages:
            offsets = p[f"{name[:-1]}_offsets"]
            h.update(np.ascontiguousarray(offsets[1:] + base, dtype="<i8").tobytes())
            base += int(offsets[-1])
    record = {"name": "(in memory)", "format": "memory", "sha256": h.hexdigest(), "bytes": size}
    if titled:
        record["index_titles"] = index_titles
    return record


def build_in_memory(ids: list[str], texts: list[str], titles: list[str] | None, index_titles: bool, params,
                    input_record: dict | None = None, param: str = "evidence"):
    """The manifest, arrays and stem counts of these passages' index, in memory
    (``TagIndex(None, ...)`` opens them; the counts, one :class:`~factcheck.scoring.counting.ShardCounts`
    a shard of its :meth:`~factcheck.tagging.index.TagIndex.text_batches`, go to its BM25 fit).

    ``params`` is the job's :class:`~factcheck.tagging.job.TagParams`, ``input_record`` what
    the manifest says about the input (None: passages given in memory, :func:`collection_record`):
    the arrays are those ``factcheck tag`` writes for the same passages and parameters, and the
    manifest too when the record is a file's.
    """
    params.validate()
    size = params.shard_size
    bounds = list(range(0, len(ids), size))
    indexed = titles is not None and index_titles  # the manifest's "index_titles": what TagIndex.texts reads
    passages, counts, stats = [], [], TermStats.empty()
    for start in bounds:  # count (the job's map), merged in input order
        p = store.typed("passages", store.passage_arrays(
            ids[start:start + size], texts[start:start + size], None if titles is None else titles[start:start + size]))
        # The texts TagIndex.text_batches yields for this shard (the strings packed in p, not
        # decoded again), counted as count_corpus counts a batch.
        shard = texts[start:start + size]
        if indexed:
            shard = [store.indexed_text(t, x) for t, x in zip(titles[start:start + size], shard)]
        c = count_terms(shard, "stems")
        stats.add(c.terms, c.totals, c.doc_freq, c.matrix.shape[0])
        passages.append(p)
        counts.append(c)
    vocab = Vocabulary.from_stats(stats, params.max_features)
    if not vocab.terms:
        raise InputError(None, None, NO_WORD, param=param)
    payload = (vocab.terms, vocab.idf, params.top_k)
    tags = [store.typed("tags", tag_arrays(c, payload)) for c in counts]
    tag_counts = np.zeros(len(vocab.terms), dtype=np.int64)
    entries = []
    for shard, (start, t) in enumerate(zip(bounds, tags)):
        tag_counts += np.bincount(t["terms"], minlength=len(vocab.terms))
        entries.append({"shard": shard, "start": start, "passages": len(t["indptr"]) - 1,
                        "empty_tags": int(np.count_nonzero(np.diff(t["indptr"]) == 0))})
    arrays, tag_terms = vocabulary_arrays(vocab, tag_counts, len(ids), params.tag_features)
    if input_record is None:
        input_record = collection_record(passages, titles is not None, index_titles)
    plan = {"format": store.MANIFEST_FORMAT, "params": asdict(params), "input": input_record}
    data = index_record(plan, store.content_key(plan), entries, titles is not None, titles is not None and index_titles,
                        vocab, tag_terms)
    vocabulary = store.typed("vocabulary", arrays)
    manifest = store.Manifest(data)
    id_hashes, id_rows = store.unique_ids(None, manifest, passages)
    return manifest, store.IndexArrays(passages, tags, vocabulary, vocab.terms, tag_terms, id_hashes, id_rows), counts


def save_index(index, path, force: bool = False) -> Path:
    """Write ``index`` into the directory ``path`` as ``factcheck tag`` lays one out, atomically.

    A directory holding the same index is kept as it is; one holding another index is
    replaced only with ``force``; anything else is refused.
    """
    dest = as_path(path, "path")
    if dest.is_symlink():  # keeping, wiping or replacing it would act on the link's target
        raise InputError(dest, None, SYMLINK_REFUSED)
    data = {k: v for k, v in index.manifest.data.items() if k != "files"}
    if (dest / store.MANIFEST).is_file():
        try:
            store.verify_index(dest, manifest := store.read_manifest(dest))
            same = manifest.data.get("plan_key") == data["plan_key"]
        except InputError:  # a damaged index (IntegrityError) is another index to replace
            same = False
        if same:
            return dest
        if not force:
            raise InputError(dest, None, "holds another index (or a damaged one); pass force=True to replace it",
                             param="path")
        # Built beside the old index and swapped in complete, as tag --force does: a stop or a
        # refusal part-way leaves the old index whole (wiping it first lost it).
        outdir.check_no_symlinks(dest, outdir.INDEX_ENTRIES)
        outdir.check_wipeable(dest)
        outdir.check_replacement(dest)
        replacement = dest / outdir.REPLACEMENT
        outdir.discard(replacement)
        _write_index(index, replacement, data)
        outdir.replace_index(dest, replacement)
        return dest
    _write_index(index, dest, data)
    return dest


def _write_index(index, dest: Path, data: dict) -> None:
    arrays = index._arrays
    with atomic_dir(dest) as tmp:
        files = {}

        def write(name: str, kind: str, folder_arrays: dict) -> None:
            written = store.write_arrays(tmp / name, kind, folder_arrays)
            files.update({f"{name}/{f}": entry for f, entry in written.items()})
        for s, p, t in zip(data["shards"], arrays.passages, arrays.tags):
            write(store.passages_name(s["shard"]), "passages", p)
            write(store.tags_name(s["shard"]), "tags", t)
        write(store.VOCABULARY_DIR, "vocabulary", arrays.vocabulary)
        write(store.IDS_DIR, "ids", {"hashes": arrays.id_hashes, "rows": arrays.id_rows})
        store.write_manifest(tmp, {**data, "files": dict(sorted(files.items()))})
