"""The page records built from the API's check record: human names, rounded numbers and the
shared words as they appear in the text (the JSON keeps field names and full precision)."""

from __future__ import annotations

import math
from urllib.parse import urlencode

from factcheck.formats.claims import LABELS
from factcheck.reporting.report import flatten, setting
from factcheck.serve.highlight import highlight_spans
from factcheck.text.analyzer import analyze, shared_stems

LABEL_NAMES = {"SUPPORTS": "Supports", "REFUTES": "Refutes", "NOT_ENOUGH_INFO": "Not enough info",
               "DISPUTED": "Disputed"}
RETRIEVER_NAMES = {"tags": "tag rule", "bm25": "BM25 retriever", "rerank": "learned reranker",
                   "dense": "dense retriever (embedding cosine)", "hybrid": "hybrid retriever (BM25 + embeddings)",
                   "pool": "two stages (a candidate pool ordered by a contextual model)"}
# A hit's scores, in the order check_view gathers them; "score" is named per retriever below.
SCORE_NAMES = {"combined": "combined (cosine + overlap)", "cosine": "tag cosine", "overlap": "tag overlap",
               "fused": "fused score", "bm25": "BM25 score", "dense": "embedding cosine",
               "first_stage": "first-stage cosine", "rank": "rank"}
PARAM_NAMES = {
    "t_sim": "cosine threshold", "t_overlap": "tag-overlap threshold", "top_n": "passages kept, at most",
    "k1": "term saturation k1", "b": "length normalisation b", "k": "passages returned",
    "pool_size": "pool: passages from each first stage", "model": "model",
    "combine": "pool: how the pool is ordered", "bm25_weight": "pool: weight of the BM25 score",
    "dense_weight": "pool: weight of the first stage's cosine",
    "method": "BM25 variant", "alpha": "weight of the dense side (alpha)", "depth": "candidates per claim",
    "candidates.k1": "candidates: BM25 k1", "candidates.b": "candidates: BM25 b",
    "candidates.depth": "candidates: BM25 passages per claim",
    "candidates.memory_k": "candidates: similar training claims whose gold passages join",
    "cutoff.threshold": "cut-off: probability at least", "cutoff.relative": "cut-off: share of the top probability",
    "cutoff.min_k": "cut-off: passages at least", "cutoff.max_k": "cut-off: passages at most",
    "model.learning_rate": "boosting: learning rate", "model.max_iter": "boosting: iterations",
    "model.max_leaf_nodes": "boosting: leaves per tree", "model.min_samples_leaf": "boosting: examples per leaf",
    "model.l2_regularization": "boosting: L2 regularisation", "model.negative_rate": "training: share of negatives kept",
    "features": "reranker features", "memory_claims": "training claims remembered",
    "chunk_window": "chunk length (words)", "chunk_overlap": "chunk overlap (words)",
    # the classifier (logistic regression over claim + evidence features)
    "C": "inverse regularisation C", "class_weight": "class weights", "stats_weight": "weight of the statistics features",
    "augment": "trained on retrieved as well as gold evidence", "groups": "feature groups",
}
METRIC_NAMES = {"evidence_f": "evidence F", "accuracy": "label accuracy",
                "harmonic_mean": "harmonic mean of the two", "mrr": "MRR (mean reciprocal rank)",
                "any_gold": "claims with a gold passage among the evidence",
                "selected_recall": "recall of the evidence (share of gold passages returned)",
                "fallback_share": "claims where the retriever fell back", "claims": "claims",
                "ranking_depth": "ranking depth", "mean_selected": "passages returned per claim (mean)"}
# The explanation's own fields (``details``), as the page names them.
DETAIL_NAMES = {"passed_filter": "passages that passed both thresholds", "candidates": "candidate passages rescored",
                "returned": "passages kept by the cut-off", "top_probability": "highest reranker probability",
                "cutoff": "cut-off"}
