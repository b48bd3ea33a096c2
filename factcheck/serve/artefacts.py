"""What a run directory holds besides the system, read at start-up (plots too: the plot route
never opens a path taken from a request); its dev predictions and explanations, which only
the dev explorer reads, when it is first built.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from factcheck.errors import InputError, ref
from factcheck.formats.claims import read_claims, read_predictions
from factcheck.formats.files import loads_json
from factcheck.formats.records import decode_object
from factcheck.formats.rundir import refuse_unfinished
from factcheck.pipeline.run import DATA_FILES
from factcheck.serve.results import _o as _object

logger = logging.getLogger(__name__)  # notes for whoever serves the app (the CLI shows them)

PLOT_LIMIT = 20 * 1024 * 1024  # bytes of plots held in memory at most


@dataclass
class Artefacts:
    run_dir: Path | None = None
    metrics: dict | None = None
    plots: dict[str, bytes] = field(default_factory=dict)
    gold: list | None = None            # dev claims with labels and gold evidence
    gold_path: Path | None = None
    predictions: dict | None = None     # run's dev predictions {cid: {evidences, claim_label}}
    explain: dict | None = None         # run's dev explanations {cid: {...}}
    explain_method: str | None = None
    notes: list[str] = field(default_factory=list)  # what is missing, for the pages
    dev_read: bool = False              # predictions and explain read (or found missing)


def _read_json(path: Path) -> dict:
    """A JSON object, or the one-line error (a list, or invalid JSON or UTF-8, is not one)."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(path, f"byte {exc.start}", "invalid UTF-8") from None
    return decode_object(path, None, text)


def list_plots(plot_dir: Path) -> dict[str, bytes]:
    plots, total = {}, 0
    if not plot_dir.is_dir():
        return plots
    for path in sorted(plot_dir.glob("*.png")):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            total += len(data)
            if total > PLOT_LIMIT:
                break
            plots[path.name] = data
    return plots


def _gold_file(run_dir: Path, metrics: dict) -> Path | None:
    """The run's dev claims in its ``data_dir`` (relative: to the cwd, or a run directory's parent)."""
    data_dir = _object(metrics.get("run")).get("data_dir")
    data_dir = Path(data_dir if isinstance(data_dir, str) else "")
    if not str(data_dir):
        return None
    bases = [Path()] if data_dir.is_absolute() else [Path.cwd(), *run_dir.resolve().parents]
    for base in bases:
        for name in DATA_FILES["dev"]:
            path = base / data_dir / name
            if path.is_file():
                return path
    return None


def load_artefacts(run_dir: Path | None, dev_claims: Path | None = None) -> Artefacts:
    a = Artefacts(run_dir=run_dir)
    if run_dir is not None:
        metrics_path = run_dir / "metrics.json"
        if metrics_path.is_file():
            a.metrics = _read_json(metrics_path)
        else:
            a.notes.append("the run directory has no metrics.json (unfinished run?)")
        a.plots = list_plots(run_dir / "plots")
        if dev_claims is None and a.metrics is not None:
            dev_claims = _gold_file(run_dir, a.metrics)
            if dev_claims is None:
                note = (f"gold dev file not found (data_dir {_object(a.metrics.get('run')).get('data_dir')!r} "
                        "from metrics.json); pass --dev-claims FILE")
                a.notes.append(note)
                logger.warning(note)
    if dev_claims is not None:
        a.gold = read_claims(dev_claims, require_labels=True)
        a.gold_path = Path(dev_claims)
    return a


def read_dev_predictions(a: Artefacts) -> Artefacts:
    """Fill in the run's dev predictions and their explanations, once: the explanations of
    20K claims took a fifth of the server's start-up, and only the dev explorer reads them."""
    if a.dev_read or a.run_dir is None:
        return a
    pred_path = a.run_dir / "dev-claims-predictions.json"
    if pred_path.is_file():
        predictions = read_predictions(pred_path)
        explain = method = None
        sidecar = a.run_dir / "dev-claims-predictions.explain.json"
        if sidecar.is_file():
            obj = _read_json(sidecar)
            explain, method = _object(obj.get("claims")), obj.get("method")
        a.predictions, a.explain, a.explain_method = predictions, explain, method
    a.dev_read = True
    return a


def _run_index(run_dir: Path) -> Path:
    """RUN/index, or the index a run made with ``--index`` recorded in its metrics."""
    if (run_dir / "index").is_dir():
        return run_dir / "index"
    try:
        recorded = loads_json((run_dir / "metrics.json").read_text("utf-8"))["run"]["index"]
        return run_dir / recorded  # relative to the run directory, or absolute
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return run_dir / "index"


def resolve_paths(run_dir: Path | None, index_dir: Path | None, model_dir: Path | None):
    """(index_dir, model_dir) from ``--run`` and/or explicit ``--index/--model``."""
    if run_dir is not None:
        run_dir = Path(run_dir)
        if not run_dir.is_dir():
            raise InputError(run_dir, None, "no such run directory (an output directory of `factcheck run`)")
        refuse_unfinished(run_dir)
        index_dir = index_dir or _run_index(run_dir)
        model_dir = model_dir or run_dir / "model"
    if index_dir is None or model_dir is None:
        raise InputError(None, None, f"give a run directory, or both {ref('index_dir')} and {ref('model_dir')}",
                         param="run_dir")
    for path, what in ((index_dir, "tag index"), (model_dir, "model")):
        if not Path(path).is_dir():
            hint = (f" (a run made with an existing index keeps no copy: pass {ref('index_dir')} too)"
                    if run_dir and what == "tag index" else "")
            raise InputError(path, None, f"no such {what} directory{hint}")
    return Path(index_dir), Path(model_dir)
