"""Write reports/constraint-cost.md: what the 2024 rule (nothing pretrained) costs.

    factcheck run --data-dir ../shared/data --out out/proxy
    factcheck run --data-dir ../shared/data --out out/proxy-open --mode open
    factcheck run --data-dir ../shared/data --out out/wiki --evidence ../shared/data/evidence-wiki.json.gz
    factcheck run --data-dir ../shared/data --out out/wiki-open --evidence ../shared/data/evidence-wiki.json.gz --mode open
    python -m scripts.constraint_cost --pair proxy out/proxy out/proxy-open --pair wiki out/wiki out/wiki-open \\
        [--costs reports/open-costs.json]

Each pair is the course-mode and the open-mode run of one knowledge source. Everything is
read from the runs' dev predictions and explanation sidecars against the labelled dev
claims (154), and scored per claim, so each open-minus-course difference is paired:
percentile bootstrap over claims (10,000 resamples, the same resamples for both runs),
Wilson intervals for proportions. ``--costs`` adds a table of measured costs (offline
time and disk at 1.2M, latency, RAM) from a JSON file of ``{"what": "value"}`` rows.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from harness.measure import ROOT, machine, write_report

import factcheck
from factcheck.evaluation.course_metric import evidence_f
from factcheck.evaluation.intervals import (Metric, bootstrap_harmonic, bootstrap_interval, bootstrap_mean,
                                            format_interval, harmonic_mean, paired_bootstrap_diff, wilson)
from factcheck.evaluation.evaluate import recall_at
from factcheck.formats.claims import explanations_path

PREDICTIONS = "dev-claims-predictions.json"


def per_claim(run: Path, gold: list) -> dict[str, np.ndarray]:
    """Per-claim evidence F, correctness, recall@100 and any-gold of one run's dev predictions."""
    preds = factcheck.read_predictions(run / PREDICTIONS)
    explain = json.loads(explanations_path(run / PREDICTIONS).read_text(encoding="utf-8"))["claims"]
    rows = {"f": [], "correct": [], "recall@100": [], "any_gold": []}
    for c in gold:
        p = preds[c.id]
        rows["f"].append(evidence_f(p["evidences"], c.evidences))
        rows["correct"].append(float(p.get("claim_label") == c.label))
        rows["recall@100"].append(recall_at(explain[c.id].get("ranking", []), c.evidences, 100))
        rows["any_gold"].append(float(bool(set(p["evidences"]) & set(c.evidences))))
    return {k: np.asarray(v, dtype=float) for k, v in rows.items()}


def paired_harmonic(f_a, acc_a, f_b, acc_b) -> Metric:
    """Harmonic mean of b minus that of a, on the same bootstrap resamples."""
    def diff(f_a, acc_a, f_b, acc_b):
        return harmonic_mean(f_b.mean(-1), acc_b.mean(-1)) - harmonic_mean(f_a.mean(-1), acc_a.mean(-1))
    lo, hi = bootstrap_interval(len(f_a), lambda i: diff(f_a[i], acc_a[i], f_b[i], acc_b[i]))
    return Metric(diff(f_a, acc_a, f_b, acc_b), lo, hi, len(f_a), "paired percentile bootstrap")


def embedding_model(run_dir: Path, run_meta: dict) -> str:
    """The open run's embedding model, as its passage vectors' manifest records it."""
    from factcheck.tagging.vectors import vectors_model
    from factcheck.text.embedding import describe_model
    model = vectors_model(run_dir / run_meta["index"])  # relative to the run directory, or absolute
    return describe_model(model) if model else "unknown (no vectors manifest)"


def single(name: str, v: np.ndarray) -> str:
    if name == "any gold passage selected":
        return format_interval(wilson(int(v.sum()), len(v)))
    return format_interval(bootstrap_mean(v))


def section(label: str, course: Path, open_: Path, gold: list) -> list[str]:
    a, b = per_claim(course, gold), per_claim(open_, gold)
    meta = {p: json.loads((p / "metrics.json").read_text())["run"] for p in (course, open_)}
    L = [f"## {label}: {meta[course]['evidence']} ({meta[course]['passages']:,} passages)", "",
         f"Course run `{course}` (retriever {meta[course]['retriever']['chosen']}), open run `{open_}` "
         f"(retriever {meta[open_]['retriever']['chosen']}; embedding model {embedding_model(open_, meta[open_])}).", "",
         "| dev metric | course | open | open − course (paired) |", "|---|---|---|---|"]
    for name, key in (("evidence F", "f"), ("label accuracy", "correct"), ("recall@100", "recall@100"),
                      ("any gold passage selected", "any_gold")):
        diff = paired_bootstrap_diff(b[key], a[key])  # open minus course
        L.append(f"| {name} | {single(name, a[key])} | {single(name, b[key])} | {format_interval(diff)} |")
    hm = paired_harmonic(a["f"], a["correct"], b["f"], b["correct"])
    L.append(f"| harmonic mean | {format_interval(bootstrap_harmonic(a['f'], a['correct']))} | "
             f"{format_interval(bootstrap_harmonic(b['f'], b['correct']))} | {format_interval(hm)} |")
    d = paired_bootstrap_diff(b["f"], a["f"])
    verdict = "above zero" if d.low > 0 else "not above zero"
    L += ["", f"Evidence F, open minus course: {format_interval(d)} -- the paired 95% interval is **{verdict}**.", ""]
    return L


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--pair", nargs=3, action="append", metavar=("LABEL", "COURSE_RUN", "OPEN_RUN"), required=True)
    ap.add_argument("--dev-claims", type=Path, default=ROOT.parent / "shared" / "data" / "dev-claims.json")
    ap.add_argument("--costs", type=Path, default=None, help="JSON {what: value} of measured costs")
    ap.add_argument("--notes", type=Path, default=None, help="Markdown appended as is (targets, oracle analysis)")
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "constraint-cost.md")
    args = ap.parse_args(argv)
    gold = factcheck.read_claims(args.dev_claims, require_labels=True)
    L = ["# What the course rule costs: course mode versus open mode (dev)", "",
         f"Machine: {machine()}. Regenerate with:", "", "```",
         "python -m scripts.constraint_cost " + " ".join(f"--pair {a} {b} {c}" for a, b, c in args.pair)
         + (f" --costs {args.costs}" if args.costs else "") + (f" --notes {args.notes}" if args.notes else "")
         + (f" --out {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}"
            if args.out != ROOT / "reports" / "constraint-cost.md" else ""),
         "```", "",
         "Course mode obeys the 2024 rule (nothing pretrained); open mode adds a pretrained sentence-embedding "
         "model: the bundled `wordllama` static embeddings (256-dim `l2_supercat`, loaded from the installed wheel "
         "with downloads disabled) or a local ONNX model (`--embedding-model DIR`), as each section says. Both were "
         "chosen and trained on the training claims only; dev (154 claims) is scored once. Intervals: 95% "
         "percentile bootstrap over claims (10,000 resamples), Wilson for proportions; differences are paired "
         "(the same resamples for both runs).", ""]
    for label, course, open_ in args.pair:
        L += section(label, Path(course), Path(open_), gold)
    if args.costs:
        costs = json.loads(args.costs.read_text())
        L += ["## Costs", "", "| what | measured |", "|---|---|"] + [f"| {k} | {v} |" for k, v in costs.items()] + [""]
    if args.notes:
        L += [args.notes.read_text().rstrip(), ""]
    write_report(args.out, L)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