# Fields shown elsewhere on the page.
_DETAILS_SHOWN_ELSEWHERE = {"claim_tags", "params"}
EXAMPLES_PER_LABEL = 2


def isolate(text):
    """``text`` escaped, in a ``<bdi>`` (an id, a title, a claim): an unterminated bidi
    override in it (U+202E) reverses nothing after it."""
    import markupsafe
    return markupsafe.Markup("<bdi>{}</bdi>").format(text)


def label_name(label) -> str:
    """``NOT_ENOUGH_INFO`` -> ``Not enough info``."""
    return LABEL_NAMES.get(label, str(label).replace("_", " ").capitalize())


def metric_name(key) -> str:
    """``harmonic_mean`` -> ``harmonic mean of the two``; ``recall@5`` stays."""
    return METRIC_NAMES.get(key, human(key))


def retriever_name(method) -> str:
    """``bm25`` -> ``BM25 retriever``."""
    return RETRIEVER_NAMES.get(method, str(method))


def human(key) -> str:
    """A field name a page has no name for: ``shared_numbers`` -> ``shared numbers``."""
    return str(key).replace("_", " ")


def num(x, digits: int | None = None) -> str:
    """A score for a person: ``24.3153`` -> ``24.32``, ``0.6371233`` -> ``0.637``, ``316312`` ->
    ``316,312``; ``digits`` fixes the decimals."""
    if x is None:
        return "—"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return f"{x:,}"
    if not isinstance(x, float) or not math.isfinite(x):
        return str(x)
    if digits is not None:
        return f"{x:.{digits}f}"
    if x == int(x) and abs(x) < 1e6:
        return f"{int(x):,}"
    a = abs(x)
    return format(x, ",.1f" if a >= 100 else ".2f" if a >= 1 else ".3f" if a >= 0.001 else ".2g")


def param_rows(params: dict | None, prefix: str = "") -> list[dict]:
    """A nested parameter record as table rows ``{"name", "key", "value", "long"}``."""
    rows = []
    for full, value in flatten(params, prefix):
        key = full.rsplit(".", 1)[-1]
        long = isinstance(value, (list, tuple)) and len(value) > 4
        rows.append({"name": PARAM_NAMES.get(full, PARAM_NAMES.get(key, human(key))), "key": full,
                     "value": f"{len(value)} names" if long else setting(value),
                     "long": [str(v) for v in value] if long else None})
    return rows


def shared_words(text: str, spans: list[dict]) -> list[str]:
    """The highlighted words as they appear in ``text``, each once (case-insensitively), in order."""
    first = {}
    for s in spans:
        word = text[s["start"]:s["end"]]
        first.setdefault(word.lower(), word)
    return list(first.values())


def score_rows(hit: dict, method: str) -> list[tuple[str, str]]:
    """A hit's scores as ``(name, value)``; a ``score`` repeating another is left out."""
    scores, rows = hit.get("scores") or {}, []
    for key, value in scores.items():
        if key == "score":
            if any(k != "score" and v == value for k, v in scores.items()):
                continue
            name = "reranker probability" if method == "rerank" else "score"
        else:
            name = SCORE_NAMES.get(key, human(key))
        # a score of exactly 1 (a tag cosine) reads as 1.000 beside its 0.693 neighbours
        rows.append((name, num(value, 3) if isinstance(value, float) and abs(value) <= 1 else num(value)))
    return rows


