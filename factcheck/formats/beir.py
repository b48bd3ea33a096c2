"""BEIR's files: ``corpus.jsonl`` (``_id``, ``title``, ``text``), ``queries.jsonl`` (``_id``,
``text``) and the qrels TSV ``query-id corpus-id score`` (header optional)."""

from __future__ import annotations

from pathlib import Path

from factcheck.errors import InputError
from factcheck.formats.common import MISSING, batched, check_id, check_text
from factcheck.formats.records import iter_records, kind_of

NAME = "beir"
QRELS_FIELDS = 3


def is_source(record: dict) -> bool:
    return "_id" in record and "text" in record


def passages(spec, path: Path):
    """Batches of ``_id``, ``text`` and ``title`` (absent or empty: no title)."""
    def records():
        for place, obj in iter_records(path, what='a BEIR corpus object {"_id", "title", "text"}',
                                       max_passage_chars=spec.max_passage_chars):
            pid = check_id(path, place, obj.get("_id", MISSING), "_id")
            text = check_text(path, place, obj.get("text", MISSING), "text")
            title = obj.get("title")
            yield pid, text, "" if title is None else check_text(path, place, title, "title", "the title"), place
    return batched(records(), True)


def read_queries(path: Path):
    """``(place, qid, text)`` of ``queries.jsonl`` (``id`` accepted for ``_id``)."""
    for place, obj in iter_records(path):
        qid = obj.get("_id", obj.get("id"))
        if qid is None:
            raise InputError(path, place, 'missing "_id" (a BEIR query is {"_id": ..., "text": ...})')
        if isinstance(qid, bool) or not isinstance(qid, (str, int)) or str(qid) == "":
            raise InputError(path, place, f'"_id" must be a non-empty string, got {kind_of(qid)}')
        text = obj.get("text")
        if not isinstance(text, str):
            raise InputError(path, place, f'"text" must be a string, got {kind_of(text)}')
        yield place, str(qid), text


def judgment(fields: list[str], first: bool):
    """``(qid, docid, grade)`` of a qrels line; None for the header."""
    if first:
        try:
            float(fields[2])
        except ValueError:
            return None
    return fields[0], fields[1], fields[2]
