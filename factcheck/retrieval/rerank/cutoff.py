"""How many passages to return per claim: the cut-off, tuned for the course's evidence F.

Keep the passages whose probability is at least ``threshold`` and at least ``relative`` x
the claim's top one, clamped to ``[min_k, max_k]`` (``min_k >= 1``: the leaderboard needs
evidence). Tuned on the hold-out claims by :func:`factcheck.training.rerank.tune_cutoff`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class Cutoff:
    """How many of a claim's ranked passages to return (see the module docstring)."""

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
        """The four numbers as a dict."""
        return asdict(self)
