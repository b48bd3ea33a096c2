"""Climate-FEVER's release file (``climate-fever.jsonl``): its claims, and its evidence
sentences as a knowledge source. One claim a line::

    {"claim_id": "0", "claim": "...", "claim_label": "SUPPORTS",
     "evidences": [{"evidence_id": "Extreme weather:14", "evidence_label": "NOT_ENOUGH_INFO",
                    "article": "Extreme weather", "evidence": "...", "entropy": 0.69,
                    "votes": ["SUPPORTS", "NOT_ENOUGH_INFO", null, null, null]}, ...]}

A claim's labels are the course's four (the course claims are these claims); each of its
five sentences has its own label. **Gold evidence** of a claim: its sentences whose
``evidence_label`` is not NOT_ENOUGH_INFO, or all of them for a NOT_ENOUGH_INFO claim --
the pattern the course's files follow (every NOT_ENOUGH_INFO claim has five gold passages,
SUPPORTS and REFUTES one to five, DISPUTED at least two). A sentence without a label (as
``factcheck convert`` writes when it has none) counts as gold.

As a knowledge source: one passage per distinct ``evidence_id``, text the sentence, title
the article. The same sentence recurs under several claims: a repeat with the same text is
the same passage (read once), a repeat with another text is an error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Iterator

from factcheck.errors import InputError
from factcheck.formats.course_json import kind_of
from factcheck.formats.files import atomic_path, check_unicode
from factcheck.formats.jsonlines import iter_records

__all__ = ["is_claim_record", "iter_claim_records", "iter_evidence_batches", "write_claims"]

NOT_ENOUGH_INFO = "NOT_ENOUGH_INFO"
BATCH = 4096


def is_claim_record(record: dict) -> bool:
    """A Climate-FEVER claim: ``claim_id`` and ``claim``."""
    return "claim_id" in record and "claim" in record


def _string(path, place, rec, key, *, optional=False):
    value = rec.get(key)
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)) or (isinstance(value, str) and not value.strip()):
        what = f"missing {key!r}" if value is None else f"{key!r} must be a non-empty string, got {kind_of(value)}"
        raise InputError(path, place, what)
    value = str(value)
    check_unicode(path, place, value, repr(key))
    return value


def _evidences(path, place, rec) -> list[dict]:
    value = rec.get("evidences")
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(e, dict) for e in value):
        raise InputError(path, place, "'evidences' must be a list of objects with 'evidence_id'")
    return value


def iter_claim_records(path: Path) -> Iterator[tuple[str, str, str, str | None, list[str]]]:
    """``(place, claim id, claim, label, gold evidence ids)`` per claim (gold: see the module)."""
    path = Path(path)
    for place, rec in iter_records(path, what="a Climate-FEVER claim object"):
        cid = _string(path, place, rec, "claim_id")
        where = f"{place} (claim {cid!r})"
        text = _string(path, where, rec, "claim")
        label = _string(path, where, rec, "claim_label", optional=True)
        gold = []
        for ev in _evidences(path, where, rec):
            eid = _string(path, where, ev, "evidence_id")
            ev_label = _string(path, where, ev, "evidence_label", optional=True)
            if label == NOT_ENOUGH_INFO or ev_label != NOT_ENOUGH_INFO:
                gold.append(eid)
        yield place, cid, text, label, list(dict.fromkeys(gold))


Batch = tuple[list[str], list[str], list[str], Callable[[int], str]]


def iter_evidence_batches(path: Path, max_passage_chars: int | None = None) -> Iterator[Batch]:
    """``(ids, texts, titles, place)`` batches: every distinct evidence sentence once, in
    order of first appearance (``max_passage_chars``: see :func:`~factcheck.formats.jsonlines.iter_records`)."""
    path = Path(path)
    seen: dict[str, tuple[str, str]] = {}   # id -> (text, where first seen)
    ids, texts, titles, places = [], [], [], []
    for place, rec in iter_records(path, what="a Climate-FEVER claim object", max_passage_chars=max_passage_chars):
        cid = _string(path, place, rec, "claim_id")
        where = f"{place} (claim {cid!r})"
        for ev in _evidences(path, where, rec):
            eid = _string(path, where, ev, "evidence_id")
            text = ev.get("evidence")
            if not isinstance(text, str):
                raise InputError(path, where, f"evidence {eid!r}: missing 'evidence' (the sentence)" if text is None
                                 else f"evidence {eid!r}: 'evidence' must be a string, got {kind_of(text)}")
            check_unicode(path, where, text, "an evidence sentence")
            if eid in seen:
                if seen[eid][0] != text:
                    raise InputError(path, where, f"evidence {eid!r} has another text than at {seen[eid][1]}")
                continue
            seen[eid] = (text, where)
            article = ev.get("article")
            title = article.replace("_", " ") if isinstance(article, str) and article.strip() else None
            ids.append(eid)
            texts.append(text)
            titles.append(title or "")
            places.append(where)
            if len(ids) == BATCH:
                yield ids, texts, titles, places.__getitem__
                ids, texts, titles, places = [], [], [], []
    if ids:
        yield ids, texts, titles, places.__getitem__


def write_claims(path: Path, claims, texts: dict[str, str] | None = None, titles: dict[str, str] | None = None) -> None:
    """Climate-FEVER JSONL: each claim with its evidence ids as ``evidences``; the sentence
    and article from ``texts``/``titles`` when given, else null; labels, entropy and votes
    are unknown (null: read back, every listed sentence is gold)."""
    with atomic_path(Path(path)) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        for c in claims:
            rec = {"claim_id": c.id, "claim": c.text}
            if c.label is not None:
                rec["claim_label"] = c.label
            rec["evidences"] = [{"evidence_id": e, "evidence_label": None,
                                 "article": (titles or {}).get(e), "evidence": (texts or {}).get(e),
                                 "entropy": None, "votes": None} for e in c.evidences]
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
