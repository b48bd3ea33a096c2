"""FEVER's files: claims JSONL, the ``wiki-pages/*.jsonl`` dump, predictions JSONL.

Claims (``train.jsonl``, ``shared_task_dev.jsonl``, ...)::

    {"id": 75397, "verifiable": "VERIFIABLE", "label": "SUPPORTS", "claim": "...",
     "evidence": [[[92206, 104971, "Nikolaj_Coster-Waldau", 7], [92206, 104971, "Fox_Broadcasting_Company", 0]],
                  [[92206, 104972, ...]]]}

``evidence`` is a list of evidence *sets*, each a list of ``[annotation_id, evidence_id,
page, line]``; any one complete set verifies the claim. A NOT ENOUGH INFO claim's set is
``[[annotation_id, null, null, null]]``: no sentence. Test files have ``id`` and ``claim`` only.

Wiki pages: ``{"id": "Page_title", "text": "...", "lines": "0\\tFirst sentence.\\tlink\\n1\\t..."}``.
One passage per non-empty line, id ``page:line`` (:func:`sentence_id`), text the line's
sentence (the links after it are not text), title the page's (readable: underscores as
spaces, ``-LRB-`` as ``(``, ...). A page without a non-empty line gives no passage (FEVER's
dump starts with such a record).

Predictions: ``{"id", "predicted_label", "predicted_evidence": [[page, line], ...]}``, one a
line, in the order of the claims (the official scorer pairs predictions and claims by line).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Iterator

from factcheck.errors import InputError
from factcheck.formats.course_json import SURROGATE_ESCAPE, kind_of
from factcheck.formats.files import atomic_path, check_unicode
from factcheck.formats.jsonlines import decode_object, iter_records
from factcheck.formats.utf8_stream import Utf8Stream

__all__ = ["LABELS", "sentence_id", "split_sentence_id", "readable_title", "is_claim_record", "is_wiki_record",
           "iter_claim_records", "iter_wiki_batches", "write_claims", "read_predictions", "write_predictions",
           "claim_id_out"]

LABELS = ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")
NOT_ENOUGH_INFO = ("NOT ENOUGH INFO", "NOT_ENOUGH_INFO")  # FEVER's spelling and the course's
BATCH = 4096  # passages per batch handed to the tagging driver

# FEVER's page ids escape brackets and colons (the Penn Treebank way) and use underscores.
_ESCAPES = {"-LRB-": "(", "-RRB-": ")", "-LSB-": "[", "-RSB-": "]", "-LCB-": "{", "-RCB-": "}",
            "-COLON-": ":"}


def sentence_id(page: str, line: int) -> str:
    """The passage id of line ``line`` of page ``page``: ``"page:line"``.

    Example
    -------
    >>> sentence_id("Nikolaj_Coster-Waldau", 7)
    'Nikolaj_Coster-Waldau:7'
    """
    return f"{page}:{line}"


def split_sentence_id(pid: str) -> tuple[str, int] | None:
    """``(page, line)`` of a ``page:line`` id (the line after the last colon: page titles
    may hold colons), or None when ``pid`` has no such form.

    Example
    -------
    >>> split_sentence_id("Star_Wars:_Episode_I:3")
    ('Star_Wars:_Episode_I', 3)
    >>> split_sentence_id("evidence-12") is None
    True
    """
    page, sep, line = pid.rpartition(":")
    if not sep or not page or not line.isdigit() or not line.isascii():
        return None
    return page, int(line)


def readable_title(page: str) -> str:
    """A page id as a title: ``Nikolaj_Coster-Waldau`` -> ``Nikolaj Coster-Waldau``,
    ``-LRB-`` -> ``(`` and the other escapes FEVER's ids use.

    Example
    -------
    >>> readable_title("Savages_-LRB-2012_film-RRB-")
    'Savages (2012 film)'
    """
    title = page.replace("_", " ")
    if "-" in title:
        for escaped, char in _ESCAPES.items():
            title = title.replace(escaped, char)
    return title


def is_claim_record(record: dict) -> bool:
    """A FEVER claim: ``id`` and ``claim``, with ``verifiable`` or ``evidence``."""
    return "id" in record and "claim" in record and ("verifiable" in record or "evidence" in record)


def is_wiki_record(record: dict) -> bool:
    """A FEVER wiki page: ``id`` and ``lines``."""
    return "id" in record and "lines" in record


def claim_id_out(cid: str):
    """A claim id as FEVER writes it: an integer when it reads as one (FEVER's ids are)."""
    return int(cid) if cid.isdigit() and cid.isascii() and str(int(cid)) == cid else cid


# --------------------------------------------------------------------------- claims

def _claim_id(path, place, value) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, str)) or value == "":
        raise InputError(path, place, f"'id' must be an integer or a non-empty string, got {kind_of(value)}")
    cid = str(value)
    check_unicode(path, place, cid, "the claim id")
    return cid


