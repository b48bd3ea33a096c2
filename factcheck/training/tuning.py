"""Tune retrieval parameters on the training claims only (the fixed 80/20 split).

Protocol, for each retriever: evaluate every grid point on the 80% part (the sweep),
keep the best few (``SHORTLIST``) there, and choose among those on the 20% part. The
80% part does the broad search, the untouched 20% decides between near-ties, and dev
is never looked at. Every grid point's scores on both parts are kept for the CSV and
the plots, so the choice can be audited.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from factcheck.progress import progress as progress_bar

from factcheck.evaluation.course_metric import evidence_f
from factcheck.formats.files import write_csv_atomic

SHORTLIST = 5
TAG_GRID = {
    "t_sim": (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.55, 0.6, 0.7),
    "t_overlap": (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6),
    "top_n": (1, 2, 3, 4, 6, 8, 10),
}
BM25_GRID = {"k1": (0.9, 1.2, 1.5), "b": (0.4, 0.75), "k": (1, 2, 3, 4, 5, 6, 8, 10)}
# Only when named (``--method tfidf``): the TF-IDF cosine is no automatic candidate.
TFIDF_GRID = {"analyzer": ("plain", "stems"), "k": BM25_GRID["k"]}
# Open mode. Fusion "max" only: 5-fold CV over the training claims chose it over "rrf" in
# every fold (docs/decisions.md); alpha 0.4 (proxy) / 0.6 (wiki) won there, so the grid
# brackets both.
HYBRID_GRID = {"alpha": (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8), "k": (1, 2, 3, 4, 5, 6, 8, 10)}


@dataclass
class Sweep:
    """One retriever's grid: every point's scores on both parts, and the choice."""

    method: str
    param_names: tuple[str, ...]
    rows: list[dict] = field(default_factory=list)  # params + f_fit, f_holdout, (fallback_*)
    chosen: dict | None = None

    def choose(self) -> dict:
        """The best of the ``SHORTLIST`` best on the fit part, by hold-out F (see the module docstring)."""
        ranked = sorted(self.rows, key=lambda r: (-r["f_fit"], _param_key(r, self.param_names)))
        shortlist = ranked[:SHORTLIST]
        best = max(shortlist, key=lambda r: (r["f_holdout"], r["f_fit"]))
        self.chosen = {k: best[k] for k in self.param_names}
        return self.chosen

    def write_csv(self, path: Path) -> None:
        """Every grid point and whether it was chosen."""
        write_csv_atomic(path, list(self.rows[0]) + ["chosen"],
                         ({**r, "chosen": all(r[k] == self.chosen[k] for k in self.param_names)} for r in self.rows))


def _param_key(row, names):
    return tuple(row[n] for n in names)


def mean_f(ids_per_claim: list[list[str]], claims) -> float:
    """Mean evidence F of the retrieved ids against the claims' gold."""
    return float(np.mean([evidence_f(ids, c.evidences) for ids, c in zip(ids_per_claim, claims)]))


def sweep_tags(retriever, fit_claims, holdout_claims, grid=TAG_GRID, progress=None) -> Sweep:
    """Sweep the tag rule's thresholds; ``retriever`` is a fitted TagRuleRetriever."""
    points = list(itertools.product(grid["t_sim"], grid["t_overlap"], grid["top_n"]))
    ids = retriever.index_.ids
    sweep = Sweep("tags", ("t_sim", "t_overlap", "top_n"))
    results = {}
    for part, claims in (("fit", fit_claims), ("holdout", holdout_claims)):
        texts = (c.text for c in progress_bar(claims, desc=f"tag rule sweep ({part})", unit="claims", enabled=progress))
        results[part] = retriever.sweep(texts, grid["t_sim"], grid["t_overlap"], grid["top_n"])
    for p in points:
        row = dict(zip(sweep.param_names, p))
        for part, claims in (("fit", fit_claims), ("holdout", holdout_claims)):
            chosen, paths = results[part][p]
            row[f"f_{part}"] = mean_f([[ids[r] for r in rows.tolist()] for rows in chosen], claims)
            row[f"fallback_{part}"] = float(np.mean([pth == "fallback" for pth in paths]))
        sweep.rows.append(row)
    sweep.choose()
    return sweep


