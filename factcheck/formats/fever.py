"""FEVER's files: claims JSONL (``evidence``: a list of alternative evidence sets of
``[annotation_id, evidence_id, page, line]``), the ``wiki-pages/*.jsonl`` dump (a passage
``page:line`` per non-empty line) and predictions JSONL (a line per claim, in the claims'
order). Layouts in docs/formats.md.
"""

from __future__ import annotations

import json
from pathlib import Path

from factcheck.errors import InputError, ref
from factcheck.formats.common import BATCH, Claim, check_id, plural
from factcheck.formats.files import atomic_path, check_unicode
from factcheck.formats.records import (SURROGATE_ESCAPE, decode_object, iter_lines, iter_records, kind_of, parse_int,
                                      shown)

NAME = "fever"
LABEL_FIELD = "'label'"  # how errors name the label
LABELS = ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")
NOT_ENOUGH_INFO = ("NOT ENOUGH INFO", "NOT_ENOUGH_INFO")  # FEVER's spelling and the course's
SOURCE_LOSSES = ["FEVER's hyperlinks after each sentence are not read, nor the pages' 'text' (the lines joined)"]
# FEVER's page ids escape brackets and colons (the Penn Treebank way) and use underscores.
_ESCAPES = {"-LRB-": "(", "-RRB-": ")", "-LSB-": "[", "-RSB-": "]", "-LCB-": "{", "-RCB-": "}",
            "-COLON-": ":"}


def sentence_id(page: str, line: int) -> str:
    """The passage id of line ``line`` of page ``page``: ``"page:line"``."""
    return f"{page}:{line}"


#: The most lines a FEVER page written here may number (every number up to the last is written).
MAX_PAGE_LINES = 1 << 16


def split_sentence_id(pid: str) -> tuple[str, int] | None:
    """``(page, line)`` of a ``page:line`` id (split at the last colon: titles hold colons), or None."""
    page, sep, line = pid.rpartition(":")
    if not sep or not page or not line.isdigit() or not line.isascii() or len(line) > 18:
        return None
    return page, int(line)


def readable_title(page: str) -> str:
    """A page id as a title: underscores as spaces, ``-LRB-`` as ``(`` and FEVER's other escapes."""
    title = page.replace("_", " ")
    if "-" in title:
        for escaped, char in _ESCAPES.items():
            title = title.replace(escaped, char)
    return title


def is_claims(record: dict, name: str = "") -> bool:
    """A FEVER claim: ``id`` and ``claim``, with ``verifiable`` or ``evidence``."""
    return "id" in record and "claim" in record and ("verifiable" in record or "evidence" in record)


def is_source(record: dict) -> bool:
    """A FEVER wiki page: ``id`` and ``lines``."""
    return "id" in record and "lines" in record


def claim_id_out(cid: str):
    """A claim id as FEVER writes it: an integer when it reads as one."""
    return int(cid) if cid.isdigit() and cid.isascii() and len(cid) <= 18 and str(int(cid)) == cid else cid


def _pair(path, cid, pid) -> list:
    pair = split_sentence_id(pid)
    if pair is None:
        raise InputError(path, f"claim {cid!r}", f"evidence id {pid!r} is not a FEVER sentence id (page:line)")
    return list(pair)


def id_in(pid: str, one_line_pages: bool, where) -> str:
    """A passage id as FEVER's ``page:line`` (with ``one_line_pages``: ``X`` is ``X:0``)."""
    if one_line_pages:
        return sentence_id(pid, 0)
    pair = split_sentence_id(pid)
    if pair is None:
        raise InputError(where, None, f"passage id {shown(pid)} is not a FEVER sentence id (page:line); set this "
                         "to make each passage line 0 of its own page", param="one_line_pages")
    if pair[1] >= MAX_PAGE_LINES:  # a page lists every line number up to its last: 10**12 would be a bomb
        raise InputError(where, None, f"passage id {shown(pid)}: a FEVER page holds at most {MAX_PAGE_LINES:,} "
                         "lines (every line number up to its last is written)")
    return pid


def id_out(pid: str, one_line_pages: bool, where) -> str:
    """A FEVER sentence id as another format's: with ``one_line_pages``, ``X:0`` is ``X``."""
    if not one_line_pages:
        return pid
    pair = split_sentence_id(pid)
    if pair is None or pair[1] != 0:
        raise InputError(where, None, f"sentence {pid!r} is not line 0 of a page: with {ref('one_line_pages')} every "
                         "passage is its page's line 0", param="one_line_pages")
    return pair[0]