def _evidence_sets(path, place, value) -> list[list[str]]:
    """FEVER's evidence sets as lists of ``page:line`` ids (an empty set is no sentence)."""
    if not isinstance(value, list):
        raise InputError(path, place, f"'evidence' must be a list of evidence sets, got {kind_of(value)}")
    sets = []
    for i, group in enumerate(value):
        if not isinstance(group, list):
            raise InputError(path, place, f"evidence set {i + 1}: expected a list of "
                             "[annotation_id, evidence_id, page, line], got " + kind_of(group))
        ids, none = [], 0
        for entry in group:
            if not isinstance(entry, list) or len(entry) != 4:
                raise InputError(path, place, f"evidence set {i + 1}: expected [annotation_id, evidence_id, "
                                 f"page, line], got {json.dumps(entry)[:80]}")
            page, line = entry[2], entry[3]
            if page is None and line is None:
                none += 1
                continue
            if not isinstance(page, str) or not page or isinstance(line, bool) or not isinstance(line, int) \
                    or line < 0:
                raise InputError(path, place, f"evidence set {i + 1}: page must be a string and line a "
                                 f"non-negative integer, got {json.dumps(entry[2:])[:80]}")
            check_unicode(path, place, page, "a page")
            ids.append(sentence_id(page, line))
        if none and ids:
            raise InputError(path, place, f"evidence set {i + 1}: mixes sentences with [.., null, null] entries")
        if ids:
            sets.append(ids)
    return sets


def iter_claim_records(path: Path) -> Iterator[tuple[str, str, str, str | None, list[list[str]] | None]]:
    """``(place, id, claim, label, evidence sets)`` per claim; label and sets None when the
    file has none (a test file)."""
    path = Path(path)
    for place, rec in iter_records(path, what="a FEVER claim object"):
        cid = _claim_id(path, place, rec.get("id"))
        text = rec.get("claim")
        if not isinstance(text, str) or not text.strip():
            what = "missing 'claim'" if text is None else "'claim' must be a non-empty string"
            raise InputError(path, f"{place} (claim {cid!r})", what)
        check_unicode(path, place, text, "'claim'")
        label = rec.get("label")
        if label is not None and (not isinstance(label, str) or not label.strip()):
            raise InputError(path, f"{place} (claim {cid!r})", f"'label' must be a non-empty string, got "
                             f"{kind_of(label)}")
        sets = _evidence_sets(path, f"{place} (claim {cid!r})", rec["evidence"]) if "evidence" in rec else None
        if label is None and sets:
            raise InputError(path, f"{place} (claim {cid!r})", "has evidence but no 'label'")
        yield place, cid, text, label, sets


def write_claims(path: Path, claims) -> None:
    """FEVER claims JSONL. Every evidence id must be ``page:line``; a claim without
    ``evidence_sets`` gets one set per evidence id (its gold passages, each enough alone)."""
    with atomic_path(Path(path)) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        for c in claims:
            rec = {"id": claim_id_out(c.id)}
            if c.label is not None:
                rec["verifiable"] = "NOT VERIFIABLE" if c.label in NOT_ENOUGH_INFO else "VERIFIABLE"
                rec["label"] = c.label
            rec["claim"] = c.text
            if c.label is not None or c.evidences:
                sets = c.evidence_sets if c.evidence_sets is not None else [[e] for e in c.evidences]
                rec["evidence"] = [[[None, None, *_pair(path, c.id, e)] for e in group] for group in sets] \
                    or [[[None, None, None, None]]]
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")


def _pair(path, cid, pid) -> list:
    pair = split_sentence_id(pid)
    if pair is None:
        raise InputError(path, f"claim {cid!r}", f"evidence id {pid!r} is not a FEVER sentence id (page:line)")
    return list(pair)


# --------------------------------------------------------------------------- predictions

def read_predictions(path: Path) -> dict[str, dict]:
    """FEVER predictions JSONL -> ``{id: {"evidences": ["page:line", ...], "claim_label"}}``
    (the course predictions' shape, so one scorer reads both)."""
    path = Path(path)
    out = {}
    for place, rec in iter_records(path, what="a FEVER prediction object"):
        cid = _claim_id(path, place, rec.get("id"))
        if cid in out:
            raise InputError(path, place, f"claim {cid!r} predicted twice")
        label = rec.get("predicted_label")
        if label is not None and (not isinstance(label, str) or not label.strip()):
            raise InputError(path, f"{place} (claim {cid!r})", "'predicted_label' must be a non-empty string")
        ev = rec.get("predicted_evidence")
        if not isinstance(ev, list):
            raise InputError(path, f"{place} (claim {cid!r})", "missing 'predicted_evidence' (a list of [page, line])"
                             if ev is None else f"'predicted_evidence' must be a list, got {kind_of(ev)}")
        ids = []
        for pair in ev:
            if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str) and pair[0]
                    and isinstance(pair[1], int) and not isinstance(pair[1], bool) and pair[1] >= 0):
                raise InputError(path, f"{place} (claim {cid!r})", "'predicted_evidence' entries must be "
                                 f"[page, line], got {json.dumps(pair)[:80]}")
            ids.append(sentence_id(pair[0], pair[1]))
        out[cid] = {"evidences": ids, "claim_label": label}
    if not out:
        raise InputError(path, None, "no predictions (empty file)")
    return out


