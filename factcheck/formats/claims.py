"""Claims files and predictions files, in every format a user may hold.

Claims formats (:data:`CLAIM_FORMATS`), chosen by ``format`` or detected
(:func:`detect_claims_format`):

``course``
    The course's JSON object ``{claim-id: {"claim_text", "claim_label", "evidences": [ids]}}``
    (train/dev), or with ``claim_text`` only (test).
``jsonl``
    One object a line: an id, the claim text and, optionally, a label and evidence ids. The
    fields ``id``, ``claim`` or ``claim_text``, ``label`` or ``claim_label``, and ``evidences``
    are found without options; other names are set with ``id_column``, ``text_column``,
    ``label_column`` and ``evidence_column`` (as for the evidence readers).
``csv``
    The same columns, with a header row (``.tsv``: tab-separated). The evidence cell holds
    the ids separated by spaces, or a JSON list when an id contains a space.
``fever``
    FEVER's claims JSONL (:mod:`factcheck.formats.fever`): evidence *sets* kept.
``climate-fever``
    Climate-FEVER's release JSONL (:mod:`factcheck.formats.climate_fever`).

Labels are any non-empty strings: the label set is the training file's
(:func:`label_set`: the course's four, FEVER's three, or the labels found).

Claims files are small (thousands of claims), so the course format is read whole, with
duplicate keys detected (``json.load`` would silently keep the last one); JSON lines go
through the one record primitive (:mod:`factcheck.formats.jsonlines`).
"""

from __future__ import annotations

import csv
import json
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from factcheck.errors import FactcheckWarning, InputError
from factcheck.formats import climate_fever, fever
from factcheck.formats.course_json import TOO_LONG_NUMBER, kind_of
from factcheck.formats.csv_rows import iter_csv
from factcheck.formats.evidence import MISSING, check_id
from factcheck.formats.files import check_unicode, open_binary, write_json_atomic, write_text_atomic
from factcheck.formats.jsonlines import first_record, iter_records

__all__ = ["Claim", "as_claims", "LABELS", "FEVER_LABELS", "CLAIM_FORMATS", "CLAIM_OPTIONS", "label_set",
           "ordered_labels", "detect_claims_format", "read_claims", "read_fever_claims", "read_fever_predictions",
           "prefixed_params",
           "write_claims", "read_predictions", "write_predictions", "PREDICTION_FORMATS"]

LABELS = ("SUPPORTS", "REFUTES", "NOT_ENOUGH_INFO", "DISPUTED")   # the course's (and Climate-FEVER's)
FEVER_LABELS = fever.LABELS                                          # SUPPORTS, REFUTES, NOT ENOUGH INFO
KNOWN_LABEL_SETS = (LABELS, FEVER_LABELS)
CLAIM_FORMATS = ("course", "jsonl", "csv", "fever", "climate-fever")
PREDICTION_FORMATS = ("course", "fever")
# The reader options every claims reader takes (the CLI spells them --claims-format, ...).
CLAIM_OPTIONS = ("format", "id_column", "text_column", "label_column", "evidence_column")
# Fields found without options (first present wins, decided on the first record).
DEFAULT_FIELDS = {"id_column": ("id",), "text_column": ("claim", "claim_text"),
                  "label_column": ("label", "claim_label"), "evidence_column": ("evidences",)}

