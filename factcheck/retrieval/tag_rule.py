"""The 2024 tag rule, reproduced exactly and vectorised over an inverted index of tags.

The rule, per claim:

1. claim tags = the claim's stems (same analysis as tagging), sorted, duplicates kept;
   overlap counts use the distinct set;
2. claim tags and each passage's tags are vectorised by the 1,000-term tag model;
   ``cosine`` is their dot product (both rows are L2-normalised);
3. ``overlap`` = |shared tags| / min(|distinct claim tags|, |passage tags|);
   ``combined`` = cosine + overlap;
4. keep passages with cosine > ``t_sim`` and overlap > ``t_overlap``; order them by
   combined descending (ties by corpus order); keep those whose shared-tag count equals
   the largest among kept ones, at most ``top_n``  -> path "filtered";
5. if none pass: the ``top_n`` best by combined over the whole corpus -> path "fallback".
   Passages sharing no tag score 0 and follow in corpus order (as a stable sort over the
   whole corpus would place them).

Why an inverted index: a passage sharing no tag with the claim has overlap 0 and cosine
0, so it can never pass the filter and ranks after every passage that shares one. Only
the postings of the claim's stems are touched; no per-passage Python loop. Cosines are
accumulated term by term in ascending term order -- the same additions, in the same
order, as the per-passage reference in the tests, so the floats are bit-identical and
threshold decisions agree exactly.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from factcheck.errors import check_number
from factcheck.retrieval.base import Hit, Retriever, Selection, TopK, stable_top
from factcheck.retrieval.sparse_scores import first_rows_not_in
from factcheck.text.analyzer import analyze


class TagRuleRetriever(Retriever):
    """The 2024 tag rule: passages whose tags match the claim's stems (see the module docstring).

    Parameters
    ----------
    t_sim : float, default 0.55
        Cosine threshold, in [0, 1]: a passage passes only if its tag cosine with the
        claim is above it.
    t_overlap : float, default 0.5
        Tag-overlap threshold, in [0, 1]: |shared tags| / min(|claim tags|, |passage tags|)
        must be above it.
    top_n : int, default 6
        At most this many passages are returned.

    Attributes
    ----------
    index_ : TagIndex
        The index fitted to.

    See Also
    --------
    BM25Retriever : ranks by BM25 over the full passage text.

    Example
    -------
    >>> import factcheck
    >>> index = factcheck.build_index("data/demo/evidence.json", "out/demo-index", progress=False)
    >>> tags = factcheck.TagRuleRetriever(t_sim=0.1, t_overlap=0.1, top_n=3).fit(index)
    >>> tags
    TagRuleRetriever(t_overlap=0.1, t_sim=0.1, top_n=3)
    >>> selection = tags.retrieve("Sea levels are rising.")
    >>> selection.path, selection.ids
    ('filtered', ['evidence-8'])
    >>> selection.hits[0].explanation["shared_tags"]
    ['level', 'rise', 'sea']
    """

    name = "tags"

    def __init__(self, t_sim: float = 0.55, t_overlap: float = 0.5, top_n: int = 6):
        self.t_sim = t_sim
        self.t_overlap = t_overlap
        self.top_n = top_n

    def _check_params(self) -> None:
        check_number(self.t_sim, "t_sim", low=0.0, high=1.0)
        check_number(self.t_overlap, "t_overlap", low=0.0, high=1.0)
        check_number(self.top_n, "top_n", integer=True, low=1)

    # ------------------------------------------------------------------ fitting
    def _fit(self, index) -> None:
        n, vocab = len(index), index.vocabulary
        self._vocab_col = {t: j for j, t in enumerate(vocab)}
        tags = sp.csr_matrix((np.ones(len(index.tag_terms), dtype=np.int8), index.tag_terms, index.tag_indptr),
                             shape=(n, len(vocab)))
        postings = tags.tocsc()
        del tags
        postings.sort_indices()
        # Rows as int32 (half of int64's 8 bytes a tag; candidates are widened after
        # np.unique), and the tag space's CSR is not kept: the column-major copy is what
        # a claim reads (the reranker computes the few CSR rows it needs).
        row_type = np.int32 if n < 2 ** 31 else np.int64
        self._post_ptr, self._post_rows = postings.indptr, postings.indices.astype(row_type)
        del postings
        self._n_tags = np.diff(index.tag_indptr)
        self._tag_vec = index.tag_vectorizer
        passage_space = index.tag_space_rows().tocsc()
        passage_space.sort_indices()
        self._space_ptr = passage_space.indptr
        self._space_rows = passage_space.indices.astype(row_type)
        self._space_vals = passage_space.data

    # ------------------------------------------------------------------ scoring
    def claim_tags(self, claim: str) -> list[str]:
        """The claim's stems, sorted, duplicates kept (step 1 of the rule)."""
        return sorted(analyze(claim))

    def _score(self, claim: str):
        """Candidate rows (sorted) with shared counts, cosine, overlap, combined."""
        tags = self.claim_tags(claim)
        distinct = sorted(set(tags))
        cols = [self._vocab_col[t] for t in distinct if t in self._vocab_col]
        if cols:
            rows = np.concatenate([self._post_rows[self._post_ptr[c]:self._post_ptr[c + 1]] for c in cols])
            cand, shared = np.unique(rows, return_counts=True)
            cand = cand.astype(np.int64)
        else:
            cand, shared = np.zeros(0, np.int64), np.zeros(0, np.int64)
        cosine = np.zeros(len(cand))
        q = self._tag_vec.transform([" ".join(tags)])
        q.sort_indices()
        for t, w in zip(q.indices.tolist(), q.data.tolist()):
            a, b = self._space_ptr[t], self._space_ptr[t + 1]
            pos = np.searchsorted(cand, self._space_rows[a:b])
            cosine[pos] += self._space_vals[a:b] * w
        overlap = shared / np.minimum(len(distinct), self._n_tags[cand]) if len(cand) else np.zeros(0)
        return distinct, cand, shared, cosine, overlap, cosine + overlap

    def _ordered(self, cand, combined, depth):
        """Candidates by combined desc (ties by row), then zero-score rows by row."""
        top = stable_top(combined, depth)
        rows, scores = cand[top.rows], top.scores
        if len(rows) < depth:
            fill = first_rows_not_in(cand, depth - len(rows), len(self.index_))
            rows = np.concatenate([rows, fill])
            scores = np.concatenate([scores, np.zeros(len(fill))])
        return rows, scores

    def _rank(self, texts: list[str], depth: int) -> list[TopK]:
        out = []
        for claim in texts:
            _, cand, _, _, _, combined = self._score(claim)
            out.append(TopK(*self._ordered(cand, combined, depth)))
        return out

    def _retrieve(self, texts: list[str]) -> list[Selection]:
        return [self._select(claim) for claim in texts]

    def choose(self, scored, t_sim: float, t_overlap: float, top_n: int):
        """Apply the rule to a claim's scores: (chosen rows, path, number that passed the filter).

        Separate from scoring so a threshold sweep scores each claim once.
        """
        distinct, cand, shared, cosine, overlap, combined = scored
        passed = np.flatnonzero((cosine > t_sim) & (overlap > t_overlap))
        if len(passed):
            order = passed[np.lexsort((cand[passed], -combined[passed]))]
            best = shared[order].max()
            return cand[order[shared[order] == best][:top_n]], "filtered", len(passed)
        rows, _ = self._ordered(cand, combined, top_n)
        return rows, "fallback", 0

    def sweep(self, claims, t_sims, t_overlaps, top_ns) -> dict:
        """Every (t_sim, t_overlap, top_n) combination at once: -> per-claim (rows, path).

        Gives exactly what :meth:`choose` gives for each point, but scores each claim once
        and sorts its candidates once: the filter keeps the combined-score order, the
        fallback order does not depend on the thresholds, and a smaller ``top_n`` is a
        prefix of a larger one. ``claims`` may be any iterable (e.g. a progress bar).
        """
        self._check_fitted()
        out = {(a, b, n): ([], []) for a in t_sims for b in t_overlaps for n in top_ns}
        max_n = max(top_ns)
        for claim in claims:
            _, cand, shared, cosine, overlap, combined = self._score(claim)
            fallback, _ = self._ordered(cand, combined, max_n)
            order = np.lexsort((cand, -combined))
            live = order[(cosine[order] > min(t_sims)) & (overlap[order] > min(t_overlaps))]
            rows_l, cos_l, ov_l, sh_l = cand[live], cosine[live], overlap[live], shared[live]
            for a in t_sims:
                for b in t_overlaps:
                    passed = np.flatnonzero((cos_l > a) & (ov_l > b))
                    if len(passed):
                        keep = passed[sh_l[passed] == sh_l[passed].max()]
                        rows, path = rows_l[keep], "filtered"
                    else:
                        rows, path = fallback, "fallback"
                    for n in top_ns:
                        out[(a, b, n)][0].append(rows[:n])
                        out[(a, b, n)][1].append(path)
        return out

    def _select(self, claim: str) -> Selection:
        scored = self._score(claim)
        distinct, cand, shared, cosine, overlap, combined = scored
        rows, path, n_passed = self.choose(scored, self.t_sim, self.t_overlap, self.top_n)
        pos = np.minimum(np.searchsorted(cand, rows), max(len(cand) - 1, 0))
        found = (pos < len(cand)) & (cand[pos] == rows) if len(cand) else np.zeros(len(rows), bool)
        stats = [(cosine[p], overlap[p], combined[p]) if f else (0.0, 0.0, 0.0)
                 for p, f in zip(pos.tolist(), found.tolist())]
        claim_set = set(distinct)
        hits = []
        for row, (cos, ov, comb) in zip(rows.tolist(), stats):
            passage_tags = self.index_.tags(row)
            hits.append(Hit(row, self.index_.ids[row], float(comb), {
                "cosine": float(cos), "overlap": float(ov), "combined": float(comb),
                "shared_tags": [t for t in passage_tags if t in claim_set],
                "passage_tags": passage_tags,
            }))
        return Selection(hits, path, {"claim_tags": self.claim_tags(claim), "thresholds": self.params(),
                                      "passed_filter": int(n_passed)})
