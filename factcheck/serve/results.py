"""The results page's tables from ``metrics.json``: a missing key leaves a row out, and any
``{"value", "ci95"}`` record shows as a value with its interval."""

from __future__ import annotations

from factcheck.evaluation.intervals import format_interval as value_and_interval
from factcheck.reporting.plots import PLOT_CAPTIONS
from factcheck.reporting.report import config_rows


def is_interval(x) -> bool:
    return isinstance(x, dict) and "value" in x and "ci95" in x


def format_interval(x, short: bool = False) -> str:
    """``0.183 [0.151, 0.217] (bootstrap, n=154)``; ``short`` leaves out the method and n."""
    if not is_interval(x):
        return "—" if x is None else str(x)
    extra = ", ".join(str(p) for p in (x.get("method"), f"n={x['n']}" if "n" in x else None) if p)
    return value_and_interval(x) + (f" ({extra})" if extra and not short else "")


def _intervals(d: dict) -> list[tuple[str, dict]]:
    return [(k, v) for k, v in (d or {}).items() if is_interval(v)]


def tables(metrics: dict | None) -> dict:
    """Every table of the results page."""
    if not metrics:
        return {}
    run = metrics.get("run") or {}
    retrieval = metrics.get("retrieval") or {}
    out = {
        "course": _intervals(metrics.get("intervals")),
        "retrieval": _intervals(retrieval),
        "retrieval_scalars": [(k, v) for k, v in retrieval.items() if isinstance(v, (int, float))],
        "per_label": [(label, d.get("n"), d.get("evidence_f"), d.get("recall"))
                      for label, d in (metrics.get("per_label") or {}).items()],
        "retriever": run.get("retriever") or {},
        "retriever_config": config_rows((run.get("retriever") or {}).get("params") or {}),
        "on_dev": [(name, config_rows(d.get("params") or {}), d.get("evidence_f"),
                    (d.get("retrieval") or {}).get("recall@5"),
                    (d.get("retrieval") or {}).get("mrr"))
                   for name, d in (run.get("retrievers_on_dev") or {}).items()],
        "classifier": run.get("classifier"),
        "classifier_config": config_rows({k: v for k, v in (run.get("classifier") or {}).items()
                                          if k not in ("reader", "reader_cv")}),
        "timings": list((run.get("timings") or {}).items()),
        "run": {k: run.get(k) for k in ("data_dir", "evidence", "passages") if k in run},
        "claims": metrics.get("claims"),
        "captions": PLOT_CAPTIONS,
    }
    abl = run.get("ablation") or {}
    conditions = [(f"{c} evidence", abl[c]) for c in ("gold", "retrieved") if isinstance(abl.get(c), dict)]
    conditions += [(f"baseline: {name}", d) for name, d in (abl.get("baselines") or {}).items()]
    out["ablation"] = [(name, d.get("accuracy"), d.get("macro_f1")) for name, d in conditions]
    gvr = abl.get("gold_vs_retrieved") or {}
    out["gold_vs_retrieved"] = {"difference": gvr.get("accuracy_difference"),
                                "p_value": (gvr.get("mcnemar") or {}).get("p_value")} if gvr else None
    return out
