"""Paired comparison of two runs' predictions on the same labelled claims.

For each claim: the course metric's evidence F and label correctness under run A and
run B; then the paired differences (B - A) of evidence F and of accuracy, each with a
paired-bootstrap 95% interval over claims (10,000 resamples, seed 0), McNemar's exact
test on the labels, and the sha256 of both prediction files. Used to check that a change
which may move predictions (rounding, one implementation in place of two) leaves the
figures where they were::

    python -m scripts.compare_runs --groundtruth ../shared/data/dev-claims.json \\
        --a RUN_BEFORE/dev-claims-predictions.json --b RUN_AFTER/dev-claims-predictions.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

import numpy as np
from scipy.stats import binomtest


def evidence_f(predicted, gold) -> float:
    predicted, gold = set(predicted), set(gold)
    correct = len(predicted & gold)
    if not correct or not predicted or not gold:
        return 0.0
    p, r = correct / len(predicted), correct / len(gold)
    return 2 * p * r / (p + r)


def per_claim(predictions: dict, truth: dict) -> tuple[np.ndarray, np.ndarray]:
    f, correct = [], []
    for cid, claim in truth.items():
        pred = predictions.get(cid, {})
        f.append(evidence_f(pred.get("evidences", []), claim["evidences"]))
        correct.append(float(pred.get("claim_label") == claim["claim_label"]))
    return np.array(f), np.array(correct)


def paired(a: np.ndarray, b: np.ndarray, n_boot: int = 10_000, seed: int = 0) -> dict:
    d = b - a
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, len(d), size=(n_boot, len(d)))].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return {"a": float(a.mean()), "b": float(b.mean()), "diff": float(d.mean()), "low": float(lo), "high": float(hi)}


def compare(groundtruth: Path, a: Path, b: Path) -> dict:
    truth = json.loads(Path(groundtruth).read_text("utf-8"))
    pa, pb = (json.loads(Path(p).read_text("utf-8")) for p in (a, b))
    fa, ca = per_claim(pa, truth)
    fb, cb = per_claim(pb, truth)
    only_a, only_b = int(np.sum((ca == 1) & (cb == 0))), int(np.sum((ca == 0) & (cb == 1)))
    return {
        "claims": len(truth),
        "sha256": {"a": hashlib.sha256(Path(a).read_bytes()).hexdigest(),
                   "b": hashlib.sha256(Path(b).read_bytes()).hexdigest()},
        "evidence_lists_differing": sum(set(pa.get(c, {}).get("evidences", [])) != set(pb.get(c, {}).get("evidences", []))
                                        for c in truth),
        "labels_differing": sum(pa.get(c, {}).get("claim_label") != pb.get(c, {}).get("claim_label") for c in truth),
        "evidence_f": paired(fa, fb),
        "accuracy": paired(ca, cb),
        "mcnemar": {"only_a_correct": only_a, "only_b_correct": only_b,
                    "p_value": 1.0 if only_a + only_b == 0 else float(binomtest(only_a, only_a + only_b).pvalue)},
    }


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groundtruth", type=Path, required=True)
    ap.add_argument("--a", type=Path, required=True, help="predictions before")
    ap.add_argument("--b", type=Path, required=True, help="predictions after")
    args = ap.parse_args(argv)
    print(json.dumps(compare(args.groundtruth, args.a, args.b), indent=2))


if __name__ == "__main__":
    main()
