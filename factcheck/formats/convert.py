"""``factcheck convert``: claims, knowledge sources and predictions from one format to
another. Lossless where the formats allow; whatever the target cannot hold is listed (each
function returns the notes, the CLI prints them), never dropped quietly.

Passage ids: FEVER names a sentence ``page:line``; with ``one_line_pages`` each passage
``X`` is line 0 of its own page ``X`` (FEVER id ``X:0``), and back. Without it every id
must already read as ``page:line``.

Example
-------
>>> notes = convert_claims("data/demo/dev-claims.json", "dev.jsonl", "fever", one_line_pages=True)  # doctest: +SKIP
"""

from __future__ import annotations

from pathlib import Path

from factcheck.errors import InputError
from factcheck.formats import climate_fever, course, fever, jsonl
from factcheck.formats.claims import (CLAIM_FORMATS, UNITS as CLAIM_UNITS, Claim, detect_claims_format,
                                      prefixed_params, read_claims, read_predictions, write_claims, write_predictions)
from factcheck.formats.common import plural
from factcheck.formats.evidence import UNITS as SOURCE_UNITS, iter_passage_records, source_spec
from factcheck.formats.fever import split_sentence_id

__all__ = ["convert_claims", "convert_evidence", "convert_predictions", "EVIDENCE_TARGETS", "PREDICTION_TARGETS"]

EVIDENCE_UNITS = {unit.NAME: unit for unit in (course, jsonl, fever)}
EVIDENCE_TARGETS = tuple(EVIDENCE_UNITS)
PREDICTION_TARGETS = ("course", "fever")


def _to_fever_id(pid: str, one_line_pages: bool, where) -> str:
    if one_line_pages:
        return fever.sentence_id(pid, 0)
    if split_sentence_id(pid) is None:
        raise InputError(where, None, f"passage id {pid!r} is not a FEVER sentence id (page:line); set this to "
                         "make each passage line 0 of its own page", param="one_line_pages")
    return pid


def _from_fever_id(pid: str, one_line_pages: bool, where) -> str:
    if not one_line_pages:
        return pid
    pair = split_sentence_id(pid)
    if pair is None or pair[1] != 0:
        raise InputError(where, None, f"sentence {pid!r} is not line 0 of a page: with one_line_pages every "
                         "passage is its page's line 0", param="one_line_pages")
    return pair[0]


def _check_target(to: str, targets) -> None:
    if to not in targets:
        raise InputError(None, None, f"unknown {'claims format' if targets is CLAIM_FORMATS else 'target'} {to!r}; "
                         f"expected one of {', '.join(targets)}", param="to")


