"""The app's check page in a terminal (``factcheck check``), from ``GET /api/check``'s record."""

from __future__ import annotations

import textwrap

from factcheck.errors import InputError
from factcheck.formats.common import plural
from factcheck.formats.records import MAX_QUERY_CHARS, check_length, length_cap

BAR = 24  # characters of the widest probability bar

PATHS = {
    "filtered": "passed the tag rule's thresholds",
    "fallback": "fallback: nothing passed the filter, so the best over the whole corpus",
    "fallback/rerank": ("fallback: the claim shares no term with the corpus and resembles no training claim, "
                        "so the first passages in corpus order"),
    "ranked": "the top of the BM25 ranking",
    "ranked/hybrid": ("the top of the fused ranking: BM25 and embedding cosine (dense), each divided by the "
                      "claim's best, mixed with weight alpha on the dense side (open mode)"),
    "ranked/dense": "the passages closest to the claim by embedding cosine (open mode)",
    "ranked/pool": ("a pool of BM25's and the passage vectors' best passages, ordered by the contextual "
                    "model's cosine, alone or combined with the first stages' scores as the retriever's combine "
                    "says (open mode, two stages)"),
    "reranked": "scored by the learned reranker, cut off per claim",
}


def check_claim(claim: str, run_dir=None, index_dir=None, model_dir=None, method: str = "best",
                mode: str | None = None, max_claim_chars: int | None = None) -> dict:
    """``factcheck check``'s view of one claim (no timing: the same input gives the same bytes)."""
    from factcheck.system.checker import FactChecker
    from factcheck.serve.artefacts import resolve_paths
    from factcheck.serve.explain import check_view

    check_length(None, "the claim", claim, length_cap(max_claim_chars, "max_claim_chars", MAX_QUERY_CHARS),
                 "max_claim_chars")
    claim = " ".join(claim.split())
    if not claim:
        raise InputError(None, None, "the claim is empty; give the claim text in quotes", param="claim")
    index_dir, model_dir = resolve_paths(run_dir, index_dir, model_dir)
    chosen = FactChecker.load(index_dir, model_dir, mode=mode)
    best = chosen.chosen_method
    name = best if method in (None, "", "best") else method
    system = chosen if name == best else chosen.using(name)  # as the app does
    return check_view(claim, name, best, system.check(claim), system.texts, None, system.retriever.params())


def _fmt(v) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def why(hit: dict, thresholds: dict | None) -> list[str]:
    """Plain-language reasons for one hit, from whatever its retriever recorded."""
    s, lines = hit.get("scores", {}), []
    if "cosine" in s and "overlap" in s:
        t = thresholds or {}
        lines.append(f"tag cosine {s['cosine']:.3f} (threshold {_fmt(t.get('t_sim', '?'))}), "
                     f"tag overlap {s['overlap']:.3f} (threshold {_fmt(t.get('t_overlap', '?'))}), "
                     f"combined {s.get('combined', 0):.3f}")
    elif "features" in hit.get("extra", {}):
        lines.append(f"reranker probability {hit['score']:.3f}, rank {s.get('rank', '?')}, BM25 {s.get('bm25', 0):.2f}")
    elif "first_stage" in s:
        lines.append(f"contextual cosine {s.get('dense', 0):.3f}, rank {s.get('rank', '?')}; in the pool by "
                     f"BM25 {s.get('bm25', 0):.2f} and passage-vector cosine {s['first_stage']:.3f}")
    elif "fused" in s:
        lines.append(f"fused score {s['fused']:.3f}, rank {s.get('rank', '?')}: BM25 {s.get('bm25', 0):.2f}, "
                     f"dense (embedding cosine) {s.get('dense', 0):.3f}")
    elif "dense" in s and "bm25" not in s:
        lines.append(f"dense (embedding cosine) {s['dense']:.3f}, rank {s.get('rank', '?')}")
    elif "bm25" in s:
        lines.append(f"BM25 score {s['bm25']:.2f}, rank {s.get('rank', '?')}")
    elif "reason" in hit:
        lines.append(str(hit["reason"]))
    shared = hit.get("shared_tags") or []
    what = "shared tags" if hit.get("shared_tags_source") == "shared_tags" else "shared stems"
    lines.append(f"{what}: {', '.join(shared) if shared else 'none'}")
    extra = hit.get("extra", {})
    for key, label in (("shared_bigrams", "shared stem pairs"), ("shared_numbers", "shared numbers"),
                       ("shared_names", "shared names")):
        if extra.get(key):
            lines.append(f"{label}: {', '.join(map(str, extra[key]))}")
    cited = extra.get("cited_by_similar_claim")
    if isinstance(cited, dict):
        lines.append(f"gold evidence of a similar training claim ({cited.get('claim')}, "
                     f"similarity {cited.get('similarity', 0):.2f}): \"{cited.get('text', '')}\"")
    return lines


def format_check(view: dict, width: int = 100) -> str:
    wrap = lambda text, indent: textwrap.fill(text, width, initial_indent=indent,  # noqa: E731
                                              subsequent_indent=indent, break_on_hyphens=False)
    probs = view["probabilities"]
    label_w = max(map(len, probs), default=0)
    top = max(probs.values(), default=1.0) or 1.0
    method = view["method"] + (" (the run's choice)" if view["method"] == view["best_method"] else
                               f" (the run chose {view['best_method']})")
    out = [wrap(f"Claim: {view['claim']}", ""), "",
           f"Verdict: {view['verdict']}", "",
           "Probabilities:"]
    for label, v in probs.items():
        out.append(f"  {label:<{label_w}}  {v:5.3f}  " + "#" * max(1, round(BAR * v / top)))
    hits = view["hits"]
    out += ["", f"Evidence: {plural(len(hits), 'passage')}, retriever {method}",
            wrap(f"how: {PATHS.get(view['path'] + '/' + view['method'], PATHS.get(view['path'], view['path']))}"
                 + (" (" + ", ".join(f"{k}={_fmt(v)}" for k, v in (view.get("thresholds") or {}).items()) + ")"
                    if view.get("thresholds") else ""), "  ")]
    for i, hit in enumerate(hits, 1):
        out += ["", f"{i:2d}. {hit['id']}" + (f"  ({hit['title']})" if hit.get("title") else "")]
        out.append(wrap(hit.get("text") or "(empty passage)", "    "))
        out.append("    why picked:")
        out += [textwrap.fill(line, width, initial_indent="    - ", subsequent_indent="      ",
                              break_on_hyphens=False) for line in why(hit, view.get("thresholds"))]
    read = view.get("classifier_read") or {}
    if read:
        same = read.get("ids") == [h["id"] for h in hits]
        out += ["", wrap(f"The classifier read {read.get('method')} passages"
                         + (" (the ones above)." if same else ": " + ", ".join(read.get("ids", [])) + "."), "")]
    return "\n".join(out)
