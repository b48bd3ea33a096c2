"""Claims and predictions files: which format unit reads or writes one (``format``, or
detected from the name and the first record), the label sets (docs/formats.md), and the
``.explain.json`` sidecar written next to predictions: the retriever's spec and
``"claims": {claim id: record}`` (docs/explanations.md).
"""

from __future__ import annotations

import warnings
from contextlib import contextmanager
from pathlib import Path

from factcheck.errors import FactcheckWarning, InputError, as_path
from factcheck.formats import climate_fever, course, csvfile, fever, jsonl
from factcheck.formats.common import Claim, prediction
from factcheck.formats.files import JsonObjectStream, atomic_path
from factcheck.formats.records import MAX_QUERY_CHARS, check_length, first_record, length_cap, shown

__all__ = ["Claim", "as_claims", "LABELS", "FEVER_LABELS", "CLAIM_FORMATS", "CLAIM_OPTIONS", "label_set",
           "ordered_labels", "detect_claims_format", "read_claims", "prefixed_params", "write_claims",
           "read_predictions", "check_predictions", "accepted_labels", "write_predictions", "PREDICTION_FORMATS",
           "explained_predictions_writer", "explanations_path", "predictions_format_of", "write_explained_predictions"]

LABELS = ("SUPPORTS", "REFUTES", "NOT_ENOUGH_INFO", "DISPUTED")   # the course's (and Climate-FEVER's)
FEVER_LABELS = fever.LABELS                                          # SUPPORTS, REFUTES, NOT ENOUGH INFO
KNOWN_LABEL_SETS = (LABELS, FEVER_LABELS)
UNITS = {unit.NAME: unit for unit in (course, jsonl, csvfile, fever, climate_fever)}
CLAIM_FORMATS = tuple(UNITS)
PREDICTION_UNITS = {unit.NAME: unit for unit in (course, fever)}
PREDICTION_FORMATS = tuple(PREDICTION_UNITS)
# The reader options every claims reader takes (the CLI spells them --claims-format, ...).
CLAIM_OPTIONS = ("format", "id_column", "text_column", "label_column", "evidence_column")


def as_claims(claims) -> list[Claim]:
    """Claims from what a caller has: one string, or a sequence of strings and
    :class:`Claim` objects; a string's id is its position (``"0"``, ``"1"``, ...)."""
    if isinstance(claims, (str, Claim)):
        claims = [claims]
    elif isinstance(claims, (bytes, bytearray)) or not hasattr(claims, "__iter__"):
        raise TypeError(f"claims: expected a str, a Claim or a list of them, got {type(claims).__name__}")
    out = []
    for i, c in enumerate(claims):
        if isinstance(c, str):
            c = Claim(str(i), c)
        elif not isinstance(c, Claim):
            raise TypeError(f"claims[{i}]: expected a str or a Claim, got {type(c).__name__}")
        out.append(c)
    return out