def write_predictions(path: Path, claims, evidences: dict, labels: dict | None = None) -> None:
    """FEVER predictions JSONL, claims in input order (every evidence id ``page:line``)."""
    with atomic_path(Path(path)) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        for c in claims:
            rec = {"id": claim_id_out(c.id)}
            if labels is not None:
                rec["predicted_label"] = labels[c.id]
            rec["predicted_evidence"] = [_pair(path, c.id, e) for e in evidences[c.id]]
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")


# --------------------------------------------------------------------------- wiki pages

PassageBatch = tuple[list[str], list[str], list[str], Callable[[int], str]]


def iter_wiki_batches(path: Path, max_chars: int | None = None,
                      max_passage_chars: int | None = None) -> Iterator[PassageBatch]:
    """``(ids, texts, titles, place)`` batches of a wiki-pages file, in file order;
    ``place(i)`` names the file line of passage i. ``max_passage_chars``: a page line
    longer than a page of such passages can be is refused while it streams."""
    path = Path(path)
    ids, texts, titles, linenos = [], [], [], []
    stream = Utf8Stream(path)
    try:
        for lineno, raw in enumerate(stream.lines(max_passage_chars), start=1):
            if not raw or raw.isspace():
                continue
            place = f"line {lineno}"
            page_rec = decode_object(path, place, raw, max_chars=max_chars,
                                     what='a FEVER wiki page {"id", "text", "lines"}')
            page, lines = page_rec.get("id"), page_rec.get("lines")
            if not isinstance(lines, str):
                raise InputError(path, place, "missing 'lines' (is this a FEVER wiki-pages file?)" if lines is None
                                 else f"'lines' must be a string, got {kind_of(lines)}")
            if not isinstance(page, str):
                raise InputError(path, place, "missing 'id' (the page title)" if page is None
                                 else f"'id' must be a string, got {kind_of(page)}")
            if not lines.strip():
                continue  # a page without sentences (FEVER's dump opens with one)
            if not page:
                raise InputError(path, place, "empty page 'id' on a page with lines")
            title = None
            suspect = SURROGATE_ESCAPE.search(raw) is not None  # a lone surrogate needs an escape
            for raw_line in lines.split("\n"):
                number, tab, rest = raw_line.partition("\t")
                sentence = rest.partition("\t")[0]
                if not sentence.strip():
                    if number and not number.isdigit():
                        raise InputError(path, place, f"page {page!r}: a line must start with its number and a "
                                         f"tab, got {raw_line[:40]!r}")
                    continue  # an empty line: no passage
                if not tab or not number.isdigit() or not number.isascii():
                    raise InputError(path, place, f"page {page!r}: a line must start with its number and a tab, "
                                     f"got {raw_line[:40]!r}")
                if title is None:
                    if suspect:
                        check_unicode(path, place, page, "the page id")
                    title = readable_title(page)
                if suspect:
                    check_unicode(path, place, sentence, "a sentence")
                ids.append(f"{page}:{int(number)}")
                texts.append(sentence)
                titles.append(title)
                linenos.append(lineno)
            if len(ids) >= BATCH:
                yield ids, texts, titles, _places(linenos)
                ids, texts, titles, linenos = [], [], [], []
        if ids:
            yield ids, texts, titles, _places(linenos)
    finally:
        stream.close()


def _places(linenos: list[int]) -> Callable[[int], str]:
    return lambda i: f"line {linenos[i]}"


def write_wiki_pages(path: Path, pages) -> None:
    """A wiki-pages JSONL file from ``(page, [(line, sentence), ...])`` pairs, pages in the
    given order; line numbers without a sentence are written empty, as FEVER's are."""
    with atomic_path(Path(path)) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        for page, lines in pages:
            by_number = dict(lines)
            top = max(by_number, default=-1)
            numbered = [f"{n}\t{by_number.get(n, '')}" for n in range(top + 1)]
            text = " ".join(by_number[n] for n in sorted(by_number))
            fh.write(json.dumps({"id": page, "text": text, "lines": "\n".join(numbered)}, ensure_ascii=False) + "\n")
