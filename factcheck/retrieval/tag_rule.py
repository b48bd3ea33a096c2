"""The 2024 tag rule (docs/retrieval.md), reproduced bit for bit and vectorised, but for
the passages sharing no tag with the claim: never returned (the 2024 fallback's fill)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from factcheck.errors import Interval
from factcheck.formats.npy import release
from factcheck.retrieval.base import Retriever, Scored, Selection
from factcheck.scoring.matrix import TermFill, TermMatrix, load_array, new_array
from factcheck.tagging.derived import DerivedCache
from factcheck.scoring.topk import rank_order, top_k
from factcheck.text.analyzer import analyze


CACHE_VERSION = "tag-rule/1"


def _rule_matrices(index, folder=None) -> tuple[TermMatrix, TermMatrix, np.ndarray]:
    """The rule's term-major tags (int16 ones), tag-space TF-IDF and tags per passage, one shard
    at a time: a pass counts each term's passages, a second fills the matrices (the same arrays
    as :meth:`~factcheck.scoring.matrix.TermMatrix.from_units` of every shard's rows joined). With
    ``folder`` they are written there as they are filled, then mapped (:class:`TermFill`)."""
    n_vocab, n_space, n = len(index.vocabulary), len(index.tag_vocabulary), len(index)

    def shards():
        for first, (indptr, terms) in index.tag_batches():
            tags = sp.csr_matrix((np.ones(len(terms), dtype=np.int16), terms, indptr),
                                 shape=(len(indptr) - 1, n_vocab), copy=True)  # the shard's arrays are read-only
            space = index.tag_space_rows(tags=(indptr, terms))  # a row's TF-IDF reads that row alone
            tags.sum_duplicates()  # each row's own tags, as from_units takes them
            space.sum_duplicates()
            yield first, np.diff(indptr), tags, space

    df_tags, df_space = np.zeros(n_vocab, dtype=np.int64), np.zeros(n_space, dtype=np.int64)
    for _, _, tags, space in shards():
        df_tags += np.bincount(tags.indices, minlength=n_vocab)
        df_space += np.bincount(space.indices, minlength=n_space)
    tags_fill = TermFill(df_tags, n, np.int16, folder, "tags-")
    space_fill = TermFill(df_space, n, np.float64, folder, "space-")
    n_tags, filled = new_array(folder, "n_tags", np.int64, n), 0
    for first, counts, tags, space in shards():
        tags_fill.add(tags)
        space_fill.add(space)
        n_tags[first:first + len(counts)] = counts
        filled += len(counts)
        release(n_tags)
    if filled != n:
        raise ValueError("the index's shards do not hold its passages")
    if folder is not None:
        n_tags.flush()
        del n_tags
        n_tags = load_array(folder, "n_tags")
    return tags_fill.matrix(), space_fill.matrix(), n_tags


def _load_rule_matrices(folder):
    tags, space = TermMatrix.load(folder, "tags-"), TermMatrix.load(folder, "space-")
    n_tags = load_array(folder, "n_tags")
    if not (tags.n_units == space.n_units == len(n_tags)) or n_tags.dtype != np.int64:
        raise ValueError("inconsistent tag rule matrices")
    return tags, space, n_tags


class TagRuleRetriever(Retriever):
    """The 2024 tag rule: passages whose tags match the claim's stems.

    Parameters
    ----------
    t_sim : float, default 0.55
        A passage passes only if its tag cosine with the claim is above it.
    t_overlap : float, default 0.5
        |shared tags| / min(|claim tags|, |passage tags|) must be above it too.
    k : int, default 6
        At most this many passages are returned (as every retriever's ``k``; the 2024 rule's
        ``top_n``).

    Example
    -------
    >>> import factcheck
    >>> index = factcheck.build_index("data/demo/evidence.json", "out/demo-index", progress=False)
    >>> tags = factcheck.TagRuleRetriever(t_sim=0.1, t_overlap=0.1, k=3).fit(index)
    >>> tags
    TagRuleRetriever(k=3, t_overlap=0.1, t_sim=0.1)
    >>> selection = tags.retrieve("Sea levels are rising.")
    >>> selection.path, selection.ids
    ('filtered', ['evidence-8'])
    >>> selection.hits[0].explanation["shared_tags"]
    ['level', 'rise', 'sea']
    """

    name = "tags"
    _parameter_constraints = {"t_sim": Interval(float, 0, 1), "t_overlap": Interval(float, 0, 1), "k": Interval(int, 1)}

    def __init__(self, t_sim: float = 0.55, t_overlap: float = 0.5, k: int = 6):
        self.t_sim = t_sim
        self.t_overlap = t_overlap
        self.k = k

    def _fit(self, index) -> None:
        self._vocab_col = {t: j for j, t in enumerate(index.vocabulary)}
        if index.root is None:  # an index in memory has no directory to cache in
            self._tags, self._space, self._n_tags = _rule_matrices(index)
        else:  # built once per index, then mapped by every process (serve's start-up included)
            key = {"plan_key": index.manifest.data.get("plan_key"), "passages": len(index), "version": CACHE_VERSION}
            self._tags, self._space, self._n_tags = DerivedCache(index.root).load_or_build(
                "tag-rule/matrices", key, lambda folder: _rule_matrices(index, folder), _load_rule_matrices)
        self._tag_vec = index.tag_vectorizer

    def claim_tags(self, claim: str) -> list[str]:
        """The claim's stems, sorted, duplicates kept (step 1 of the rule)."""
        return sorted(analyze(claim))

    def _score(self, claim: str):
        """Candidate rows (sorted) with shared counts, cosine, overlap, combined."""
        tags = self.claim_tags(claim)
        distinct = sorted(set(tags))
        cols = [self._vocab_col[t] for t in distinct if t in self._vocab_col]
        query = sp.csr_matrix((np.ones(len(cols), dtype=np.int16), cols, [0, len(cols)]), shape=(1, self._tags.n_terms))
        (cand, shared), = self._tags.products(query, sort=True)
        cand, shared = cand.astype(np.int64), shared.astype(np.int64)
        cosine = np.zeros(len(cand))
        (rows, cos), = self._space.products(self._tag_vec.transform([claim]), sort=True)
        cosine[np.searchsorted(cand, rows)] = cos  # a tag-space term is a tag: rows are candidates
        overlap = shared / np.minimum(len(distinct), self._n_tags[cand]) if len(cand) else np.zeros(0)
        return distinct, cand, shared, cosine, overlap, cosine + overlap

    def _fallback(self, cand, combined, k):
        """The ``k`` best candidates by combined. The 2024 rule filled up to ``k`` with
        passages sharing no tag (score 0) in corpus order; no retriever returns those as evidence."""
        return top_k(combined, k, cand)

    _evidence_depth = 0  # the rule reads every candidate's scores

    def _scored(self, texts):
        for claim in texts:
            scored = self._score(claim)
            yield Scored(scored[1], scored[5], scored)

    def choose(self, scored, t_sim: float, t_overlap: float, k: int):
        """The rule on a claim's scores: (chosen rows, path, number that passed the filter)."""
        _, _, _, cosine, overlap, _ = scored
        rows, path = self.choose_grid(scored, (t_sim,), (t_overlap,), k)[(t_sim, t_overlap)]
        return rows, path, (int(np.count_nonzero((cosine > t_sim) & (overlap > t_overlap))) if path == "filtered" else 0)

    def sweep(self, claims, t_sims, t_overlaps, ks) -> dict:
        """:meth:`choose` at every (t_sim, t_overlap, k) -> per-claim (rows, paths), each claim scored once."""
        self._check_fitted()
        out = {(a, b, n): ([], []) for a in t_sims for b in t_overlaps for n in ks}
        for claim in claims:
            for (a, b), (rows, path) in self.choose_grid(self._score(claim), t_sims, t_overlaps, max(ks)).items():
                for n in ks:
                    out[(a, b, n)][0].append(rows[:n])
                    out[(a, b, n)][1].append(path)
        return out

    def choose_grid(self, scored, t_sims, t_overlaps, k: int) -> dict:
        """:meth:`choose` with ``k`` at every (t_sim, t_overlap) -> (rows, path), from one claim's scores.

        The rule keeps the passing candidates that share the most tags, so the candidates are
        visited in groups of equal shared count, most first, and a setting is settled by the first
        group where one of its candidates passes: only those groups are ranked, not every candidate
        (most of a claim's candidates share one tag and are never ranked)."""
        _, cand, shared, cosine, overlap, combined = scored
        left = [(a, b) for a in t_sims for b in t_overlaps]
        got = {}
        if len(cand):
            most = int(shared.max())  # a stable sort on 16-bit keys is a radix sort: linear
            key = (most - shared).astype(np.uint16 if most < 2 ** 16 else np.int64)
            by_shared = np.argsort(key, kind="stable")
            ends = np.flatnonzero(np.diff(key[by_shared])) + 1
            for group in np.split(by_shared, ends):
                cos, ov = cosine[group], overlap[group]
                best_ov = {}  # t_sim -> the largest overlap among the group's candidates above it
                for a in {a for a, _ in left}:
                    above = cos > a
                    best_ov[a] = ov[above].max() if above.any() else -np.inf
                settled = [(a, b) for a, b in left if best_ov[a] > b]
                if not settled:
                    continue
                loosest = group[(cos > min(a for a, _ in settled)) & (ov > min(b for _, b in settled))]
                ranked = loosest[rank_order(cand[loosest], combined[loosest])]
                for a, b in settled:
                    got[(a, b)] = cand[ranked[(cosine[ranked] > a) & (overlap[ranked] > b)][:k]], "filtered"
                left = [ab for ab in left if ab not in got]
                if not left:
                    break
        if left:
            fallback, _ = self._fallback(cand, combined, k)
            got.update({ab: (fallback, "fallback") for ab in left})
        return {(a, b): got[(a, b)] for a in t_sims for b in t_overlaps}

    def _select(self, claim, scored, top) -> Selection:
        distinct, cand, shared, cosine, overlap, combined = scored.state
        rows, path, n_passed = self.choose(scored.state, self.t_sim, self.t_overlap, self.k)
        pos = np.minimum(np.searchsorted(cand, rows), max(len(cand) - 1, 0))
        found = (pos < len(cand)) & (cand[pos] == rows) if len(cand) else np.zeros(len(rows), bool)
        stats = [(cosine[p], overlap[p], combined[p]) if f else (0.0, 0.0, 0.0)
                 for p, f in zip(pos.tolist(), found.tolist())]
        claim_set = set(distinct)
        hits = [self._hit(row, float(comb), {"cosine": float(cos), "overlap": float(ov), "combined": float(comb),
                                             "shared_tags": [t for t in tags if t in claim_set], "passage_tags": tags})
                for row, (cos, ov, comb), tags in zip(rows.tolist(), stats, map(self.index_.tags, rows.tolist()))]
        return Selection(hits, path, {"claim_tags": self.claim_tags(claim), "thresholds": self.params(),
                                      "passed_filter": int(n_passed)})

