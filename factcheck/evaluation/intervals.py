"""95% intervals and paired tests: every reported rate comes with one.

* means of per-claim values (evidence F, recall@k, MRR, accuracy): percentile bootstrap
  over claims, 10,000 resamples, fixed seed -- vectorised as one (B, n) index matrix;
* proportions of independent yes/no outcomes (any-gold rate, fallback share, per-label
  recall): Wilson score interval;
* paired comparisons on the same claims: paired bootstrap of the difference, and
  McNemar's exact test (a two-sided binomial test on the discordant pairs).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import binomtest, norm

N_BOOT = 10_000
SEED = 20240501


@dataclass
class Estimate:
    """A value with its 95% interval ``[low, high]``, the method and the sample size."""

    value: float | None
    low: float | None
    high: float | None
    method: str
    n: int

    def to_json(self) -> dict:
        """``{"value", "ci95": [low, high], "method", "n"}``, as metrics.json holds it."""
        return {"value": self.value, "ci95": [self.low, self.high], "method": self.method, "n": self.n}

    def fmt(self, digits: int = 3) -> str:
        """As :func:`format_interval`."""
        return format_interval(self, digits)


def format_interval(estimate: Estimate | dict | None, digits: int = 3, missing: str = "n/a") -> str:
    """A value with its 95% interval, the way every report and command shows one.

    Parameters
    ----------
    estimate : Estimate, or its JSON form ``{"value", "ci95": [low, high], ...}``, or None
    digits : int
        Decimals of the value and of both bounds.
    missing : str
        What to show when there is no estimate or no value (no claims to average over).

    Example
    -------
    >>> format_interval({"value": 0.1834, "ci95": [0.151, 0.2172]})
    '0.183 [0.151, 0.217]'
    >>> format_interval(None, missing="—")
    '—'
    """
    if isinstance(estimate, Estimate):
        estimate = estimate.to_json()
    if not estimate or estimate.get("value") is None:
        return missing
    low, high = estimate["ci95"]
    return f"{estimate['value']:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def resample_indices(n: int, n_boot: int = N_BOOT, seed: int = SEED) -> np.ndarray:
    """``(n_boot, n)`` bootstrap indices, fixed seed: every interval resamples the same way."""
    return np.random.default_rng(seed).integers(0, n, size=(n_boot, n))


# Resampled indices drawn at a time: (n_boot x n) at once is 8 bytes x 10,000 x n -- 8 GB
# for 100,000 queries. Drawn in blocks of rows from the same generator they are the very
# same indices (numpy's generator fills row after row; a test checks it), so every
# interval is the one a single draw gives.
BLOCK_ENTRIES = 1 << 22


def bootstrap_means(columns: dict, n_boot: int = N_BOOT, seed: int = SEED) -> dict[str, Estimate]:
    """:func:`bootstrap_mean` of several value lists over the same items (queries, claims)
    at once: one set of resamples serves them all, drawn block by block (memory bounded
    by :data:`BLOCK_ENTRIES`, whatever the number of items). Each estimate equals
    ``bootstrap_mean(values, n_boot, seed)`` bit for bit.

    Example
    -------
    >>> est = bootstrap_means({"hit": [1, 0, 1, 1], "rr": [1.0, 0.0, 0.5, 1.0]})
    >>> est["hit"].fmt(), est["hit"] == bootstrap_mean([1, 0, 1, 1])
    ('0.750 [0.250, 1.000]', True)
    """
    arrays = {name: np.asarray(values, dtype=np.float64) for name, values in columns.items()}
    sizes = {len(v) for v in arrays.values()}
    if len(sizes) > 1:
        raise ValueError(f"every column needs the same number of items, got {sorted(sizes)}")
    n = sizes.pop() if sizes else 0
    if n == 0:
        return {name: Estimate(None, None, None, "bootstrap", 0) for name in arrays}
    rng = np.random.default_rng(seed)
    means = {name: np.empty(n_boot) for name in arrays}
    block = max(1, BLOCK_ENTRIES // n)
    for start in range(0, n_boot, block):
        rows = min(block, n_boot - start)
        idx = rng.integers(0, n, size=(rows, n))
        for name, v in arrays.items():
            means[name][start:start + rows] = v[idx].mean(axis=1)
    out = {}
    for name, v in arrays.items():
        lo, hi = np.percentile(means[name], [2.5, 97.5])
        out[name] = Estimate(float(v.mean()), float(lo), float(hi), "bootstrap", n)
    return out


def bootstrap_mean(values, n_boot: int = N_BOOT, seed: int = SEED) -> Estimate:
    """The mean of per-claim values with its percentile-bootstrap 95% interval."""
    return bootstrap_means({"values": values}, n_boot, seed)["values"]


def harmonic_mean(a, b):
    """Elementwise 2ab / (a + b), 0 where both are 0."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(a + b > 0, 2 * a * b / (a + b), 0.0)
    return out


def bootstrap_harmonic(f_values, a_values, n_boot: int = N_BOOT, seed: int = SEED) -> Estimate:
    """Harmonic mean of two per-claim means, resampling claims jointly."""
    f, a = np.asarray(f_values, float), np.asarray(a_values, float)
    if len(f) == 0:
        return Estimate(None, None, None, "bootstrap", 0)
    idx = resample_indices(len(f), n_boot, seed)
    hm = harmonic_mean(f[idx].mean(axis=1), a[idx].mean(axis=1))
    lo, hi = np.percentile(hm, [2.5, 97.5])
    return Estimate(float(harmonic_mean(f.mean(), a.mean())), float(lo), float(hi), "bootstrap", len(f))


def paired_bootstrap_diff(a_values, b_values, n_boot: int = N_BOOT, seed: int = SEED) -> Estimate:
    """mean(a) - mean(b) over the same claims, resampled as pairs."""
    a, b = np.asarray(a_values, float), np.asarray(b_values, float)
    d = a - b
    diffs = d[resample_indices(len(d), n_boot, seed)].mean(axis=1)
    lo, hi = np.percentile(diffs, [2.5, 97.5])
    return Estimate(float(d.mean()), float(lo), float(hi), "paired bootstrap", len(d))


def wilson(successes: int, n: int, confidence: float = 0.95) -> Estimate:
    """A proportion with its Wilson score interval."""
    if n == 0:
        return Estimate(None, None, None, "Wilson", 0)
    z = norm.ppf(0.5 + confidence / 2)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return Estimate(p, float(max(0.0, centre - half)), float(min(1.0, centre + half)), "Wilson", n)


def mcnemar_exact(correct_a, correct_b) -> dict:
    """Exact McNemar test on paired correctness: binomial test on discordant pairs."""
    a, b = np.asarray(correct_a, bool), np.asarray(correct_b, bool)
    only_a = int(np.sum(a & ~b))
    only_b = int(np.sum(~a & b))
    discordant = only_a + only_b
    p = 1.0 if discordant == 0 else float(binomtest(only_a, discordant, 0.5).pvalue)
    return {"only_a_correct": only_a, "only_b_correct": only_b, "p_value": p}
