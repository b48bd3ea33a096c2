"""How many passages to return per claim: the cut-off, tuned for the course's evidence F.

Evidence F punishes both missing gold and returning extra passages, and claims differ:
one has a single clear answer, another five weak ones. The rule keeps the passages whose
probability is at least ``threshold`` *and* at least ``relative`` x the claim's top
probability, then clamps the count to ``[min_k, max_k]``. ``min_k >= 1`` because the
leaderboard format requires evidence for every claim.

:func:`tune_cutoff` grid-searches the four numbers for the best mean F on the holdout
claims (never dev), evaluating every rule on every claim at once from cumulative
correct counts; ties go to the first rule in grid order, so tuning is deterministic.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

THRESHOLDS = (0.0, 0.02, 0.04, 0.06, 0.08, 0.1, 0.12, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6)
RELATIVES = (0.0, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
MIN_KS = (1, 2, 3)
MAX_KS = (1, 2, 3, 4, 5, 6, 8)


@dataclass(frozen=True)
class Cutoff:
    threshold: float = 0.1
    relative: float = 0.5
    min_k: int = 1
    max_k: int = 5

    def count(self, probs_desc: np.ndarray) -> int:
        """How many of a claim's passages (probabilities, best first) to return."""
        if not len(probs_desc):
            return 0
        keep = int(np.sum((probs_desc >= self.threshold) & (probs_desc >= self.relative * probs_desc[0])))
        return int(min(max(keep, self.min_k), self.max_k, len(probs_desc)))

    def to_json(self) -> dict:
        return asdict(self)


def tune_cutoff(probs: list[np.ndarray], correct: list[np.ndarray], n_gold: list[int]) -> tuple[Cutoff, float]:
    """Best rule for mean F. ``probs[i]``/``correct[i]``: claim i's candidates best first
    (probabilities, is-gold flags); ``n_gold[i]``: its number of distinct gold passages."""
    k_max = max(MAX_KS)
    n = len(probs)
    P = np.full((n, k_max), -1.0)
    C = np.zeros((n, k_max + 1))  # C[i, k] = gold among the first k
    avail = np.zeros(n, dtype=np.int64)
    for i, (p, c) in enumerate(zip(probs, correct)):
        m = min(len(p), k_max)
        P[i, :m] = p[:m]
        C[i, 1:m + 1] = np.cumsum(c[:m])
        C[i, m + 1:] = C[i, m]
        avail[i] = len(p)
    g = np.asarray(n_gold, dtype=np.float64)
    top = P[:, :1]
    best, best_f = Cutoff(), -1.0
    for t in THRESHOLDS:
        above_t = P >= t
        for r in RELATIVES:
            keep = (above_t & (P >= r * top)).sum(axis=1)
            for lo in MIN_KS:
                for hi in MAX_KS:
                    if hi < lo:
                        continue
                    k = np.minimum(np.minimum(np.maximum(keep, lo), hi), avail)
                    hits = C[np.arange(n), k]
                    f = np.where(hits > 0, 2 * hits / np.maximum(k + g, 1), 0.0).mean() if n else 0.0
                    if f > best_f + 1e-12:
                        best, best_f = Cutoff(t, r, lo, hi), float(f)
    return best, best_f
