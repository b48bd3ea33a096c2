"""The ``.explain.json`` sidecar written next to predictions: the retriever's spec and
``"claims": {claim id: record}`` (docs/explanations.md)."""

from __future__ import annotations

from pathlib import Path

from factcheck.errors import InputError
from factcheck.formats.claims import Claim, write_predictions
from factcheck.formats.fever import split_sentence_id
from factcheck.formats.files import write_json_atomic

__all__ = ["explanations_path", "write_explained_predictions"]


def explanations_path(predictions: Path) -> Path:
    """The sidecar's path for a predictions file: ``dev.json`` -> ``dev.explain.json``."""
    name = predictions.name
    stem = name[:-5] if name.endswith(".json") else name[:-6] if name.endswith(".jsonl") else name
    return predictions.with_name(stem + ".explain.json")


def write_explained_predictions(out: Path, claims: list[Claim], evidences: dict[str, list[str]],
                                explanations: dict[str, dict], retriever_spec: dict,
                                labels: dict[str, str] | None = None, predictions_format: str | None = None) -> Path:
    """Predictions (:func:`~factcheck.formats.claims.write_predictions`; ``predictions_format``
    None: FEVER's for a ``.jsonl`` name, else course) and their sidecar, whose path it returns.
    The sidecar is written first and removed if the predictions fail: predictions never
    exist without their explanations, nor new explanations beside old predictions."""
    out = Path(out)
    sidecar = explanations_path(out)
    for dest in (out, sidecar):
        if dest.is_dir():
            raise InputError(dest, None, "is a directory, expected a file name")
    fmt = predictions_format or ("fever" if out.name.lower().endswith(".jsonl") else "course")
    if fmt == "fever":  # every id must be page:line: refuse before writing anything
        for c in claims:
            for e in evidences[c.id]:
                if split_sentence_id(e) is None:
                    raise InputError(out, f"claim {c.id!r}", f"evidence id {e!r} is not a FEVER sentence id "
                                     "(page:line): the knowledge source is not FEVER's; write the course format")
    elif fmt != "course":
        raise InputError(out, None, f"unknown predictions format {fmt!r}; expected course or fever",
                         param="predictions_format")
    write_json_atomic(sidecar, {**retriever_spec, "claims": explanations})
    try:
        write_predictions(out, claims, evidences, labels, fmt)
    except BaseException:  # e.g. a full disk: never the new explanations beside older predictions
        sidecar.unlink(missing_ok=True)
        raise
    return sidecar
