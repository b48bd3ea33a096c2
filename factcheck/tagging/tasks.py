"""The worker bodies of the tagging job's two map stages: count a shard, tag a shard. Each
reads its shard from the output directory and writes its result and "done" record.
"""

from __future__ import annotations

from pathlib import Path

import scipy.sparse as sp

from factcheck.scoring.counting import ShardCounts, count_terms
from factcheck.scoring.tfidf import tfidf_rows
from factcheck.scoring.topk import top_k_rows
from factcheck.tagging import store
from factcheck.tagging.packing import pack_strings, unpack_strings
from factcheck.text.porter import porter_stemmer

__all__ = ["count_shard", "counts_arrays", "tag_arrays", "tag_shard", "warm_up"]


def warm_up() -> None:
    """Load what the tasks need (a worker's imports overlap the driver's reading)."""
    porter_stemmer()  # count_shard's stemmer


def count_shard(root: str, shard: int, key: str, index_titles: bool) -> None:
    """Count the stems of passage shard ``shard`` into the arrays of ``work/counts-NNNNN/``."""
    root = Path(root)
    name = store.passages_name(shard)
    p = store.read_checked(root, name, "passages", store.recorded_files(root, name))
    name = store.counts_name(shard)
    store.mark_done(root, name, key, store.write_arrays(root / name, "counts",
                                                        counts_arrays(store.shard_texts(p, index_titles))))


def counts_arrays(texts: list[str]) -> dict:
    """The arrays of a counts folder for ``texts`` (a shard's, as the index reads them)."""
    counts = count_terms(texts)
    m = counts.matrix
    terms, offsets = pack_strings(counts.terms)
    return {"terms": terms, "term_offsets": offsets, "totals": counts.totals, "doc_freq": counts.doc_freq,
            "indptr": m.indptr, "indices": m.indices, "data": m.data}


def read_counts(root: Path, shard: int) -> tuple[list[str], dict]:
    """The terms and arrays of ``work/counts-NNNNN/``, as its done record lists them."""
    name = store.counts_name(shard)
    c = store.read_checked(root, name, "counts", store.recorded_files(root, name))
    return unpack_strings(c["terms"], c["term_offsets"]), c


def tag_shard(root: str, shard: int, key: str, payload) -> None:
    """Tag shard ``shard`` with its top-k TF-IDF terms; ``payload``: (vocabulary, IDF, k)."""
    root = Path(root)
    local_terms, c = read_counts(root, shard)
    n = len(c["indptr"]) - 1
    local = ShardCounts(local_terms, sp.csr_matrix((c["data"], c["indices"], c["indptr"]), shape=(n, len(local_terms))))
    name = store.tags_name(shard)
    store.mark_done(root, name, key, store.write_arrays(root / name, "tags", tag_arrays(local, payload)))


def tag_arrays(local: ShardCounts, payload) -> dict:
    """The arrays of a tags folder: each passage's top-k TF-IDF terms from its counts ``local``
    (:func:`~factcheck.scoring.counting.count_terms`'s, or a counts folder's read back)."""
    vocab_terms, idf, top_k = payload
    # canonical order -> identical float sums in every shard layout
    counts = local.to_columns(dict(zip(vocab_terms, range(len(vocab_terms)))))
    weights = tfidf_rows(counts, idf)
    indptr, terms, values = top_k_rows(weights, top_k)
    return {"indptr": indptr, "terms": terms, "weights": values}
