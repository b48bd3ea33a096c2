"""The workbench's markdown tables (``factcheck selftest`` and ``evaluate-retrieval``)."""

from __future__ import annotations

from factcheck.evaluation.intervals import format_interval

__all__ = ["self_retrieval_markdown", "judged_markdown"]


def self_retrieval_markdown(result: dict) -> str:
    """The self-retrieval table: one row per (method, units), and what was counted."""
    corpus = result["corpus"]
    ks = result["ks"]
    metrics = [f"recall@{k}" for k in ks] + ["mrr@10", "mrr"]
    lines = [
        f"# Self-retrieval: {corpus['name']}",
        "",
        f"Each row's `{corpus['query_column']}` is a query whose one relevant document is its own row "
        f"(`{corpus.get('text_column', 'text')}` indexed). {result['queries']:,} queries of {corpus['rows']:,} rows"
        + (f"; {result['skipped_empty']:,} rows with an empty query skipped" if result["skipped_empty"] else "")
        + (f"; {corpus['chunks']:,} chunks of {corpus['chunk_window']} words, {corpus['chunk_overlap']} shared"
           if corpus.get("chunks") else "")
        + f". Mode {result['mode']}; tfidf analyzer `{result['analyzer']}`. MRR is over the top "
          f"{result['depth']}. 95% intervals: percentile bootstrap over queries. A document sharing no term "
          "with its query is not retrieved (\"no match\": queries that retrieved nothing).",
        "",
        "| method | units | " + " | ".join(_header(m) for m in metrics) + " | no match |",
        "|---|---|" + "---|" * len(metrics) + "---|",
    ]
    for r in result["results"]:
        cells = [format_interval(r["metrics"][m]) for m in metrics]
        units = "whole" if r["units"] == "whole" else f"chunks {r['chunk_window']}/{r['chunk_overlap']}"
        lines.append(f"| {r['method']} | {units} ({r['indexed_units']:,}) | " + " | ".join(cells)
                     + f" | {r['no_match']:,} |")
    return "\n".join(lines) + "\n"


def _header(metric: str) -> str:
    return metric.replace("recall@", "R@").replace("mrr", "MRR").replace("ndcg", "nDCG").replace("map", "MAP")


def judged_markdown(result: dict, title: str = "Judged queries") -> str:
    """A judged-query evaluation: every metric with its 95% interval, and what was counted."""
    spec = result["retriever"]
    lines = [
        f"# {title}",
        "",
        f"{result['queries']:,} judged queries ranked by {spec['method']} to depth {result['depth']:,}"
        + (f"; {result['skipped_unjudged']:,} queries without judgments skipped" if result["skipped_unjudged"] else "")
        + (f"; {result['judged_not_in_index']:,} relevant documents not in the index"
           if result["judged_not_in_index"] else "")
        + (f"; {result['no_match']:,} queries matched nothing" if result.get("no_match") else "")
        + ". trec_eval's definitions (relevant: grade >= 1); 95% intervals: percentile bootstrap over queries.",
        "",
        "| metric | value [95% interval] |",
        "|---|---|",
    ]
    lines += [f"| {_header(name)} | {format_interval(est, 4)} |" for name, est in result["metrics"].items()]
    return "\n".join(lines) + "\n"
