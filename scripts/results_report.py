"""Write reports/results.md from the metrics of `factcheck run` on both evidence files.

    factcheck run --data-dir ../shared/data --out out/proxy
    factcheck run --data-dir ../shared/data --out out/wiki --evidence ../shared/data/evidence-wiki.json.gz
    python -m scripts.results_report --runs out/proxy out/wiki

Every figure is read from the runs' metrics.json (dev, 154 claims); the 2024 figures are
those of the 2024 system on the real 1.2M-sentence corpus.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from harness.measure import ROOT, machine, write_report
from factcheck.evaluation.intervals import format_interval
from factcheck.formats.files import sha256_file


def e(d: dict | None) -> str:
    return format_interval(d, missing="—")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--runs", nargs="+", type=Path, default=[ROOT / "out" / "proxy", ROOT / "out" / "wiki"])
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "results.md")
    args = ap.parse_args(argv)
    runs = {p: json.loads((p / "metrics.json").read_text()) for p in args.runs}

    L = ["# Results: `factcheck run` on the course data (dev)", "",
         f"Machine: {machine()}. Commands:", "", "```",
         "factcheck run --data-dir ../shared/data --out out/proxy",
         "factcheck run --data-dir ../shared/data --out out/wiki --evidence ../shared/data/evidence-wiki.json.gz",
         f"python -m scripts.results_report --runs {' '.join(str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p) for p in args.runs)}",
         "```", "",
         "Everything was tuned and trained on the training claims only (retrievers on a fixed 80/20 split, the "
         "classifier and its reader by 5-fold x 3 cross-validation over all of them); dev (154 claims) "
         "is scored once. Intervals: 95% percentile bootstrap over claims (10,000 resamples), Wilson for "
         "proportions; paired differences by paired bootstrap, with McNemar's exact test. The 2024 column is "
         "the 2024 system on the real 1.2M-sentence corpus; the proxy corpus is easier in absolute terms (see "
         "`../shared/data/README.md`), so compare methods side by side within a column of this table.", ""]
    header = "| metric | " + " | ".join(f"{m['run']['evidence']} ({m['run']['passages']:,} passages)"
                                       for m in runs.values()) + " | 2024 system |"
    L += [header, "|---" * (len(runs) + 2) + "|"]

    def row(name, get, ref="—"):
        L.append(f"| {name} | " + " | ".join(get(m) for m in runs.values()) + f" | {ref} |")

    row("retriever used (chosen on the training hold-out)",
        lambda m: f"{m['run']['retriever']['chosen']}", "tag rule")
    row("classifier reads the passages of (chosen by cross-validation on the training claims)",
        lambda m: m["run"]["classifier"]["reader"], "the same tag-rule passages")
    row("**evidence F**", lambda m: e(m["intervals"]["evidence_f"]), "0.043 [0.020, 0.069]")
    row("**label accuracy** (retrieved evidence)", lambda m: e(m["intervals"]["accuracy"]), "0.383")
    row("**harmonic mean**", lambda m: e(m["intervals"]["harmonic_mean"]), "—")
    row("macro-F1 (retrieved evidence)", lambda m: e(m["run"]["ablation"]["retrieved"]["macro_f1"]), "—")
    row("accuracy with gold evidence", lambda m: e(m["run"]["ablation"]["gold"]["accuracy"]), "0.578")
    row("macro-F1 with gold evidence", lambda m: e(m["run"]["ablation"]["gold"]["macro_f1"]), "—")
    row("gold − retrieved accuracy (paired)",
        lambda m: e(m["run"]["ablation"]["gold_vs_retrieved"]["accuracy_difference"]), "+0.195 [0.110, 0.279]")
    row("McNemar exact p (gold vs retrieved)",
        lambda m: f"{m['run']['ablation']['gold_vs_retrieved']['mcnemar']['p_value']:.2g}", "< 0.001")
    row("always-majority accuracy",
        lambda m: e(m["run"]["ablation"]["baselines"]["always-majority"]["accuracy"]), "0.442 (always SUPPORTS)")
    row("system − always-majority accuracy (paired)",
        lambda m: e(m["run"]["ablation"]["baselines"]["always-majority"]["retrieved_vs_baseline"]["accuracy_difference"]))
    row("McNemar exact p (system vs always-majority)",
        lambda m: f"{m['run']['ablation']['baselines']['always-majority']['retrieved_vs_baseline']['mcnemar']['p_value']:.2g}")
    row("claim-only accuracy", lambda m: e(m["run"]["ablation"]["baselines"]["claim-only"]["accuracy"]))
    row("labels predicted on dev (S/R/N/D)", lambda m: "/".join(
        str(m["run"]["ablation"]["retrieved"]["per_label"][k]["predicted"])
        for k in ("SUPPORTS", "REFUTES", "NOT_ENOUGH_INFO", "DISPUTED")), "REFUTES, DISPUTED never")
    row("any gold passage retrieved (Wilson)", lambda m: e(m["retrieval"]["any_gold"]), "13/154 = 0.084")
    row("recall@100 of the ranking", lambda m: e(m["retrieval"].get("recall@100")), "—")

    L += ["", "## Every retriever on dev", ""]
    for p, m in runs.items():
        L += [f"**{m['run']['evidence']}** (hold-out F used for the choice: "
              + ", ".join(f"{k} {v:.3f}" for k, v in m["run"]["retriever"]["holdout"].items()) + ")", "",
              "| retriever | parameters | dev evidence F | recall@100 | any gold |", "|---|---|---|---|---|"]
        for name, r in m["run"]["retrievers_on_dev"].items():
            params = {k: v for k, v in r["params"].items() if not isinstance(v, (dict, list))}
            L.append(f"| {name} | `{json.dumps(params)}` | {e(r['evidence_f'])} | "
                     f"{e(r['retrieval'].get('recall@100'))} | {e(r['retrieval'].get('any_gold'))} |")
        L.append("")
    L += ["## Per-label recall with retrieved evidence (Wilson)", "",
          "| label | " + " | ".join(m["run"]["evidence"] for m in runs.values()) + " |",
          "|---" * (len(runs) + 1) + "|"]
    for label in ("SUPPORTS", "REFUTES", "NOT_ENOUGH_INFO", "DISPUTED"):
        L.append(f"| {label} | " + " | ".join(e(m["run"]["ablation"]["retrieved"]["per_label"][label]["recall"])
                                             for m in runs.values()) + " |")
    L += ["", "## Predictions (sha256)", "",
          "The same input gives the same bytes; a change of these is a change of the system.", "",
          "| evidence | dev-claims-predictions.json | test-claims-predictions.json |", "|---|---|---|"]
    for p, m in runs.items():
        digests = [sha256_file(p / f"{split}-claims-predictions.json") for split in ("dev", "test")]
        L.append(f"| {m['run']['evidence']} | `{digests[0]}` | `{digests[1]}` |")
    L += ["", "Full reports with plots: " + ", ".join(f"`{p.name}/report.md`" for p in runs) +
          " (in the run directories; not committed)."]
    write_report(args.out, L)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