def convert_claims(src, dest, to: str, *, claims_format: str | None = None, claims_id_column: str | None = None,
                   claims_text_column: str | None = None, claims_label_column: str | None = None,
                   claims_evidence_column: str | None = None, one_line_pages: bool = False,
                   evidence=None, format: str | None = None, id_column: str | None = None,
                   text_column: str | None = None, title_column: str | None = None,
                   max_passage_chars: int | None = None) -> list[str]:
    """Write the claims of ``src`` to ``dest`` in format ``to``; returns what ``to`` cannot hold.

    Parameters
    ----------
    src, dest : str or Path
    to : {"course", "jsonl", "csv", "fever", "climate-fever"}
    claims_format, claims_id_column, claims_text_column, claims_label_column, claims_evidence_column
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
                             label_column=claims_label_column, evidence_column=claims_evidence_column)
    losses = getattr(CLAIM_UNITS[source_format], "claims_losses", None)
    notes: list[str] = losses(claims, to) if losses else []
    if to == "fever":
        renamed = sum(len(c.evidences) for c in claims)
        claims = [_mapped(c, lambda e: _to_fever_id(e, one_line_pages, src)) for c in claims]
        if one_line_pages and renamed:
            notes.append(f"{plural(renamed, 'evidence id')} written as FEVER sentences [X, 0] (one-line pages)")
        odd = sorted({c.label for c in claims if c.label is not None} - set(fever.LABELS))
        if odd:
            notes.append(f"labels kept as they are: {', '.join(odd)} {'is' if len(odd) == 1 else 'are'} not among "
                         f"FEVER's ({', '.join(fever.LABELS)})")
    elif source_format == "fever" and one_line_pages:
        claims = [_mapped(c, lambda e: _from_fever_id(e, True, src)) for c in claims]
    if to == "climate-fever":
        texts = titles = None
        if evidence is not None:
            wanted = {e for c in claims for e in c.evidences}
            texts, titles = _passages_of(source_spec(evidence, format=format, id_column=id_column,
                                                     text_column=text_column, title_column=title_column,
                                                     max_passage_chars=max_passage_chars), wanted)
            missing = sorted(wanted - set(texts))
            if missing:
                notes.append(f"{plural(len(missing), 'evidence id')} not in {Path(evidence).name} (first: "
                             f"{missing[0]!r}): written without a sentence")
        else:
            notes.append("evidence sentences' texts unknown (give the knowledge source to fill them): null")
        notes.append("per-sentence labels, votes and entropy are unknown: null (read back, every listed sentence "
                     "is gold)")
        climate_fever.write_claims(dest, claims, texts, titles)
        return notes
    empty = [c.id for c in claims if c.label is not None and not c.evidences]
    if empty and to == "course":
        notes.append(f"{plural(len(empty), 'labelled claim')} without evidence (first: {empty[0]!r}): "
                     "written with an empty 'evidences' list")
    write_claims(dest, claims, to)
    return notes


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
    """Write the knowledge source ``src`` to ``dest`` as ``to`` (course JSON, JSONL
    ``{id, text[, title]}``, or FEVER wiki pages grouped by ``page:line`` ids); returns what
    ``to`` cannot hold. The reader options are :func:`~factcheck.formats.evidence.source_spec`'s.
    """
    src, dest = Path(src), Path(dest)
    _check_target(to, EVIDENCE_TARGETS)
    spec = source_spec(src, format=format, id_column=id_column, text_column=text_column, title_column=title_column,
                       max_passage_chars=max_passage_chars)
    notes = list(getattr(SOURCE_UNITS[spec.format], "SOURCE_LOSSES", ()))
    if to == "fever":
        rename = lambda pid: _to_fever_id(pid, one_line_pages, spec.path)  # noqa: E731
    else:
        rename = lambda pid: _from_fever_id(pid, one_line_pages and spec.format == "fever", src)  # noqa: E731
    records = ((pid, texts[i], titles[i] if titles is not None else None)
               for ids, texts, titles in iter_passage_records(spec) for i, pid in enumerate(ids))
    EVIDENCE_UNITS[to].write_passages(dest, records, spec.has_titles, notes, rename)
    return notes


def convert_predictions(src, dest, to: str, *, one_line_pages: bool = False, claims=None,
                        claims_format: str | None = None, claims_id_column: str | None = None,
                        claims_text_column: str | None = None, claims_label_column: str | None = None,
                        claims_evidence_column: str | None = None) -> list[str]:
    """Predictions from the course format to FEVER's predictions JSONL or back.

    ``claims`` (a claims file, read with the ``claims_*`` options): the claims' order and
    texts, which FEVER's predictions do not hold; without it the course file has no
    ``claim_text`` (listed) and keeps the predictions' order.
    """
    src, dest = Path(src), Path(dest)
    _check_target(to, PREDICTION_TARGETS)
    preds = read_predictions(src)
    notes: list[str] = []
    if claims is not None:
        with prefixed_params("claims_"):
            ordered = read_claims(claims, format=claims_format, id_column=claims_id_column,
                                  text_column=claims_text_column, label_column=claims_label_column,
                                  evidence_column=claims_evidence_column)
        unknown = [cid for cid in preds if cid not in {c.id for c in ordered}]
        if unknown:
            raise InputError(src, f"claim {unknown[0]!r}", f"not in {Path(claims).name} "
                             f"({len(unknown)} predicted claims are not)")
        missing = [c.id for c in ordered if c.id not in preds]
        if missing:
            notes.append(f"{plural(len(missing), 'claim')} of {Path(claims).name} without a prediction (first: "
                         f"{missing[0]!r}): not written")
        ordered = [c for c in ordered if c.id in preds]
    else:
        ordered = [Claim(cid, "") for cid in preds]
        if to == "course":
            notes.append("claim texts are not in FEVER predictions (give the claims file to include them): "
                         "written without 'claim_text'")
    labelled = all(p["claim_label"] is not None for p in preds.values())
    if not labelled and any(p["claim_label"] is not None for p in preds.values()):
        raise InputError(src, None, "some predictions have a label and others not")
    labels = {cid: p["claim_label"] for cid, p in preds.items()} if labelled else None
    if to == "fever":
        evidences = {cid: [_to_fever_id(e, one_line_pages, src) for e in p["evidences"]] for cid, p in preds.items()}
        notes.append("claim texts are not kept (FEVER predictions have none)")
        write_predictions(dest, ordered, evidences, labels, "fever")
        return notes
    evidences = {cid: [_from_fever_id(e, one_line_pages, src) for e in p["evidences"]] for cid, p in preds.items()}
    course.write_predictions(dest, ordered, evidences, labels, texts=claims is not None)
    return notes
