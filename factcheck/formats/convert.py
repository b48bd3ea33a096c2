"""``factcheck convert``: claims, knowledge sources and predictions from one format to another.

Lossless where the formats allow; whatever the target cannot hold is *listed* (each
function returns the list, the CLI prints it), never dropped quietly.

Passage ids. FEVER names a sentence by ``[page, line]``, which :mod:`factcheck.formats.fever`
reads as the id ``page:line``. Course ids (``evidence-12``) have no page and line: with
``one_line_pages`` each passage ``X`` becomes line 0 of its own page ``X`` (FEVER id
``X:0``), and back (``X:0`` -> ``X``). Without it every id must already read as
``page:line``, and a FEVER ``[page, line]`` becomes ``page:line``.

Example
-------
>>> notes = convert_claims("data/demo/dev-claims.json", "dev.jsonl", "fever", one_line_pages=True)  # doctest: +SKIP
"""

from __future__ import annotations

from pathlib import Path

from factcheck.errors import InputError
from factcheck.formats import fever
from factcheck.formats.claims import (CLAIM_FORMATS, Claim, detect_claims_format, prefixed_params, read_claims,
                                     read_predictions, write_claims, write_predictions)
from factcheck.formats.evidence import iter_passage_records, source_spec
from factcheck.formats.files import atomic_path, dumps_json, write_json_atomic
from factcheck.formats.fever import split_sentence_id

__all__ = ["convert_claims", "convert_evidence", "convert_predictions", "EVIDENCE_TARGETS", "PREDICTION_TARGETS"]

EVIDENCE_TARGETS = ("course", "jsonl", "fever")
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


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


