"""What the format units share: the :class:`Claim` record, the checks of one record's
fields and the batching of passages.

A format unit is a module with ``NAME`` and whichever of these apply: ``passages(spec,
path)`` (batches ``(ids, texts, titles or None, place)``, ``place(i)`` naming passage i),
``write_passages``, ``is_source``, ``read_claims``, ``is_claims``, ``write_claims``,
``read_predictions``, ``PredictionsStream`` (the writer of predictions, claim by claim).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import islice
from typing import Callable, Iterator

from factcheck.errors import InputError, ref
from factcheck.formats.files import check_unicode
from factcheck.formats.records import kind_of

BATCH = 4096  # passages per batch handed to the tagging driver
Batch = tuple[list[str], list[str], "list[str] | None", Callable[[int], str]]
MISSING = object()  # a field absent from a record


@dataclass
class Claim:
    """One claim: its id and text, and for labelled claims the gold label and evidence ids.

    Parameters
    ----------
    id : str
        The claim's id (``claim-1937``; FEVER's integer ids as their digits).
    text : str
        The claim.
    label : str or None
        The gold label (None for unlabelled claims), one of the training file's label set.
    evidences : list of str
        The gold evidence passage ids, in file order (empty for unlabelled claims).
    evidence_sets : list of list of str or None
        FEVER's alternative complete evidence sets (any one verifies the claim;
        ``evidences`` is their union); None for formats without sets.

    Example
    -------
    >>> Claim("claim-1", "Sea levels are rising.", "SUPPORTS", ["evidence-8"]).label
    'SUPPORTS'
    """

    id: str
    text: str
    label: str | None = None
    evidences: list[str] = field(default_factory=list)
    evidence_sets: list[list[str]] | None = None


def batched(records, titled: bool) -> Iterator[Batch]:
    """``(id, text, title, place)`` records as batches of :data:`BATCH`."""
    records = iter(records)
    while chunk := list(islice(records, BATCH)):
        ids, texts, titles, places = map(list, zip(*chunk))
        yield ids, texts, titles if titled else None, places.__getitem__


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 shard``, ``2 shards``."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


def check_id(path, place, value, column, what: str = "the id") -> str:
    """A record's id (every format's passages, claims and queries): a non-empty string, or an
    integer written as text; ``MISSING`` or None is a missing ``column``."""
    if value is MISSING or value is None:
        raise InputError(path, place, f"missing {column!r}")
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InputError(path, place, f"{column!r} must be a string or an integer, got {kind_of(value)}")
    value = str(value)
    if not value:
        raise InputError(path, place, f"{column!r} is empty")
    return check_unicode(path, place, value, what)


def check_text(path, place, value, column, what: str = "the text") -> str:
    """A passage's text or title: a string (empty allowed)."""
    if value is MISSING:
        raise InputError(path, place, f"missing {column!r}")
    if not isinstance(value, str):
        raise InputError(path, place, f"{column!r} must be a string, got {kind_of(value)}")
    return check_unicode(path, place, value, what)


def claim_text(path, cid, text, name: str) -> str:
    """A claim's text: a non-blank string."""
    if not isinstance(text, str):
        raise InputError(path, f"claim {cid!r}", f"missing {name}" if text is None else f"{name} must be a string")
    if not text.strip():
        raise InputError(path, f"claim {cid!r}", f"{name} is empty")
    return check_unicode(path, f"claim {cid!r}", text, name)


def claim_label(path, cid, value, *, required: bool, name: str = "'claim_label'") -> str | None:
    """A gold or predicted label: a non-blank string, or None where none is required."""
    if value is None:
        if required:
            raise InputError(path, f"claim {cid!r}", f"missing {name}")
        return None
    if not isinstance(value, str) or not value.strip():
        got = "an empty string" if isinstance(value, str) else kind_of(value)
        raise InputError(path, f"claim {cid!r}", f"{name} must be a non-empty string, got {got}")
    return check_unicode(path, f"claim {cid!r}", value, name)