# --------------------------------------------------------------------------- claims

def _evidence_sets(path, place, value) -> list[list[str]]:
    """FEVER's evidence sets as lists of ``page:line`` ids."""
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
            ids.append(sentence_id(check_unicode(path, place, page, "a page"), line))
        if none and ids:
            raise InputError(path, place, f"evidence set {i + 1}: mixes sentences with [.., null, null] entries")
        if ids:
            sets.append(ids)
    return sets


def read_claims(path: Path, require_labels: bool, columns: dict) -> list[Claim]:
    """Claims keeping their evidence sets (``evidences``: their union)."""
    claims = []
    for place, rec in iter_records(path, what="a FEVER claim object"):
        cid = check_id(path, place, rec.get("id"), "id", "the claim id")
        where = f"{place} (claim {cid!r})"
        text = rec.get("claim")
        if not isinstance(text, str) or not text.strip():
            raise InputError(path, where, "missing 'claim'" if text is None else "'claim' must be a non-empty string")
        check_unicode(path, place, text, "'claim'")
        label = rec.get("label")
        if label is not None and (not isinstance(label, str) or not label.strip()):
            raise InputError(path, where, f"'label' must be a non-empty string, got {kind_of(label)}")
        sets = _evidence_sets(path, where, rec["evidence"]) if "evidence" in rec else None
        if label is None and sets:
            raise InputError(path, where, "has evidence but no 'label'")
        claims.append(Claim(cid, text, label, list(dict.fromkeys(e for s in sets or () for e in s)), sets))
    return claims


def write_claims(path: Path, claims) -> None:
    """Every evidence id ``page:line``; without ``evidence_sets``, one set per evidence id."""
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


def claims_notes(claims, one_line_pages: bool) -> list[str]:
    """What converting claims to FEVER changes (its ids, labels not among its own)."""
    notes = []
    renamed = sum(len(c.evidences) for c in claims)
    if one_line_pages and renamed:
        notes.append(f"{plural(renamed, 'evidence id')} written as FEVER sentences [X, 0] (one-line pages)")
    odd = sorted({c.label for c in claims if c.label is not None} - set(LABELS))
    if odd:
        notes.append(f"labels kept as they are: {', '.join(odd)} {'is' if len(odd) == 1 else 'are'} not among "
                     f"FEVER's ({', '.join(LABELS)})")
    return notes


def claims_losses(claims, to: str) -> list[str]:
    """What converting FEVER claims to ``to`` does not keep."""
    sets = sum(1 for c in claims if c.evidence_sets and (len(c.evidence_sets) > 1
                                                         or any(len(s) > 1 for s in c.evidence_sets)))
    notes = [f"{plural(sets, 'claim')}: FEVER's alternative evidence sets (or multi-sentence sets) flattened into "
             f"one list of ids ({to} has no evidence sets)"] if sets and to != NAME else []
    return notes + ["FEVER's annotation and evidence ids (bookkeeping of the annotation) are not kept; "
                    "'verifiable' follows from the label"]


# --------------------------------------------------------------------------- predictions

def is_predictions(record: dict) -> bool:
    return "predicted_label" in record or "predicted_evidence" in record


def read_predictions(path: Path) -> dict[str, dict]:
    """``{id: {"evidences": ["page:line", ...], "claim_label"}}``: the course predictions' shape."""
    out = {}
    for place, rec in iter_records(path, what="a FEVER prediction object"):
        cid = check_id(path, place, rec.get("id"), "id", "the claim id")
        where = f"{place} (claim {cid!r})"
        if cid in out:
            raise InputError(path, place, f"claim {cid!r} predicted twice")
        label = rec.get("predicted_label")
        if label is not None and (not isinstance(label, str) or not label.strip()):
            raise InputError(path, where, "'predicted_label' must be a non-empty string")
        ev = rec.get("predicted_evidence")
        if not isinstance(ev, list):
            raise InputError(path, where, "missing 'predicted_evidence' (a list of [page, line])"
                             if ev is None else f"'predicted_evidence' must be a list, got {kind_of(ev)}")
        for pair in ev:
            if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str) and pair[0]
                    and isinstance(pair[1], int) and not isinstance(pair[1], bool) and pair[1] >= 0):
                raise InputError(path, where, "'predicted_evidence' entries must be [page, line], got "
                                 f"{json.dumps(pair)[:80]}")
        out[cid] = {"evidences": [sentence_id(*pair) for pair in ev], "claim_label": label}
    if not out:
        raise InputError(path, None, "no predictions (empty file)")
    return out


