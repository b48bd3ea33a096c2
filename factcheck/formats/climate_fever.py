"""Climate-FEVER's release file (``climate-fever.jsonl``): its claims, and its evidence
sentences as a knowledge source (each distinct ``evidence_id`` once, titled by its
article). A claim's gold evidence: its sentences not labelled NOT_ENOUGH_INFO, or all of
them for a NOT_ENOUGH_INFO claim (docs/formats.md).
"""

from __future__ import annotations

import json
from pathlib import Path

from factcheck.errors import InputError
from factcheck.formats.common import Claim, batched, check_id, plural
from factcheck.formats.files import atomic_path, check_unicode
from factcheck.formats.records import iter_records, kind_of

NAME = "climate-fever"
LABEL_FIELD = "'claim_label'"  # how errors name the label
NOT_ENOUGH_INFO = "NOT_ENOUGH_INFO"
_WHAT = "a Climate-FEVER claim object"


def is_claims(record: dict, name: str = "") -> bool:
    """A Climate-FEVER claim: ``claim_id`` and ``claim``."""
    return "claim_id" in record and "claim" in record


def is_source(record: dict) -> bool:
    return is_claims(record) and "evidences" in record


def _string(path, place, rec, key, *, optional=False):
    value = rec.get(key)
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)) or (isinstance(value, str) and not value.strip()):
        what = f"missing {key!r}" if value is None else f"{key!r} must be a non-empty string, got {kind_of(value)}"
        raise InputError(path, place, what)
    return check_unicode(path, place, str(value), repr(key))


def _evidences(path, place, rec) -> list[dict]:
    value = rec.get("evidences")
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(e, dict) for e in value):
        raise InputError(path, place, "'evidences' must be a list of objects with 'evidence_id'")
    return value


def read_claims(path: Path, require_labels: bool, columns: dict) -> list[Claim]:
    claims = []
    for place, rec in iter_records(path, what=_WHAT):
        cid = check_id(path, place, rec.get("claim_id"), "claim_id")
        where = f"{place} (claim {cid!r})"
        text = _string(path, where, rec, "claim")
        label = _string(path, where, rec, "claim_label", optional=True)
        gold = []
        for ev in _evidences(path, where, rec):
            eid = check_id(path, where, ev.get("evidence_id"), "evidence_id")
            if label == NOT_ENOUGH_INFO or _string(path, where, ev, "evidence_label", optional=True) != NOT_ENOUGH_INFO:
                gold.append(eid)
        claims.append(Claim(cid, text, label, list(dict.fromkeys(gold))))
    return claims


def claims_losses(claims, to: str) -> list[str]:
    return ["Climate-FEVER's per-sentence labels, votes, entropy and articles are not kept, nor the sentences "
            "that are not gold (see docs/formats.md); the sentences themselves are a knowledge source: "
            "`factcheck convert evidence`"]


def passages(spec, path: Path):
    """Batches ``(ids, texts, titles, place)``: every distinct evidence sentence once."""
    def records():
        seen: dict[str, tuple[str, str]] = {}   # id -> (text, where first seen)
        for place, rec in iter_records(path, what=_WHAT, max_passage_chars=spec.max_passage_chars):
            where = f"{place} (claim {check_id(path, place, rec.get('claim_id'), 'claim_id')!r})"
            for ev in _evidences(path, where, rec):
                eid = check_id(path, where, ev.get("evidence_id"), "evidence_id")
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
                title = article.replace("_", " ") if isinstance(article, str) and article.strip() else ""
                yield eid, text, title, where
    return batched(records(), True)


def write_converted(path: Path, claims, notes: list[str], passages=None, name: str | None = None) -> None:
    """Converted claims, with sentences and articles from ``passages(wanted ids) -> (texts,
    titles)`` (the knowledge source ``name``) when given; what is unknown goes to ``notes``."""
    texts = titles = None
    if passages is not None:
        wanted = {e for c in claims for e in c.evidences}
        texts, titles = passages(wanted)
        missing = sorted(wanted - set(texts))
        if missing:
            notes.append(f"{plural(len(missing), 'evidence id')} not in {name} (first: {missing[0]!r}): written "
                         "without a sentence")
    else:
        notes.append("evidence sentences' texts unknown (give the knowledge source to fill them): null")
    notes.append("per-sentence labels, votes and entropy are unknown: null (read back, every listed sentence is gold)")
    write_claims(path, claims, texts, titles)


def write_claims(path: Path, claims, texts: dict[str, str] | None = None, titles: dict[str, str] | None = None) -> None:
    """Each claim with its evidence ids as ``evidences``, sentence and article from
    ``texts``/``titles`` (else null); labels, entropy and votes null."""
    with atomic_path(Path(path)) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        for c in claims:
            rec = {"claim_id": c.id, "claim": c.text}
            if c.label is not None:
                rec["claim_label"] = c.label
            rec["evidences"] = [{"evidence_id": e, "evidence_label": None,
                                 "article": (titles or {}).get(e), "evidence": (texts or {}).get(e),
                                 "entropy": None, "votes": None} for e in c.evidences]
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
