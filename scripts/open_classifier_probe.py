#!/usr/bin/env python3
"""Issue 13: does the classifier CV choose the dense (embedding cosine) feature group?

Runs the pipeline's classifier selection (:func:`~factcheck.pipeline.classifier_cv.select_classifier`,
5x3 repeated stratified CV over the 1,228 training claims, one-standard-error rule) with
``dense=True`` on one index, the open mode's hybrid retriever as the reader (out-of-fold
evidence), and prints every feature set's mean CV accuracy with and without ``dense``
and which configuration the rule keeps. Training claims only; dev is never read.

Usage::

    PYTHONPATH=$PWD python scripts/open_classifier_probe.py --index /tmp/idx-wiki --alpha 0.6 --out out/cls-wiki.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from factcheck.formats.claims import read_claims
from factcheck.formats.files import write_json_atomic
from factcheck.pipeline.classifier_cv import select_classifier
from factcheck.retrieval.dense import HybridRetriever
from factcheck.tagging.index import TagIndex


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", type=Path, required=True)
    ap.add_argument("--data-dir", type=Path, default=Path("/work/shared/data"))
    ap.add_argument("--alpha", type=float, required=True, help="hybrid weight chosen in phase 1 (proxy 0.4, wiki 0.6)")
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)

    index = TagIndex.load(args.index)
    train = read_claims(args.data_dir / "train-claims.json", require_labels=True)
    reader = HybridRetriever(k=args.k, alpha=args.alpha).fit(index)
    sel = select_classifier(train, {"hybrid": reader}, index, jobs=args.jobs, progress=False, dense=True)
    variants = sorted(sel.summary["variants"], key=lambda v: -v["cv_accuracy"])
    out = {"index": str(args.index), "reader": reader.params(), "chosen": sel.summary["chosen"],
           "cv_accuracy": {"mean": sel.summary["cv"]["accuracy_mean"], "sd": sel.summary["cv"]["accuracy_sd"],
                           "oof_interval": sel.summary["cv"]["accuracy_oof"]},
           "variants": variants}
    write_json_atomic(args.out, out)
    print(json.dumps(out, indent=1)[:4000])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
