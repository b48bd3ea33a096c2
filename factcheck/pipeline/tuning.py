"""Tune retrieval parameters on the training claims only (the fixed 80/20 split).

Protocol, for each retriever: evaluate every grid point on the 80% part (the sweep),
keep the best few (``SHORTLIST``) there, and choose among those on the 20% part. The
80% part does the broad search, the untouched 20% decides between near-ties, and dev
is never looked at. Every grid point's scores on both parts are kept for the CSV and
the plots, so the choice can be audited.
"""

from __future__ import annotations

import csv
import itertools
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from factcheck.evaluation.course_metric import evidence_f

SHORTLIST = 5
TAG_GRID = {
    "t_sim": (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.55, 0.6, 0.7),
    "t_overlap": (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6),
    "top_n": (1, 2, 3, 4, 6, 8, 10),
}
BM25_GRID = {"k1": (0.9, 1.2, 1.5), "b": (0.4, 0.75), "k": (1, 2, 3, 4, 5, 6, 8, 10)}


@dataclass
class Sweep:
    method: str
    param_names: tuple[str, ...]
    rows: list[dict] = field(default_factory=list)  # params + f_fit, f_holdout, (fallback_*)
    chosen: dict | None = None

    def choose(self) -> dict:
        ranked = sorted(self.rows, key=lambda r: (-r["f_fit"], _param_key(r, self.param_names)))
        shortlist = ranked[:SHORTLIST]
        best = max(shortlist, key=lambda r: (r["f_holdout"], r["f_fit"]))
        self.chosen = {k: best[k] for k in self.param_names}
        return self.chosen

    def write_csv(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        cols = list(self.rows[0])
        with open(path, "w", newline="", encoding="utf-8") as fh:
            w = csv.DictWriter(fh, fieldnames=cols + ["chosen"])
            w.writeheader()
            for r in self.rows:
                w.writerow({**r, "chosen": all(r[k] == self.chosen[k] for k in self.param_names)})


def _param_key(row, names):
    return tuple(row[n] for n in names)


def mean_f(ids_per_claim: list[list[str]], claims) -> float:
    return float(np.mean([evidence_f(ids, c.evidences) for ids, c in zip(ids_per_claim, claims)]))


def sweep_tags(retriever, fit_claims, holdout_claims, grid=TAG_GRID, progress=None) -> Sweep:
    """Sweep the tag rule's thresholds; ``retriever`` is a fitted TagRuleRetriever."""
    points = list(itertools.product(grid["t_sim"], grid["t_overlap"], grid["top_n"]))
    ids = retriever.index.ids
    sweep = Sweep("tags", ("t_sim", "t_overlap", "top_n"))
    results = {}
    for part, claims in (("fit", fit_claims), ("holdout", holdout_claims)):
        texts = (c.text for c in tqdm(claims, desc=f"tag rule sweep ({part})", disable=progress is False))
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
    ids = index.ids
    pairs = list(itertools.product(grid["k1"], grid["b"]))
    for k1, b in tqdm(pairs, desc="BM25 sweep", disable=progress is False):
        r = BM25Retriever(k1=k1, b=b, cache=False).fit(index)
        ranked = {part: [[ids[x] for x in rk.rows.tolist()] for rk in r.rank([c.text for c in claims], depth)]
                  for part, claims in (("fit", fit_claims), ("holdout", holdout_claims))}
        for k in grid["k"]:
            row = {"k1": k1, "b": b, "k": k}
            for part, claims in (("fit", fit_claims), ("holdout", holdout_claims)):
                row[f"f_{part}"] = mean_f([rk[:k] for rk in ranked[part]], claims)
            sweep.rows.append(row)
    sweep.choose()
    return sweep


def plot_sweep(sweep: Sweep, path: Path, x: str, series: tuple[str, ...], title: str, xlabel: str,
               fixed: dict | None = None) -> None:
    """F against ``x``, one line per value of ``series``, on the 80% and 20% parts side by side.

    Lines differ in style and marker as well as colour, so lines lying on top of each
    other stay visible (on the demo data all 7 tag-rule lines coincide), and a caption
    says so when they do.
    """
    plt = pyplot()
    fixed = fixed or {}
    rows = [r for r in sweep.rows if all(r[k] == v for k, v in fixed.items())]
    keys = sorted({tuple(r[s] for s in series) for r in rows})
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    curves = set()
    for ax, part in zip(axes, ("fit", "holdout")):
        for i, key in enumerate(keys):
            pts = sorted((r[x], r[f"f_{part}"]) for r in rows if tuple(r[s] for s in series) == key)
            curves.add((part, tuple(p[1] for p in pts)))
            ax.plot(*zip(*pts), marker="osD^vP*X"[i % 8], ls=("-", "--", "-.", ":")[i % 4], alpha=0.75,
                    label=", ".join(f"{s}={v}" for s, v in zip(series, key)))
        ax.axvline(sweep.chosen[x], color="grey", ls=":", lw=2, label=f"chosen {x} = {sweep.chosen[x]}")
        ax.set_title(f"{title}: training {'80%' if part == 'fit' else '20% hold-out'}")
        ax.set_xlabel(xlabel)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("evidence F")
    axes[1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), title="one line per")
    caption = ("Grid points scored on the training 80%; the best few are compared on the 20% hold-out, "
               "and the grey dotted line marks the value chosen there.")
    if len(keys) > 1 and len(curves) == 2:
        caption += f" All {len(keys)} lines coincide: {', '.join(series)} makes no difference on this data."
    fig.text(0.01, -0.02, caption, fontsize=8, wrap=True, va="top")
    save_figure(fig, path)


def plot_tags(sweep: Sweep, path: Path) -> None:
    top_n = sweep.chosen["top_n"]
    plot_sweep(sweep, path, "t_sim", ("t_overlap",), f"tag rule, top_n={top_n}", "t_sim (cosine threshold)",
               {"top_n": top_n})


def plot_bm25(sweep: Sweep, path: Path) -> None:
    plot_sweep(sweep, path, "k", ("k1", "b"), "BM25", "k (passages returned)")


def pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def save_figure(fig, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None}, bbox_inches="tight")  # keeps outside legends
    pyplot().close(fig)