def evidence_ids(path, cid, value, *, required: bool, name: str = "'evidences'") -> list[str]:
    """A list of passage ids (strings), or [] where none is required."""
    if value is None:
        if required:
            raise InputError(path, f"claim {cid!r}", f"missing {name}")
        return []
    # A string too: it is no list of one id here. (A tuple reaches this only from Python.)
    if not isinstance(value, (list, tuple)):
        raise InputError(path, f"claim {cid!r}", f"{name} must be a list of passage ids (strings), got "
                         f"{kind_of(value)}")
    if not all(isinstance(e, str) and e for e in value):
        raise InputError(path, f"claim {cid!r}", f"{name} must be a list of passage ids (strings)")
    for e in value:
        check_unicode(path, f"claim {cid!r}", e, "an evidence id")
    return list(value)


def prediction(path, cid, entry) -> dict:
    """One prediction in the course shape, validated: ``{"evidences": [ids], "claim_label": str or None}``."""
    if not isinstance(entry, dict):
        raise InputError(path, f"claim {cid!r}", f"expected an object with 'evidences', got {kind_of(entry)}")
    return {"evidences": evidence_ids(path, cid, entry.get("evidences"), required=True),
            "claim_label": claim_label(path, cid, entry.get("claim_label"), required=False)}


def needs_evidence(label: str | None) -> bool:
    # FEVER's NOT ENOUGH INFO claims have no evidence by definition; the course's always do.
    return label != "NOT ENOUGH INFO"


# --------------------------------------------------------------------------- JSONL and CSV claims

FORMATS_HINT = ("claims files are course JSON ({id: {claim_text, claim_label, evidences}}), JSON lines "
                "(.jsonl, one {id, claim, label, evidences} a line; FEVER and Climate-FEVER files are "
                "recognised) or CSV (.csv/.tsv with a header: id, claim, label, evidences); "
                f"choose one with {ref('format')} (course, jsonl, csv, fever, climate-fever)")
# Claim fields found without options (the first present in the first record wins).
DEFAULT_FIELDS = {"id_column": ("id",), "text_column": ("claim", "claim_text"),
                  "label_column": ("label", "claim_label"), "evidence_column": ("evidences",)}


def claim_fields(path, place, present, columns: dict) -> dict:
    """The field of each role: the option's, or the first default present in the first record."""
    fields = {}
    for role, defaults in DEFAULT_FIELDS.items():
        chosen = columns.get(role)
        found = ", ".join(repr(f) for f in present) or "none"
        if chosen is None:
            chosen = next((f for f in defaults if f in present), None)
            if chosen is None and role in ("id_column", "text_column"):
                names = " or ".join(repr(f) for f in defaults)
                raise InputError(path, None, f"no {names} field in the first record ({place}; found {found}); "
                                 f"name it with {ref(role)} ({FORMATS_HINT})", param=role)
        elif chosen not in present and role in ("id_column", "text_column"):
            raise InputError(path, None, f"no field {chosen!r} in the first record ({place}; found {found})",
                             param=role)
        fields[role] = chosen
    return fields


def claims_from_records(path, rows, require_labels: bool) -> list[Claim]:
    """Claims from ``(place, record, fields)`` rows (JSONL objects, CSV rows as dicts)."""
    claims = []
    for place, rec, fields in rows:
        cid = check_id(path, place, rec.get(fields["id_column"], MISSING), fields["id_column"])
        text = claim_text(path, cid, rec.get(fields["text_column"]), repr(fields["text_column"]))
        label_field, evidence_field = fields["label_column"], fields["evidence_column"]
        label = claim_label(path, cid, rec.get(label_field) if label_field else None, required=require_labels,
                            name=repr(label_field or "label"))
        evidences = evidence_ids(path, cid, rec.get(evidence_field) if evidence_field else None,
                                 required=require_labels and needs_evidence(label),
                                 name=repr(evidence_field or "evidences"))
        claims.append(Claim(cid, text, label, evidences))
    return claims


def claim_record(c: Claim, text: str = "claim", label: str = "label", with_id: bool = True) -> dict:
    """A claim as a JSON-lines record (``id``, ``claim``, ``label``, ``evidences``), or under
    other names (the course's ``claim_text``, ``claim_label``, keyed by its id: no ``id``)."""
    rec = {"id": c.id} if with_id else {}
    rec[text] = c.text
    if c.label is not None:
        rec[label] = c.label
    if c.label is not None or c.evidences:
        rec["evidences"] = list(c.evidences)
    return rec
