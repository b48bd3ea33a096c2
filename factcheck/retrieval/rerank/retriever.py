"""``RerankRetriever``: candidates -> features -> P(gold) -> per-claim cut-off.

Usage (training, which chooses by evidence F, is :mod:`factcheck.training.rerank`)::

    retriever = train_reranker(index, fit_claims, holdout_claims)   # fitted to ``index``
    retriever.save("rerank.skops")
    retriever = RerankRetriever.load("rerank.skops").fit(index)   # e.g. in the web app
    retriever.retrieve(["Arctic sea ice is recovering."])

The saved model holds the candidate settings, the boosted trees, the cut-off, the label
memory's claims (ids, texts, gold ids: the memory's TF-IDF is refitted on load, a
fraction of a second) and the training report. Corpus statistics are not saved: they
are rebuilt from (or loaded from the cache next to) whatever index the model is fitted
to, so one model serves the proxy and the wiki-only index alike.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from factcheck.errors import InputError
from factcheck.formats.files import dump_model_atomic
from factcheck.formats.safe_load import load_model
from factcheck.retrieval.base import Hit, Ranking, Retriever, Selection
from factcheck.retrieval.rerank import features as F
from factcheck.retrieval.rerank.candidates import CandidateConfig, CandidateGenerator
from factcheck.retrieval.rerank.cutoff import Cutoff
from factcheck.retrieval.rerank.explain import explain_hit
from factcheck.retrieval.rerank.memory import ClaimMemory
from factcheck.retrieval.rerank.model import RelevanceModel
from factcheck.retrieval.rerank.semantic import load_scorer, pool_features
from factcheck.retrieval.rerank.terms import TermIndex

FORMAT = "factcheck-rerank/1"
_MEMO_LIMIT = 4096


class RerankRetriever(Retriever):
    name = "rerank"

    def __init__(self, candidates: CandidateConfig | dict | None = None, model: RelevanceModel | None = None,
                 cutoff: Cutoff | dict | None = None, memory: ClaimMemory | None = None,
                 report: dict | None = None):
        self.config = candidates if isinstance(candidates, CandidateConfig) else CandidateConfig(**(candidates or {}))
        self.model = model
        self.cutoff = cutoff if isinstance(cutoff, Cutoff) else Cutoff(**(cutoff or {}))
        self.memory = memory
        self.report = report or {}
        self._memo: dict[str, tuple] = {}

    def params(self) -> dict:
        return {"candidates": self.config.to_json(), "cutoff": self.cutoff.to_json(),
                "model": self.model.config.to_json() if self.model else None,
                "features": self.model.features if self.model else None,
                "memory_claims": len(self.memory) if self.memory is not None else 0}

    # ------------------------------------------------------------------ fitting
    def fit(self, index, terms: TermIndex | None = None, context: F.FeatureContext | None = None,
            dense=None) -> "RerankRetriever":
        """Attach to an index (``terms``/``context``/``dense`` reuse structures already built
        for it). A model trained with dense candidates (``dense_depth > 0``, the open mode)
        loads the index's passage vectors and the bundled embedding model unless ``dense``
        (a scorer, :mod:`~factcheck.retrieval.rerank.semantic`) is given."""
        if self.model is None:
            raise InputError(None, None, "the rerank method needs a trained model: "
                             "run `factcheck train-rerank` and pass its output with --rerank-model",
                             param="rerank_model")
        self.index = index
        self.terms = terms or TermIndex.for_index(index)
        self.context = context or F.FeatureContext(index, self.terms)
        if self.memory is not None:
            self.memory.bind(index.row_of, len(index))
        self.dense = None
        if self.config.dense_depth > 0:
            self.dense = dense if dense is not None else load_scorer(index)
        self.generator = CandidateGenerator(self.terms, self.memory, self.config, self.dense)
        self._memo = {}
        return self

    # ------------------------------------------------------------------ scoring
    def scored(self, claim: str):
        """(candidates, features, positions in the pool by probability desc -- ties by BM25,
        then row -- and those probabilities), memoised: ``run_retrieval`` asks for
        ``retrieve`` and ``rank`` of the same claims."""
        hit = self._memo.get(claim)
        if hit is None:
            cands = self.generator.generate(claim)
            X = pool_features(self.context, cands, self.config.k1, self.config.b, self.dense)
            p = self.model.predict(X)
            order = np.lexsort((cands.rows, -cands.bm25, -p))  # ties: BM25, then corpus order
            hit = (cands, X, order, p[order])
            if len(self._memo) >= _MEMO_LIMIT:
                self._memo.clear()
            self._memo[claim] = hit
        return hit

    def clear_cache(self) -> None:
        self._memo = {}

    def rank(self, claims: list[str], depth: int = 100) -> list[Ranking]:
        out = []
        for claim in claims:
            cands, _, order, probs = self.scored(claim)
            rows, scores = cands.rows[order][:depth], probs[:depth]
            if len(rows) < depth:  # pad like stable_top: unscored passages in corpus order
                fill = np.setdiff1d(np.arange(min(len(self.index), depth + len(cands.rows)), dtype=np.int64),
                                    cands.rows)[:depth - len(rows)]
                rows, scores = np.concatenate([rows, fill]), np.concatenate([scores, np.zeros(len(fill))])
            out.append(Ranking(rows.astype(np.int64), scores))
        return out

    def retrieve(self, claims: list[str]) -> list[Selection]:
        out = []
        for claim in claims:
            cands, X, order, probs = self.scored(claim)
            if not len(cands.rows):  # no known term and no similar training claim
                out.append(self._fallback(claim))
                continue
            k = self.cutoff.count(probs)
            hits = []
            for i in range(k):
                j = int(order[i])
                row = int(cands.rows[j])
                hits.append(Hit(row, self.index.ids[row], float(probs[i]),
                                explain_hit(self, cands, X[j], row, i + 1)))
            out.append(Selection(hits, "reranked", {
                "candidates": int(len(cands.rows)), "returned": k, "cutoff": self.cutoff.to_json(),
                "top_probability": float(probs[0]) if len(probs) else 0.0}))
        return out

    def _fallback(self, claim: str) -> Selection:
        """Nothing to rank: the leaderboard format still needs evidence, so return the
        first ``min_k`` passages of :meth:`rank` (corpus order) and say why."""
        rows = self.rank([claim], max(self.cutoff.min_k, 1))[0].rows.tolist()
        hits = [Hit(r, self.index.ids[r], 0.0, {"rank": i + 1, "reason": "the claim shares no term with the "
                                                "corpus and resembles no training claim"})
                for i, r in enumerate(rows)]
        return Selection(hits, "fallback", {"candidates": 0, "returned": len(hits), "cutoff": self.cutoff.to_json()})

    # ------------------------------------------------------------------ persistence
    def save(self, path) -> None:
        if self.model is None:
            raise ValueError("nothing to save: the reranker is not trained")
        mem = self.memory
        dump_model_atomic(Path(path), {
            "format": FORMAT, "candidates": self.config.to_json(), "cutoff": self.cutoff.to_json(),
            "model": self.model, "report": self.report,
            "memory": None if mem is None else {"claim_ids": mem.claim_ids, "texts": mem.texts,
                                                 "evidences": mem.evidences}})

    @classmethod
    def load(cls, path) -> "RerankRetriever":
        path = Path(path)
        if not path.is_file():
            raise InputError(path, None, "no such reranker model (train one with `factcheck train-rerank`)")
        obj = load_model(path, "reranker model")  # skops with trusted types only: no code runs
        if not isinstance(obj, dict) or obj.get("format") != FORMAT:
            raise InputError(path, None, f"not a reranker model (expected format {FORMAT})")
        try:  # trusted types, but the contents may still be wrong: one line, never a traceback
            if not callable(getattr(obj["model"], "predict", None)):
                raise TypeError("model has no predict")
            m = obj["memory"]
            memory = None if m is None else ClaimMemory(m["claim_ids"], m["texts"], m["evidences"])
            return cls(obj["candidates"], obj["model"], obj["cutoff"], memory, obj.get("report"))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InputError(path, None, f"not a reranker model (damaged contents: {type(exc).__name__})") from None