def label_set(labels) -> tuple[str, ...]:
    """The label set of a training file: the course's four or FEVER's three when every label
    is among them, otherwise the labels found, sorted (with a :class:`FactcheckWarning`
    when they mix a known set with others: a typo?).

    Example
    -------
    >>> label_set(["REFUTES", "SUPPORTS"])
    ('SUPPORTS', 'REFUTES', 'NOT_ENOUGH_INFO', 'DISPUTED')
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


def detect_claims_format(path) -> str:
    """The format of a claims file: CSV by its name, else what its first record is (a first
    line that is not a whole JSON object: course)."""
    path = Path(path)
    name = path.name.lower().removesuffix(".gz")
    if name.endswith(csvfile.SUFFIXES):
        return "csv"
    record = first_record(path)
    if record is None:
        return "jsonl" if name.endswith((".jsonl", ".ndjson")) else "course"
    return next(unit.NAME for unit in (course, fever, climate_fever, jsonl) if unit.is_claims(record, name))


def read_claims(path, *, require_labels: bool = False, format: str | None = None, id_column: str | None = None,
                text_column: str | None = None, label_column: str | None = None,
                evidence_column: str | None = None, max_claim_chars: int | None = None) -> list[Claim]:
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
    max_claim_chars : int or None
        A longer claim text is an error; None: :data:`~factcheck.formats.records.MAX_QUERY_CHARS`.

    Returns
    -------
    list of Claim

    Example
    -------
    >>> claims = read_claims("data/demo/train-claims.json", require_labels=True)
    >>> claims[0].id, claims[0].label, claims[0].evidences
    ('claim-t1', 'SUPPORTS', ['evidence-1'])
    """
    path = as_path(path, "path")
    unit = _unit(UNITS, path, detect_claims_format(path) if format is None else format)
    columns = {"id_column": id_column, "text_column": text_column, "label_column": label_column,
               "evidence_column": evidence_column}
    if unit.NAME not in ("jsonl", "csv"):
        for name, value in columns.items():
            if value is not None:
                raise InputError(path, None, f"applies to JSONL and CSV claims only; the {unit.NAME} format's "
                                 "fields are fixed", param=name)
    max_claim_chars = length_cap(max_claim_chars, "max_claim_chars", MAX_QUERY_CHARS)
    claims = unit.read_claims(path, require_labels, columns)
    if not claims:
        raise InputError(path, None, "no claims (empty file)")
    seen = {}
    for c in claims:
        if c.id in seen:
            raise InputError(path, f"claim {c.id!r}", f"duplicate claim id (first seen as claim {seen[c.id]})")
        seen[c.id] = len(seen) + 1
        check_length(path, f"claim {shown(c.id)}", c.text, max_claim_chars, "max_claim_chars")
        if require_labels and c.label is None:
            raise InputError(path, f"claim {c.id!r}", f"missing {getattr(unit, 'LABEL_FIELD', 'label')} (labelled "
                             "claims are needed here)")
    return claims


@contextmanager
def prefixed_params(prefix: str = "claims_"):
    """An error about ``format`` inside names ``claims_format`` (the caller's name for it)."""
    try:
        yield
    except InputError as exc:
        raise exc.renamed({o: prefix + o for o in CLAIM_OPTIONS}) from None


def write_claims(path, claims: list[Claim], format: str = "course") -> None:
    """Claims in ``format``, written atomically (what it cannot hold is the caller's to report)."""
    _unit(UNITS, path, format).write_claims(Path(path), claims)


def _unit(units: dict, path, format, what: str = "claims"):
    if format not in units:
        raise InputError(path, None, f"unknown {what} format {format!r}; expected one of {', '.join(units)}",
                         param="format")
    return units[format]


def read_predictions(path, labels=None, format: str | None = None) -> dict[str, dict]:
    """``{claim-id: {"evidences": [...], "claim_label": str or None}}`` in file order, validated.

    Parameters
    ----------
    path : str or Path
        Course-format predictions (``{id: {"claim_label", "evidences"}}``) or FEVER's
        predictions JSONL (``[page, line]`` pairs read as ``page:line`` ids).
    labels : sequence of str or None
        The labels a prediction may carry (the ground truth's label set); None accepts any.
    format : {"course", "fever"} or None
        None: FEVER when the first record has ``predicted_label`` or ``predicted_evidence``.

    Returns
    -------
    dict of str to dict
        Claim id -> ``{"evidences": [...], "claim_label": str or None}``, in file order.

    Example
    -------
    >>> read_predictions("out/demo/dev-claims-predictions.json")["claim-d1"]["claim_label"]  # doctest: +SKIP
    'SUPPORTS'
    """
    path = as_path(path, "path")
    if format is None:
        first = first_record(path)
        format = "fever" if first is not None and fever.is_predictions(first) else "course"
    out = _unit(PREDICTION_UNITS, path, format, "predictions").read_predictions(path)
    _check_predicted_labels(out, labels, path)
    return out


def check_predictions(predictions, labels=None, source=None) -> dict[str, dict]:
    """Predictions given in Python, validated as :func:`read_predictions` validates a file's
    (the same checks, the same words): ``{claim-id: {"evidences": [...], "claim_label": str or None}}``.

    Parameters
    ----------
    predictions : dict of str to dict
        Claim id -> ``{"evidences": [ids], "claim_label": str}`` (the label optional). A
        string for ``evidences`` is refused, as in a file: a prediction's evidence is a list.
    labels : sequence of str or None
        The labels a prediction may carry; None accepts any.
    source : str or None
        The file the predictions came from, named in errors; None names the parameter ``predictions``.

    Example
    -------
    >>> check_predictions({"c1": {"evidences": "evidence-3"}})
    Traceback (most recent call last):
    ...
    factcheck.errors.InputError: predictions claim 'c1': 'evidences' must be a list of passage ids (strings), got a string
    """
    if not isinstance(predictions, dict):
        raise InputError(source, None, f"expected a dict of claim id -> prediction, got {type(predictions).__name__}",
                         param=None if source else "predictions")
    try:
        out = {}
        for cid, entry in predictions.items():
            if not isinstance(cid, str) or not cid:
                raise InputError(source, f"key {cid!r}", "a claim id must be a non-empty string")
            out[cid] = prediction(source, cid, entry)
        _check_predicted_labels(out, labels, source)
    except InputError as exc:
        if source is not None:
            raise
        raise InputError(None, exc.place, exc.message, param="predictions") from None
    return out


