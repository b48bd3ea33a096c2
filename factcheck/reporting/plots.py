"""Every figure of a run (matplotlib, headless) and their captions."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np

from factcheck.errors import require_extra
from factcheck.formats.files import atomic_path


__all__ = ["PLOT_CAPTIONS", "draw_plots", "plot_bm25", "plot_tags", "require_plots"]

PLOT_CAPTIONS = {
    "sweep-tags": "Tag rule: evidence F against the cosine threshold, one line per overlap threshold, "
                  "on the training 80% (left) and the 20% hold-out (right); dotted: the value chosen.",
    "sweep-bm25": "BM25: evidence F against the number of passages returned, one line per (k1, b); "
                  "dotted: the value chosen.",
    "confusion": "Dev confusion matrices of the classifier, reading retrieved (left) and gold (right) evidence.",
    "intervals": "Every dev measure with its 95% interval.",
}


def plot_sweep(sweep, path: Path, x: str, series: tuple[str, ...], title: str, xlabel: str,
               fixed: dict | None = None) -> None:
    """F against ``x``, one line per value of ``series``, on the 80% and 20% parts side by side."""
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


def plot_tags(sweep, path: Path) -> None:
    """The tag rule's sweep at the chosen ``k``."""
    k = sweep.chosen["k"]
    plot_sweep(sweep, path, "t_sim", ("t_overlap",), f"tag rule, k={k}", "t_sim (cosine threshold)",
               {"k": k})


def plot_bm25(sweep, path: Path) -> None:
    plot_sweep(sweep, path, "k", ("k1", "b"), "BM25", "k (passages returned)")


def require_plots() -> None:
    """An InputError naming the ``plots`` extra if matplotlib is not installed (before a run's work)."""
    require_extra("plots", "drawing a run's figures", "matplotlib")


def pyplot():
    """matplotlib's pyplot on the headless backend."""
    require_plots()
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def save_figure(fig, path: Path) -> None:
    """Write ``fig`` as a PNG without a timestamp, atomically, and close it."""
    fig.tight_layout()
    try:
        with atomic_path(path) as tmp:  # "tight" keeps the legends outside the axes
            fig.savefig(tmp, format="png", dpi=110, metadata={"Software": None}, bbox_inches="tight")
    finally:
        pyplot().close(fig)


def plot_confusions(abl: dict, path: Path) -> None:
    """The dev confusion matrices, reading retrieved and gold evidence."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.8))
    for ax, cond in zip(axes, ("retrieved", "gold")):
        conf = abl[cond]["confusion"]
        m = np.array(conf["matrix"])
        ax.imshow(m, cmap="Blues")
        labels = conf["labels"]
        ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right")
        ax.set_yticks(range(len(labels)), labels)
        for i in range(m.shape[0]):
            for j in range(m.shape[1]):
                ax.text(j, i, str(m[i, j]), ha="center", va="center",
                        color="white" if m[i, j] > m.max() / 2 else "black")
        ax.set_xlabel("predicted")
        ax.set_ylabel("gold label")
        ax.set_title(f"dev, {cond} evidence")
    save_figure(fig, path)


def plot_intervals(metrics: dict, path: Path) -> None:
    """Every dev measure of ``metrics`` (``metrics.json``'s content) with its interval."""
    plt = pyplot()
    run, abl = metrics["run"], metrics["run"]["ablation"]
    rows = [(f"evidence F: {name}" + (" (used)" if name == run["retriever"]["chosen"] else ""), r["evidence_f"])
            for name, r in run["retrievers_on_dev"].items()]
    rows += [("accuracy: gold evidence", abl["gold"]["accuracy"]),
             ("accuracy: retrieved evidence", abl["retrieved"]["accuracy"])]
    rows += [(f"accuracy: {name}", b["accuracy"]) for name, b in abl.get("baselines", {}).items()]
    rows.append(("harmonic mean (system)", metrics["intervals"]["harmonic_mean"]))
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(rows) + 1))
    for i, (label, e) in enumerate(rows):
        v, (lo, hi) = e["value"], e["ci95"]
        ax.errorbar(v, i, xerr=[[v - lo], [hi - v]], fmt="o", capsize=4)
    ax.set_yticks(range(len(rows)), [r[0] for r in rows])
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("value on dev (dot) with its 95% interval (bar)")
    ax.grid(axis="x", alpha=0.3)
    save_figure(fig, path)


def draw_plots(out: Path, candidates, abl: dict, metrics_so_far: dict) -> dict:
    """Render every figure of a run into ``out/plots``; name -> path relative to ``out``."""
    draw = {f"sweep-{m}": partial(plot, candidates.sweeps[m])
            for m, plot in (("tags", plot_tags), ("bm25", plot_bm25)) if m in candidates.sweeps}
    draw.update({"confusion": partial(plot_confusions, abl), "intervals": partial(plot_intervals, metrics_so_far)})
    for name, plot in draw.items():
        plot(out / "plots" / f"{name}.png")
    return {name: f"plots/{name}.png" for name in draw}
