"""Judged queries as plain dicts, as BEIR and Pyserini pass them: queries ``{qid: text}``,
qrels ``{qid: {docid: grade}}``, runs ``{qid: [(docid, score), ...]}``."""

from __future__ import annotations

from pathlib import Path

from factcheck.errors import InputError
from factcheck.formats import beir, trec
from factcheck.formats.files import check_unicode
from factcheck.formats.records import MAX_QUERY_CHARS, check_length, length_cap, parse_int
from factcheck.formats.trec import check_trec_id, read_trec_run, trec_order, write_trec_run

__all__ = ["read_queries", "read_qrels", "read_trec_run", "write_trec_run", "trec_order", "check_trec_id"]


def read_queries(path, max_query_chars: int | None = None) -> dict[str, str]:
    """``{qid: text}`` in file order from BEIR ``queries.jsonl`` (``.jsonl``/``.ndjson``,
    gzip too) or a ``qid<TAB>text`` topics file (``.tsv``/``.txt``).

    Parameters
    ----------
    path : str or Path
        The queries file.
    max_query_chars : int or None
        A longer query is an error; None: :data:`~factcheck.formats.records.MAX_QUERY_CHARS`.

    Returns
    -------
    dict
        Query id -> text (an integer ``_id`` as its digits).

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
    unit = beir if name.endswith((".jsonl", ".ndjson")) else trec if name.endswith((".tsv", ".txt")) else None
    if unit is None:
        raise InputError(path, None, "cannot tell the queries format from the file name; expected "
                         "BEIR queries .jsonl or a qid<TAB>text .tsv")
    cap = length_cap(max_query_chars, "max_query_chars", MAX_QUERY_CHARS)
    out: dict[str, str] = {}
    first: dict[str, str] = {}
    for place, qid, text in unit.read_queries(path):
        check_length(path, place, text, cap, "max_query_chars")
        check_unicode(path, place, qid, "the query id")
        check_unicode(path, place, text, "the query text")
        if qid in out:
            raise InputError(path, place, f"duplicate query id {qid!r} (first seen at {first[qid]})")
        out[qid], first[qid] = text, place
    if not out:
        raise InputError(path, None, "no queries")
    return out


def read_qrels(path) -> dict[str, dict[str, int]]:
    """``{qid: {docid: grade}}``, queries in file order, from TREC qrels (``qid iter docid
    grade``) or a BEIR qrels TSV (``query-id corpus-id score``, header optional).

    Parameters
    ----------
    path : str or Path
        The qrels file (gzip read transparently).

    Returns
    -------
    dict
        Query id -> {document id -> integer grade}.

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
    unit = None
    for place, line in trec.lines(path):
        fields = line.split()
        first_line = unit is None
        if first_line:
            unit = {u.QRELS_FIELDS: u for u in (beir, trec)}.get(len(fields))
            if unit is None:
                raise InputError(path, place, f"expected TREC qrels (qid iter docid grade) or BEIR qrels "
                                 f"(query-id corpus-id score), found {len(fields)} fields")
        if len(fields) != unit.QRELS_FIELDS:
            raise InputError(path, place, f"expected {unit.QRELS_FIELDS} fields like the first line, "
                             f"found {len(fields)}")
        judged = unit.judgment(fields, first_line)
        if judged is None:
            continue  # BEIR's header
        qid, docid, grade = judged
        grade = parse_int(path, place, grade, "the relevance grade", -(1 << 31), (1 << 31) - 1)
        check_unicode(path, place, qid + docid, "the line")
        if (qid, docid) in first:
            raise InputError(path, place, f"query {qid!r} judges document {docid!r} twice (first at "
                             f"{first[qid, docid]})")
        first[qid, docid] = place
        out.setdefault(qid, {})[docid] = grade
    if not out:
        raise InputError(path, None, "no judgments")
    return out
