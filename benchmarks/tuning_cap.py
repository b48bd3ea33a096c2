"""What ``--max-tuning-claims`` costs in quality: a learning curve on the course's training
claims, written to reports/tuning-cap.md.

One command (hours on the proxy; the wiki file alone takes minutes):

    python -m benchmarks.tuning_cap
    python -m benchmarks.tuning_cap --files wiki --out /tmp/tuning-cap.md   # the wiki file alone

Protocol (the training claims only; dev and test are never read): stratified 5-fold splits of
the training claims (``cv_splits``, one repeat). In each split, the whole system is trained
(``train_system``: tuning, the retriever's choice, the classifier's cross-validation and
fit) on the split's training part capped at N claims (``tuning_subsample``, the cap's own
sample), and checks the split's test claims. Every claim is tested once per N; each cap is
compared with the uncapped training part, paired by claim (``paired_bootstrap_diff``):
evidence F (the course metric's per claim), label accuracy, and their harmonic mean.

The course has 1,228 training claims, under the default cap, so its runs never sample: this
measures the slope of quality against the claims trained on, near the sizes the course has.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from harness.measure import ROOT, SHARED, machine, write_report

WORK = ROOT / "bench" / "tuning-cap"
FILES = {"wiki": "evidence-wiki.json.gz", "proxy": "evidence.json.gz"}
SHARES = (0.25, 0.5)  # the caps, as shares of a split's training part (the whole is the reference)
FOLDS = 5


def log(*parts) -> None:
    print(*parts, file=sys.stderr, flush=True)


def curve(name: str, evidence: Path, train: list, shares=SHARES, folds: int = FOLDS) -> dict:
    """Per cap: every training claim's evidence F and correctness when tested, and each
    split's chosen retriever."""
    import factcheck
    from factcheck.classification.cv import cv_splits
    from factcheck.evaluation.course_metric import evidence_f
    from factcheck.formats.splits import tuning_subsample
    from factcheck.pipeline.run import train_system

    index = factcheck.build_index(evidence, WORK / f"index-{name}", progress=False)
    splits = cv_splits([c.label for c in train], folds=folds, repeats=1)
    caps = {f"{share:g}": share for share in shares} | {"all": None}
    f = {cap: np.zeros(len(train)) for cap in caps}
    correct = {cap: np.zeros(len(train)) for cap in caps}
    chosen = {cap: [] for cap in caps}
    seconds = {cap: 0.0 for cap in caps}
    trained_on = {cap: [] for cap in caps}
    for split in splits:
        part = [train[i] for i in split.train]
        tested = [train[i] for i in split.test]
        for cap, share in caps.items():
            n = len(part) if share is None else int(round(share * len(part)))
            trained_on[cap].append(n)
            t0 = time.perf_counter()
            with tempfile.TemporaryDirectory(dir=WORK) as tmp:
                trained = train_system(index, tuning_subsample(part, n), Path(tmp), progress=False)
                verdicts = trained.system.check(tested)
            seconds[cap] += time.perf_counter() - t0
            for i, claim, v in zip(split.test, tested, verdicts):
                f[cap][i] = evidence_f(v.evidences, claim.evidences)
                correct[cap][i] = float(v.label == claim.label)
            chosen[cap].append(f"{trained.candidates.best} / {trained.selection.reader}")
            log(f"{name} fold {split.fold} cap {cap} ({n} claims): {seconds[cap]:.0f} s so far")
    return {"caps": caps, "f": f, "correct": correct, "chosen": chosen, "seconds": seconds, "trained_on": trained_on}


def table(name: str, result: dict) -> list[str]:
    from factcheck.evaluation.intervals import bootstrap_harmonic, bootstrap_mean, paired_bootstrap_diff
    f, correct, ref = result["f"], result["correct"], "all"
    lines = [f"### {name}", "",
             "| cap (claims trained on a split) | evidence F | accuracy | harmonic mean | ΔF vs all | Δaccuracy vs all "
             "| Δharmonic vs all | retriever / reader chosen, per split | s (5 trainings) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for cap in result["caps"]:
        sizes = result["trained_on"][cap]
        diffs = (["–"] * 3 if cap == ref else
                 [paired_bootstrap_diff(f[cap], f[ref]).fmt(), paired_bootstrap_diff(correct[cap], correct[ref]).fmt(),
                  diff_harmonic(f[cap], correct[cap], f[ref], correct[ref])])
        lines.append(f"| {cap} of the part ({min(sizes)}-{max(sizes)}) | {bootstrap_mean(f[cap]).fmt()} "
                     f"| {bootstrap_mean(correct[cap]).fmt()} | {bootstrap_harmonic(f[cap], correct[cap]).fmt()} "
                     f"| {' | '.join(diffs)} | {'; '.join(result['chosen'][cap])} | {result['seconds'][cap]:.0f} |")
    return lines + [""]


def diff_harmonic(f_a, c_a, f_b, c_b) -> str:
    """The harmonic mean's paired difference (a - b) with its 95% interval: the claims
    resampled together for both arms."""
    from factcheck.evaluation.intervals import Metric, bootstrap_interval, harmonic_mean

    def stat(i):
        return (harmonic_mean(f_a[i].mean(axis=-1), c_a[i].mean(axis=-1))
                - harmonic_mean(f_b[i].mean(axis=-1), c_b[i].mean(axis=-1)))
    low, high = bootstrap_interval(len(f_a), stat)
    return Metric(stat(np.arange(len(f_a))), low, high, len(f_a), "paired bootstrap").fmt()


def load() -> str:
    return "load average (1, 5, 15 min): " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv=None) -> int:
    import factcheck
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--files", default=",".join(FILES), help="evidence files by name: wiki, proxy")
    p.add_argument("--out", type=Path, default=ROOT / "reports" / "tuning-cap.md")
    args = p.parse_args(argv)
    WORK.mkdir(parents=True, exist_ok=True)
    files = {n: SHARED / FILES[n] for n in args.files.split(",")}
    train = factcheck.read_claims(SHARED / "train-claims.json")
    lines = ["# What `--max-tuning-claims` costs: a learning curve on the course's training claims", "",
             f"Command: `python -m benchmarks.tuning_cap --files {args.files}`.", "",
             f"Machine: {machine()}; {load()} before.", "",
             "Protocol: stratified 5-fold splits of the training claims (one repeat, `cv_splits`); in each split "
             "the whole system (tuning, the retriever's choice, the classifier's cross-validation and fit: "
             "`train_system`) is trained on the split's training part capped by `tuning_subsample` (the cap's "
             "own sample) and checks the split's test claims, so every training claim is tested once per cap. "
             "Each cap is paired by claim with the uncapped training part (`paired_bootstrap_diff`, 95%). "
             "Dev and test claims are not read.", ""]
    for name, evidence in files.items():
        lines += table(name, curve(name, evidence, train))
        lines.append(f"After {name}: {load()}.")
        lines.append("")
    lines.append(f"After: {load()}.")
    write_report(args.out, lines)
    log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
