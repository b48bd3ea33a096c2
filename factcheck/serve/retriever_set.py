"""Every retriever a model directory knows, fitted once on one tag index: the app's
:class:`~factcheck.system.checker.FactChecker` for each retriever.

``FactChecker.load`` builds the model's chosen retriever; the other tuned ones
(``available_methods``) are fitted on the *same* :class:`TagIndex` and share the
classifier, so switching retriever in the app costs nothing per request and the
316K-passage index is held in memory once. A retriever that cannot be loaded here
(e.g. the reranker missing from this installation) is reported, not fatal.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from factcheck.errors import InputError
from factcheck.system.checker import FactChecker
from factcheck.system.model_dir import available_methods

logger = logging.getLogger(__name__)  # notes for whoever serves the app (the CLI shows them)

BEST = "best"


class UnknownMethod(ValueError):
    pass


@dataclass
class RetrieverSet:
    by_method: dict[str, FactChecker]
    best: str
    unavailable: dict[str, str] = field(default_factory=dict)
    load_seconds: dict[str, float] = field(default_factory=dict)
    # Retrieval and classification are CPU-bound and the retrievers' memo caches are not
    # meant for concurrent writers: one check at a time, the rest queue.
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def methods(self) -> list[str]:
        return sorted(self.by_method)

    @property
    def others(self) -> list[str]:
        """The loaded retrievers other than the model's choice, by name."""
        return [m for m in self.methods if m != self.best]

    @property
    def index(self):
        return self.by_method[self.best].index

    def resolve(self, requested: str | None) -> str:
        """``best``/empty -> the model's chosen retriever; otherwise a loaded method name."""
        if requested in (None, "", BEST):
            return self.best
        if requested in self.by_method:
            return requested
        raise UnknownMethod(requested)

    def check(self, method: str, text: str):
        """(Verdict, seconds) for one claim with the named retriever."""
        system = self.by_method[method]
        with self.lock:
            t = time.perf_counter()
            verdict = system.check(text)
            return verdict, time.perf_counter() - t


def load_retriever_set(index_dir: Path, model_dir: Path, warm_up: bool = True, mode: str | None = None) -> RetrieverSet:
    t = time.perf_counter()
    chosen = FactChecker.load(index_dir, model_dir, mode=mode)
    best = chosen.chosen_method
    systems = RetrieverSet({best: chosen}, best, load_seconds={best: round(time.perf_counter() - t, 2)})
    for method in available_methods(chosen.meta):
        if method == best:
            continue
        t = time.perf_counter()
        try:
            systems.by_method[method] = chosen.using(method)
        except (InputError, ImportError, OSError) as exc:
            systems.unavailable[method] = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            logger.warning("retriever %r not available: %s", method, systems.unavailable[method])
            continue
        systems.load_seconds[method] = round(time.perf_counter() - t, 2)
    if warm_up:  # first calls pay for lazy caches (vocabularies, analyzer memo, sklearn)
        for method in systems.methods:
            systems.check(method, "Global temperatures are rising because of carbon dioxide emissions.")
    return systems
