"""``RerankRetriever``: candidates -> features -> P(gold) -> per-claim cut-off."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np

from factcheck.errors import InputError, check_number, ref, validate_params
from factcheck.formats.files import dump_model_atomic
from factcheck.formats.rundir import refuse_unfinished
from factcheck.formats.safe_load import load_model
from factcheck.retrieval.base import Retriever, Scored, Selection, TopK
from factcheck.retrieval.rerank import features as F
from factcheck.retrieval.rerank.candidates import CandidateConfig, CandidateGenerator
from factcheck.retrieval.rerank.cutoff import Cutoff
from factcheck.retrieval.rerank.explain import explain_hit
from factcheck.retrieval.rerank.memory import ClaimMemory
from factcheck.retrieval.rerank.model import RelevanceModel
from factcheck.scoring.topk import rank_order
from factcheck.tagging.packing import offsets_fault, pack_strings, strings_of
from factcheck.retrieval.rerank.semantic import load_scorer, pool_features
from factcheck.retrieval.rerank.terms import TermIndex

# /2: the core's BM25 and TF-IDF features (/1 models read BM25 scaled by k1 + 1: retrain them).
# /3: the claim memory's strings and its texts' stems packed in arrays (/2 held the strings as
# lists and its texts were analysed at load; still read).
FORMAT = "factcheck-rerank/3"
READ_FORMATS = (FORMAT, "factcheck-rerank/2")
POOL_CLAIMS = 64  # claims whose pools the model scores in one call (their features held meanwhile)


class RerankRetriever(Retriever):
    """A learned reranker: BM25 and label-memory candidates, P(gold) from boosted trees,
    a per-claim cut-off tuned for evidence F.

    Trained by :func:`factcheck.training.rerank.train_reranker` or loaded with :meth:`load`.

    Parameters
    ----------
    candidates : CandidateConfig or dict or None
        The candidate stage's settings (None: the defaults).
    model : RelevanceModel or None
        The trained relevance model; required at ``fit``.
    cutoff : Cutoff or dict or None
        How many passages to return per claim (None: the defaults).
    memory : ClaimMemory or None
        The label memory: training claims and their gold ids.
    report : dict or None
        The training report; saved with the model.

    Example
    -------
    >>> import factcheck
    >>> from factcheck.training.rerank import train_reranker
    >>> index = factcheck.build_index("data/demo/evidence.json", "out/demo-index", progress=False)
    >>> train = factcheck.read_claims("data/demo/train-claims.json", require_labels=True)
    >>> reranker = train_reranker(index, train[:12], train[12:], progress=False)
    >>> reranker.save("out/rerank.skops")
    >>> reranker = factcheck.RerankRetriever.load("out/rerank.skops")
    >>> reranker.memory, reranker.cutoff
    (ClaimMemory(16 claims), Cutoff(threshold=0.0, relative=0.0, min_k=1, max_k=1))
    >>> reranker.fit(index).retrieve("Sea levels are rising.").path
    'reranked'
    """

    name = "rerank"

    def __init__(self, candidates: CandidateConfig | dict | None = None, model: RelevanceModel | None = None,
                 cutoff: Cutoff | dict | None = None, memory: ClaimMemory | None = None,
                 report: dict | None = None):
        self.candidates = candidates
        self.model = model
        self.cutoff = cutoff
        self.memory = memory
        self.report = report

    def params(self) -> dict:
        """What model directories and explanations record."""
        return {"candidates": self._candidate_config().to_json(), "cutoff": self._cutoff_rule().to_json(),
                "model": self.model.config.to_json() if self.model else None,
                "features": self.model.features if self.model else None,
                "memory_claims": len(self.memory) if self.memory is not None else 0}

    def _candidate_config(self) -> CandidateConfig:
        return _as_settings(CandidateConfig, self.candidates, "candidates")

    def _cutoff_rule(self) -> Cutoff:
        return _as_settings(Cutoff, self.cutoff, "cutoff")

    def _check_params(self) -> None:
        if self.model is None:
            raise InputError(None, None, "the rerank method needs a trained model: "
                             f"run `factcheck train-rerank` and pass its output as {ref('rerank_model')}",
                             param="rerank_model")
        if not callable(getattr(self.model, "predict", None)):
            raise InputError(None, None, f"expected a trained relevance model, got {type(self.model).__name__}",
                             param="model")
        cut = self._cutoff_rule()
        validate_params(cut, "cutoff.")
        check_number(cut.max_k, "cutoff.max_k", integer=True, low=cut.min_k)
        validate_params(self._candidate_config(), "candidates.")
        if self.memory is not None and not isinstance(self.memory, ClaimMemory):
            raise InputError(None, None, f"expected a ClaimMemory, got {type(self.memory).__name__}", param="memory")

    def _fit(self, index, terms: TermIndex | None = None, context: F.FeatureContext | None = None,
             dense=None) -> None:
        self.candidates_ = self._candidate_config()
        self.cutoff_ = self._cutoff_rule()
        self.terms_ = terms or TermIndex.for_index(index)
        self.context_ = context or F.FeatureContext(index, self.terms_)
        # A copy: fitting never changes the ``memory`` parameter (shared, maybe bound elsewhere).
        self.memory_ = None if self.memory is None else copy.copy(self.memory).bind(index.row_of, len(index))
        self.dense_ = None
        if self.candidates_.dense_depth > 0:
            self.dense_ = dense if dense is not None else load_scorer(index)
        self.generator_ = CandidateGenerator(self.terms_, self.memory_, self.candidates_, self.dense_)

    def scored(self, claim: str):
        """One claim's (candidates, features, pool positions by probability desc, those probabilities)."""
        self._check_fitted()
        return self._pools([claim], self.generator_.first_stage([claim]))[0]

    def _pools(self, texts: list[str], firsts: list) -> list[tuple]:
        """:meth:`scored` of each claim, given its :meth:`CandidateGenerator.first_stage`: the
        claims' pools in one call of the model (each row's probability is its own: the same bits)."""
        pools, gen = [], self.generator_
        sims = [None] * len(texts)
        if gen.memory is not None and len(gen.memory) and gen.config.memory_k > 0:
            sims = gen.memory.similarities_of(texts)  # the claims against the memory at once
        for claim, first, memory_sims in zip(texts, firsts, sims):
            cands = gen.generate(claim, first=first, memory_sims=memory_sims)
            pools.append((cands, pool_features(self.context_, cands, self.candidates_.k1, self.candidates_.b,
                                               self.dense_)))
        p_all = self.model.predict(np.vstack([X for _, X in pools])) if pools else np.zeros(0)
        out, at = [], 0
        for cands, X in pools:
            p, at = p_all[at:at + len(X)], at + len(X)
            order = rank_order(cands.rows, p, cands.bm25)  # ties: BM25, then corpus order
            out.append((cands, X, order, p[order]))
        return out

    def _scored(self, texts):
        texts = list(texts)
        self._check_fitted()
        # The batch's BM25 tops in one call (a score buffer reused over the claims, no product
        # each), then the model over POOL_CLAIMS claims' pools at once (its per-call cost was a
        # tenth of a claim's).
        firsts = self.generator_.first_stage(texts)
        for start in range(0, len(texts), POOL_CLAIMS):
            chunk = texts[start:start + POOL_CLAIMS]
            for cands, X, order, probs in self._pools(chunk, firsts[start:start + POOL_CLAIMS]):
                p = np.empty(len(order))
                p[order] = probs
                yield Scored(cands.rows, p, (cands, X, order, probs))

    _evidence_depth = 0  # the cut-off reads the whole pool's probabilities

    def _search(self, texts, k, select):
        # The reranker's own order (ties by BM25 before the row), not the core's tie rule.
        for claim, scored in zip(texts, self._scored(texts)):
            cands, _, order, probs = scored.state
            sel = self._select(claim, scored, None) if select else None
            yield sel, (TopK(cands.rows[order][:k].astype(np.int64), probs[:k]) if k else None)

    def _select(self, claim, scored, top) -> Selection:
        cands, X, order, probs = scored.state
        if not len(cands.rows):  # no known term and no similar training claim
            return self._fallback()
        k = self.cutoff_.count(probs)
        rows = cands.rows[order[:k]].tolist()
        hits = [self._hit(r, float(probs[i]), explain_hit(self, cands, X[order[i]], r, i + 1))
                for i, r in enumerate(rows)]
        return Selection(hits, "reranked", {
            "candidates": int(len(cands.rows)), "returned": k, "cutoff": self.cutoff_.to_json(),
            "top_probability": float(probs[0]) if len(probs) else 0.0})

    def _fallback(self) -> Selection:
        """Nothing to rank: the first ``min_k`` passages, and why."""
        hits = [self._hit(r, 0.0, {"rank": r + 1, "reason": "the claim shares no term with the corpus and "
                                                             "resembles no training claim"})
                for r in range(min(max(self.cutoff_.min_k, 1), len(self.index_)))]
        return Selection(hits, "fallback", {"candidates": 0, "returned": len(hits), "cutoff": self.cutoff_.to_json()})

    def save(self, path) -> None:
        """Write the trained reranker to ``path`` (skops, atomically).

        Parameters
        ----------
        path : str or Path
        """
        if self.model is None:
            raise InputError(None, None, "nothing to save: the reranker is not trained", param="model")
        mem = self.memory
        dump_model_atomic(Path(path), {
            "format": FORMAT, "candidates": self._candidate_config().to_json(), "cutoff": self._cutoff_rule().to_json(),
            # Without its wall-clock timings: the same training gives the same bytes.
            "model": self.model, "report": {k: v for k, v in (self.report or {}).items() if k != "timings"},
            "memory": None if mem is None else _packed_memory(mem)})

    @classmethod
    def load(cls, path) -> "RerankRetriever":
        """A reranker saved by :meth:`save` (unfitted).

        Parameters
        ----------
        path : str or Path
            A ``rerank.skops`` file.

        Returns
        -------
        RerankRetriever
        """
        path = Path(path)
        refuse_unfinished(path)
        if not path.is_file():
            raise InputError(path, None, "no such reranker model (train one with `factcheck train-rerank`)")
        obj = load_model(path, "reranker model", probe=_probe)  # skops with trusted types only: no code runs
        if isinstance(obj, dict) and obj.get("format") == "factcheck-rerank/1":
            raise InputError(path, None, "a reranker trained by an earlier version, on other BM25 features: "
                             "train it again (`factcheck train-rerank`, or `factcheck run`)")
        if not isinstance(obj, dict) or obj.get("format") not in READ_FORMATS:
            raise InputError(path, None, f"not a reranker model (expected format {FORMAT})")
        try:  # trusted types, but the contents may still be wrong: one line, never a traceback
            if not callable(getattr(obj["model"], "predict", None)):
                raise TypeError("model has no predict")
            m = obj["memory"]
            memory = None if m is None else ClaimMemory(*_memory_lists(m))
            return cls(CandidateConfig(**obj["candidates"]), obj["model"], Cutoff(**obj["cutoff"]), memory,
                       obj.get("report"))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InputError(path, None, f"not a reranker model (damaged contents: {type(exc).__name__})") from None