FORMATS_HINT = ("claims files are course JSON ({id: {claim_text, claim_label, evidences}}), JSON lines "
                "(.jsonl, one {id, claim, label, evidences} a line; FEVER and Climate-FEVER files are "
                "recognised) or CSV (.csv/.tsv with a header: id, claim, label, evidences); "
                "choose one with format (course, jsonl, csv, fever, climate-fever)")


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
        The gold label (None for unlabelled claims): one of the training file's label set
        (:func:`label_set`), e.g. :data:`LABELS` or FEVER's.
    evidences : list of str
        The gold evidence passage ids, in file order (empty for unlabelled claims).
    evidence_sets : list of list of str or None
        FEVER's alternative complete evidence sets (any one set verifies the claim;
        ``evidences`` is their union); None for formats without sets.

    Example
    -------
    >>> Claim("claim-1", "Sea levels are rising.", "SUPPORTS", ["evidence-8"]).label
    'SUPPORTS'
    >>> Claim("75397", "A claim.", "SUPPORTS", ["Page:7", "Other:0"], [["Page:7"], ["Other:0"]]).evidence_sets
    [['Page:7'], ['Other:0']]
    """

    id: str
    text: str
    label: str | None = None
    evidences: list[str] = field(default_factory=list)
    evidence_sets: list[list[str]] | None = None


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


# --------------------------------------------------------------------------- labels

def label_set(labels) -> tuple[str, ...]:
    """The label set of a training file: the classifier's classes, in a fixed order.

    The course's four (in the course's order) when every label is one of them -- even if
    a label is absent, as on small data -- FEVER's three when every label is FEVER's, and
    otherwise the labels found, sorted. A set that mixes a known set with other labels
    (``SUPPORTS`` and ``SUPORTS``) is most likely a typo: a :class:`FactcheckWarning`.

    Example
    -------
    >>> label_set(["REFUTES", "SUPPORTS"])
    ('SUPPORTS', 'REFUTES', 'NOT_ENOUGH_INFO', 'DISPUTED')
    >>> label_set(["NOT ENOUGH INFO", "SUPPORTS"])
    ('SUPPORTS', 'REFUTES', 'NOT ENOUGH INFO')
    >>> label_set(["false", "true"])
    ('false', 'true')
    """
    found = {str(v) for v in labels}
    for known in KNOWN_LABEL_SETS:
        if found <= set(known):
            return known
    mixed = [known for known in KNOWN_LABEL_SETS if len(found & set(known)) >= 2]
    if mixed:
        others = sorted(found - set(mixed[0]))
        warnings.warn(FactcheckWarning(f"labels {', '.join(others)} are not among the known labels "
                                       f"{', '.join(mixed[0])}; using all {len(found)} labels found as the label "
                                       "set (a typo?)"), stacklevel=2)
    return tuple(sorted(found))


def ordered_labels(labels) -> list[str]:
    """``labels`` in the order of their label set (:func:`label_set`'s order), for display."""
    labels = list(labels)
    order = label_set(labels) if labels else ()
    return [label for label in order if label in labels]


# --------------------------------------------------------------------------- reading

def detect_claims_format(path) -> str:
    """The format of a claims file, from its name and its first record.

    ``.csv``/``.tsv`` are CSV. Otherwise the first non-blank line decides: an object
    whose values are all objects is a one-line course file; a record with FEVER's fields
    (``claim`` with ``verifiable`` or ``evidence``) is FEVER, one with Climate-FEVER's
    (``claim_id``, ``claim``) is Climate-FEVER, any other record is generic JSON lines; a
    first line that is not a whole JSON object is a course file (a ``.jsonl`` file then
    fails as JSON lines, at its first line).
    """
    path = Path(path)
    name = path.name.lower().removesuffix(".gz")
    if name.endswith((".csv", ".tsv")):
        return "csv"
    record = first_record(path)
    if record is None:
        return "jsonl" if name.endswith((".jsonl", ".ndjson")) else "course"
    if all(isinstance(v, dict) for v in record.values()) and not name.endswith((".jsonl", ".ndjson")):
        return "course"  # (an empty object too: the course reader says "no claims")
    if fever.is_claim_record(record):
        return "fever"
    if climate_fever.is_claim_record(record):
        return "climate-fever"
    return "jsonl"


def read_claims(path, *, require_labels: bool = False, format: str | None = None, id_column: str | None = None,
                text_column: str | None = None, label_column: str | None = None,
                evidence_column: str | None = None) -> list[Claim]:
    """Claims in file order.

    Parameters
    ----------
    path : str or Path
        A claims file (``.gz`` read transparently).
    require_labels : bool
        Every claim needs a label and gold evidence ids (training and scoring).
    format : {"course", "jsonl", "csv", "fever", "climate-fever"} or None
        None: detected (:func:`detect_claims_format`).
    id_column, text_column, label_column, evidence_column : str or None
        JSONL/CSV field names; None finds ``id``, ``claim``/``claim_text``,
        ``label``/``claim_label`` and ``evidences``.

    Returns
    -------
    list of Claim

    Example
    -------
    >>> claims = read_claims("data/demo/train-claims.json", require_labels=True)
    >>> claims[0].id, claims[0].label, claims[0].evidences
    ('claim-t1', 'SUPPORTS', ['evidence-1'])
    """
    path = Path(path)
    fmt = _check_format(path, format)
    columns = {"id_column": id_column, "text_column": text_column, "label_column": label_column,
               "evidence_column": evidence_column}
    if fmt not in ("jsonl", "csv"):
        for name, value in columns.items():
            if value is not None:
                raise InputError(path, None, f"applies to JSONL and CSV claims only; the {fmt} format's "
                                 "fields are fixed", param=name)
    if fmt == "course":
        claims = _read_course(path, require_labels)
    elif fmt == "jsonl":
        claims = _read_records(path, _jsonl_rows(path, columns), require_labels)
    elif fmt == "csv":
        claims = _read_records(path, _csv_rows(path, columns), require_labels)
    elif fmt == "fever":
        claims = [Claim(cid, text, label, _union(sets), sets) for _p, cid, text, label, sets
                  in fever.iter_claim_records(path)]
    else:
        claims = [Claim(cid, text, label, gold) for _p, cid, text, label, gold
                  in climate_fever.iter_claim_records(path)]
    if not claims:
        raise InputError(path, None, "no claims (empty file)")
    _check_claims(path, claims, require_labels, fmt)
    return claims


def read_fever_claims(path) -> list[Claim]:
    """FEVER claims JSONL: :func:`read_claims` with ``format="fever"``; each claim keeps
    its evidence sets (``Claim.evidence_sets``, ids ``page:line``)."""
    return read_claims(path, format="fever")


def read_fever_predictions(path, labels=None) -> dict[str, dict]:
    """FEVER predictions JSONL: :func:`read_predictions` with ``format="fever"``
    (``{id: {"evidences": ["page:line", ...], "claim_label"}}``)."""
    return read_predictions(path, labels, format="fever")


@contextmanager
def prefixed_params(prefix: str = "claims_"):
    """Inside a function that takes the claims reader's options under another name
    (``run_pipeline(claims_format=...)``), an error about ``format`` names ``claims_format``."""
    try:
        yield
    except InputError as exc:
        if exc.param in CLAIM_OPTIONS:
            raise InputError(exc.path, exc.place, exc.message, param=prefix + exc.param) from None
        raise


def _check_format(path: Path, fmt: str | None) -> str:
    if fmt is None:
        return detect_claims_format(path)
    if fmt not in CLAIM_FORMATS:
        raise InputError(path, None, f"unknown claims format {fmt!r}; expected one of {', '.join(CLAIM_FORMATS)}",
                         param="format")
    return fmt


def _union(sets) -> list[str]:
    return list(dict.fromkeys(e for s in sets or () for e in s))


def _check_claims(path, claims, require_labels: bool, fmt: str) -> None:
    """What every format shares: distinct ids and, where required, labels. (The course,
    JSONL and CSV readers check required evidence themselves: they know absent from empty.)"""
    seen = {}
    for c in claims:
        if c.id in seen:
            raise InputError(path, f"claim {c.id!r}", f"duplicate claim id (first seen as claim {seen[c.id]})")
        seen[c.id] = len(seen) + 1
        if require_labels and c.label is None:
            name = {"course": "'claim_label'", "fever": "'label'", "climate-fever": "'claim_label'"}.get(fmt, "label")
            raise InputError(path, f"claim {c.id!r}", f"missing {name} (labelled claims are needed here)")


def _must_have_evidence(label: str | None) -> bool:
    # FEVER's NOT ENOUGH INFO claims have no evidence by definition; the course's always do.
    return label != "NOT ENOUGH INFO"


# ---------------------------------------------------------------- course JSON

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
        hint = ""
        if exc.msg == "Extra data" and exc.lineno > 1:  # a second JSON value on a later line
            hint = (" (one JSON value a line is JSON lines: name the file .jsonl or choose "
                    "format jsonl, fever or climate-fever)")
        raise InputError(path, f"line {exc.lineno}, column {exc.colno}", f"invalid JSON: {exc.msg}{hint}") from None
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


def _evidence_list(path, cid, value, *, required: bool, name: str = "'evidences'") -> list[str]:
    if value is None:
        if required:
            raise InputError(path, f"claim {cid!r}", f"missing {name}")
        return []
    if not isinstance(value, list) or not all(isinstance(e, str) and e for e in value):
        raise InputError(path, f"claim {cid!r}", f"{name} must be a list of passage ids (strings)")
    for e in value:
        check_unicode(path, f"claim {cid!r}", e, "an evidence id")
    return list(value)


def _label(path, cid, value, *, required: bool, name: str = "'claim_label'") -> str | None:
    if value is None:
        if required:
            raise InputError(path, f"claim {cid!r}", f"missing {name}")
        return None
    if not isinstance(value, str) or not value.strip():
        got = "an empty string" if isinstance(value, str) else kind_of(value)
        raise InputError(path, f"claim {cid!r}", f"{name} must be a non-empty string, got {got}")
    check_unicode(path, f"claim {cid!r}", value, name)
    return value


def _read_course(path: Path, require_labels: bool = False) -> list[Claim]:
    obj = _load_object(path, "claims")
    claims = []
    for cid, entry in obj.items():
        if not isinstance(entry, dict):
            looks_like_record = any(k in obj for k in ("claim", "claim_text", "claim_id"))
            raise InputError(path, f"claim {cid!r}", "expected an object with 'claim_text'"
                             + (f"; this looks like one JSON-lines record ({FORMATS_HINT})" if looks_like_record
                                else f" ({FORMATS_HINT})"))
        text = _claim_text(path, cid, entry.get("claim_text"), "'claim_text'")
        label = _label(path, cid, entry.get("claim_label"), required=require_labels)
        evidences = _evidence_list(path, cid, entry.get("evidences"),
                                   required=require_labels and _must_have_evidence(label))
        claims.append(Claim(cid, text, label, evidences))
    return claims


def _claim_text(path, cid, text, name: str) -> str:
    if not isinstance(text, str):
        what = f"missing {name}" if text is None else f"{name} must be a string"
        raise InputError(path, f"claim {cid!r}", what)
    if not text.strip():
        raise InputError(path, f"claim {cid!r}", f"{name} is empty")
    check_unicode(path, f"claim {cid!r}", text, name)
    return text


# ---------------------------------------------------------------- JSONL and CSV

def _resolve_fields(path, place, present, columns: dict) -> dict:
    """Field name for each role: the option's, or the first default present in the first record."""
    fields = {}
    for role, defaults in DEFAULT_FIELDS.items():
        chosen = columns.get(role)
        if chosen is None:
            chosen = next((f for f in defaults if f in present), None)
            if chosen is None and role in ("id_column", "text_column"):
                names = " or ".join(repr(f) for f in defaults)
                found = ", ".join(repr(f) for f in present) or "none"
                raise InputError(path, None, f"no {names} field in the first record ({place}; found {found}); "
                                 f"name it with {role} ({FORMATS_HINT})", param=role)
        elif chosen not in present and role in ("id_column", "text_column"):
            found = ", ".join(repr(f) for f in present) or "none"
            raise InputError(path, None, f"no field {chosen!r} in the first record ({place}; found {found})",
                             param=role)
        fields[role] = chosen
    return fields


def _jsonl_rows(path: Path, columns: dict):
    """``(place, field -> value, fields)`` for each record; fields resolved on the first."""
    fields = None
    for place, obj in iter_records(path, what="a JSON object (one claim a line)"):
        if fields is None:
            fields = _resolve_fields(path, place, list(obj), columns)
        yield place, obj, fields


def _csv_rows(path: Path, columns: dict):
    rows = iter_csv(path)
    place, header = next(rows)
    fields = _resolve_fields(path, place, header, columns)
    for place, row in rows:
        record = dict(zip(header, row))
        for role in ("label_column", "evidence_column"):
            f = fields[role]
            if f is not None and record.get(f) == "":
                record[f] = None  # an empty cell: no label / no evidence
        ev = fields["evidence_column"]
        if ev is not None and record.get(ev) is not None:
            record[ev] = _evidence_cell(path, place, record[ev])
        yield place, record, fields


def _evidence_cell(path, place, cell: str):
    """Evidence ids in a CSV cell: separated by whitespace, or a JSON list of strings."""
    if cell.lstrip().startswith("["):
        try:
            return json.loads(cell)
        except ValueError:
            raise InputError(path, place, "the evidence cell starts with '[' but is not a JSON list") from None
    return cell.split()


def _read_records(path: Path, rows, require_labels: bool) -> list[Claim]:
    claims = []
    for place, rec, fields in rows:
        cid = check_id(path, place, rec.get(fields["id_column"], MISSING), fields["id_column"])
        check_unicode(path, place, cid, "the claim id")
        text = _claim_text(path, cid, rec.get(fields["text_column"]), repr(fields["text_column"]))
        label_field, evidence_field = fields["label_column"], fields["evidence_column"]
        label = _label(path, cid, rec.get(label_field) if label_field else None, required=require_labels,
                       name=repr(label_field or "label"))
        evidences = _evidence_list(path, cid, rec.get(evidence_field) if evidence_field else None,
                                   required=require_labels and _must_have_evidence(label),
                                   name=repr(evidence_field or "evidences"))
        claims.append(Claim(cid, text, label, evidences))
    return claims


# --------------------------------------------------------------------------- writing claims

def write_claims(path, claims: list[Claim], format: str = "course") -> None:
    """Claims in ``format`` (course, jsonl, csv, fever, climate-fever), written atomically.

    What a format cannot hold is the caller's to report (:mod:`factcheck.formats.convert`
    lists it); this function writes what it can. FEVER needs ``page:line`` evidence ids.
    """
    path = Path(path)
    if format == "course":
        out = {}
        for c in claims:
            entry = {"claim_text": c.text}
            if c.label is not None:
                entry["claim_label"] = c.label
            if c.label is not None or c.evidences:
                entry["evidences"] = list(c.evidences)
            out[c.id] = entry
        write_json_atomic(path, out)
    elif format == "jsonl":
        lines = []
        for c in claims:
            rec = {"id": c.id, "claim": c.text}
            if c.label is not None:
                rec["label"] = c.label
            if c.label is not None or c.evidences:
                rec["evidences"] = list(c.evidences)
            lines.append(json.dumps(rec, ensure_ascii=False) + "\n")
        write_text_atomic(path, "".join(lines))
    elif format == "csv":
        import io
        buf = io.StringIO()
        w = csv.writer(buf, delimiter="\t" if path.name.lower().endswith(".tsv") else ",", lineterminator="\n")
        w.writerow(["id", "claim", "label", "evidences"])
        for c in claims:
            spaced = any(not e or any(ch.isspace() for ch in e) for e in c.evidences)
            cell = json.dumps(c.evidences, ensure_ascii=False) if spaced else " ".join(c.evidences)
            w.writerow([c.id, c.text, c.label or "", cell])
        write_text_atomic(path, buf.getvalue())
    elif format == "fever":
        fever.write_claims(path, claims)
    elif format == "climate-fever":
        climate_fever.write_claims(path, claims)
    else:
        raise InputError(path, None, f"unknown claims format {format!r}; expected one of {', '.join(CLAIM_FORMATS)}",
                         param="format")


# --------------------------------------------------------------------------- predictions

def read_predictions(path, labels=None, format: str | None = None) -> dict[str, dict]:
    """``{claim-id: {"evidences": [...], "claim_label": optional}}``, validated.

    Parameters
    ----------
    path : str or Path
        Course-format predictions (``{id: {"claim_label", "evidences"}}``) or FEVER's
        predictions JSONL (``predicted_label``, ``predicted_evidence``; ids ``page:line``).
    labels : sequence of str or None
        The labels a prediction may carry (the ground truth's label set); a label outside
        it is an error. None accepts any label.
    format : {"course", "fever"} or None
        None: FEVER when the first record has ``predicted_label``, else course.

    Returns
    -------
    dict of str to dict
        Claim id -> ``{"evidences": [...], "claim_label": str or None}``, in file order
        (FEVER's ``[page, line]`` pairs as ``page:line`` ids).

    Example
    -------
    >>> predictions = read_predictions("out/demo/dev-claims-predictions.json")   # doctest: +SKIP
    >>> predictions["claim-d1"]["claim_label"]                                 # doctest: +SKIP
    'SUPPORTS'
    """
    path = Path(path)
    if format is None:
        first = first_record(path)
        format = "fever" if first is not None and ("predicted_label" in first or "predicted_evidence" in first) \
            else "course"
    if format not in PREDICTION_FORMATS:
        raise InputError(path, None, f"unknown predictions format {format!r}; expected one of "
                         f"{', '.join(PREDICTION_FORMATS)}", param="format")
    if format == "fever":
        out = fever.read_predictions(path)
    else:
        obj = _load_object(path, "predictions")
        out = {}
        for cid, entry in obj.items():
            if not isinstance(entry, dict):
                raise InputError(path, f"claim {cid!r}", "expected an object with 'evidences'")
            evidences = _evidence_list(path, cid, entry.get("evidences"), required=True)
            label = _label(path, cid, entry.get("claim_label"), required=False)
            out[cid] = {"evidences": evidences, "claim_label": label}
    if labels is not None:
        allowed = set(labels)
        for cid, p in out.items():
            if p["claim_label"] is not None and p["claim_label"] not in allowed:
                raise InputError(path, f"claim {cid!r}", f"unknown label {p['claim_label']!r}; "
                                 f"expected one of {', '.join(labels)}")
    return out


def write_predictions(path, claims: list[Claim], evidences: dict[str, list[str]],
                      labels: dict[str, str] | None = None, format: str = "course") -> None:
    """Write predictions, claims in input order, atomically: the course/leaderboard format,
    or FEVER's predictions JSONL.

    Parameters
    ----------
    path : str or Path
        The file to write.
    claims : list of Claim
        The claims, in the order to write them (their texts are written too, in the course format).
    evidences : dict of str to list of str
        Claim id -> evidence ids (``page:line`` for FEVER's format).
    labels : dict of str to str or None
        Claim id -> predicted label; None writes no labels (retrieval only).
    format : {"course", "fever"}, default "course"
        ``"fever"``: ``{"id", "predicted_label", "predicted_evidence": [[page, line], ...]}`` lines.

    Example
    -------
    >>> claims = [Claim("claim-1", "Sea levels are rising.")]
    >>> write_predictions("out/pred.json", claims, {"claim-1": ["evidence-8"]}, {"claim-1": "SUPPORTS"})
    >>> read_predictions("out/pred.json")
    {'claim-1': {'evidences': ['evidence-8'], 'claim_label': 'SUPPORTS'}}
    """
    if format == "fever":
        fever.write_predictions(Path(path), claims, evidences, labels)
        return
    if format != "course":
        raise InputError(path, None, f"unknown predictions format {format!r}; expected one of "
                         f"{', '.join(PREDICTION_FORMATS)}", param="format")
    out = {}
    for c in claims:
        entry = {"claim_text": c.text}
        if labels is not None:
            entry["claim_label"] = labels[c.id]
        entry["evidences"] = list(evidences[c.id])
        out[c.id] = entry
    write_json_atomic(Path(path), out)
