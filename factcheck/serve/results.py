"""The results page's tables from ``metrics.json`` (a missing or malformed key leaves a row out)."""

from __future__ import annotations

from factcheck.evaluation.intervals import format_interval as value_and_interval
from factcheck.reporting.plots import PLOT_CAPTIONS
from factcheck.reporting.report import config_rows


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def is_interval(x) -> bool:
    """An ``{"value", "ci95": [low, high]}`` record of numbers (the value may be null)."""
    ci = x.get("ci95") if isinstance(x, dict) else None
    return (isinstance(ci, list) and len(ci) == 2 and all(map(_number, ci))
            and "value" in x and (x["value"] is None or _number(x["value"])))


def format_interval(x, short: bool = False) -> str:
    """``0.183 [0.151, 0.217] (bootstrap, n=154)``; ``short`` leaves out the method and n."""
    if not is_interval(x):
        return "—" if x is None else str(x)
    extra = ", ".join(str(p) for p in (x.get("method"), f"n={x['n']}" if "n" in x else None) if p)
    return value_and_interval(x) + (f" ({extra})" if extra and not short else "")


def _o(x) -> dict:
    """``x`` when an object, else an empty one: a field of another shape leaves its rows out."""
    return x if isinstance(x, dict) else {}


def _s(x) -> str | None:
    return x if isinstance(x, str) else None


def _intervals(d) -> list[tuple[str, dict]]:
    return [(k, v) for k, v in _o(d).items() if is_interval(v)]


def tables(metrics: dict | None) -> dict:
    if not isinstance(metrics, dict) or not metrics:
        return {}
    run = _o(metrics.get("run"))
    retrieval = _o(metrics.get("retrieval"))
    retriever, classifier = _o(run.get("retriever")), _o(run.get("classifier"))
    chosen = {"chosen": _s(retriever.get("chosen")), "chosen_by": _s(retriever.get("chosen_by")),
              "holdout_claims": retriever.get("holdout_claims"), "holdout": _o(retriever.get("holdout"))}
    reader = {"reader": _s(classifier.get("reader")),
              "reader_cv": {name: _o(r) for name, r in _o(classifier.get("reader_cv")).items()}}
    out = {
        "course": _intervals(metrics.get("intervals")),
        "retrieval": _intervals(retrieval),
        "retrieval_scalars": [(k, v) for k, v in retrieval.items() if isinstance(v, (int, float))],
        "per_label": [(label, _o(d).get("n"), _o(d).get("evidence_f"), _o(d).get("recall"))
                      for label, d in _o(metrics.get("per_label")).items()],
        "retriever": chosen,
        "retriever_config": config_rows(_o(retriever.get("params"))),
        "on_dev": [(name, config_rows(_o(_o(d).get("params"))), _o(d).get("evidence_f"),
                    _o(_o(d).get("retrieval")).get("recall@5"), _o(_o(d).get("retrieval")).get("mrr"))
                   for name, d in _o(run.get("retrievers_on_dev")).items()],
        "classifier": reader,
        "classifier_config": config_rows({k: v for k, v in classifier.items() if k not in ("reader", "reader_cv")}),
        "timings": list(_o(run.get("timings")).items()),
        "run": {k: run.get(k) for k in ("data_dir", "evidence", "passages") if k in run},
        "claims": metrics.get("claims"),
        "captions": PLOT_CAPTIONS,
    }
    abl = _o(run.get("ablation"))
    conditions = [(f"{c} evidence", abl[c]) for c in ("gold", "retrieved") if isinstance(abl.get(c), dict)]
    conditions += [(f"baseline: {name}", _o(d)) for name, d in _o(abl.get("baselines")).items()]
    out["ablation"] = [(name, d.get("accuracy"), d.get("macro_f1")) for name, d in conditions]
    gvr = _o(abl.get("gold_vs_retrieved"))
    out["gold_vs_retrieved"] = {"difference": gvr.get("accuracy_difference"),
                                "p_value": _o(gvr.get("mcnemar")).get("p_value")} if gvr else None
    return out
