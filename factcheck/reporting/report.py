"""The run's report: markdown tables from metrics.json content (figures: :mod:`.plots`)."""

from __future__ import annotations

from pathlib import Path

from factcheck.classification.cv import FOLDS
from factcheck.evaluation.intervals import format_interval as _e
from factcheck.formats.common import plural
from factcheck.formats.files import write_text_atomic
from factcheck.reporting.plots import PLOT_CAPTIONS

# The 2024 system's figures, on the course's 154 dev claims: shown only beside a run on that file.
FIGURES_2024 = {"evidence_f": 0.043, "accuracy": 0.383, "harmonic_mean": "—"}
COURSE_DEV_SHA256 = "ea9976e861095c5856a13773d15cf149c9b961d4afaf36be2e8b22d2e1ec1fe4"
LIST_SHOWN = 6  # longer lists (the reranker's 25 features) are shortened in tables


def flatten(config: dict | None, prefix: str = ""):
    """``(dotted key, value)`` for every leaf of a nested configuration, in order."""
    for key, value in (config or {}).items():
        if isinstance(value, dict):
            yield from flatten(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def setting(value) -> str:
    """A parameter's value as it was set: ``0.04``, ``lucene``, ``a, b``."""
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value)) or "none"
    return str(value)


def config_rows(config: dict, prefix: str = "") -> list[tuple[str, str]]:
    """A nested configuration as ``(setting, value)`` rows: ``candidates.k1 | 0.9``."""
    rows = []
    for name, value in flatten(config, prefix):
        if isinstance(value, (list, tuple)) and len(value) > LIST_SHOWN:
            value = f"{len(value)}: " + ", ".join(map(str, value[:LIST_SHOWN // 2])) + ", … (all in metrics.json)"
        rows.append((name, setting(value)))
    return rows


def config_table(config: dict) -> list[str]:
    return ["| setting | value |", "|---|---|"] + [f"| {k} | {v} |" for k, v in config_rows(config)]


def write_report(path: Path, metrics: dict, plots: dict) -> None:
    """``report.md`` from ``metrics.json``'s content and the plots (name -> relative path)."""
    run = metrics["run"]
    abl = run["ablation"]
    iv = metrics["intervals"]
    L = [f"# factcheck run: {run['evidence']} ({run['passages']:,} passages)", ""]
    if run.get("mode") == "open":  # course mode's report stays as it was (no line)
        L += ["Mode: **open** -- the bundled pretrained word embeddings (wordllama `l2_supercat`) add the "
              "`dense`/`hybrid` retrievers and the reranker's and classifier's dense features; the 2024 "
              "course rule (nothing pretrained) does not hold for this run.", ""]
    course = run.get("dev_sha256") == COURSE_DEV_SHA256
    L += ["Dev results (the course metric), 95% percentile-bootstrap intervals over claims:", "",
          "| metric | this run | 2024 system (same dev claims) |" if course else "| metric | this run |",
          "|---|---|---|" if course else "|---|---|"]
    for key, name in (("evidence_f", "evidence F"), ("accuracy", "label accuracy"), ("harmonic_mean", "harmonic mean")):
        L.append(f"| {name} | {_e(iv[key])} |" + (f" {FIGURES_2024[key]} |" if course else ""))
    L.append("")
    if "fever" in metrics:  # FEVER-format claims: the shared task's own score on the same predictions
        fv = metrics["fever"]
        L += [f"The FEVER shared task's score on the same predictions (evidence: the first {fv['max_evidence']} "
              f"predicted sentences; {fv['claims']} claims, {fv['verifiable_claims']} verifiable; "
              "the rules: docs/fever-score.md), 95% intervals:", "",
              "| metric | this run |", "|---|---|"]
        for key, name in (("fever_score", "FEVER score"), ("label_accuracy", "label accuracy"),
                          ("evidence_precision", "evidence precision"), ("evidence_recall", "evidence recall"),
                          ("evidence_f1", "evidence F1")):
            L.append(f"| {name} | {_e(fv['intervals'][key])} |")
        L.append("")
    if "without_gold" in metrics:  # FEVER's NOT ENOUGH INFO claims: no gold sentence
        w = metrics["without_gold"]
        L += [f"{w['claims']} dev claims have no gold evidence (FEVER's NOT ENOUGH INFO) and count 0 in the "
              f"evidence F above; over the other claims it is {_e(w['evidence_f_others'])}. The retrieval "
              "metrics below leave them out.", ""]
    ret = run["retriever"]
    holdout = ", ".join(f"{k} {v:.3f}" for k, v in ret["holdout"].items())
    n_holdout = ret.get("holdout_claims")
    how = {"default": f"the default: the training hold-out ({n_holdout} claims) is too small to choose "
                      f"(evidence F there: {holdout})",
           "user": f"named with --method (evidence F on the training hold-out: {holdout})"}.get(
        ret.get("chosen_by"), f"chosen by evidence F on the 20% hold-out of the training claims: {holdout}")
    shown = ret["params"]
    if ret["chosen"] == "pool":  # its record leaves the default order out: the report names it
        from factcheck.retrieval.pool import DEFAULT_COMBINATION
        shown = {**{k: v for k, v in DEFAULT_COMBINATION.items() if k == "combine"}, **shown}
    L += [f"Retriever used: **{ret['chosen']}**, {how}. Its settings:", ""] + config_table(shown) + [""]
    L += ["## Retrieval on its own (dev)", ""]
    scored = {r.get("claims") for r in run["retrievers_on_dev"].values()} - {None}
    if scored and max(scored) < metrics["claims"]:  # a deterministic sample (--max-scoring-claims)
        L += [f"Every retriever on the same {max(scored):,} of the {metrics['claims']:,} dev claims, a deterministic "
              "sample by claim id (`--max-scoring-claims`); the system's own figures above are on every one.", ""]
    L += ["| retriever | evidence F | recall@5 | recall@100 | MRR | any gold (Wilson) |", "|---|---|---|---|---|---|"]
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
          f"({plural(g['mcnemar']['only_a_correct'], 'claim')} right only with gold, "
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
          "Classifier configuration (chosen by cross-validation on the training claims):", ""]
    L += config_table({k: v for k, v in clf.items() if k not in ("reader", "reader_cv")}) + [""]
    cv = run.get("classifier_cv")
    if cv:
        c = cv["cv"]
        # Fewer folds than the usual five only when the rarest label has that few claims (classification.cv).
        fewer = f"; fewer than {FOLDS} folds: the rarest training label has {cv['folds']} claims" \
            if cv["folds"] < FOLDS else ""
        L += [f"Cross-validated ({cv['folds']} folds x {cv['repeats']} repeats, {cv['claims']} training claims, "
              f"out-of-fold evidence{fewer}): accuracy {c['accuracy_mean']:.3f} (sd {c['accuracy_sd']:.3f} over folds; "
              f"out-of-fold {_e(c['accuracy_oof'])}), macro-F1 {c['macro_f1_mean']:.3f} "
              f"(sd {c['macro_f1_sd']:.3f}). Calibration: temperature {cv['calibration']['temperature']:.3f}, "
              f"expected calibration error {cv['calibration']['cv_uncalibrated']['ece']:.3f} -> "
              f"{cv['calibration']['cv_calibrated']['ece']:.3f} (out-of-fold)"
              + (f", {cv['calibration']['dev']['ece']:.3f} on dev." if cv["calibration"].get("dev") else "."), ""]
    L += ["## Plots", ""]
    for name, p in plots.items():
        L += [f"![{name}]({p})", "", f"*{PLOT_CAPTIONS.get(name, name)}*", ""]
    L += ["", "## Timings (seconds)", "", "| step | seconds |", "|---|---|"]
    L += [f"| {k} | {v:.2f} |" for k, v in run["timings"].items() if k != "total"]
    if "total" in run["timings"]:
        L.append(f"| **total (wall time)** | **{run['timings']['total']:.2f}** |")
    if metrics["missing"]:
        L += ["", f"Claims without predictions: {len(metrics['missing'])}"]
    write_text_atomic(path, "\n".join(L) + "\n")
