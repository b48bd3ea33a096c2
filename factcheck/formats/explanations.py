"""The ``.explain.json`` sidecar written next to predictions: the retriever's spec and
``"claims": {claim id: record}`` (docs/explanations.md)."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from factcheck.errors import InputError
from factcheck.formats.claims import Claim, predictions_stream
from factcheck.formats.fever import split_sentence_id
from factcheck.formats.files import JsonObjectStream, atomic_path

__all__ = ["explained_predictions_writer", "explanations_path", "predictions_format_of", "write_explained_predictions"]


def explanations_path(predictions: Path) -> Path:
    """The sidecar's path for a predictions file: ``dev.json`` -> ``dev.explain.json``."""
    name = predictions.name
    stem = name[:-5] if name.endswith(".json") else name[:-6] if name.endswith(".jsonl") else name
    return predictions.with_name(stem + ".explain.json")


def predictions_format_of(out: Path, predictions_format: str | None = None) -> str:
    """The format predictions are written in: ``predictions_format``, else FEVER's for a
    ``.jsonl`` name and the course's otherwise."""
    return predictions_format or ("fever" if Path(out).name.lower().endswith(".jsonl") else "course")


def write_explained_predictions(out: Path, claims: list[Claim], evidences: dict[str, list[str]],
                                explanations: dict[str, dict], retriever_spec: dict,
                                labels: dict[str, str] | None = None, predictions_format: str | None = None) -> Path:
    """Predictions (:func:`~factcheck.formats.claims.write_predictions`; ``predictions_format``
    None: FEVER's for a ``.jsonl`` name, else course) and their sidecar, whose path it returns
    (:func:`explained_predictions_writer` with one batch)."""
    with explained_predictions_writer(out, retriever_spec, predictions_format) as writer:
        writer.write(claims, evidences, explanations, labels)
    return explanations_path(Path(out))


class _Batches:
    def __init__(self, out: Path, fmt: str, files: tuple, sidecar: JsonObjectStream, predictions):
        self.out, self.fmt, self.files, self.sidecar, self.predictions = out, fmt, files, sidecar, predictions

    def write(self, claims: list[Claim], evidences: dict[str, list[str]], explanations: dict[str, dict],
              labels: dict[str, str] | None = None) -> None:
        """The next claims, in order, with their evidence ids, sidecar records and labels."""
        if self.fmt == "fever":  # every id must be page:line: refuse before writing the batch
            for c in claims:
                for e in evidences[c.id]:
                    if split_sentence_id(e) is None:
                        raise InputError(self.out, f"claim {c.id!r}", f"evidence id {e!r} is not a FEVER sentence "
                                         "id (page:line): the knowledge source is not FEVER's; write the course format")
        for c in claims:
            self.sidecar.add(c.id, explanations[c.id])
            self.predictions.add(c, evidences[c.id], labels)
        for fh in self.files:  # on disk now: a batch is never held past its write
            fh.flush()


@contextmanager
def explained_predictions_writer(out: Path, retriever_spec: dict, predictions_format: str | None = None):
    """``with explained_predictions_writer(out, spec) as w: w.write(claims, evidences,
    explanations, labels)`` batch after batch: predictions and sidecar are written under
    temporary names as the batches come (never held whole) and renamed when the block ends
    without an error, the sidecar first (on an error, neither file is touched); if the
    predictions' rename fails the new sidecar is removed: predictions never exist without
    their explanations, nor new explanations beside old predictions."""
    out = Path(out)
    sidecar = explanations_path(out)
    for dest in (out, sidecar):
        if dest.is_dir():
            raise InputError(dest, None, "is a directory, expected a file name")
    fmt = predictions_format_of(out, predictions_format)
    if fmt not in ("course", "fever"):
        raise InputError(out, None, f"unknown predictions format {fmt!r}; expected course or fever",
                         param="predictions_format")
    sidecar_renamed = False
    try:
        with atomic_path(out) as tmp_out:
            with atomic_path(sidecar) as tmp_sidecar:
                with open(tmp_sidecar, "w", encoding="utf-8", newline="\n") as fs, \
                        open(tmp_out, "w", encoding="utf-8", newline="\n") as fp:
                    batches = _Batches(out, fmt, (fs, fp), JsonObjectStream(fs, retriever_spec, "claims"),
                                       predictions_stream(fp, out, fmt))
                    yield batches
                    batches.sidecar.close()
                    batches.predictions.close()
            sidecar_renamed = True  # then leaving the outer block renames the predictions
    except BaseException:  # e.g. a full disk: never the new explanations beside older predictions
        if sidecar_renamed:
            sidecar.unlink(missing_ok=True)
        raise
