"""Generic JSON lines: one object a line, as a knowledge source (``id_column``,
``text_column``, optionally ``title_column``) or as claims (``id``, ``claim`` or
``claim_text``, ``label`` or ``claim_label``, ``evidences``, or the fields named)."""

from __future__ import annotations

from pathlib import Path

from factcheck.formats.common import (MISSING, batched, check_id, check_text, claim_fields, claim_record,
                                      claims_from_records)
from factcheck.formats.files import atomic_path, dumps_json, write_text_atomic
from factcheck.formats.records import iter_records

NAME = "jsonl"


def passages(spec, path: Path):
    id_col, text_col, title_col = spec.id_column, spec.text_column, spec.title_column

    def records():
        what = f"a JSON object with {id_col!r} and {text_col!r}"
        for place, obj in iter_records(path, what=what, max_passage_chars=spec.max_passage_chars):
            pid = check_id(path, place, obj.get(id_col, MISSING), id_col)
            text = check_text(path, place, obj.get(text_col, MISSING), text_col)
            title = None if title_col is None else check_text(path, place, obj.get(title_col, MISSING), title_col,
                                                               "the title")
            yield pid, text, title, place
    return batched(records(), title_col is not None)


def is_claims(record: dict, name: str) -> bool:
    return True


def read_claims(path: Path, require_labels: bool, columns: dict):
    def rows():
        fields = None
        for place, obj in iter_records(path, what="a JSON object (one claim a line)"):
            fields = fields or claim_fields(path, place, list(obj), columns)
            yield place, obj, fields
    return claims_from_records(path, rows(), require_labels)


def write_claims(path: Path, claims) -> None:
    write_text_atomic(path, "".join(dumps_json(claim_record(c), indent=None) for c in claims))


def write_passages(dest: Path, records, titled: bool, notes: list[str], rename=str) -> None:
    """``{"id", "text"[, "title"]}`` a line from ``(id, text, title)`` records."""
    with atomic_path(dest) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        for pid, text, title in records:
            rec = {"id": rename(pid), "text": text}
            if titled:
                rec["title"] = title
            fh.write(dumps_json(rec, indent=None))