def passage_view(hit: dict, method: str, title: str | None = None) -> dict:
    """One evidence passage for a page: scores named and rounded, shared words, stems."""
    extra = hit.get("extra") or {}
    stems = [("shared stems", hit.get("shared_tags") or [])]
    if hit.get("passage_tags") is not None:
        stems.append(("passage tags (its top TF-IDF stems)", hit["passage_tags"]))
    for key, name in (("shared_bigrams", "shared stem pairs"), ("shared_names", "shared names (stems)")):
        if extra.get(key):
            stems.append((name, [str(x) for x in extra[key]]))
    cited = extra.get("cited_by_similar_claim")
    features = extra.get("features") if isinstance(extra.get("features"), dict) else None
    other = {k: v for k, v in extra.items()
             if k not in ("shared_bigrams", "shared_names", "shared_numbers", "cited_by_similar_claim", "features")}
    return {
        "id": hit["id"], "title": title, "text": hit.get("text") or "", "highlight": hit.get("highlight") or [],
        "scores": score_rows(hit, method),
        "words": shared_words(hit.get("text") or "", hit.get("highlight") or []),
        "numbers": [str(x) for x in extra.get("shared_numbers") or []],
        "stems": stems, "shared_stems": hit.get("shared_tags") or [],
        "cited": ({"claim": cited.get("claim"), "text": cited.get("text", ""),
                   "similarity": num(cited.get("similarity"))} if isinstance(cited, dict) else None),
        "features": [(k, num(v)) for k, v in features.items()] if features else None,
        "other": [(human(k), ", ".join(map(str, v)) if isinstance(v, list) else
                   "; ".join(f"{human(kk)} {num(vv) if isinstance(vv, float) else vv}" for kk, vv in v.items()))
                  for k, v in other.items() if v],
    }


def read_passage(pid: str, text: str | None, claim_stems: set[str], title: str | None = None) -> dict:
    """A passage the classifier read, with the words it shares with the claim marked."""
    text = text or ""
    stems = shared_stems(claim_stems, text)
    spans = highlight_spans(text, stems)
    return {"id": pid, "title": title, "text": text, "highlight": spans, "words": shared_words(text, spans),
            "numbers": [], "shared_stems": stems}


def detail_rows(result: dict) -> list[tuple[str, str]]:
    """The explanation's own fields as ``(name, value)`` rows; nested ones as ``a 1, b 2``."""
    rows = []
    for key, value in (result.get("details") or {}).items():
        if key in _DETAILS_SHOWN_ELSEWHERE:
            continue
        if isinstance(value, dict):
            # the row says "cut-off" already: "probability at least 0.04, passages at most 4"
            shown = ", ".join(f"{PARAM_NAMES.get(f'{key}.{k}', human(k)).split(': ', 1)[-1]} {setting(v)}"
                              for k, v in value.items())
        else:
            shown = setting(value) if isinstance(value, list) else num(value)
        rows.append((DETAIL_NAMES.get(key, PARAM_NAMES.get(key, human(key))), shown))
    return rows


def probability_rows(probabilities: dict) -> list[dict]:
    return [{"label": label, "name": label_name(label), "value": p, "shown": num(p, 3)}
            for label, p in probabilities.items()]


def check_url(claim: str, method: str | None = None, page: str = "/") -> str:
    """The URL of ``page`` checking ``claim`` (with ``method`` unless it is the model's choice)."""
    query = {"claim": claim} if method in (None, "", "best") else {"claim": claim, "method": method}
    return f"{page}?{urlencode(query)}"


def examples(gold, per_label: int = EXAMPLES_PER_LABEL) -> list[dict]:
    """A few gold dev claims per label: ``[{"label", "name", "claims"}]``."""
    groups = {}
    for claim in gold or []:
        group = groups.setdefault(claim.label, [])
        if len(group) < per_label:
            group.append({"id": claim.id, "text": claim.text})
    order = [label for label in LABELS if label in groups] + sorted(set(groups) - set(LABELS))
    return [{"label": label, "name": label_name(label), "claims": groups[label]} for label in order]


def label_class(label) -> str:
    """A label as one CSS class name (FEVER's ``NOT ENOUGH INFO`` has spaces)."""
    return str(label).replace(" ", "_")


def claim_view(result: dict) -> dict:
    """The claim with the words any evidence passage shares with it marked."""
    union = {s for h in result.get("hits", []) for s in h.get("shared_tags") or []}
    claim = result["claim"]
    return {"text": claim, "highlight": highlight_spans(claim, union)}


