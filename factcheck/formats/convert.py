"""``factcheck convert``: claims, knowledge sources and predictions from one format to
another; each function returns the notes of what the target cannot hold. With
``one_line_pages`` passage ``X`` is FEVER's ``X:0``, and back.
"""

from __future__ import annotations

from pathlib import Path

from factcheck.errors import InputError
from factcheck.formats import course, fever, jsonl
from factcheck.formats.claims import (CLAIM_FORMATS, PREDICTION_FORMATS, UNITS as CLAIM_UNITS, Claim,
                                      detect_claims_format, prefixed_params, read_claims, read_predictions,
                                      write_claims, write_predictions)
from factcheck.formats.common import plural
from factcheck.formats.evidence import UNITS as SOURCE_UNITS, iter_passage_records, source_spec

__all__ = ["convert_claims", "convert_evidence", "convert_predictions", "EVIDENCE_TARGETS"]

EVIDENCE_UNITS = {unit.NAME: unit for unit in (course, jsonl, fever)}
EVIDENCE_TARGETS = tuple(EVIDENCE_UNITS)


def _check_target(to: str, targets) -> None:
    if to not in targets:
        raise InputError(None, None, f"unknown {'claims format' if targets is CLAIM_FORMATS else 'target'} {to!r}; "
                         f"expected one of {', '.join(targets)}", param="to")


def convert_claims(src, dest, to: str, *, claims_format: str | None = None, claims_id_column: str | None = None,
                   claims_text_column: str | None = None, claims_label_column: str | None = None,
                   claims_evidence_column: str | None = None, one_line_pages: bool = False,
                   evidence=None, format: str | None = None, id_column: str | None = None,
                   text_column: str | None = None, title_column: str | None = None,
                   max_passage_chars: int | None = None, max_claim_chars: int | None = None) -> list[str]:
    """Write the claims of ``src`` to ``dest`` in format ``to``; returns what ``to`` cannot hold.

    Parameters
    ----------
    src, dest : str or Path
    to : {"course", "jsonl", "csv", "fever", "climate-fever"}
    claims_format, claims_id_column, claims_text_column, claims_label_column, claims_evidence_column, max_claim_chars
        How to read ``src`` (:func:`~factcheck.formats.claims.read_claims`'s options).
    one_line_pages : bool
        Passage ``X`` is FEVER's page ``X``, line 0.
    evidence : str, Path or None
        Climate-FEVER target: the knowledge source whose texts and titles fill each
        evidence's ``evidence`` and ``article``.
    format, id_column, text_column, title_column, max_passage_chars
        How to read ``evidence`` (:func:`~factcheck.formats.evidence.source_spec`).
    """
    src, dest = Path(src), Path(dest)
    _check_target(to, CLAIM_FORMATS)
    with prefixed_params("claims_"):
        source_format = claims_format or detect_claims_format(src)
        claims = read_claims(src, format=source_format, id_column=claims_id_column, text_column=claims_text_column,
                             label_column=claims_label_column, evidence_column=claims_evidence_column,
                             max_claim_chars=max_claim_chars)
    source, target = CLAIM_UNITS[source_format], CLAIM_UNITS[to]
    notes: list[str] = source.claims_losses(claims, to) if hasattr(source, "claims_losses") else []
    rename = _renaming(source, target, one_line_pages, src)
    if rename is not None:
        claims = [_mapped(c, rename) for c in claims]
    if hasattr(target, "claims_notes"):
        notes += target.claims_notes(claims, one_line_pages)
    if hasattr(target, "write_converted"):
        passages = None if evidence is None else lambda wanted: _passages_of(source_spec(
            evidence, format=format, id_column=id_column, text_column=text_column, title_column=title_column,
            max_passage_chars=max_passage_chars), wanted)
        target.write_converted(dest, claims, notes, passages, Path(evidence).name if evidence is not None else None)
    else:
        write_claims(dest, claims, to)
    return notes


def _renaming(source, target, one_line_pages: bool, where):
    """How passage ids change from ``source``'s format to ``target``'s (None: they do not)."""
    if hasattr(target, "id_in"):
        return lambda pid: target.id_in(pid, one_line_pages, where)
    if source is not target and hasattr(source, "id_out") and one_line_pages:
        return lambda pid: source.id_out(pid, one_line_pages, where)
    return None


