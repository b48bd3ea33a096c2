"""One claim's check as the JSON the API returns and the check page renders (so the two never
disagree): each hit with its text, shared tags, highlight spans and ``scores``."""

from __future__ import annotations

from factcheck.formats.claims import ordered_labels
from factcheck.serve.highlight import highlight_spans
from factcheck.text.analyzer import analyze, shared_stems

RANKING_SHOWN = 10  # the explanation keeps a depth-100 ranking; the page shows its head
_NOT_DETAILS = {"path", "hits", "ranking", "probabilities", "thresholds", "classifier_read"}
_NOT_SCORES = {"id"}
_SHOWN = {"id", "shared_tags", "passage_tags", "text", "highlight", "scores"}
# Where a retriever records the stems a claim and passage share; without them they are computed.
_SHARED_KEYS = ("shared_tags", "shared_terms")
_SCORE_ORDER = ("combined", "cosine", "overlap", "fused", "bm25", "dense", "rank")  # then the rest by name, "score" last


def hit_view(hit: dict, text: str, claim: str) -> dict:
    """A hit with its text, shared tags, highlight spans, ``scores`` and structured ``extra``."""
    out = dict(hit)
    out["text"] = text
    recorded = next((k for k in _SHARED_KEYS if isinstance(hit.get(k), list)), None)
    out["shared_tags"] = list(hit[recorded]) if recorded else shared_stems(set(analyze(claim)), text)
    out["shared_tags_source"] = recorded or "computed"
    out["extra"] = {k: v for k, v in hit.items()
                    if k not in _SHOWN and k != recorded and isinstance(v, (list, dict))}
    out["highlight"] = highlight_spans(text, out["shared_tags"])
    numeric = {k: v for k, v in hit.items()
               if k not in _NOT_SCORES and isinstance(v, (int, float)) and not isinstance(v, bool)}
    order = [k for k in _SCORE_ORDER if k in numeric]
    order += sorted(k for k in numeric if k not in order and k != "score") + (["score"] if "score" in numeric else [])
    out["scores"] = {k: numeric[k] for k in order}
    return out


def ordered_probabilities(probabilities: dict) -> dict:
    """The labels in their label set's order (the course's, FEVER's, or sorted)."""
    return {label: float(probabilities[label]) for label in ordered_labels(probabilities)}


def check_view(claim: str, method: str, best: str, verdict, texts_of, seconds: float | None = None,
               retriever_params: dict | None = None) -> dict:
    """The API/page record of one claim's :class:`~factcheck.system.checker.Verdict`."""
    explain = verdict.explanation.to_json()
    ids = [h["id"] for h in explain["hits"]]
    texts = texts_of(ids)
    return {
        "claim": claim,
        "method": method,
        "best_method": best,
        "retriever_params": retriever_params or {},
        "verdict": verdict.label,
        "probabilities": ordered_probabilities(verdict.probabilities),
        "path": explain.get("path"),
        "thresholds": explain.get("thresholds"),
        "details": {k: v for k, v in explain.items() if k not in _NOT_DETAILS},
        "hits": [hit_view(h, t, claim) for h, t in zip(explain["hits"], texts)],
        "ranking_head": list(explain.get("ranking", []))[:RANKING_SHOWN],
        # What the classifier read: the shown passages, or another retriever's (the reader).
        "classifier_read": explain.get("classifier_read"),
        "timing_ms": None if seconds is None else round(seconds * 1000, 2),
    }
