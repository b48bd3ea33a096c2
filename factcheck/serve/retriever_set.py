"""Every retriever a model directory knows, fitted once on the same index and sharing the
classifier; one that cannot be loaded is reported, not fatal."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from factcheck.errors import InputError
from factcheck.formats.claims import ordered_labels
from factcheck.system.checker import FactChecker
from factcheck.system.model_dir import available_methods

logger = logging.getLogger(__name__)  # notes for whoever serves the app (the CLI shows them)

BEST = "best"


@dataclass
class RetrieverSet:
    """The checker of each loaded retriever, the model's choice and why any other is missing."""

    by_method: dict[str, FactChecker]
    best: str
    unavailable: dict[str, str] = field(default_factory=dict)
    # One check at a time: the work is CPU-bound and the retrievers' caches have no concurrent writers.
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def methods(self) -> list[str]:
        return sorted(self.by_method)

    @property
    def labels(self) -> list[str]:
        """The labels the classifier predicts, in their label set's order (any number from two)."""
        return ordered_labels(str(c) for c in self.by_method[self.best].classifier.classes_)

    @property
    def index(self):
        """The index every retriever is fitted on."""
        return self.by_method[self.best].index

    def check(self, method: str, text: str):
        """(Verdict, seconds) for one claim with the named retriever."""
        system = self.by_method[method]
        with self.lock:
            t = time.perf_counter()
            verdict = system.check(text)
            return verdict, time.perf_counter() - t


def load_retriever_set(index_dir: Path, model_dir: Path, warm_up: bool = True, mode: str | None = None) -> RetrieverSet:
    """The model's chosen retriever and every other it names, each checked once if ``warm_up``."""
    chosen = FactChecker.load(index_dir, model_dir, mode=mode)
    best = chosen.chosen_method
    systems = RetrieverSet({best: chosen}, best)
    for method in available_methods(chosen.meta):
        if method == best:
            continue
        try:
            systems.by_method[method] = chosen.using(method)
        except (InputError, ImportError, OSError) as exc:
            systems.unavailable[method] = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            logger.warning("retriever %r not available: %s", method, systems.unavailable[method])
    if warm_up:  # first calls pay for lazy caches (vocabularies, analyzer memo, sklearn)
        for method in systems.methods:
            systems.check(method, "Global temperatures are rising because of carbon dioxide emissions.")
    return systems
