"""The one metric type, :class:`Metric` (a value with its 95% interval): percentile bootstrap
(fixed seed) for means, Wilson for proportions, paired bootstrap and exact McNemar for pairs."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

# scipy.stats is imported where an interval is computed: it costs most of a second, and
# the result types here are imported by commands (search) that compute none.

N_BOOT = 10_000
SEED = 20240501
# Resampled values per batch, bounding memory; batches draw the same indices as one draw.
BLOCK_ENTRIES = 1 << 22


@dataclass(frozen=True)
class Metric:
    """A metric's ``value`` with its 95% interval ``[low, high]``, its ``n`` items and the
    interval's ``method``, as plain floats and ints; ``value`` is None with nothing to measure.

    Example
    -------
    >>> m = wilson(8, 10)
    >>> m.value, m.n, m.method, m.fmt()
    (0.8, 10, 'Wilson', '0.800 [0.490, 0.943]')
    >>> m.to_json()["ci95"] == [m.low, m.high]
    True
    """

    value: float | None
    low: float | None = None
    high: float | None = None
    n: int = 0
    method: str = "none"

    def __post_init__(self):
        for name in ("value", "low", "high"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, float(getattr(self, name)))
        object.__setattr__(self, "n", int(self.n))

    def to_json(self) -> dict:
        """``{"value", "ci95": [low, high], "method", "n"}``, as ``metrics.json`` holds it."""
        return {"value": self.value, "ci95": [self.low, self.high], "method": self.method, "n": self.n}

    def fmt(self, digits: int = 3) -> str:
        """As :func:`format_interval`."""
        return format_interval(self, digits)


class Result:
    """Base of the typed results (dataclasses holding ``metrics``)."""

    def to_json(self) -> dict:
        """The fields, in order, as plain JSON values."""
        return {f.name: to_json(getattr(self, f.name)) for f in dataclasses.fields(self)}


def to_json(obj):
    """``obj`` as plain JSON values (by its ``to_json`` if it has one)."""
    if hasattr(obj, "to_json"):
        return obj.to_json()
    if isinstance(obj, dict):
        return {k: to_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_json(v) for v in obj]
    return obj


def format_interval(estimate: Metric | dict | None, digits: int = 3, missing: str = "n/a") -> str:
    """A :class:`Metric` (or its JSON form) as every report shows one: ``0.183 [0.151, 0.217]``."""
    if isinstance(estimate, Metric):
        estimate = estimate.to_json()
    if not estimate or estimate.get("value") is None:
        return missing
    low, high = estimate["ci95"]
    return f"{estimate['value']:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def describe(estimate: Metric | dict) -> str:
    """``0.1834  (95% CI 0.1510-0.2172, bootstrap)``, as ``factcheck evaluate`` prints a metric."""
    e = estimate.to_json() if isinstance(estimate, Metric) else estimate
    (low, high), value = e["ci95"], e["value"]
    if value is None:
        return "n/a"
    return f"{value:.4f}" + ("" if low is None else f"  (95% CI {low:.4f}-{high:.4f}, {e['method']})")


def bootstrap_interval(n: int, statistic, n_boot: int = N_BOOT, seed: int = SEED) -> tuple:
    """``(low, high)``: numpy's 2.5th and 97.5th percentiles of ``statistic(idx)`` over
    scipy's ``n_boot`` resamples of ``n`` items (``idx``: a ``(resamples, n)`` array of item
    numbers to gather by). Not scipy's own interval step: it moves some bounds by an ulp."""
    if n == 1:  # every resample is the item itself (scipy needs two)
        value = statistic(np.zeros((1, 1), dtype=np.int64))[..., 0]
        return value, value
    from scipy.stats import bootstrap
    result = bootstrap((np.arange(n),), lambda idx, axis: statistic(idx), n_resamples=n_boot,
                       batch=max(1, BLOCK_ENTRIES // n), vectorized=True, method="percentile",
                       rng=np.random.default_rng(seed))
    low, high = np.percentile(result.bootstrap_distribution, [2.5, 97.5], axis=-1)
    return low, high


def bootstrap_means(columns: dict, n_boot: int = N_BOOT, seed: int = SEED) -> dict[str, Metric]:
    """:func:`bootstrap_mean` of several value lists over the same items, from one set of resamples."""
    arrays = {name: np.asarray(v, dtype=np.float64) for name, v in columns.items()}
    sizes = {len(v) for v in arrays.values()}
    if len(sizes) > 1:
        raise ValueError(f"every column needs the same number of items, got {sorted(sizes)}")
    if not sizes or 0 in sizes:
        return {name: Metric(None, None, None, 0, "bootstrap") for name in arrays}
    n = sizes.pop()
    names = list(arrays)
    # 0/1 columns (hits at k) are counted, not added: their bits are packed into one byte an
    # item, gathered once for all of them; a count over n is the mean a gather gives, bit
    # for bit (whole numbers add exactly in any order). Other columns are gathered one by
    # one (numpy adds a 2-D gather's rows as it adds one column's resamples).
    binary = [name for name in names if _binary(arrays[name])][:8]
    rest = [name for name in names if name not in binary]
    packed = np.zeros(n, dtype=np.uint8)
    for bit, name in enumerate(binary):
        packed |= arrays[name].astype(np.uint8) << np.uint8(bit)

    def means(i):
        out = {name: arrays[name][i].mean(axis=-1) for name in rest}
        if binary:
            bits = packed[i]
            for bit, name in enumerate(binary):
                out[name] = np.count_nonzero(bits & np.uint8(1 << bit), axis=-1) / i.shape[-1]
        return np.stack([out[name] for name in names])

    low, high = bootstrap_interval(n, means, n_boot, seed)
    return {name: Metric(v.mean(), lo, hi, len(v), "bootstrap") for (name, v), lo, hi in zip(arrays.items(), low, high)}


def _binary(values: np.ndarray) -> bool:
    """Every value 0 or 1 (not -0.0, whose sums keep the sign a count would lose)."""
    return bool(np.all((values == 1) | ((values == 0) & ~np.signbit(values))))


def bootstrap_mean(values, n_boot: int = N_BOOT, seed: int = SEED) -> Metric:
    """The mean of per-item values with its percentile-bootstrap 95% interval."""
    return bootstrap_means({"values": values}, n_boot, seed)["values"]


def harmonic_mean(a, b):
    """Elementwise 2ab / (a + b), 0 where both are 0."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(a + b > 0, 2 * a * b / (a + b), 0.0)


def bootstrap_harmonic(f_values, a_values, n_boot: int = N_BOOT, seed: int = SEED) -> Metric:
    """Harmonic mean of two per-item means, resampling the items jointly."""
    f, a = np.asarray(f_values, float), np.asarray(a_values, float)
    if len(f) == 0:
        return Metric(None, None, None, 0, "bootstrap")
    low, high = bootstrap_interval(len(f), lambda i: harmonic_mean(f[i].mean(axis=-1), a[i].mean(axis=-1)), n_boot,
                                   seed)
    return Metric(harmonic_mean(f.mean(), a.mean()), low, high, len(f), "bootstrap")


def paired_bootstrap_diff(a_values, b_values, n_boot: int = N_BOOT, seed: int = SEED) -> Metric:
    """mean(a) - mean(b) over the same items, resampled as pairs."""
    d = np.asarray(a_values, float) - np.asarray(b_values, float)
    return dataclasses.replace(bootstrap_mean(d, n_boot, seed), method="paired bootstrap")


def wilson(successes: int, n: int, confidence: float = 0.95) -> Metric:
    """A proportion with its Wilson score interval (scipy's)."""
    if n == 0:
        return Metric(None, None, None, 0, "Wilson")
    from scipy.stats import binomtest
    ci = binomtest(int(successes), int(n)).proportion_ci(confidence_level=confidence, method="wilson")
    return Metric(successes / n, ci.low, ci.high, n, "Wilson")


def mcnemar_exact(correct_a, correct_b) -> dict:
    """Exact McNemar test on paired correctness: binomial test on discordant pairs."""
    a, b = np.asarray(correct_a, bool), np.asarray(correct_b, bool)
    only_a, only_b = int(np.sum(a & ~b)), int(np.sum(~a & b))
    from scipy.stats import binomtest
    p = 1.0 if only_a + only_b == 0 else float(binomtest(only_a, only_b + only_a, 0.5).pvalue)
    return {"only_a_correct": only_a, "only_b_correct": only_b, "p_value": p}