# --------------------------------------------------------------------------- claims

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
        Passage ``X`` is FEVER's page ``X``, line 0 (see the module docstring).
    evidence : str, Path or None
        Climate-FEVER target: the knowledge source whose texts and titles fill each
        evidence's ``evidence`` and ``article``.
    format, id_column, text_column, title_column, max_passage_chars
        How to read ``evidence`` (:func:`~factcheck.formats.evidence.source_spec`).
    """
    src, dest = Path(src), Path(dest)
    if to not in CLAIM_FORMATS:
        raise InputError(None, None, f"unknown claims format {to!r}; expected one of {', '.join(CLAIM_FORMATS)}",
                         param="to")
    with prefixed_params("claims_"):
        source_format = claims_format or detect_claims_format(src)
        claims = read_claims(src, format=source_format, id_column=claims_id_column, text_column=claims_text_column,
                             label_column=claims_label_column, evidence_column=claims_evidence_column)
    notes: list[str] = []
    if source_format == "fever":
        if to != "fever":
            flattened = sum(1 for c in claims if c.evidence_sets and (len(c.evidence_sets) > 1
                                                                      or any(len(s) > 1 for s in c.evidence_sets)))
            if flattened:
                notes.append(f"{_plural(flattened, 'claim')}: FEVER's alternative evidence sets (or multi-sentence "
                             f"sets) flattened into one list of ids ({to} has no evidence sets)")
        notes.append("FEVER's annotation and evidence ids (bookkeeping of the annotation) are not kept; "
                     "'verifiable' follows from the label")
    if source_format == "climate-fever":
        notes.append("Climate-FEVER's per-sentence labels, votes, entropy and articles are not kept, nor the "
                     "sentences that are not gold (see docs/formats.md); the sentences themselves are a knowledge "
                     "source: `factcheck convert evidence`")
    if to == "fever":
        renamed = sum(1 for c in claims for e in c.evidences)
        claims = [_mapped(c, lambda e: _to_fever_id(e, one_line_pages, src)) for c in claims]
        if one_line_pages and renamed:
            notes.append(f"{_plural(renamed, 'evidence id')} written as FEVER sentences [X, 0] (one-line pages)")
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
                notes.append(f"{_plural(len(missing), 'evidence id')} not in {Path(evidence).name} (first: "
                             f"{missing[0]!r}): written without a sentence")
        else:
            notes.append("evidence sentences' texts unknown (give the knowledge source to fill them): null")
        notes.append("per-sentence labels, votes and entropy are unknown: null (read back, every listed sentence "
                     "is gold)")
        from factcheck.formats import climate_fever
        climate_fever.write_claims(dest, claims, texts, titles)
    else:
        if to in ("course", "jsonl", "csv"):
            empty = [c.id for c in claims if c.label is not None and not c.evidences]
            if empty and to == "course":
                notes.append(f"{_plural(len(empty), 'labelled claim')} without evidence (first: {empty[0]!r}): "
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


# --------------------------------------------------------------------------- knowledge sources

def convert_evidence(src, dest, to: str, *, format: str | None = None, id_column: str | None = None,
                     text_column: str | None = None, title_column: str | None = None,
                     one_line_pages: bool = False, max_passage_chars: int | None = None) -> list[str]:
    """Write the knowledge source ``src`` to ``dest`` as ``to`` (course JSON, JSONL
    ``{id, text[, title]}``, or FEVER wiki pages); returns what ``to`` cannot hold.

    To FEVER: passages are grouped into pages by their ``page:line`` ids (or, with
    ``one_line_pages``, each is line 0 of its own page); a tab or newline inside a text
    (FEVER's field separators) becomes a space, and an empty text cannot be a FEVER line:
    both are listed. From FEVER: the ids are ``page:line`` (``page`` with ``one_line_pages``).
    ``max_passage_chars``: the readers' passage cap (:func:`~factcheck.formats.evidence.source_spec`).
    """
    src, dest = Path(src), Path(dest)
    if to not in EVIDENCE_TARGETS:
        raise InputError(None, None, f"unknown target {to!r}; expected one of {', '.join(EVIDENCE_TARGETS)}",
                         param="to")
    spec = source_spec(src, format=format, id_column=id_column, text_column=text_column, title_column=title_column,
                       max_passage_chars=max_passage_chars)
    notes: list[str] = []
    if spec.format == "fever":
        notes.append("FEVER's hyperlinks after each sentence are not read, nor the pages' 'text' (the lines "
                     "joined)")
    if to == "fever":
        _write_fever(spec, dest, one_line_pages, notes)
        return notes
    titled = spec.has_titles and to == "jsonl"
    if spec.has_titles and not titled:
        notes.append(f"titles are not kept ({to} has no titles; the JSONL target keeps them)")
    n = 0
    with atomic_path(dest) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        if to == "course":
            fh.write("{")
        for ids, texts, titles in iter_passage_records(spec):
            for i, pid in enumerate(ids):
                if spec.format == "fever" and one_line_pages:
                    pid = _from_fever_id(pid, True, src)
                if to == "course":
                    fh.write(("," if n else "") + "\n" + dumps_json(pid, indent=None).rstrip("\n") + ": "
                             + dumps_json(texts[i], indent=None).rstrip("\n"))
                else:
                    rec = {"id": pid, "text": texts[i]}
                    if titled:
                        rec["title"] = titles[i]
                    fh.write(dumps_json(rec, indent=None))
                n += 1
        if to == "course":
            fh.write("\n}\n")
    return notes


def _write_fever(spec, dest: Path, one_line_pages: bool, notes: list[str]) -> None:
    pages: dict[str, dict[int, str]] = {}
    cleaned = empty = 0
    first_empty = None
    for ids, texts, titles in iter_passage_records(spec):
        for pid, text in zip(ids, texts):
            page, line = (pid, 0) if one_line_pages else split_sentence_id(_to_fever_id(pid, False, spec.path))
            if "\t" in text or "\n" in text or "\r" in text:
                text = " ".join(text.replace("\t", " ").split("\n")).replace("\r", " ")
                cleaned += 1
            if not text.strip():
                empty += 1
                first_empty = first_empty or pid
                continue  # listed below: an empty line is no sentence
            pages.setdefault(page, {})[line] = text
    if spec.has_titles:
        notes.append("titles are not kept (a FEVER page's title is its id)")
    if cleaned:
        notes.append(f"{_plural(cleaned, 'passage')} held tabs or newlines (FEVER's separators): written as spaces")
    if empty:
        notes.append(f"{_plural(empty, 'passage')} with an empty text (first: {first_empty!r}) cannot be a FEVER "
                     "line: not written")
    fever.write_wiki_pages(dest, ((page, sorted(lines.items())) for page, lines in pages.items()))


# --------------------------------------------------------------------------- predictions

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
    if to not in PREDICTION_TARGETS:
        raise InputError(None, None, f"unknown target {to!r}; expected one of {', '.join(PREDICTION_TARGETS)}",
                         param="to")
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
            notes.append(f"{_plural(len(missing), 'claim')} of {Path(claims).name} without a prediction (first: "
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
    if claims is None:
        out = {}
        for c in ordered:
            entry = {}
            if labels is not None:
                entry["claim_label"] = labels[c.id]
            entry["evidences"] = evidences[c.id]
            out[c.id] = entry
        write_json_atomic(dest, out)
        return notes
    write_predictions(dest, ordered, evidences, labels, "course")
    return notes
