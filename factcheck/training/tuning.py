"""Tune retrieval parameters on the training claims: every grid point is scored on the 80%
part, and the best ``SHORTLIST`` there are compared on the 20% hold-out, which chooses.
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
POOL_SWEEP_BATCH = 256  # claims whose pools are embedded together (memory only, never the result)
# New pool passages from which a batch is embedded in worker processes, and at most how many a
# worker embeds at a time (speed and memory only: a vector is the same bits in any process).
PARALLEL_PASSAGES, PASSAGES_A_TASK = 1_000, 2_000
TAG_GRID = {
    "t_sim": (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.55, 0.6, 0.7),
    "t_overlap": (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6),
    "k": (1, 2, 3, 4, 6, 8, 10),
}
BM25_GRID = {"k1": (0.9, 1.2, 1.5), "b": (0.4, 0.75), "k": (1, 2, 3, 4, 5, 6, 8, 10)}
# Only when named (``--method tfidf``): the TF-IDF cosine is no automatic candidate.
TFIDF_GRID = {"analyzer": ("plain", "stems"), "k": BM25_GRID["k"]}
# Open mode: fusion "max" only, and alphas around the 0.4 and 0.6 that CV chose (docs/decisions.md).
HYBRID_GRID = {"alpha": (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8), "k": (1, 2, 3, 4, 5, 6, 8, 10)}
# Open mode, the two stages: the pool sizes, the weights of the "weighted" combination (each
# pair but (0, 0)) and k, as reports/two-stage.md pre-registered them (benchmarks.two_stage reads them).
POOL_GRID = {"pool_size": (50, 100, 200), "weights": (0.0, 0.1, 0.25, 0.5), "k": HYBRID_GRID["k"]}
POOL_WEIGHTS = ("bm25_weight", "dense_weight")


@dataclass
class Sweep:
    """One retriever's grid: every point's scores on both parts, and the choice."""

    method: str
    param_names: tuple[str, ...]
    rows: list[dict] = field(default_factory=list)  # params + f_fit, f_holdout, (fallback_*)
    chosen: dict | None = None
    rule: str = "shortlist"  # or "fit": the first row of the best fit F (the rows' order breaks ties)
    # claim id -> the chosen point's evidence ids, for every swept claim (fit and hold-out), where
    # the sweep computed it as the fitted retriever would: not retrieved again by the selection
    evidence: dict | None = None

    def choose(self) -> None:
        """The best of the ``SHORTLIST`` best on the fit part, by hold-out F (``rule="fit"``:
        the first row with the best fit F)."""
        # "fit" is the rule the two-stage pool's bet pre-registered and was measured by (a
        # grid with no claim-trained state needs no inner hold-out); its hold-out F then stays
        # an untouched estimate for the choice among retrievers.
        if self.rule == "fit":
            best = max(self.rows, key=lambda r: r["f_fit"])  # max keeps the first of equals
            self.chosen = {k: best[k] for k in self.param_names}
            return
        shortlist = sorted(self.rows, key=lambda r: (-r["f_fit"], tuple(r[n] for n in self.param_names)))[:SHORTLIST]
        best = max(shortlist, key=lambda r: (r["f_holdout"], r["f_fit"]))
        self.chosen = {k: best[k] for k in self.param_names}

    def write_csv(self, path: Path) -> None:
        """Every grid point and whether it was chosen."""
        write_csv_atomic(path, list(self.rows[0]) + ["chosen"],
                         ({**r, "chosen": all(r[k] == self.chosen[k] for k in self.param_names)} for r in self.rows))


def mean_f(ids_per_claim: list[list[str]], claims) -> float:
    return float(np.mean([evidence_f(ids, c.evidences) for ids, c in zip(ids_per_claim, claims)]))


def sweep_tags(retriever, fit_claims, holdout_claims, grid=TAG_GRID, progress=None) -> Sweep:
    """Sweep the tag rule's thresholds; ``retriever`` is a fitted TagRuleRetriever."""
    points = list(itertools.product(grid["t_sim"], grid["t_overlap"], grid["k"]))
    ids = retriever.index_.ids
    sweep = Sweep("tags", ("t_sim", "t_overlap", "k"))
    results = {}
    for part, claims in (("fit", fit_claims), ("holdout", holdout_claims)):
        texts = (c.text for c in progress_bar(claims, desc=f"tag rule sweep ({part})", unit="claims", enabled=progress))
        results[part] = retriever.sweep(texts, grid["t_sim"], grid["t_overlap"], grid["k"])
    for p in points:
        row = dict(zip(sweep.param_names, p))
        for part, claims in (("fit", fit_claims), ("holdout", holdout_claims)):
            chosen, paths = results[part][p]
            row[f"f_{part}"] = mean_f([[ids[r] for r in rows.tolist()] for rows in chosen], claims)
            row[f"fallback_{part}"] = float(np.mean([pth == "fallback" for pth in paths]))
        sweep.rows.append(row)
    sweep.choose()
    point = tuple(sweep.chosen[n] for n in sweep.param_names)
    sweep.evidence = {c.id: [ids[r] for r in rows.tolist()]
                      for part, claims in (("fit", fit_claims), ("holdout", holdout_claims))
                      for c, rows in zip(claims, results[part][point][0])}
    return sweep


