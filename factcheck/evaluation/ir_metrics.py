"""Judged-query metrics as trec_eval defines them: recall@k, MRR, nDCG@k, MAP.

Inputs are plain dicts, as BEIR and Pyserini pass them; the metrics never know the model:

* ``run`` -- ``{qid: [(docid, score), ...]}``, each list **in rank order** (the list's
  order is the ranking; scores are not re-sorted, so a retriever's tie order counts. A
  run read from a TREC file is already in trec_eval's order:
  :func:`factcheck.formats.qrels.read_trec_run`);
* ``qrels`` -- ``{qid: {docid: grade}}`` with integer grades.

Definitions (trec_eval's, which ir_measures and pytrec_eval compute; the tests compare
them with ``ir_measures`` to 1e-9 on random runs and graded qrels):

* relevant: grade >= 1; ``R`` = the query's relevant documents in the qrels (judged
  documents the run cannot contain still count);
* ``recall@k`` = relevant in the top k / R (ir_measures ``R@k``);
* ``mrr`` = 1 / rank of the first relevant document anywhere in the run (``RR``), and
  ``mrr@10`` the same within the top 10 (``RR@10``; 0 beyond);
* ``ndcg@k`` = DCG@k / ideal DCG@k with gain = the grade (negative grades count 0) and
  discount log2(rank + 1); the ideal ranking is every judged document by grade (``nDCG@k``);
* ``map`` = the mean over relevant documents of the precision at each one's rank, 0 for
  those not retrieved (``AP``), over the whole run.

Which queries count: every query of the qrels (a judged query missing from the run scores
0 on every metric, as ir_measures scores it; they are listed under ``missing``); queries
of the run without judgments are left out and counted (``unjudged``). A query whose
judgments are all below 1 counts, with 0 (as ir_measures). Each mean has a 95% interval:
percentile bootstrap over queries (:mod:`factcheck.evaluation.intervals`).

Example
-------
>>> run = {"q1": [("d1", 3.0), ("d2", 2.0), ("d3", 1.0)], "q2": [("d9", 1.0)]}
>>> qrels = {"q1": {"d2": 1, "d3": 2}, "q2": {"d4": 1}}
>>> per_query(run, qrels)["mrr"]
{'q1': 0.5, 'q2': 0.0}
>>> round(judged_metrics(run, qrels)["metrics"]["recall@5"].value, 3)
0.5
"""

from __future__ import annotations

import math

from factcheck.evaluation.intervals import bootstrap_means

__all__ = ["DEFAULT_KS", "ir_measures_names", "judged_metrics", "per_query", "metric_names"]

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
    """Every metric of every judged query: ``{metric: {qid: value}}`` (qrels order).

    Parameters
    ----------
    run : dict
        ``{qid: [(docid, score), ...]}`` in rank order (or ``[docid, ...]``).
    qrels : dict
        ``{qid: {docid: grade}}``.
    ks : sequence of int
        The cut-offs of recall.
    ndcg_cutoff, mrr_cutoff : int
        The cut-offs of nDCG and of the cut MRR.

    Returns
    -------
    dict
        Metric name (:func:`metric_names`) -> {qid: value}.

    Example
    -------
    See the module docstring.
    """
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


def judged_metrics(run: dict, qrels: dict, ks=DEFAULT_KS, ndcg_cutoff: int = NDCG_CUTOFF,
                   mrr_cutoff: int = MRR_CUTOFF) -> dict:
    """The mean of every metric over the judged queries, each with its 95% interval.

    Parameters
    ----------
    run, qrels, ks, ndcg_cutoff, mrr_cutoff
        As for :func:`per_query`.

    Returns
    -------
    dict
        ``queries`` (judged queries scored), ``missing`` (judged queries absent from the
        run, scored 0), ``unjudged`` (run queries without judgments, left out),
        ``depth`` (the longest ranking), ``metrics``: name -> :class:`~factcheck.evaluation.intervals.Estimate`,
        and ``per_query``: name -> {qid: value}.

    Example
    -------
    >>> run = {"q1": [("d1", 3.0), ("d2", 2.0), ("d3", 1.0)], "q2": [("d9", 1.0)]}
    >>> qrels = {"q1": {"d2": 1, "d3": 2}, "q2": {"d4": 1}, "q3": {"d1": 1}}
    >>> scored = judged_metrics(run, qrels, ks=(1, 5))
    >>> scored["queries"], scored["missing"], scored["metrics"]["recall@5"].value
    (3, ['q3'], 0.3333333333333333)
    >>> scored["per_query"]["mrr"]
    {'q1': 0.5, 'q2': 0.0, 'q3': 0.0}
    """
    values = per_query(run, qrels, ks, ndcg_cutoff, mrr_cutoff)
    estimates = bootstrap_means({name: list(v.values()) for name, v in values.items()})
    return {
        "queries": len(qrels),
        "missing": [qid for qid in qrels if qid not in run],
        "unjudged": sum(qid not in qrels for qid in run),
        "depth": max((len(r) for r in run.values()), default=0),
        "metrics": estimates,
        "per_query": values,
    }

