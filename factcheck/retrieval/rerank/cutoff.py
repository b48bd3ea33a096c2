"""How many passages to return per claim: the cut-off, tuned for the course's evidence F."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from factcheck.errors import Interval


@dataclass(frozen=True)
class Cutoff:
    """Keep passages of probability at least ``threshold`` and ``relative`` x the top one, within ``[min_k, max_k]``."""

    # At least one passage: the leaderboard needs evidence.
    _parameter_constraints = {"threshold": Interval(float, 0, 1), "relative": Interval(float, 0, 1),
                              "min_k": Interval(int, 1), "max_k": Interval(int, 1)}
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
