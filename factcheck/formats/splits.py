"""The one fixed 80/20 split of the training claims used for every tuning decision.

Thresholds, k, classifier and reranker hyper-parameters are all chosen on this split;
the dev claims are only ever used for final numbers. Membership depends only on the
claim ids and the seed, so every component and every run sees the same split.
"""

from __future__ import annotations

import numpy as np

SPLIT_SEED = 90042
HOLDOUT_SHARE = 0.2


def train_holdout_split(claims: list, holdout_share: float = HOLDOUT_SHARE, seed: int = SPLIT_SEED):
    """Return (fit, holdout) lists, each in the input order."""
    ids = sorted(c.id for c in claims)
    perm = np.random.default_rng(seed).permutation(len(ids))
    n_hold = int(round(holdout_share * len(ids)))
    held = {ids[i] for i in perm[:n_hold]}
    fit = [c for c in claims if c.id not in held]
    holdout = [c for c in claims if c.id in held]
    return fit, holdout