# The memory's strings as packed pairs of arrays, not lists, and its texts' stems with them:
# skops writes and audits one node a string, and analysing the texts again was most of the
# rest of loading a reranker (docs/decisions.md, "Models saved packed").
def _packed_memory(mem: ClaimMemory) -> dict:
    return {"claim_ids": pack_strings(mem.claim_ids), "texts": pack_strings(mem.texts),
            **_packed_lists("evidence", mem.evidences), **_packed_lists("stem", mem.stems)}


def _packed_lists(name: str, lists: list[list[str]]) -> dict:
    return {f"{name}_strings": pack_strings([x for one in lists for x in one]),
            f"{name}_offsets": np.cumsum([0, *map(len, lists)], dtype=np.int64)}


def _unpacked_lists(memory: dict, name: str, n: int) -> list[list[str]]:
    """The ``n`` lists :func:`_packed_lists` packed (a ValueError unless they unpack)."""
    strings, cuts = strings_of(*memory[f"{name}_strings"]), memory[f"{name}_offsets"]
    if not isinstance(cuts, np.ndarray) or cuts.dtype != np.int64 or cuts.shape != (n + 1,) \
            or offsets_fault(cuts, len(strings)):
        raise ValueError(f"the memory's {name} offsets do not cut its strings")
    cuts = cuts.tolist()
    return [strings[a:b] for a, b in zip(cuts[:-1], cuts[1:])]


