"""Judged-query metrics as trec_eval defines them (and ir_measures and pytrec_eval compute
them; the tests compare with ``ir_measures`` to 1e-9): recall@k, MRR, nDCG@k, MAP.

Plain dicts, as BEIR and Pyserini pass them: ``run`` is ``{qid: [(docid, score), ...]}``,
each list **in rank order** (scores are not re-sorted, so a retriever's tie order counts;
a run read from a TREC file is in trec_eval's order already), ``qrels`` is
``{qid: {docid: grade}}``.

* relevant: grade >= 1; ``R`` = the query's relevant documents in the qrels;
* ``recall@k`` = relevant in the top k / R (ir_measures ``R@k``);
* ``mrr`` = 1 / rank of the first relevant document (``RR``); ``mrr@10`` the same within
  the top 10, else 0 (``RR@10``);
* ``ndcg@k`` = DCG@k / ideal DCG@k, gain = the grade (negative counts 0), discount
  log2(rank + 1), the ideal ranking every judged document by grade (``nDCG@k``);
* ``map`` = the mean over relevant documents of the precision at each one's rank, 0 for
  those not retrieved (``AP``).

Every judged query counts (one missing from the run scores 0, as in ir_measures; listed
under ``missing``); run queries without judgments are left out (``unjudged``). Each mean
has a percentile-bootstrap 95% interval over queries.

Example
-------
>>> run = {"q1": [("d1", 3.0), ("d2", 2.0), ("d3", 1.0)], "q2": [("d9", 1.0)]}
>>> qrels = {"q1": {"d2": 1, "d3": 2}, "q2": {"d4": 1}}
>>> per_query(run, qrels)["mrr"]
{'q1': 0.5, 'q2': 0.0}
>>> round(judged_metrics(run, qrels).metrics["recall@5"].value, 3)
0.5
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from factcheck.evaluation.intervals import Metric, Result, bootstrap_means

__all__ = ["DEFAULT_KS", "JudgedMetrics", "ir_measures_names", "judged_metrics", "per_query", "metric_names"]

DEFAULT_KS = (1, 5, 10, 100)
MRR_CUTOFF = 10
NDCG_CUTOFF = 10


def metric_names(ks=DEFAULT_KS, ndcg_cutoff: int = NDCG_CUTOFF, mrr_cutoff: int = MRR_CUTOFF) -> list[str]:
    """The metrics :func:`per_query` computes, in report order."""
    return [*(f"recall@{k}" for k in ks), f"mrr@{mrr_cutoff}", "mrr", f"ndcg@{ndcg_cutoff}", "map"]


def ir_measures_names(ks=DEFAULT_KS, ndcg_cutoff: int = NDCG_CUTOFF, mrr_cutoff: int = MRR_CUTOFF) -> dict:
    """Our metric name -> the ir_measures measure it equals (for tests and docs)."""
    names = {f"recall@{k}": f"R@{k}" for k in ks}
    names.update({f"mrr@{mrr_cutoff}": f"RR@{mrr_cutoff}", "mrr": "RR", f"ndcg@{ndcg_cutoff}": f"nDCG@{ndcg_cutoff}",
                  "map": "AP"})
    return names


def _query_values(ranked: list[str], judged: dict[str, int], ks, ndcg_cutoff: int, mrr_cutoff: int) -> list[float]:
    relevant = {d for d, g in judged.items() if g >= 1}
    n_rel = len(relevant)
    hits = [d in relevant for d in ranked]
    first = next((i for i, h in enumerate(hits, start=1) if h), None)
    out = [sum(hits[:k]) / n_rel if n_rel else 0.0 for k in ks]
    out.append(1.0 / first if first is not None and first <= mrr_cutoff else 0.0)
    out.append(1.0 / first if first is not None else 0.0)
    gains = sorted((g for g in judged.values() if g > 0), reverse=True)[:ndcg_cutoff]
    ideal = sum(g / math.log2(i + 2) for i, g in enumerate(gains))
    dcg = sum(max(judged.get(d, 0), 0) / math.log2(i + 2) for i, d in enumerate(ranked[:ndcg_cutoff]))
    out.append(dcg / ideal if ideal > 0 else 0.0)
    found, precision_sum = 0, 0.0
    for i, h in enumerate(hits, start=1):
        if h:
            found += 1
            precision_sum += found / i
    out.append(precision_sum / n_rel if n_rel else 0.0)
    return out


def per_query(run: dict, qrels: dict, ks=DEFAULT_KS, ndcg_cutoff: int = NDCG_CUTOFF,
              mrr_cutoff: int = MRR_CUTOFF) -> dict[str, dict[str, float]]:
    """Every metric of every judged query, ``{metric: {qid: value}}`` in qrels order:
    ``run`` is ``{qid: [(docid, score), ...]}`` in rank order (or ``[docid, ...]``),
    ``qrels`` ``{qid: {docid: grade}}``, ``ks`` the recall cut-offs (see the module docstring)."""
    names = metric_names(ks, ndcg_cutoff, mrr_cutoff)
    out: dict[str, dict[str, float]] = {name: {} for name in names}
    for qid, judged in qrels.items():
        ranked = [entry if isinstance(entry, str) else entry[0] for entry in run.get(qid, ())]
        if len(set(ranked)) != len(ranked):
            dup = next(d for i, d in enumerate(ranked) if d in ranked[:i])
            raise ValueError(f"query {qid!r}: document {dup!r} is ranked twice")
        for name, value in zip(names, _query_values(ranked, judged, ks, ndcg_cutoff, mrr_cutoff)):
            out[name][qid] = value
    return out


@dataclass
class JudgedMetrics(Result):
    """What :func:`judged_metrics` returns: ``metrics`` (name -> the mean over the judged
    queries, a :class:`~factcheck.evaluation.intervals.Metric`), ``queries`` scored,
    ``missing`` (judged queries absent from the run, scored 0), ``unjudged`` (run queries
    without judgments, left out), ``depth`` (the longest ranking), ``per_query``."""

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
    run, qrels, ks, ndcg_cutoff, mrr_cutoff
        As for :func:`per_query`.

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
