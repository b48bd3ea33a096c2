"""The run's report: markdown tables and matplotlib plots, from metrics.json content."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from factcheck.formats.files import write_text_atomic
from factcheck.pipeline import tuning

FIGURES_2024 = {"evidence_f": 0.043, "accuracy_retrieved": 0.383, "accuracy_gold": 0.578,
                "always_supports": 0.442}


def write_csv(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def plot_confusions(abl: dict, path: Path) -> None:
    plt = tuning.pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
    for ax, cond in zip(axes, ("retrieved", "gold")):
        conf = abl[cond]["confusion"]
        m = np.array(conf["matrix"])
        ax.imshow(m, cmap="Blues")
        short = [l[:8] for l in conf["labels"]]
        ax.set_xticks(range(len(short)), short, rotation=30)
        ax.set_yticks(range(len(short)), short)
        for i in range(m.shape[0]):
            for j in range(m.shape[1]):
                ax.text(j, i, str(m[i, j]), ha="center", va="center",
                        color="white" if m[i, j] > m.max() / 2 else "black")
        ax.set_xlabel("predicted")
        ax.set_ylabel("gold label")
        ax.set_title(f"dev, {cond} evidence")
    tuning.save_figure(fig, path)


def plot_intervals(metrics: dict, path: Path) -> None:
    plt = tuning.pyplot()
    rows = []
    for name, r in metrics["run"]["retrievers_on_dev"].items():
        rows.append((f"evidence F: {name}", r["evidence_f"]))
    abl = metrics["run"]["ablation"]
    rows.append(("accuracy: gold evidence", abl["gold"]["accuracy"]))
    rows.append(("accuracy: retrieved evidence", abl["retrieved"]["accuracy"]))
    for name, b in abl.get("baselines", {}).items():
        rows.append((f"accuracy: {name}", b["accuracy"]))
    rows.append(("harmonic mean (system)", metrics["intervals"]["harmonic_mean"]))
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(rows) + 1))
    for i, (label, e) in enumerate(rows):
        v, (lo, hi) = e["value"], e["ci95"]
        ax.errorbar(v, i, xerr=[[v - lo], [hi - v]], fmt="o", capsize=4)
    ax.set_yticks(range(len(rows)), [r[0] for r in rows])
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("dev, with 95% interval")
    ax.grid(axis="x", alpha=0.3)
    tuning.save_figure(fig, path)


def plots(out: Path, candidates, abl: dict, metrics_so_far: dict) -> dict:
    """Render every figure; returns name -> path relative to ``out``."""
    files = {}
    if "tags" in candidates.sweeps:
        tuning.plot_tags(candidates.sweeps["tags"], out / "plots" / "sweep-tags.png")
        files["sweep-tags"] = "plots/sweep-tags.png"
    if "bm25" in candidates.sweeps:
        tuning.plot_bm25(candidates.sweeps["bm25"], out / "plots" / "sweep-bm25.png")
        files["sweep-bm25"] = "plots/sweep-bm25.png"
    plot_confusions(abl, out / "plots" / "confusion.png")
    files["confusion"] = "plots/confusion.png"
    plot_intervals(metrics_so_far, out / "plots" / "intervals.png")
    files["intervals"] = "plots/intervals.png"
    return files


def _e(d: dict, digits: int = 3) -> str:
    v, (lo, hi) = d["value"], d["ci95"]
    return "n/a" if v is None else f"{v:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def write_report(path: Path, metrics: dict, plots: dict, candidates) -> None:
    run = metrics["run"]
    abl = run["ablation"]
    iv = metrics["intervals"]
    L = [f"# factcheck run: {run['evidence']} ({run['passages']:,} passages)", ""]
    L += ["Dev results (the course metric), 95% percentile-bootstrap intervals over claims:", "",
          "| metric | this run | 2024 system |", "|---|---|---|",
          f"| evidence F | {_e(iv['evidence_f'])} | {FIGURES_2024['evidence_f']} |",
          f"| label accuracy | {_e(iv['accuracy'])} | {FIGURES_2024['accuracy_retrieved']} |",
          f"| harmonic mean | {_e(iv['harmonic_mean'])} | — |", ""]
    L += [f"Retriever used: **{run['retriever']['chosen']}** with `{run['retriever']['params']}`, "
          "chosen by evidence F on the 20% hold-out of the training claims: "
          + ", ".join(f"{k} {v:.3f}" for k, v in run["retriever"]["holdout"].items()) + ".", ""]
    L += ["## Retrieval on its own (dev)", "",
          "| retriever | evidence F | recall@5 | recall@100 | MRR | any gold (Wilson) |", "|---|---|---|---|---|---|"]
    for name, r in run["retrievers_on_dev"].items():
        rr = r["retrieval"]
        cell = lambda k: _e(rr[k]) if k in rr else "—"  # noqa: E731
        L.append(f"| {name} | {_e(r['evidence_f'])} | {cell('recall@5')} | {cell('recall@100')} | "
                 f"{cell('mrr')} | {cell('any_gold')} |")
    if "fallback_share" in run["retrievers_on_dev"].get("tags", {}).get("retrieval", {}):
        L += ["", f"Tag rule fallback share on dev: {_e(run['retrievers_on_dev']['tags']['retrieval']['fallback_share'])}."]
    L += ["", "## Classifier: gold versus retrieved evidence (dev)", "",
          "| condition | accuracy | macro-F1 |", "|---|---|---|",
          f"| gold evidence | {_e(abl['gold']['accuracy'])} | {_e(abl['gold']['macro_f1'])} |",
          f"| retrieved evidence | {_e(abl['retrieved']['accuracy'])} | {_e(abl['retrieved']['macro_f1'])} |"]
    for name, b in abl.get("baselines", {}).items():
        L.append(f"| baseline: {name} | {_e(b['accuracy'])} | {_e(b['macro_f1'])} |")
    g = abl["gold_vs_retrieved"]
    L += ["", f"Gold minus retrieved accuracy: {_e(g['accuracy_difference'])} (paired bootstrap); "
          f"McNemar exact p = {g['mcnemar']['p_value']:.4g} "
          f"({g['mcnemar']['only_a_correct']} claims right only with gold, "
          f"{g['mcnemar']['only_b_correct']} only with retrieved)."]
    for name, b in abl.get("baselines", {}).items():
        c = b["retrieved_vs_baseline"]
        L.append(f"Retrieved-evidence system minus {name}: {_e(c['accuracy_difference'])}; "
                 f"McNemar p = {c['mcnemar']['p_value']:.4g}.")
    L += ["", "Per-label recall (Wilson) and predicted counts, retrieved evidence:", "",
          "| label | recall | predicted |", "|---|---|---|"]
    for label, e in abl["retrieved"]["per_label"].items():
        L.append(f"| {label} | {_e(e['recall'])} | {e['predicted']} |")
    clf = run["classifier"]
    L += ["", f"The classifier reads the passages of **{clf['reader']}** (best cross-validated label accuracy "
          "on the training claims, by reader: " + ", ".join(f"{k} {v['accuracy']:.3f}" for k, v in clf["reader_cv"].items())
          + "); the returned evidence is the retriever's above.", "",
          "Classifier configuration (chosen by cross-validation on the training claims): `"
          + str({k: v for k, v in clf.items() if k not in ("reader", "reader_cv")}) + "`", ""]
    cv = run.get("classifier_cv")
    if cv:
        c = cv["cv"]
        L += [f"Cross-validated ({cv['folds']} folds x {cv['repeats']} repeats, {cv['claims']} training claims, "
              f"out-of-fold evidence): accuracy {c['accuracy_mean']:.3f} (sd {c['accuracy_sd']:.3f} over folds; "
              f"out-of-fold {_e(c['accuracy_oof'])}), macro-F1 {c['macro_f1_mean']:.3f} "
              f"(sd {c['macro_f1_sd']:.3f}). Calibration: temperature {cv['calibration']['temperature']:.3f}, "
              f"expected calibration error {cv['calibration']['cv_uncalibrated']['ece']:.3f} -> "
              f"{cv['calibration']['cv_calibrated']['ece']:.3f} (out-of-fold)"
              + (f", {cv['calibration']['dev']['ece']:.3f} on dev." if cv["calibration"].get("dev") else "."), ""]
    L += ["## Plots", ""] + [f"![{name}]({p})" for name, p in plots.items()]
    L += ["", "## Timings (seconds)", ""] + [f"- {k}: {v}" for k, v in run["timings"].items()]
    if metrics["missing"]:
        L += ["", f"Claims without predictions: {len(metrics['missing'])}"]
    write_text_atomic(path, "\n".join(L) + "\n")