def _mapped(c: Claim, f) -> Claim:
    sets = None if c.evidence_sets is None else [[f(e) for e in s] for s in c.evidence_sets]
    return Claim(c.id, c.text, c.label, [f(e) for e in c.evidences], sets)


def _passages_of(spec, wanted: set[str]) -> tuple[dict, dict]:
    texts, titles = {}, {}
    for ids, batch_texts, batch_titles in iter_passage_records(spec):
        for i, pid in enumerate(ids):
            if pid in wanted:
                texts[pid] = batch_texts[i]
                if batch_titles is not None and batch_titles[i]:
                    titles[pid] = batch_titles[i]
    return texts, titles


def convert_evidence(src, dest, to: str, *, format: str | None = None, id_column: str | None = None,
                     text_column: str | None = None, title_column: str | None = None,
                     one_line_pages: bool = False, max_passage_chars: int | None = None) -> list[str]:
    """Write the knowledge source ``src`` to ``dest`` as ``to`` (course, jsonl or fever);
    returns what ``to`` cannot hold. The reader options are
    :func:`~factcheck.formats.evidence.source_spec`'s."""
    src, dest = Path(src), Path(dest)
    _check_target(to, EVIDENCE_TARGETS)
    spec = source_spec(src, format=format, id_column=id_column, text_column=text_column, title_column=title_column,
                       max_passage_chars=max_passage_chars)
    source, target = SOURCE_UNITS[spec.format], EVIDENCE_UNITS[to]
    notes = list(getattr(source, "SOURCE_LOSSES", ()))
    rename = _renaming(source, target, one_line_pages, spec.path if hasattr(target, "id_in") else src) or str
    records = ((pid, texts[i], titles[i] if titles is not None else None)
               for ids, texts, titles in iter_passage_records(spec) for i, pid in enumerate(ids))
    target.write_passages(dest, records, spec.has_titles, notes, rename)
    return notes


def convert_predictions(src, dest, to: str, *, one_line_pages: bool = False, claims=None,
                        claims_format: str | None = None, claims_id_column: str | None = None,
                        claims_text_column: str | None = None, claims_label_column: str | None = None,
                        claims_evidence_column: str | None = None, max_claim_chars: int | None = None) -> list[str]:
    """Predictions from the course format to FEVER's predictions JSONL or back; returns the notes.
    ``claims`` (a claims file, read with the ``claims_*`` options): the claims' order and
    texts, which FEVER's predictions do not hold."""
    src, dest = Path(src), Path(dest)
    _check_target(to, PREDICTION_FORMATS)
    preds = read_predictions(src)
    notes: list[str] = []
    if claims is not None:
        with prefixed_params("claims_"):
            ordered = read_claims(claims, format=claims_format, id_column=claims_id_column,
                                  text_column=claims_text_column, label_column=claims_label_column,
                                  evidence_column=claims_evidence_column, max_claim_chars=max_claim_chars)
        known = {c.id for c in ordered}  # once, not once per prediction
        unknown = [cid for cid in preds if cid not in known]
        if unknown:
            raise InputError(src, f"claim {unknown[0]!r}", f"not in {Path(claims).name} "
                             f"({len(unknown)} predicted claims are not)")
        missing = [c.id for c in ordered if c.id not in preds]
        if missing:
            notes.append(f"{plural(len(missing), 'claim')} of {Path(claims).name} without a prediction (first: "
                         f"{missing[0]!r}): not written")
        ordered = [c for c in ordered if c.id in preds]
    else:
        ordered = None  # the predictions' own order
        if to == "course":
            notes.append("claim texts are not in FEVER predictions (give the claims file to include them): "
                         "written without 'claim_text'")
    rename = fever.id_in if to == "fever" else fever.id_out
    mapped = {cid: {"evidences": [rename(e, one_line_pages, src) for e in p["evidences"]],
                    "claim_label": p["claim_label"]} for cid, p in preds.items()}
    if to == "fever":
        notes.append("claim texts are not kept (FEVER predictions have none)")
    try:  # the one writer; its refusals are about the file read
        write_predictions(dest, mapped, ordered, to)
    except InputError as exc:
        if exc.param != "predictions":
            raise
        raise InputError(src, exc.place, exc.message) from None
    return notes
