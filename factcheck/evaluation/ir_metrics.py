"""Judged-query metrics as trec_eval defines them (tested against ``ir_measures``), on
BEIR's plain dicts: ``run`` ``{qid: [(docid, score), ...]}`` in rank order (never re-sorted),
``qrels`` ``{qid: {docid: grade}}``; relevant means grade >= 1. A judged query missing from
the run scores 0; run queries without judgments are left out.
"""

from __future__ import annotations

import math
from operator import itemgetter
from dataclasses import dataclass

from factcheck.evaluation.intervals import Metric, Result, bootstrap_means

__all__ = ["DEFAULT_KS", "JudgedMetrics", "ir_measures_names", "judged_metrics", "per_query",
           "recall_at", "reciprocal_rank"]

DEFAULT_KS = (1, 5, 10, 100)
MRR_CUTOFF = 10
NDCG_CUTOFF = 10


def recall_at(ranked: list[str], relevant, k: int) -> float:
    """The share of the distinct ``relevant`` ids among the first ``k`` ranked (0 without any)."""
    relevant = set(relevant)
    return len(relevant.intersection(ranked[:k])) / len(relevant) if relevant else 0.0


def reciprocal_rank(ranked: list[str], relevant, cutoff: int | None = None) -> float:
    """1 / the rank of the first relevant id (0 if none is ranked, or none within ``cutoff``)."""
    relevant = set(relevant)
    rank = next((i for i, pid in enumerate(ranked, start=1) if pid in relevant), None)
    return 1.0 / rank if rank is not None and (cutoff is None or rank <= cutoff) else 0.0


def ir_measures_names(ks=DEFAULT_KS, ndcg_cutoff: int = NDCG_CUTOFF, mrr_cutoff: int = MRR_CUTOFF) -> dict:
    """Our metric name -> the ir_measures measure it equals, in report order (the metrics
    :func:`per_query` computes)."""
    return {**{f"recall@{k}": f"R@{k}" for k in ks}, f"mrr@{mrr_cutoff}": f"RR@{mrr_cutoff}", "mrr": "RR",
            f"ndcg@{ndcg_cutoff}": f"nDCG@{ndcg_cutoff}", "map": "AP"}


def _query_values(ranked: list[str], judged: dict[str, int], ks, ndcg_cutoff: int, mrr_cutoff: int) -> list[float]:
    relevant = {d for d, g in judged.items() if g >= 1}
    out = [recall_at(ranked, relevant, k) for k in ks]
    out += [reciprocal_rank(ranked, relevant, mrr_cutoff), reciprocal_rank(ranked, relevant)]
    gains = sorted((g for g in judged.values() if g > 0), reverse=True)[:ndcg_cutoff]
    ideal = sum(g / math.log2(i + 2) for i, g in enumerate(gains))
    dcg = sum(max(judged.get(d, 0), 0) / math.log2(i + 2) for i, d in enumerate(ranked[:ndcg_cutoff]))
    out.append(dcg / ideal if ideal > 0 else 0.0)
    hits = [i for i, d in enumerate(ranked, start=1) if d in relevant]  # ranks of the relevant
    out.append(sum(found / i for found, i in enumerate(hits, start=1)) / len(relevant) if relevant else 0.0)
    return out


_PAIRS = {tuple, list}


def _ids(entries) -> list[str]:
    """The ids of a query's ranked entries (ids, or ``(id, score)`` pairs): in C loops when
    every entry is a pair, the usual case, as a run holds a hundred entries a query."""
    if set(map(type, entries)) <= _PAIRS:
        return list(map(itemgetter(0), entries))
    return [entry if isinstance(entry, str) else entry[0] for entry in entries]


def per_query(run: dict, qrels: dict, ks=DEFAULT_KS, ndcg_cutoff: int = NDCG_CUTOFF,
              mrr_cutoff: int = MRR_CUTOFF) -> dict[str, dict[str, float]]:
    """``{metric: {qid: value}}`` for every judged query; a document ranked twice is a ValueError."""
    names = list(ir_measures_names(ks, ndcg_cutoff, mrr_cutoff))
    out: dict[str, dict[str, float]] = {name: {} for name in names}
    for qid, judged in qrels.items():
        ranked = _ids(run.get(qid, ()))
        if len(set(ranked)) != len(ranked):
            dup = next(d for i, d in enumerate(ranked) if d in ranked[:i])
            raise ValueError(f"query {qid!r}: document {dup!r} is ranked twice")
        for name, value in zip(names, _query_values(ranked, judged, ks, ndcg_cutoff, mrr_cutoff)):
            out[name][qid] = value
    return out


@dataclass
class JudgedMetrics(Result):
    """:func:`judged_metrics`' result (``missing``: judged, not in the run; ``unjudged``: run
    queries left out; ``depth``: the longest ranking)."""

    queries: int
    missing: list[str]
    unjudged: int
    depth: int
    metrics: dict[str, Metric]
    per_query: dict[str, dict[str, float]]


def judged_metrics(run: dict, qrels: dict, ks=DEFAULT_KS, ndcg_cutoff: int = NDCG_CUTOFF,
                   mrr_cutoff: int = MRR_CUTOFF) -> JudgedMetrics:
    """The mean of every metric over the judged queries, each with its 95% interval.

    Parameters
    ----------
    run, qrels : dict
        ``{qid: [(docid, score), ...]}`` in rank order (or ``[docid, ...]``); ``{qid: {docid: grade}}``.
    ks, ndcg_cutoff, mrr_cutoff
        The recall cut-offs; the depth of ``ndcg@N`` and ``mrr@N``.

    Returns
    -------
    JudgedMetrics
        ``metrics``: name -> :class:`~factcheck.evaluation.intervals.Metric`.

    Example
    -------
    >>> run = {"q1": [("d1", 3.0), ("d2", 2.0), ("d3", 1.0)], "q2": [("d9", 1.0)]}
    >>> qrels = {"q1": {"d2": 1, "d3": 2}, "q2": {"d4": 1}, "q3": {"d1": 1}}
    >>> scored = judged_metrics(run, qrels, ks=(1, 5))
    >>> scored.queries, scored.missing, scored.metrics["recall@5"].value
    (3, ['q3'], 0.3333333333333333)
    >>> scored.per_query["mrr"]
    {'q1': 0.5, 'q2': 0.0, 'q3': 0.0}
    """
    values = per_query(run, qrels, ks, ndcg_cutoff, mrr_cutoff)
    return JudgedMetrics(len(qrels), [qid for qid in qrels if qid not in run], sum(qid not in qrels for qid in run),
                         max((len(r) for r in run.values()), default=0),
                         bootstrap_means({name: list(v.values()) for name, v in values.items()}), values)