def sweep_bm25(index, fit_claims, holdout_claims, grid=BM25_GRID, progress=None) -> Sweep:
    """Sweep k1, b and k (free). Each (k1, b) derives its weights from the index's one
    term-count matrix (no re-indexing, nothing written into the index directory)."""
    from factcheck.retrieval.bm25 import BM25Retriever

    sweep = Sweep("bm25", ("k1", "b", "k"))
    depth = max(grid["k"])
    pairs = list(itertools.product(grid["k1"], grid["b"]))
    for k1, b in progress_bar(pairs, desc="BM25 sweep", unit="settings", enabled=progress):
        r = BM25Retriever(k1=k1, b=b, cache=False).fit(index)
        ranked = {part: [rk.ids for rk in r.rank([c.text for c in claims], depth)]
                  for part, claims in (("fit", fit_claims), ("holdout", holdout_claims))}
        for k in grid["k"]:
            row = {"k1": k1, "b": b, "k": k}
            for part, claims in (("fit", fit_claims), ("holdout", holdout_claims)):
                row[f"f_{part}"] = mean_f([rk[:k] for rk in ranked[part]], claims)
            sweep.rows.append(row)
    sweep.choose()
    return sweep


def sweep_tfidf(index, fit_claims, holdout_claims, grid=TFIDF_GRID, progress=None) -> Sweep:
    """Sweep the TF-IDF retriever's analyzer and k (one ranking per analyzer and claim)."""
    from factcheck.retrieval.tfidf import TfidfRetriever

    sweep = Sweep("tfidf", ("analyzer", "k"))
    depth = max(grid["k"])
    for analyzer in progress_bar(grid["analyzer"], desc="TF-IDF sweep", unit="settings", enabled=progress):
        r = TfidfRetriever(analyzer=analyzer).fit(index)
        ranked = {part: [rk.ids for rk in r.rank([c.text for c in claims], depth)]
                  for part, claims in (("fit", fit_claims), ("holdout", holdout_claims))}
        for k in grid["k"]:
            row = {"analyzer": analyzer, "k": k}
            for part, claims in (("fit", fit_claims), ("holdout", holdout_claims)):
                row[f"f_{part}"] = mean_f([rk[:k] for rk in ranked[part]], claims)
            sweep.rows.append(row)
    sweep.choose()
    return sweep


def sweep_open(index, fit_claims, holdout_claims, k1: float, b: float, grid=HYBRID_GRID,
               progress=None) -> tuple[Sweep, Sweep]:
    """Open mode: sweep the hybrid retriever's ``alpha`` and ``k`` (fusion ``max``, BM25's
    ``k1`` and ``b`` as BM25's own sweep chose them) and the dense retriever's ``k``.

    Each claim's BM25 and dense scores are computed once and fused for every ``alpha``.
    Returns ``(hybrid sweep, dense sweep)``; the hybrid's ``chosen`` holds every
    parameter of :class:`~factcheck.retrieval.dense.HybridRetriever`.
    """
    from factcheck.retrieval.dense import HybridRetriever, fuse
    from factcheck.scoring.topk import top_k

    hybrid = HybridRetriever(k1=k1, b=b, fusion="max").fit(index)
    depth = max(grid["k"])
    ids = index.ids
    fused = {part: {a: [] for a in grid["alpha"]} for part in ("fit", "holdout")}
    dense_top = {"fit": [], "holdout": []}
    for part, claims in (("fit", fit_claims), ("holdout", holdout_claims)):
        for c in progress_bar(claims, desc=f"hybrid sweep ({part})", unit="claims", enabled=progress):
            bm25, dense = hybrid.component_scores(c.text)
            dense_top[part].append([ids[r] for r in top_k(dense, depth)[0].tolist()])
            for a in grid["alpha"]:
                fused[part][a].append([ids[r] for r in top_k(fuse(bm25, dense, a, "max"), depth)[0].tolist()])
    claims_of = {"fit": fit_claims, "holdout": holdout_claims}
    h = Sweep("hybrid", ("alpha", "k"))
    for a in grid["alpha"]:
        for k in grid["k"]:
            h.rows.append({"alpha": a, "k": k, **{f"f_{part}": mean_f([r[:k] for r in fused[part][a]], claims_of[part])
                                                  for part in claims_of}})
    h.choose()
    h.chosen = {**h.chosen, "fusion": "max", "k1": k1, "b": b}
    d = Sweep("dense", ("k",))
    for k in grid["k"]:
        d.rows.append({"k": k, **{f"f_{part}": mean_f([r[:k] for r in dense_top[part]], claims_of[part])
                                  for part in claims_of}})
    d.choose()
    return h, d