def check_page(result: dict, reader_texts, titles_of) -> dict:
    """Everything the check page shows for one check record."""
    method = result["method"]
    hit_ids = [h["id"] for h in result["hits"]]
    titles = dict(zip(hit_ids, titles_of(hit_ids)))
    read = result.get("classifier_read") or {"method": method, "ids": hit_ids}
    read_ids = list(read.get("ids") or [])
    claim_stems = set(analyze(result["claim"]))
    read_titles = titles_of(read_ids)
    rank_in_evidence = {pid: i + 1 for i, pid in enumerate(hit_ids)}
    reader = [{**read_passage(pid, text, claim_stems, title), "evidence_rank": rank_in_evidence.get(pid)}
              for pid, text, title in zip(read_ids, reader_texts(read_ids), read_titles)]
    return {
        "claim": claim_view(result),
        "verdict_name": label_name(result["verdict"]),
        "probabilities": probability_rows(result["probabilities"]),
        "method_name": retriever_name(method),
        "params": param_rows(result.get("retriever_params")),
        "thresholds": param_rows(result.get("thresholds")),
        "details": detail_rows(result),
        "claim_stems": (result.get("details") or {}).get("claim_tags"),
        "passages": [passage_view(h, method, titles.get(h["id"])) for h in result["hits"]],
        "reader": {
            "method": read.get("method"), "name": retriever_name(read.get("method")),
            "same_retriever": read.get("method") == method, "same_passages": read_ids == hit_ids,
            "passages": reader, "in_evidence": sum(p["evidence_rank"] is not None for p in reader),
            "switch_url": check_url(result["claim"], read.get("method")),
        },
        "timing": None if result.get("timing_ms") is None else num(float(round(result["timing_ms"]))),
        "compare_url": check_url(result["claim"], page="/compare"),
    }


def compare_page(results: list[dict], titles_of) -> dict:
    """The same claim under every retriever: one column per check record, and the passages shared."""
    ranks = {}   # passage id -> {method: rank}
    for r in results:
        for i, h in enumerate(r["hits"], 1):
            ranks.setdefault(h["id"], {})[r["method"]] = i
    ids = list(ranks)
    titles = dict(zip(ids, titles_of(ids)))
    columns = []
    for r in results:
        passages = [{**passage_view(h, r["method"], titles.get(h["id"])),
                     "also_in": [retriever_name(m) for m in ranks[h["id"]] if m != r["method"]]} for h in r["hits"]]
        read = r.get("classifier_read") or {}
        columns.append({"method": r["method"], "name": retriever_name(r["method"]),
                        "best": r["method"] == r["best_method"], "verdict": r["verdict"],
                        "verdict_name": label_name(r["verdict"]),
                        "probability": num(r["probabilities"].get(r["verdict"]), 3),
                        "reader": read.get("method"), "reader_name": retriever_name(read.get("method")),
                        "path": r.get("path"), "passages": passages,
                        "url": check_url(r["claim"], r["method"])})
    methods = [r["method"] for r in results]
    overlap = [{"id": pid, "title": titles.get(pid), "ranks": [ranks[pid].get(m) for m in methods],
                "count": len(ranks[pid])} for pid in ids]
    overlap.sort(key=lambda row: (-row["count"], min(r for r in row["ranks"] if r is not None)))
    return {"columns": columns, "overlap": overlap, "shared": sum(row["count"] > 1 for row in overlap),
            "claim": results[0]["claim"] if results else ""}


def titles_of(index):
    """``ids -> [title or None, ...]`` for ``index``."""
    if not getattr(index, "has_titles", False):
        return lambda ids: [None] * len(ids)
    row_of = index.row_of

    def titles(ids):
        return [index.title(row_of[pid]) if pid in row_of else None for pid in ids]
    return titles


def texts_of(index):
    """``ids -> [text or None, ...]``: a page shows an id the index lacks as missing."""
    row_of = index.row_of
    return lambda ids: [index.text(row_of[pid]) if pid in row_of else None for pid in ids]
