"""Course claim files and prediction files.

Claims: ``{claim-id: {"claim_text": str, "claim_label": LABEL, "evidences": [ids]}}``
(train/dev), or with ``claim_text`` only (test). Predictions use the same shape; the
leaderboard format requires a label and at least one evidence id per claim.

These files are small (thousands of claims), so they are read whole, with duplicate keys
detected (``json.load`` would silently keep the last one).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from factcheck.errors import InputError
from factcheck.formats.course_json import TOO_LONG_NUMBER
from factcheck.formats.files import check_unicode, open_binary, write_json_atomic

LABELS = ("SUPPORTS", "REFUTES", "NOT_ENOUGH_INFO", "DISPUTED")


@dataclass
class Claim:
    """One claim: its id and text, and for labelled claims the gold label and evidence ids.

    Parameters
    ----------
    id : str
        The claim's id (``claim-1937``).
    text : str
        The claim.
    label : str or None
        The gold label, one of :data:`LABELS` (None for unlabelled claims).
    evidences : list of str
        The gold evidence passage ids (empty for unlabelled claims).

    Example
    -------
    >>> Claim("claim-1", "Sea levels are rising.", "SUPPORTS", ["evidence-8"]).label
    'SUPPORTS'
    """

    id: str
    text: str
    label: str | None = None
    evidences: list[str] = field(default_factory=list)


def as_claims(claims) -> list[Claim]:
    """Claims from what a caller has: one string, or a sequence of strings and
    :class:`Claim` objects. A string becomes a claim whose id is its position (``"0"``,
    ``"1"``, ...), so results can be looked up in input order.

    Example
    -------
    >>> [c.id for c in as_claims(["Sea levels rise.", "CO2 is a gas."])]
    ['0', '1']
    """
    if isinstance(claims, (str, Claim)):
        claims = [claims]
    out = []
    for i, c in enumerate(claims):
        if isinstance(c, str):
            c = Claim(str(i), c)
        elif not isinstance(c, Claim):
            raise TypeError(f"claims[{i}]: expected a str or a Claim, got {type(c).__name__}")
        out.append(c)
    return out


def _load_object(path: Path, what: str) -> dict:
    path = Path(path)
    with open_binary(path) as fh:
        raw = fh.read()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(path, f"byte {exc.start}", "invalid UTF-8") from None
    if not text.strip():
        raise InputError(path, None, f"empty file (expected a JSON object of {what})")

    def no_duplicates(pairs):
        obj = {}
        for k, v in pairs:
            if k in obj:
                raise _Duplicate(k)
            obj[k] = v
        return obj

    try:
        obj = json.loads(text, object_pairs_hook=no_duplicates)
    except json.JSONDecodeError as exc:
        raise InputError(path, f"line {exc.lineno}, column {exc.colno}", f"invalid JSON: {exc.msg}") from None
    except ValueError:  # what json raises for an integer of over 4,300 digits
        raise InputError(path, None, f"invalid JSON: {TOO_LONG_NUMBER}") from None
    except _Duplicate as dup:
        raise InputError(path, f"key {dup.key!r}", "duplicate key") from None
    except RecursionError:
        raise InputError(path, None, "JSON nested too deeply") from None
    if not isinstance(obj, dict):
        raise InputError(path, "top level", f"expected a JSON object of {what}, got {type(obj).__name__}")
    if not obj:
        raise InputError(path, None, f"no {what} (empty JSON object)")
    for key in obj:
        if not key:
            raise InputError(path, "key ''", "empty claim id")
        check_unicode(path, f"claim {key!r}", key, "the claim id")
    return obj


class _Duplicate(Exception):
    def __init__(self, key):
        self.key = key


def _evidence_list(path, cid, value, *, required: bool) -> list[str]:
    if value is None:
        if required:
            raise InputError(path, f"claim {cid!r}", "missing 'evidences'")
        return []
    if not isinstance(value, list) or not all(isinstance(e, str) and e for e in value):
        raise InputError(path, f"claim {cid!r}", "'evidences' must be a list of passage ids (strings)")
    for e in value:
        check_unicode(path, f"claim {cid!r}", e, "an evidence id")
    return list(value)


def _label(path, cid, value, *, required: bool) -> str | None:
    if value is None:
        if required:
            raise InputError(path, f"claim {cid!r}", "missing 'claim_label'")
        return None
    if value not in LABELS:
        raise InputError(path, f"claim {cid!r}",
                         f"unknown label {value!r}; expected one of {', '.join(LABELS)}")
    return value


def read_claims(path, *, require_labels: bool = False) -> list[Claim]:
    """Claims in file order, from a course claims file.

    Parameters
    ----------
    path : str or Path
        ``{claim-id: {"claim_text": ..., "claim_label": ..., "evidences": [...]}}`` (JSON,
        optionally gzipped); duplicate ids are an error.
    require_labels : bool, default False
        Every claim needs a label and evidence ids (train/dev files).

    Returns
    -------
    list of Claim

    Example
    -------
    >>> claims = read_claims("data/demo/dev-claims.json", require_labels=True)
    >>> claims[0].id, claims[0].label in LABELS
    ('claim-d1', True)
    """
    path = Path(path)
    obj = _load_object(path, "claims")
    claims = []
    for cid, entry in obj.items():
        if not isinstance(entry, dict):
            raise InputError(path, f"claim {cid!r}", "expected an object with 'claim_text'")
        text = entry.get("claim_text")
        if not isinstance(text, str):
            what = "missing 'claim_text'" if text is None else "'claim_text' must be a string"
            raise InputError(path, f"claim {cid!r}", what)
        if not text.strip():
            raise InputError(path, f"claim {cid!r}", "'claim_text' is empty")
        check_unicode(path, f"claim {cid!r}", text, "'claim_text'")
        label = _label(path, cid, entry.get("claim_label"), required=require_labels)
        evidences = _evidence_list(path, cid, entry.get("evidences"), required=require_labels)
        claims.append(Claim(cid, text, label, evidences))
    return claims


def read_predictions(path) -> dict[str, dict]:
    """A predictions file (leaderboard format), validated.

    Parameters
    ----------
    path : str or Path
        ``{claim-id: {"evidences": [...], "claim_label": optional}}``.

    Returns
    -------
    dict of str to dict
        Claim id -> ``{"evidences": [...], "claim_label": str or None}``, in file order.

    Example
    -------
    >>> predictions = read_predictions("out/demo/dev-claims-predictions.json")   # doctest: +SKIP
    >>> predictions["claim-d1"]["claim_label"]                                 # doctest: +SKIP
    'SUPPORTS'
    """
    path = Path(path)
    obj = _load_object(path, "predictions")
    out = {}
    for cid, entry in obj.items():
        if not isinstance(entry, dict):
            raise InputError(path, f"claim {cid!r}", "expected an object with 'evidences'")
        evidences = _evidence_list(path, cid, entry.get("evidences"), required=True)
        label = _label(path, cid, entry.get("claim_label"), required=False)
        out[cid] = {"evidences": evidences, "claim_label": label}
    return out


def write_predictions(path, claims: list[Claim], evidences: dict[str, list[str]],
                      labels: dict[str, str] | None = None) -> None:
    """Write predictions in the course/leaderboard format, claims in input order, atomically.

    Parameters
    ----------
    path : str or Path
        The file to write.
    claims : list of Claim
        The claims, in the order to write them (their texts are written too).
    evidences : dict of str to list of str
        Claim id -> evidence ids.
    labels : dict of str to str or None
        Claim id -> predicted label; None writes no labels (retrieval only).

    Example
    -------
    >>> claims = [Claim("claim-1", "Sea levels are rising.")]
    >>> write_predictions("out/pred.json", claims, {"claim-1": ["evidence-8"]}, {"claim-1": "SUPPORTS"})
    >>> read_predictions("out/pred.json")
    {'claim-1': {'evidences': ['evidence-8'], 'claim_label': 'SUPPORTS'}}
    """
    out = {}
    for c in claims:
        entry = {"claim_text": c.text}
        if labels is not None:
            entry["claim_label"] = labels[c.id]
        entry["evidences"] = list(evidences[c.id])
        out[c.id] = entry
    write_json_atomic(Path(path), out)