def _is_packed(memory) -> bool:
    return isinstance(memory, dict) and "evidence_offsets" in memory


def _memory_lists(memory) -> tuple[list, list, list, list | None]:
    """(claim ids, texts, evidence ids of each claim, stems of each text) of a saved memory, packed
    or (format /2) lists without the stems; a packed one that does not unpack is a ValueError."""
    if not _is_packed(memory):
        return memory.get("claim_ids"), memory.get("texts"), memory.get("evidences"), None
    ids = strings_of(*memory["claim_ids"])
    return (ids, strings_of(*memory["texts"]), _unpacked_lists(memory, "evidence", len(ids)),
            _unpacked_lists(memory, "stem", len(ids)))


def _as_settings(kind, value, param: str):
    if value is None:
        return kind()
    if isinstance(value, kind):
        return value
    if isinstance(value, dict):
        try:
            return kind(**value)
        except TypeError:
            unknown = sorted(set(value) - set(kind.__dataclass_fields__))
            raise InputError(None, None, f"unknown {kind.__name__} field(s) {', '.join(map(repr, unknown))}",
                             param=param) from None
    raise InputError(None, None, f"expected a {kind.__name__} or a dict, got {type(value).__name__}", param=param)


def _probe(obj) -> None:
    """Refuse a loaded reranker file whose settings, memory or model do not work."""
    from factcheck.formats.safe_load import BadModel
    from factcheck.retrieval.rerank.semantic import ALL_FEATURES
    if not isinstance(obj, dict) or obj.get("format") not in READ_FORMATS:
        return  # ``load`` names the format it expected
    try:
        config, cutoff = CandidateConfig(**obj["candidates"]), Cutoff(**obj["cutoff"])
    except (KeyError, TypeError) as exc:
        raise BadModel(f"its settings do not fit ({type(exc).__name__})") from None
    counts = (config.depth, config.memory_k, config.dense_depth, cutoff.min_k, cutoff.max_k)
    rates = (config.k1, config.b, cutoff.threshold, cutoff.relative)
    if not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 1_000_000 for v in counts) \
            or config.depth < 1 or not all(isinstance(v, (int, float)) and 0 <= v < 1e6 for v in rates):
        raise BadModel("its settings are out of range")
    memory = obj.get("memory")
    if memory is not None:
        try:
            parts = list(_memory_lists(memory))[:3]  # packed stems unpack as lists of strings or fail
        except (KeyError, TypeError, ValueError, AttributeError):
            parts = [None]
        if not all(isinstance(p, list) for p in parts) or len({len(p) for p in parts}) != 1 \
                or not all(isinstance(t, str) for p in parts[:2] for t in p) \
                or not all(isinstance(e, list) and all(isinstance(i, str) for i in e) for e in parts[2]):
            raise BadModel("its claim memory's lists do not line up")
    model = obj.get("model")
    cols = getattr(model, "_cols", None)
    if not isinstance(model, RelevanceModel) or not isinstance(cols, np.ndarray) or cols.ndim != 1 \
            or len(cols) < 1 or cols.min() < 0 or cols.max() >= len(ALL_FEATURES):
        raise BadModel("its model does not read the reranker's feature columns")
    p = np.asarray(model.predict(np.zeros((2, len(ALL_FEATURES)))))
    if p.shape != (2,) or not np.all(np.isfinite(p)) or np.any(p < 0) or np.any(p > 1):
        raise BadModel("its model's probabilities are not finite numbers in [0, 1]")
