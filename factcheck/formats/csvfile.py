"""CSV (``.tsv``: tab-separated) with a header row: as a knowledge source (``id_column``,
``text_column``, optionally ``title_column``) or as claims (the JSONL claims' columns; the
evidence cell holds ids separated by spaces, or a JSON list when an id holds a space)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from factcheck.errors import InputError
from factcheck.formats.common import batched, check_id, claim_fields, claims_from_records
from factcheck.formats.files import loads_json, write_text_atomic
from factcheck.formats.records import iter_csv

NAME = "csv"
SUFFIXES = (".csv", ".tsv")


def passages(spec, path: Path):
    rows = iter_csv(path, max_field_chars=spec.max_passage_chars)  # no field over the cap: the parser's limit
    _, header = next(rows)
    at = {}
    for param in ("id_column", "text_column", "title_column"):
        column = getattr(spec, param)
        if column is None:
            continue
        if column not in header:
            found = ", ".join(repr(h) for h in header) or "none"
            raise InputError(path, None, f"no column {column!r} in the header (line 1; found {found})", param=param)
        at[param] = header.index(column)
    id_at, text_at, title_at = at["id_column"], at["text_column"], at.get("title_column")
    records = ((check_id(path, place, row[id_at], spec.id_column), row[text_at],
                None if title_at is None else row[title_at], place) for place, row in rows)
    return batched(records, title_at is not None)


def default_title(path: Path, id_column: str, text_column: str) -> str | None:
    """``"title"`` when the header has such a column (neither the id nor the text): found by
    default, as ``id`` and ``text`` are. None when the header cannot be read (reading says why)."""
    try:
        _, header = next(iter_csv(path))
    except (InputError, OSError, StopIteration, UnicodeDecodeError):
        return None
    return "title" if "title" in header and "title" not in (id_column, text_column) else None


def read_claims(path: Path, require_labels: bool, columns: dict):
    def rows():
        records = iter_csv(path)
        place, header = next(records)
        fields = claim_fields(path, place, header, columns)
        for place, row in records:
            record = dict(zip(header, row))
            for role in ("label_column", "evidence_column"):
                if fields[role] is not None and record.get(fields[role]) == "":
                    record[fields[role]] = None  # an empty cell: no label / no evidence
            ev = fields["evidence_column"]
            if ev is not None and record.get(ev) is not None:
                record[ev] = _evidence_cell(path, place, record[ev])
            yield place, record, fields
    return claims_from_records(path, rows(), require_labels)


def _evidence_cell(path, place, cell: str):
    if cell.lstrip().startswith("["):
        try:
            return loads_json(cell)
        except ValueError:
            raise InputError(path, place, "the evidence cell starts with '[' but is not a JSON list") from None
    return cell.split()


def write_claims(path: Path, claims) -> None:
    buf = io.StringIO()
    w = csv.writer(buf, delimiter="\t" if Path(path).name.lower().endswith(".tsv") else ",", lineterminator="\n")
    w.writerow(["id", "claim", "label", "evidences"])
    for c in claims:
        spaced = any(not e or any(ch.isspace() for ch in e) for e in c.evidences)
        w.writerow([c.id, c.text, c.label or "", json.dumps(c.evidences, ensure_ascii=False) if spaced
                    else " ".join(c.evidences)])
    write_text_atomic(path, buf.getvalue())