def accepted_labels(labels) -> tuple[str, ...]:
    """The labels a prediction scored against ground truth with these gold labels may carry:
    every known label set that holds them all, in order (SUPPORTS and REFUTES alone fit the
    course's and FEVER's, so NOT ENOUGH INFO in either spelling), otherwise :func:`label_set`.

    Example
    -------
    >>> accepted_labels(["SUPPORTS", "REFUTES", "DISPUTED"])
    ('SUPPORTS', 'REFUTES', 'NOT_ENOUGH_INFO', 'DISPUTED')
    >>> accepted_labels(["REFUTES", "SUPPORTS"])
    ('SUPPORTS', 'REFUTES', 'NOT_ENOUGH_INFO', 'DISPUTED', 'NOT ENOUGH INFO')
    """
    found = {str(v) for v in labels}
    fits = [known for known in KNOWN_LABEL_SETS if found <= set(known)]
    return tuple(dict.fromkeys(label for known in fits for label in known)) if fits else label_set(found)


def _check_predicted_labels(predictions: dict, labels, path) -> None:
    if labels is None:
        return
    allowed = set(labels)
    for cid, p in predictions.items():
        if p["claim_label"] is not None and p["claim_label"] not in allowed:
            raise InputError(path, f"claim {cid!r}", f"unknown label {p['claim_label']!r}; "
                             f"expected one of {', '.join(labels)}")


def write_predictions(path, predictions: dict[str, dict], claims: list[Claim] | None = None,
                      format: str = "course") -> None:
    """Write predictions atomically: what :func:`read_predictions` returns and
    ``Verdicts.predictions()`` gives, so a file read can be written again.

    Parameters
    ----------
    path : str or Path
        The file to write.
    predictions : dict of str to dict
        Claim id -> ``{"evidences": [ids], "claim_label": str or None}`` (``page:line`` ids for
        FEVER's format), validated as :func:`check_predictions` does. Labels on every claim or
        on none (retrieval only: no label is written).
    claims : list of Claim or None
        The order to write and, in the course format, each ``claim_text``; every claim needs a
        prediction. None: the predictions' own order, without ``claim_text``.
    format : {"course", "fever"}, default "course"
        ``"fever"``: ``{"id", "predicted_label", "predicted_evidence": [[page, line], ...]}`` lines.

    Example
    -------
    >>> claims = [Claim("claim-1", "Sea levels are rising.")]
    >>> write_predictions("out/pred.json", {"claim-1": {"evidences": ["evidence-8"], "claim_label": "SUPPORTS"}},
    ...                   claims)
    >>> read_predictions("out/pred.json")
    {'claim-1': {'evidences': ['evidence-8'], 'claim_label': 'SUPPORTS'}}
    """
    predictions = check_predictions(predictions)
    unit = _unit(PREDICTION_UNITS, path, format, "predictions")
    if claims is None:
        claims, texts = [Claim(cid, "") for cid in predictions], False
    else:
        claims, texts = list(claims), True
        missing = next((c.id for c in claims if c.id not in predictions), None)
        if missing is not None:
            raise InputError(None, f"claim {missing!r}", "has no prediction", param="predictions")
    given = [p["claim_label"] is not None for p in predictions.values()]
    if any(given) and not all(given):
        raise InputError(None, None, "some predictions have a label and others not", param="predictions")
    evidences = {cid: p["evidences"] for cid, p in predictions.items()}
    labels = {cid: p["claim_label"] for cid, p in predictions.items()} if any(given) else None
    with atomic_path(Path(path)) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as fh:
        stream = course.PredictionsStream(fh, path, texts) if unit is course else unit.PredictionsStream(fh, Path(path))
        for c in claims:
            stream.add(c, evidences[c.id], labels)
        stream.close()


