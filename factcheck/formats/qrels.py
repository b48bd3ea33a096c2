"""Judged queries: BEIR ``queries.jsonl``, TREC/BEIR qrels, TREC run files.

Plain dicts in and out, as BEIR and Pyserini pass them:

* queries -- ``{qid: text}`` in file order: BEIR's ``queries.jsonl`` (``{"_id", "text"}``
  a line; other fields ignored), or a two-column TSV topics file (``qid<TAB>text``, as
  Pyserini and MS MARCO ship them);
* qrels -- ``{qid: {docid: grade}}``: TREC's ``qid iter docid grade`` (whitespace
  separated; ``iter`` ignored) or BEIR's TSV ``query-id corpus-id score`` with or
  without its header line. Grades are integers; as trec_eval, a grade of at least 1 is
  relevant and nDCG's gain is the grade (a negative one counts as 0);
* runs -- ``{qid: [(docid, score), ...]}``, in rank order: the TREC run format
  ``qid Q0 docid rank score tag``.

Why run files are written with strictly decreasing scores: trec_eval (and ir_measures,
pytrec_eval) ignore the rank column and sort each query's lines by score, ties by docid
*descending*; our retrievers break ties by corpus order. And pytrec_eval compares scores
in single precision (1.0 and 0.9999999999999999 tie there: measured, ir_measures 0.4.3).
So a score whose float32 is not below the previous line's is written as the float32 just
below that one: any trec_eval-style reader, in single or double precision, then sees
exactly our order, and a tied score moves by one float32 unit in the last place per tie
(~6e-8 relative). Other scores are written as they are (shortest round-trip form).
:func:`read_trec_run` sorts as trec_eval does, so reading a run file gives the ranking
every TREC tool scores.

Every error is one :class:`~factcheck.errors.InputError` naming the file and line.

Example
-------
>>> import tempfile
>>> from pathlib import Path
>>> path = Path(tempfile.mkdtemp()) / "run.trec"
>>> write_trec_run(path, {"q1": [("d2", 1.5), ("d9", 1.5), ("d1", 0.25)]}, tag="demo")
3
>>> [docid for docid, _ in read_trec_run(path)["q1"]]
['d2', 'd9', 'd1']
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from factcheck.errors import InputError
from factcheck.formats.course_json import kind_of
from factcheck.formats.files import atomic_path, check_unicode
from factcheck.formats.utf8_stream import Utf8Stream

__all__ = ["read_queries", "read_qrels", "read_trec_run", "write_trec_run", "trec_order", "check_trec_id"]


# --------------------------------------------------------------------------- queries

def read_queries(path) -> dict[str, str]:
    """``{qid: text}`` from BEIR ``queries.jsonl`` (``.jsonl``/``.ndjson``, gzip too) or a
    ``qid<TAB>text`` topics file (``.tsv``/``.txt``), in file order.

    Parameters
    ----------
    path : str or Path
        The queries file.

    Returns
    -------
    dict
        Query id -> text (ids are strings; an integer ``_id`` becomes its digits).

    Example
    -------
    >>> import tempfile
    >>> from pathlib import Path
    >>> p = Path(tempfile.mkdtemp()) / "queries.jsonl"
    >>> _ = p.write_text('{"_id": "q1", "text": "sea level rise", "metadata": {}}\\n')
    >>> read_queries(p)
    {'q1': 'sea level rise'}
    """
    path = Path(path)
    name = path.name.lower().removesuffix(".gz")
    if name.endswith((".jsonl", ".ndjson")):
        records = _jsonl_queries(path)
    elif name.endswith((".tsv", ".txt")):
        records = _tsv_queries(path)
    else:
        raise InputError(path, None, "cannot tell the queries format from the file name; expected "
                         "BEIR queries .jsonl or a qid<TAB>text .tsv")
    out: dict[str, str] = {}
    first: dict[str, str] = {}
    for place, qid, text in records:
        check_unicode(path, place, qid, "the query id")
        check_unicode(path, place, text, "the query text")
        if qid in out:
            raise InputError(path, place, f"duplicate query id {qid!r} (first seen at {first[qid]})")
        out[qid], first[qid] = text, place
    if not out:
        raise InputError(path, None, "no queries")
    return out


def _jsonl_queries(path: Path):
    stream = Utf8Stream(path)
    try:
        for lineno, line in enumerate(stream.lines(), start=1):
            if not line.strip():
                continue
            place = f"line {lineno}"
            obj = _json_object(path, place, line)
            qid = obj.get("_id", obj.get("id"))
            if qid is None:
                raise InputError(path, place, 'missing "_id" (a BEIR query is {"_id": ..., "text": ...})')
            if isinstance(qid, bool) or not isinstance(qid, (str, int)) or str(qid) == "":
                raise InputError(path, place, f'"_id" must be a non-empty string, got {kind_of(qid)}')
            text = obj.get("text")
            if not isinstance(text, str):
                raise InputError(path, place, f'"text" must be a string, got {kind_of(text)}')
            yield place, str(qid), text
    finally:
        stream.close()


def _json_object(path: Path, place: str, line: str) -> dict:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InputError(path, f"{place}, column {exc.colno}", f"invalid JSON: {exc.msg}") from None
    except (ValueError, RecursionError):
        raise InputError(path, place, "invalid JSON") from None
    if not isinstance(obj, dict):
        raise InputError(path, place, f"expected a JSON object, got {kind_of(obj)}")
    return obj


def _tsv_queries(path: Path):
    for place, line in _lines(path):
        qid, tab, text = line.partition("\t")
        if not tab or not qid.strip():
            raise InputError(path, place, "expected qid<TAB>text")
        yield place, qid.strip(), text.strip()


def _lines(path: Path):
    """(place, line without its line end) for every non-blank line."""
    stream = Utf8Stream(path)
    try:
        for lineno, line in enumerate(stream.lines(), start=1):
            line = line.rstrip("\r\n")
            if line.strip():
                yield f"line {lineno}", line
    finally:
        stream.close()


# --------------------------------------------------------------------------- qrels

BEIR_HEADER = ("query-id", "corpus-id", "score")


def read_qrels(path) -> dict[str, dict[str, int]]:
    """``{qid: {docid: grade}}`` from a TREC qrels file (``qid iter docid grade``) or a BEIR
    qrels TSV (``query-id<TAB>corpus-id<TAB>score``, header line optional).

    The layout is taken from the first line and must hold for every line; a judgment of
    the same (query, document) twice is an error (trec_eval would keep one silently).

    Parameters
    ----------
    path : str or Path
        The qrels file (gzip read transparently).

    Returns
    -------
    dict
        Query id -> {document id -> integer grade}, queries in file order.

    Example
    -------
    >>> import tempfile
    >>> from pathlib import Path
    >>> p = Path(tempfile.mkdtemp()) / "test.tsv"
    >>> _ = p.write_text("query-id\\tcorpus-id\\tscore\\nq1\\td3\\t2\\nq1\\td7\\t0\\n")
    >>> read_qrels(p)
    {'q1': {'d3': 2, 'd7': 0}}
    """
    path = Path(path)
    out: dict[str, dict[str, int]] = {}
    first: dict[tuple[str, str], str] = {}
    width = None
    for place, line in _lines(path):
        fields = line.split()
        if width is None:
            width = len(fields)
            if width not in (3, 4):
                raise InputError(path, place, f"expected TREC qrels (qid iter docid grade) or BEIR qrels "
                                 f"(query-id corpus-id score), found {len(fields)} fields")
            if width == 3 and not _parses(float, fields[2]):  # the BEIR header (any names)
                continue
        if len(fields) != width:
            raise InputError(path, place, f"expected {width} fields like the first line, found {len(fields)}")
        qid, docid, grade = (fields[0], fields[1], fields[2]) if width == 3 else (fields[0], fields[2], fields[3])
        if not _parses(int, grade):
            raise InputError(path, place, f"the relevance grade must be an integer, got {grade!r}")
        check_unicode(path, place, qid + docid, "the line")
        key = (qid, docid)
        if key in first:
            raise InputError(path, place, f"query {qid!r} judges document {docid!r} twice "
                             f"(first at {first[key]})")
        first[key] = place
        out.setdefault(qid, {})[docid] = int(grade)
    if not out:
        raise InputError(path, None, "no judgments")
    return out


def _parses(kind, text: str) -> bool:
    """Whether ``kind(text)`` (``int``, ``float``) accepts ``text``."""
    try:
        kind(text)
    except ValueError:
        return False
    return True


# --------------------------------------------------------------------------- runs

def trec_order(ranking) -> list[tuple[str, float]]:
    """``(docid, score)`` pairs as trec_eval orders them: score descending, ties by docid
    descending (byte order of the UTF-8 ids, which is code-point order)."""
    return sorted(ranking, key=lambda pair: (pair[1], pair[0]), reverse=True)


def check_trec_id(value: str, what: str, path=None) -> str:
    """A query or document id as a TREC file can hold it: non-empty, no whitespace."""
    if not value or any(c.isspace() for c in value):
        raise InputError(path, None, f"{what} {value!r} cannot be written to a TREC run file "
                         "(ids there are single whitespace-free words)")
    return value


def write_trec_run(path, run: dict, tag: str = "factcheck") -> int:
    """Write ``run`` (``{qid: [(docid, score), ...]}``, each list in rank order) as a TREC
    run file, atomically; returns the number of lines.

    Scores are written so that they strictly decrease down each query's list (see the
    module docstring): any trec_eval-style reader sees exactly this order.

    Parameters
    ----------
    path : str or Path
        The file to write.
    run : dict
        Query id -> ranked ``(docid, score)`` pairs (finite scores).
    tag : str
        The run tag (last column).

    Returns
    -------
    int
        Lines written.

    Example
    -------
    >>> import tempfile
    >>> from pathlib import Path
    >>> path = Path(tempfile.mkdtemp()) / "run.trec"
    >>> write_trec_run(path, {"q1": [("d2", 1.5), ("d9", 1.5), ("d1", 0.25)]}, tag="demo")
    3
    >>> print(path.read_text(), end="")  # the tie: d9 just below d2, so trec_eval keeps our order
    q1 Q0 d2 1 1.5 demo
    q1 Q0 d9 2 1.4999998807907104 demo
    q1 Q0 d1 3 0.25 demo
    """
    path = Path(path)
    check_trec_id(tag, "the run tag", path)
    lines = []
    for qid, ranking in run.items():
        check_trec_id(qid, "query id", path)
        previous = np.float32(np.inf)  # the last written score, as float32
        for rank, (docid, score) in enumerate(ranking, start=1):
            check_trec_id(docid, "document id", path)
            score = float(score)
            if not math.isfinite(score):
                raise InputError(path, None, f"query {qid!r}: score of {docid!r} is not finite ({score!r})")
            with np.errstate(over="ignore"):  # beyond float32's range: inf, still ordered
                single = np.float32(score)
            if not single < previous:
                single = np.nextafter(previous, np.float32(-np.inf))
                score = float(single)  # exactly a float32, so every reader sees the same value
            previous = single
            lines.append(f"{qid} Q0 {docid} {rank} {score!r} {tag}\n")
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as fh:
        fh.writelines(lines)
    return len(lines)


def read_trec_run(path) -> dict[str, list[tuple[str, float]]]:
    """``{qid: [(docid, score), ...]}`` from a TREC run file, each query's list sorted as
    trec_eval sorts it (:func:`trec_order`: score descending, ties by docid descending;
    the rank column is ignored, as trec_eval ignores it).

    Parameters
    ----------
    path : str or Path
        A run file: ``qid Q0 docid rank score tag`` a line, whitespace separated.

    Returns
    -------
    dict
        Query id -> ranked (docid, score) pairs, queries in file order.

    Example
    -------
    >>> import tempfile
    >>> from pathlib import Path
    >>> path = Path(tempfile.mkdtemp()) / "run.trec"
    >>> _ = path.write_text("q1 Q0 d1 1 0.5 x\\nq1 Q0 d7 2 0.9 x\\nq1 Q0 d3 3 0.5 x\\n")
    >>> read_trec_run(path)  # score descending, ties by docid descending; ranks ignored
    {'q1': [('d7', 0.9), ('d3', 0.5), ('d1', 0.5)]}
    """
    path = Path(path)
    run: dict[str, list[tuple[str, float]]] = {}
    first: dict[tuple[str, str], str] = {}
    for place, line in _lines(path):
        fields = line.split()
        if len(fields) != 6:
            raise InputError(path, place, f"expected 6 fields (qid Q0 docid rank score tag), found {len(fields)}")
        qid, _, docid, _, score, _ = fields
        try:
            value = float(score)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise InputError(path, place, f"the score must be a finite number, got {score!r}")
        key = (qid, docid)
        if key in first:
            raise InputError(path, place, f"query {qid!r} lists document {docid!r} twice (first at {first[key]})")
        first[key] = place
        run.setdefault(qid, []).append((docid, value))
    return {qid: trec_order(ranking) for qid, ranking in run.items()}
