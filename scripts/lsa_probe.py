#!/usr/bin/env python3
"""Issue 13, the course-legal semantic counterpart: does an LSA space help the reranker?

LSA is learned from the course data only: scikit-learn's ``TruncatedSVD`` over the
index's own idf-weighted, L2-normalised passage term matrix (the reranker's
``FeatureContext.unit``). A claim is folded into the same space (its idf-weighted terms,
projected, L2-normalised), so "dense" cosines need no pretrained weights. The LSA scorer
then stands in for the open mode's embedding scorer: its top ``dense_depth`` passages
join the reranker's candidates and the dense features
(:data:`~factcheck.retrieval.rerank.semantic.DENSE_FEATURES`) are computed from it.

Measured on the TRAINING hold-out only (the fixed 80/20 ``train_holdout_split``): the
course reranker against the LSA variants. Dev is never read: the course defaults change
only if LSA wins here, and this script is how that is decided.

Usage::

    PYTHONPATH=$PWD python scripts/lsa_probe.py --index /tmp/idx-wiki --out out/lsa-wiki.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from sklearn.decomposition import TruncatedSVD

from factcheck.formats.claims import read_claims
from factcheck.formats.files import write_json_atomic
from factcheck.formats.splits import train_holdout_split
from factcheck.pipeline.rerank_training import DEFAULT_CANDIDATES, TrainingData, train_reranker
from factcheck.retrieval.rerank import features as F
from factcheck.retrieval.rerank.candidates import CandidateConfig
from factcheck.retrieval.rerank.semantic import ALL_FEATURES
from factcheck.tagging.index import TagIndex
from factcheck.text.tokens import split_stems

SEED = 20240508


class LSAScorer:
    """Cosines in an LSA space of the index's TF-IDF (a scorer for :mod:`~factcheck.retrieval.rerank.semantic`).

    Parameters
    ----------
    n_components : int, default 128
        Dimensions kept by the truncated SVD.

    Attributes
    ----------
    vectors_ : ndarray (passages x n_components), float32, L2-normalised rows
    svd_ : TruncatedSVD

    Example
    -------
    >>> lsa = LSAScorer(128).fit(terms, context)        # doctest: +SKIP
    >>> lsa.scores("sea levels are rising").shape       # doctest: +SKIP
    (316312,)
    """

    def __init__(self, n_components: int = 128):
        self.n_components = n_components

    def fit(self, terms, context) -> "LSAScorer":
        self.terms_ = terms
        self.svd_ = TruncatedSVD(self.n_components, algorithm="randomized", n_iter=5, random_state=SEED)
        self.vectors_ = self._unit(self.svd_.fit_transform(context.unit)).astype(np.float32)
        return self

    @staticmethod
    def _unit(x: np.ndarray) -> np.ndarray:
        norms = np.sqrt(np.einsum("ij,ij->i", x, x))
        norms[norms == 0] = 1.0
        return x / norms[:, None]

    @property
    def embedder_(self) -> "LSAScorer":
        return self  # the scorer interface's text embedder: claims folded into the LSA space

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.n_components), dtype=np.float32)
        for i, text in enumerate(texts):
            ids, counts = self.terms_.query_weights(split_stems(text))
            if len(ids):
                w = counts * self.terms_.idf[ids]  # the text as a unit row of the same TF-IDF space
                out[i] = self._unit((self.svd_.components_[:, ids] @ (w / np.sqrt(w @ w)))[None, :])[0]
        return out

    def scores(self, text: str) -> np.ndarray:
        return self.vectors_ @ self.embed([text])[0]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", type=Path, required=True)
    ap.add_argument("--data-dir", type=Path, default=Path("/work/shared/data"))
    ap.add_argument("--components", default="128")
    ap.add_argument("--dense-depth", type=int, default=100)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)

    index = TagIndex.load(args.index)
    train = read_claims(args.data_dir / "train-claims.json", require_labels=True)
    fit, holdout = train_holdout_split(train)
    log = []
    terms = context = None
    for config in DEFAULT_CANDIDATES:
        d = TrainingData(index, fit, holdout, config, terms, context, progress=False)
        terms, context = d.terms, d.context
        r = train_reranker(index, fit, holdout, data=d, progress=False)
        log.append({"option": "course", "candidates": config.to_json(), **r.report["holdout"]})
        print(json.dumps(log[-1]), flush=True)
    for k in [int(x) for x in args.components.split(",")]:
        t0 = time.perf_counter()
        lsa = LSAScorer(k).fit(terms, context)
        svd_s = time.perf_counter() - t0
        for memory_k in (20, 50):
            config = CandidateConfig(memory_k=memory_k, dense_depth=args.dense_depth)
            d = TrainingData(index, fit, holdout, config, terms, context, progress=False, dense=lsa)
            for name, feats in (("lexical + LSA", ALL_FEATURES), ("lexical only (LSA candidates)", F.FEATURES)):
                r = train_reranker(index, fit, holdout, data=d, features=feats, progress=False)
                log.append({"option": f"LSA {k}", "features": name, "candidates": config.to_json(),
                            "svd_seconds": svd_s, **r.report["holdout"]})
                print(json.dumps(log[-1]), flush=True)
    write_json_atomic(args.out, {"index": str(args.index), "passages": len(index), "holdout": log})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