def _add_rows(sweep: Sweep, setting: dict, ranked: dict, ks, parts: dict) -> None:
    """One row per k of ``ks``: ``setting``'s rankings of each part's claims cut at k, scored."""
    for k in ks:
        sweep.rows.append({**setting, "k": k, **{f"f_{part}": mean_f([r[:k] for r in ranked[part]], claims)
                                                 for part, claims in parts.items()}})


def _sweep_depths(method: str, settings: list[dict], make, ks, parts: dict, desc: str, progress,
                  evidence: bool = False) -> Sweep:
    """Each setting's retriever ranks every claim once, to the deepest k; each k is scored from it.
    ``evidence``: the chosen point's evidence kept (``Sweep.evidence``), for a method whose evidence
    is its top k scoring above 0 (:meth:`~factcheck.retrieval.base.Retriever._select`)."""
    sweep = Sweep(method, (*settings[0], "k"))
    kept = {}
    for setting in progress_bar(settings, desc=desc, unit="settings", enabled=progress):
        r = make(**setting)
        rankings = {part: r.rank([c.text for c in claims], max(ks)) for part, claims in parts.items()}
        if evidence:
            kept[tuple(setting.values())] = rankings
        _add_rows(sweep, setting, {part: [rk.ids for rk in got] for part, got in rankings.items()}, ks, parts)
    sweep.choose()
    if evidence:
        k = sweep.chosen["k"]
        chosen = kept[tuple(sweep.chosen[n] for n in settings[0])]
        sweep.evidence = {c.id: [i for i, score in zip(rk.ids[:k], rk.scores[:k]) if score != 0]
                          for part, claims in parts.items() for c, rk in zip(claims, chosen[part])}
    return sweep


def sweep_bm25(index, fit_claims, holdout_claims, grid=BM25_GRID, progress=None) -> Sweep:
    """Sweep k1, b and k; the claims' terms are looked up in the index's counts once, and each
    (k1, b) derives its weights for those terms alone (the same rankings as over every term)."""
    from factcheck.retrieval.bm25 import BM25Retriever, SweepTerms

    settings = [{"k1": k1, "b": b} for k1, b in itertools.product(grid["k1"], grid["b"])]
    terms = SweepTerms(index, [c.text for c in (*fit_claims, *holdout_claims)])
    return _sweep_depths("bm25", settings, lambda **s: BM25Retriever(**s).fit(index, terms=terms), grid["k"],
                         {"fit": fit_claims, "holdout": holdout_claims}, "BM25 sweep", progress, evidence=True)


def sweep_tfidf(index, fit_claims, holdout_claims, grid=TFIDF_GRID, progress=None) -> Sweep:
    """Sweep the TF-IDF retriever's analyzer and k."""
    from factcheck.retrieval.tfidf import TfidfRetriever

    return _sweep_depths("tfidf", [{"analyzer": a} for a in grid["analyzer"]],
                         lambda **s: TfidfRetriever(**s).fit(index), grid["k"],
                         {"fit": fit_claims, "holdout": holdout_claims}, "TF-IDF sweep", progress)


def pool_orders(given: dict | None = None, weights=POOL_GRID["weights"]) -> list[dict]:
    """How a pool may be ordered, in the pre-registered tie order: the cosine alone, then
    ``weighted`` with each (``bm25_weight``, ``dense_weight``) of ``weights`` squared but (0, 0)
    (the smaller weights first), then ``rrf``; only those agreeing with the ``given`` settings
    (a given weight is the only value of that weight, and (0, 0) counts when both are given).

    Example
    -------
    >>> len(pool_orders()), pool_orders()[1]
    (17, {'combine': 'weighted', 'bm25_weight': 0.0, 'dense_weight': 0.1})
    >>> pool_orders({"combine": "weighted", "bm25_weight": 0.5})[0]
    {'combine': 'weighted', 'bm25_weight': 0.5, 'dense_weight': 0.0}
    """
    given = given or {}
    values = {w: (float(given[w]),) if w in given else tuple(weights) for w in POOL_WEIGHTS}
    out = [{"combine": "cosine", "bm25_weight": 0.0, "dense_weight": 0.0}]
    out += [{"combine": "weighted", "bm25_weight": wb, "dense_weight": wd}
            for wb in values["bm25_weight"] for wd in values["dense_weight"]
            if wb or wd or all(w in given for w in POOL_WEIGHTS)]
    out.append({"combine": "rrf", "bm25_weight": 0.0, "dense_weight": 0.0})
    return [o for o in out if all(o[k] == given[k] for k in ("combine", *POOL_WEIGHTS) if k in given)]