def explanations_path(predictions: Path) -> Path:
    """The sidecar's path for a predictions file: ``dev.json`` -> ``dev.explain.json``."""
    name = predictions.name
    stem = name[:-5] if name.endswith(".json") else name[:-6] if name.endswith(".jsonl") else name
    return predictions.with_name(stem + ".explain.json")


def predictions_format_of(out: Path, predictions_format: str | None = None) -> str:
    """The format predictions are written in: ``predictions_format``, else FEVER's for a
    ``.jsonl`` name and the course's otherwise."""
    return predictions_format or ("fever" if Path(out).name.lower().endswith(".jsonl") else "course")


def write_explained_predictions(out: Path, claims: list[Claim], evidences: dict[str, list[str]],
                                explanations: dict[str, dict], retriever_spec: dict,
                                labels: dict[str, str] | None = None, predictions_format: str | None = None) -> Path:
    """Predictions (:func:`~factcheck.formats.claims.write_predictions`; ``predictions_format``
    None: FEVER's for a ``.jsonl`` name, else course) and their sidecar, whose path it returns
    (:func:`explained_predictions_writer` with one batch)."""
    with explained_predictions_writer(out, retriever_spec, predictions_format) as writer:
        writer.write(claims, evidences, explanations, labels)
    return explanations_path(Path(out))


class _Batches:
    def __init__(self, out: Path, fmt: str, files: tuple, sidecar: JsonObjectStream, predictions):
        self.out, self.fmt, self.files, self.sidecar, self.predictions = out, fmt, files, sidecar, predictions

    def write(self, claims: list[Claim], evidences: dict[str, list[str]], explanations: dict[str, dict],
              labels: dict[str, str] | None = None) -> None:
        """The next claims, in order, with their evidence ids, sidecar records and labels."""
        if self.fmt == "fever":  # every id must be page:line: refuse before writing the batch
            for c in claims:
                for e in evidences[c.id]:
                    if fever.split_sentence_id(e) is None:
                        raise InputError(self.out, f"claim {c.id!r}", f"evidence id {e!r} is not a FEVER sentence "
                                         "id (page:line): the knowledge source is not FEVER's; write the course format")
        for c in claims:
            self.sidecar.add(c.id, explanations[c.id])
            self.predictions.add(c, evidences[c.id], labels)
        for fh in self.files:  # on disk now: a batch is never held past its write
            fh.flush()


@contextmanager
def explained_predictions_writer(out: Path, retriever_spec: dict, predictions_format: str | None = None):
    """``with explained_predictions_writer(out, spec) as w: w.write(claims, evidences,
    explanations, labels)`` batch after batch: predictions and sidecar are written under
    temporary names as the batches come (never held whole) and renamed when the block ends
    without an error, the sidecar first (on an error, neither file is touched); if the
    predictions' rename fails the new sidecar is removed: predictions never exist without
    their explanations, nor new explanations beside old predictions."""
    out = Path(out)
    sidecar = explanations_path(out)
    for dest in (out, sidecar):
        if dest.is_dir():
            raise InputError(dest, None, "is a directory, expected a file name")
    fmt = predictions_format_of(out, predictions_format)
    if fmt not in ("course", "fever"):
        raise InputError(out, None, f"unknown predictions format {fmt!r}; expected course or fever",
                         param="predictions_format")
    sidecar_renamed = False
    try:
        with atomic_path(out) as tmp_out:
            with atomic_path(sidecar) as tmp_sidecar:
                with open(tmp_sidecar, "w", encoding="utf-8", newline="\n") as fs, \
                        open(tmp_out, "w", encoding="utf-8", newline="\n") as fp:
                    # write_predictions' bytes, claim by claim
                    batches = _Batches(out, fmt, (fs, fp), JsonObjectStream(fs, retriever_spec, "claims"),
                                       PREDICTION_UNITS[fmt].PredictionsStream(fp, out))
                    yield batches
                    batches.sidecar.close()
                    batches.predictions.close()
            sidecar_renamed = True  # then leaving the outer block renames the predictions
    except BaseException:  # e.g. a full disk: never the new explanations beside older predictions
        if sidecar_renamed:
            sidecar.unlink(missing_ok=True)
        raise
