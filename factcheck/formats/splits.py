"""The one fixed 80/20 split of the training claims every tuning decision is made on (the
dev claims give final numbers only); membership depends only on the claim ids and the seed."""

from __future__ import annotations

from collections import Counter

import numpy as np

from factcheck.errors import InputError, check_number

SPLIT_SEED = 90042
HOLDOUT_SHARE = 0.2
#: Training claims that tuning and training use at most: above the course's 1,228, so the
#: course data is used whole; FEVER's 145,449 are sampled. A training claim costs about 0.33
#: CPU s at 25M passages: 10,000 keep that run within two hours (docs/main-job.md).
MAX_TUNING_CLAIMS = 10_000
#: Dev claims on which every candidate retriever is scored at most (the run's own predictions
#: are scored on every dev claim): above the course's dev, so its table is the whole of it.
MAX_SCORING_CLAIMS = 5_000


def train_holdout_split(claims: list, holdout_share: float = HOLDOUT_SHARE, seed: int = SPLIT_SEED):
    """Return (fit, holdout) lists, each in the input order."""
    ids = sorted(c.id for c in claims)
    perm = np.random.default_rng(seed).permutation(len(ids))
    n_hold = int(round(holdout_share * len(ids)))
    held = {ids[i] for i in perm[:n_hold]}
    fit = [c for c in claims if c.id not in held]
    holdout = [c for c in claims if c.id in held]
    return fit, holdout


def claims_sample(claims: list, max_claims: int, seed: int = SPLIT_SEED, param: str = "max_claims") -> list:
    """``claims`` itself when there are at most ``max_claims``, else ``max_claims`` of them in the
    input order; which ones depends only on the claim ids and the seed, as the split's.

    Example
    -------
    >>> from factcheck.formats.claims import Claim
    >>> [c.id for c in claims_sample([Claim(f"c{i}", "text") for i in range(5)], 2)]
    ['c2', 'c4']
    """
    check_number(max_claims, param, integer=True, low=1)
    if len(claims) <= max_claims:
        return claims
    ids = sorted(c.id for c in claims)
    kept = {ids[i] for i in np.random.default_rng(seed).permutation(len(ids))[:max_claims]}
    return [c for c in claims if c.id in kept]


def tuning_subsample(claims: list, max_claims: int = MAX_TUNING_CLAIMS, seed: int = SPLIT_SEED) -> list:
    """``claims`` itself when there are at most ``max_claims``, else ``max_claims`` of them in the
    input order; which ones depends only on the claim ids and the seed, as the split's.

    Example
    -------
    >>> from factcheck.formats.claims import Claim
    >>> claims = [Claim(f"c{i}", "text") for i in range(5)]
    >>> tuning_subsample(claims, 10) is claims, [c.id for c in tuning_subsample(claims, 3)]
    (True, ['c2', 'c3', 'c4'])
    """
    sample = claims_sample(claims, max_claims, seed, "max_tuning_claims")
    if sample is claims:
        return claims
    # A label the sample misses would never be predicted, or blamed on the training file.
    dropped = Counter(c.label for c in claims)
    for c in sample:
        dropped.pop(c.label, None)
    if dropped:
        label, count = min(dropped.items(), key=lambda item: str(item[0]))
        raise InputError(None, None, f"the sample of {max_claims:,} of the {len(claims):,} training claims holds no "
                         f"claim labelled {label!r} ({count:,} of them are): raise it so that every label is trained",
                         param="max_tuning_claims")
    return sample
