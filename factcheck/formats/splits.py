"""The one fixed 80/20 split of the training claims every tuning decision is made on (the
dev claims give final numbers only); membership depends only on the claim ids and the seed."""

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
