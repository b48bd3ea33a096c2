"""The dev explorer's rows: each dev claim's retrieved passages and missed gold."""

from __future__ import annotations

from dataclasses import dataclass, field

from factcheck.evaluation.course_metric import evidence_f
from factcheck.serve.explain import hit_view, ordered_probabilities
from factcheck.serve.present import passage_view, read_passage, texts_of, titles_of
from factcheck.text.analyzer import analyze

FILTERS = {
    "all": "all claims",
    "missed": "some gold passage not retrieved",
    "wrong": "label wrong",
    "fallback": "retriever fell back (tag rule: nothing passed the filter; reranker: nothing to rank)",
}


@dataclass
class DevExplorer:
    rows: list[dict] = field(default_factory=list)
    source: str = ""
    method: str | None = None
    summary: dict = field(default_factory=dict)


def build(artefacts, systems) -> DevExplorer:
    """The explorer of the run's dev predictions, or of the dev claims checked now."""
    texts, titles = texts_of(systems.index), titles_of(systems.index)
    text = lambda pid: texts([pid])[0]  # noqa: E731  (None: not in this index)
    title = lambda pid: titles([pid])[0]  # noqa: E731
    gold = {c.id: c for c in artefacts.gold or []}
    if artefacts.predictions is not None:
        preds, explain = artefacts.predictions, artefacts.explain or {}
        source, method = f"run predictions ({artefacts.run_dir}/dev-claims-predictions.json)", artefacts.explain_method
        order = [cid for cid in gold if cid in preds] or list(preds)
    elif gold:
        verdicts = systems.by_method[systems.best].check(list(gold.values()))
        preds = verdicts.predictions()
        explain, order = {v.id: v.explanation.to_json() for v in verdicts}, list(gold)
        source, method = f"checked at first view ({artefacts.gold_path})", systems.best
    else:
        return DevExplorer(source="no dev predictions and no gold dev claims (start with --run or --dev-claims)")

    rows = []
    for cid in order:
        claim, pred, ex = gold.get(cid), preds[cid], explain.get(cid, {})
        claim_text = claim.text if claim else ex.get("claim_text", "")
        gold_ids = list(claim.evidences) if claim else []
        hits_by_id = {h["id"]: h for h in ex.get("hits", [])}
        retrieved = []
        for pid in pred["evidences"]:
            t = text(pid)
            view = hit_view(hits_by_id.get(pid, {"id": pid}), t or "", claim_text)
            view["missing_text"] = t is None
            view["is_gold"] = pid in gold_ids if claim else None
            view["page"] = passage_view(view, method or "", title(pid))
            retrieved.append(view)
        read = ex.get("classifier_read") or {}
        claim_stems = set(analyze(claim_text))
        reader = [{**read_passage(pid, text(pid), claim_stems, title(pid)), "is_gold": pid in gold_ids if claim else None,
                   "missing_text": text(pid) is None} for pid in read.get("ids") or []]
        ranking = ex.get("ranking") or []
        rank_of = {pid: i + 1 for i, pid in enumerate(ranking)}
        missed = [{"id": pid, "text": text(pid), "rank": rank_of.get(pid), "depth": len(ranking)}
                  for pid in gold_ids if pid not in pred["evidences"]]
        rows.append({
            "id": cid, "text": claim_text, "gold_label": claim.label if claim else None,
            "label": pred.get("claim_label"),
            "correct": (pred.get("claim_label") == claim.label) if claim else None,
            "probabilities": ordered_probabilities(ex.get("probabilities") or {}),
            "path": ex.get("path"), "thresholds": ex.get("thresholds"),
            "retrieved": retrieved, "missed": missed, "n_gold": len(gold_ids),
            "reader": {"method": read.get("method"), "passages": reader,
                       "same": list(read.get("ids") or []) == list(pred["evidences"])} if read else None,
            "n_found": len(gold_ids) - len(missed),
            "evidence_f": evidence_f(pred["evidences"], gold_ids) if claim else None,  # as scored
        })
    return DevExplorer(rows, source, method, _summary(rows, bool(gold)))


def _summary(rows: list[dict], has_gold: bool) -> dict:
    n = len(rows)
    s = {"claims": n, "fallback": sum(r["path"] == "fallback" for r in rows)}
    if has_gold and n:
        s.update({
            "accuracy": sum(bool(r["correct"]) for r in rows) / n,
            "evidence_f": sum(r["evidence_f"] for r in rows) / n,
            "all_gold_found": sum(r["n_found"] == r["n_gold"] for r in rows),
            "no_gold_found": sum(r["n_found"] == 0 for r in rows),
        })
    return s


def select(rows: list[dict], show: str) -> list[dict]:
    """The rows a filter of :data:`FILTERS` shows."""
    if show == "missed":
        return [r for r in rows if r["missed"]]
    if show == "wrong":
        return [r for r in rows if r["correct"] is False]
    if show == "fallback":
        return [r for r in rows if r["path"] == "fallback"]
    return rows
