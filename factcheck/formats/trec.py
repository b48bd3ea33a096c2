"""TREC's files: qrels ``qid iter docid grade``, topics ``qid<TAB>text`` and run files
``qid Q0 docid rank score tag``.

trec_eval-style readers ignore the rank column and sort by score (pytrec_eval in float32),
ties by docid descending, while our retrievers break ties by corpus order: so run files are
written with strictly decreasing float32 scores, a tie as the float32 just below.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from factcheck.errors import InputError
from factcheck.formats.files import atomic_path
from factcheck.formats.records import iter_lines, parse_float

NAME = "trec"
QRELS_FIELDS = 4


def lines(path: Path):
    """``(place, line)`` of every non-blank line, without its line end."""
    for lineno, line in iter_lines(path):
        line = line.rstrip("\r\n")
        if line.strip():
            yield f"line {lineno}", line


def read_queries(path: Path):
    """``(place, qid, text)`` of a topics file."""
    for place, line in lines(path):
        qid, tab, text = line.partition("\t")
        if not tab or not qid.strip():
            raise InputError(path, place, "expected qid<TAB>text")
        yield place, qid.strip(), text.strip()


def judgment(fields: list[str], first: bool):
    """``(qid, docid, grade)`` of a qrels line (the ``iter`` column ignored)."""
    return fields[0], fields[2], fields[3]


def trec_order(ranking) -> list[tuple[str, float]]:
    """``(docid, score)`` pairs as trec_eval orders them: score descending, ties by docid
    descending (code-point order, which is the UTF-8 bytes' order)."""
    return sorted(ranking, key=lambda pair: (pair[1], pair[0]), reverse=True)


def check_trec_id(value: str, what: str, path=None) -> str:
    """A query or document id as a TREC file can hold it: non-empty, no whitespace."""
    if not value or any(c.isspace() for c in value):
        raise InputError(path, None, f"{what} {value!r} cannot be written to a TREC run file "
                         "(ids there are single whitespace-free words)")
    return value


def write_trec_run(path, run: dict, tag: str = "factcheck") -> int:
    """Write a run as a TREC run file, atomically, with strictly decreasing scores.

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
    out = []
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
            out.append(f"{qid} Q0 {docid} {rank} {score!r} {tag}\n")
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as fh:
        fh.writelines(out)
    return len(out)


def read_trec_run(path) -> dict[str, list[tuple[str, float]]]:
    """A run file's rankings, each as trec_eval sorts it (the rank column ignored).

    Parameters
    ----------
    path : str or Path
        ``qid Q0 docid rank score tag`` a line, whitespace separated.

    Returns
    -------
    dict
        Query id -> ranked ``(docid, score)`` pairs, queries in file order.

    Example
    -------
    >>> import tempfile
    >>> from pathlib import Path
    >>> path = Path(tempfile.mkdtemp()) / "run.trec"
    >>> _ = path.write_text("q1 Q0 d1 1 0.5 x\\nq1 Q0 d7 2 0.9 x\\nq1 Q0 d3 3 0.5 x\\n")
    >>> read_trec_run(path)
    {'q1': [('d7', 0.9), ('d3', 0.5), ('d1', 0.5)]}
    """
    path = Path(path)
    run: dict[str, list[tuple[str, float]]] = {}
    first: dict[tuple[str, str], str] = {}
    for place, line in lines(path):
        fields = line.split()
        if len(fields) != 6:
            raise InputError(path, place, f"expected 6 fields (qid Q0 docid rank score tag), found {len(fields)}")
        qid, _, docid, _, score, _ = fields
        value = parse_float(path, place, score, "the score")
        if (qid, docid) in first:
            raise InputError(path, place, f"query {qid!r} lists document {docid!r} twice (first at "
                             f"{first[qid, docid]})")
        first[qid, docid] = place
        run.setdefault(qid, []).append((docid, value))
    return {qid: trec_order(ranking) for qid, ranking in run.items()}