def embed_passages(model: dict, texts: list[str]) -> np.ndarray:
    """``texts`` embedded as passages by ``model`` (an embedder's identity): a worker's task."""
    from factcheck.text.embedding import load_embedder
    return load_embedder(model).embed(texts, "passage", memo=False)


def workers_embed(embedder, jobs: int):
    """An ``embed`` for :meth:`~factcheck.tagging.pool_vectors.PoolVectorCache.vectors` that
    splits :data:`PARALLEL_PASSAGES` passages or more among ``jobs`` single-threaded worker
    processes (None for one job: the embedder's own threads). One thread a process costs less
    CPU than the threads of one process (docs/decisions.md, "Embedding speed")."""
    from joblib import effective_n_jobs
    from factcheck.classification.cv import run_folds
    workers = effective_n_jobs(jobs)
    if workers < 2:
        return None

    def embed(texts: list[str]) -> np.ndarray:
        if len(texts) < PARALLEL_PASSAGES:
            return embedder.embed(texts, "passage", memo=False)
        cuts = np.linspace(0, len(texts), max(workers, -(-len(texts) // PASSAGES_A_TASK)) + 1).astype(int).tolist()
        return np.concatenate(run_folds(embed_passages, [(embedder.identity, texts[a:z]) for a, z in
                                                         zip(cuts, cuts[1:])], jobs, "embedding pool passages",
                                        unit="tasks"))
    return embed


def sweep_pool(index, fit_claims, holdout_claims, k1: float, b: float, pool: dict | None = None,
               grid=POOL_GRID, progress=None, jobs: int = 1) -> Sweep:
    """Open mode, the two stages (:class:`~factcheck.retrieval.pool.PoolRetriever`): every
    pool setting ``pool`` does not give (``pool_size``, ``combine``, ``bm25_weight``,
    ``dense_weight``) swept over ``grid`` (:func:`pool_orders`), a given one fixed, and k;
    the ``model`` as given, BM25's ``k1`` and ``b`` as BM25's sweep chose.

    Each claim's pools at every size come from one first-stage scoring
    (:meth:`~factcheck.retrieval.pool.PoolRetriever.pools`) and the largest pools' passages are
    embedded once; each setting orders the same cosines (:func:`~factcheck.retrieval.pool.combine_scores`).
    The choice is the first row with the best fit F (:meth:`Sweep.choose`'s ``"fit"``), rows
    in the order pool size, :func:`pool_orders`, k. ``jobs``: worker processes embedding the
    pools' new passages (:func:`workers_embed`; the same rows whatever it is).
    """
    from factcheck.retrieval.pool import PoolRetriever, combine_scores
    from factcheck.scoring.topk import top_k

    given = {k: v for k, v in (pool or {}).items() if v is not None}
    sizes = (int(given["pool_size"]),) if "pool_size" in given else tuple(grid["pool_size"])
    orders = pool_orders(given, grid["weights"])
    fixed = {"model": given["model"]} if "model" in given else {}
    r = PoolRetriever(**fixed, k1=k1, b=b, pool_size=max(sizes)).fit(index)
    ks, ids = grid["k"], index.ids
    embed = workers_embed(r.embedder_, jobs)
    parts = {"fit": fit_claims, "holdout": holdout_claims}
    # F by setting and part: k x claims (a k's row contiguous, as mean_f's array of the claims' F)
    scored = {(n, i): {part: np.zeros((len(ks), len(claims))) for part, claims in parts.items()}
              for n in sizes for i in range(len(orders))}
    # Each setting's top rows by part: claims x max(ks), -1 past the pool or where the score is 0
    # (the retriever's selection drops those), so the chosen setting's evidence needs no second pass.
    tops = {key: {part: np.full((len(claims), max(ks)), -1, dtype=np.int64) for part, claims in parts.items()}
            for key in scored}
    for part, claims in parts.items():
        with progress_bar(total=len(claims), desc=f"pool sweep ({part})", unit="claims", enabled=progress) as bar:
            for start in range(0, len(claims), POOL_SWEEP_BATCH):
                batch = claims[start:start + POOL_SWEEP_BATCH]
                texts = [c.text for c in batch]
                pools = [r.pools(t, sizes) for t in texts]
                # Each claim's passages of every size (those of its largest pools), embedded and scored once.
                unions = [np.unique(np.concatenate([p[n][0] for n in sizes])) for p in pools]
                for c, (claim, p, union, cos_all) in enumerate(zip(batch, pools, unions, r.cosines(texts, unions, embed)),
                                                               start):
                    for n in sizes:
                        rows, bm25, dense = p[n]
                        cos = cos_all[np.searchsorted(union, rows)]
                        for i, o in enumerate(orders):
                            s = combine_scores(o["combine"], rows, cos, bm25, dense, o["bm25_weight"], o["dense_weight"])
                            top, scores = top_k(s, max(ks), rows)
                            tops[n, i][part][c, :len(top)] = np.where(scores != 0, top, -1)
                            # scores of 0 dropped, as the retriever's selection drops them
                            found = [ids[x] for x in top[scores != 0].tolist()]
                            scored[n, i][part][:, c] = [evidence_f(found[:k], claim.evidences) for k in ks]
                bar.update(len(texts))
    names = (*fixed, "pool_size", "combine", *POOL_WEIGHTS, "k1", "b", "k")
    sweep = Sweep("pool", names, rule="fit")
    for n in sizes:
        for i, o in enumerate(orders):
            for j, k in enumerate(ks):  # as mean_f: the mean of the claims' F
                sweep.rows.append({**fixed, "pool_size": n, **o, "k1": k1, "b": b, "k": k,
                                   **{f"f_{part}": float(np.mean(scored[n, i][part][j])) for part in parts}})
    sweep.choose()
    chosen = tops[sweep.chosen["pool_size"], orders.index({o: sweep.chosen[o] for o in ("combine", *POOL_WEIGHTS)})]
    sweep.evidence = _top_evidence(chosen, parts, sweep.chosen["k"], ids)
    return sweep


def _top_evidence(tops: dict, parts: dict, k: int, ids) -> dict:
    """Claim id -> evidence ids from each part's top rows (claims x depth, -1: none there),
    cut at ``k`` as the retriever's selection cuts its top (a -1 inside the top k is a 0 score it drops)."""
    return {c.id: [ids[r] for r in row[:k].tolist() if r >= 0]
            for part, claims in parts.items() for c, row in zip(claims, tops[part])}


def sweep_open(index, fit_claims, holdout_claims, k1: float, b: float, grid=HYBRID_GRID,
               progress=None) -> tuple[Sweep, Sweep]:
    """Open mode: ``(hybrid sweep, dense sweep)``, each claim's two score vectors computed once."""
    from factcheck.retrieval.dense import HybridRetriever, fuse
    from factcheck.scoring.topk import top_k

    hybrid = HybridRetriever(k1=k1, b=b, fusion="max").fit(index)
    depth = max(grid["k"])
    ids = index.ids
    parts = {"fit": fit_claims, "holdout": holdout_claims}
    fused = {part: {a: [] for a in grid["alpha"]} for part in parts}
    # each alpha's top rows by part (-1 where the fused score is 0): the chosen one's evidence
    tops = {a: {part: np.full((len(claims), depth), -1, dtype=np.int64) for part, claims in parts.items()}
            for a in grid["alpha"]}
    dense_top = {part: [] for part in parts}
    for part, claims in parts.items():
        for j, c in enumerate(progress_bar(claims, desc=f"hybrid sweep ({part})", unit="claims", enabled=progress)):
            bm25, dense = hybrid.component_scores(c.text)
            dense_top[part].append([ids[r] for r in top_k(dense, depth)[0].tolist()])
            for a in grid["alpha"]:
                rows, scores = top_k(fuse(bm25, dense, a, "max"), depth)
                fused[part][a].append([ids[r] for r in rows.tolist()])
                tops[a][part][j, :len(rows)] = np.where(scores != 0, rows, -1)
    h = Sweep("hybrid", ("alpha", "k"))
    for a in grid["alpha"]:
        _add_rows(h, {"alpha": a}, {part: fused[part][a] for part in parts}, grid["k"], parts)
    h.choose()
    h.evidence = _top_evidence(tops[h.chosen["alpha"]], parts, h.chosen["k"], ids)
    h.chosen = {**h.chosen, "fusion": "max", "k1": k1, "b": b}
    d = Sweep("dense", ("k",))
    _add_rows(d, {}, dense_top, grid["k"], parts)
    d.choose()
    return h, d