def write_predictions(path: Path, claims, evidences: dict, labels: dict | None = None) -> None:
    """Claims in input order, every evidence id ``page:line``."""
    with atomic_path(Path(path)) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as fh:
        stream = PredictionsStream(fh, path)
        for c in claims:
            stream.add(c, evidences[c.id], labels)
        stream.close()


class PredictionsStream:
    """FEVER's predictions written to the open file ``fh`` claim by claim, a line each."""

    def __init__(self, fh, path: Path):
        self.fh, self.path = fh, path

    def add(self, c, evidences: list, labels: dict | None = None) -> None:
        rec = {"id": claim_id_out(c.id)}
        if labels is not None:
            rec["predicted_label"] = labels[c.id]
        rec["predicted_evidence"] = [_pair(self.path, c.id, e) for e in evidences]
        self.fh.write(json.dumps(rec, ensure_ascii=False) + "\n")

    def close(self) -> None:
        pass


# --------------------------------------------------------------------------- wiki pages

def passages(spec, path: Path):
    """Batches ``(ids, texts, titles, place)``, ``place(i)`` the file line of passage i."""
    ids, texts, titles, linenos = [], [], [], []
    for lineno, raw in iter_lines(path, spec.max_passage_chars):
        if not raw or raw.isspace():
            continue
        place = f"line {lineno}"
        page_rec = decode_object(path, place, raw, what='a FEVER wiki page {"id", "text", "lines"}')
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
            blank = not sentence.strip()
            if (number or not blank) and not (number.isdigit() and (blank or (tab and number.isascii()))):
                raise InputError(path, place, f"page {page!r}: a line must start with its number and a tab, "
                                 f"got {raw_line[:40]!r}")
            if blank:
                continue  # an empty line: no passage
            if title is None:
                if suspect:
                    check_unicode(path, place, page, "the page id")
                title = readable_title(page)
            if suspect:
                check_unicode(path, place, sentence, "a sentence")
            ids.append(f"{page}:{parse_int(path, place, number, f'page {shown(page)}: the line number', 0, 10**18 - 1)}")
            texts.append(sentence)
            titles.append(title)
            linenos.append(lineno)
        if len(ids) >= BATCH:
            yield ids, texts, titles, _places(linenos)
            ids, texts, titles, linenos = [], [], [], []
    if ids:
        yield ids, texts, titles, _places(linenos)


def _places(linenos: list[int]):
    return lambda i: f"line {linenos[i]}"


def write_passages(dest: Path, records, titled: bool, notes: list[str], rename=str) -> None:
    """Wiki pages from ``(id, text, title)`` records (``rename(id)`` reads ``page:line``), in
    order of first appearance; tabs and newlines become spaces, an empty text no line."""
    pages: dict[str, dict[int, str]] = {}
    cleaned = empty = 0
    first_empty = None
    for pid, text, _title in records:
        page, line = split_sentence_id(rename(pid))
        if "\t" in text or "\n" in text or "\r" in text:
            text = " ".join(text.replace("\t", " ").split("\n")).replace("\r", " ")
            cleaned += 1
        if not text.strip():
            empty += 1
            first_empty = first_empty or pid
            continue
        pages.setdefault(page, {})[line] = text
    if titled:
        notes.append("titles are not kept (a FEVER page's title is its id)")
    if cleaned:
        notes.append(f"{plural(cleaned, 'passage')} held tabs or newlines (FEVER's separators): written as spaces")
    if empty:
        notes.append(f"{plural(empty, 'passage')} with an empty text (first: {first_empty!r}) cannot be a FEVER "
                     "line: not written")
    with atomic_path(Path(dest)) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        for page, by_number in pages.items():
            top = max(by_number, default=-1)
            numbered = [f"{n}\t{by_number.get(n, '')}" for n in range(top + 1)]
            text = " ".join(by_number[n] for n in sorted(by_number))
            fh.write(json.dumps({"id": page, "text": text, "lines": "\n".join(numbered)}, ensure_ascii=False) + "\n")

