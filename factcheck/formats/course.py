"""The course's JSON formats: a knowledge source ``{"evidence-1": "text", ...}``, claims
``{"claim-1": {"claim_text", "claim_label", "evidences": [ids]}}`` and predictions (the
claims' shape). Claims and predictions are read whole.

A knowledge source (often one 160 MB line) is streamed with ijson's yajl backend, which
decodes a lone surrogate escape to ``?`` and reports no offset: so the bytes it is given
are scanned for lone surrogates and over-long members here, and an error's place is found
by reading the file again up to it.
"""

from __future__ import annotations

import codecs
import re
from pathlib import Path

import ijson

from factcheck.errors import InputError
from factcheck.formats.common import (BATCH, FORMATS_HINT, Claim, claim_label, claim_record, claim_text, evidence_ids,
                                      needs_evidence, plural, prediction)
from factcheck.formats.files import (JsonObjectStream, atomic_path, check_unicode, dumps_json, open_binary,
                                     write_json_atomic)
from factcheck.formats.records import READ_ERRORS, decode_object, kind_of, over_limit, read_failure

NAME = "course"
LABEL_FIELD = "'claim_label'"  # how errors name the label
CHUNK_BYTES = 1 << 16  # bytes handed to the parser at a time
_BOM = b"\xef\xbb\xbf"
_CONTINUATION = bytes(range(0x80, 0xC0))  # UTF-8 bytes that start no character
_HINT = re.compile(rb"\\u[dD][89a-fA-F]")
# Each escape in turn: a surrogate pair, a lone surrogate (group 1), any other escape.
_ESCAPES = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|\\u([dD][89a-fA-F][0-9a-fA-F]{2})"
                      rb"|\\.", re.DOTALL)
_NUMBER = b"0123456789+-.eE"
_TOP_LEVEL = 'expected a JSON object {"id": "text", ...} at the top level'


class _Stop(Exception):
    pass


class _Feed:
    """The file as ijson reads it (after a byte-order mark): ``progress`` (members read so
    far) enables the checks above; ``slow_from``/``stop_at`` re-read up to an error."""

    def __init__(self, path, max_chars=None, progress=None, slow_from=None, stop_at=None):
        self.path, self.progress, self.slow_from, self.stop_at = path, progress, slow_from, stop_at
        self.longest = None if max_chars is None else 2 * max_chars + (1 << 16)
        self.max_chars = max_chars
        self.fh = open_binary(path)
        self.raw = self.fed = self.chunk_start = 0   # bytes read / given to the parser
        self.first = self.first_at = None            # the first byte that is not whitespace
        self.done = self.mark = self.escapes = 0     # the streaming bound's state
        self.carry, self.carry_at = b"", 0           # the surrogate scan's unfinished tail
        self.line, self.column, self.last, self.recent = 1, 1, (1, 1), b""
        head = self._read(3)
        self.pending = b"" if head == _BOM else head

    def _read(self, n: int) -> bytes:
        try:
            block = self.fh.read(n)
        except READ_ERRORS as exc:
            self.fh.close()
            raise read_failure(self.path, self.raw, exc) from None
        self.raw += len(block)
        return block

    def read(self, n: int) -> bytes:
        if n == 0:  # ijson asks for 0 bytes to learn whether the file gives bytes or text
            return b""
        if self.stop_at is not None:
            n = min(n, self.stop_at - self.fed)
            if n <= 0:
                raise _Stop
        if self.slow_from is not None:
            n = self._number_run() if self.fed >= self.slow_from else min(n, self.slow_from - self.fed)
        chunk, self.pending = self.pending[:n], self.pending[n:]
        if len(chunk) < n:
            chunk += self._read(n - len(chunk))
        if self.first is None and chunk.lstrip(b" \t\n\r"):
            stripped = chunk.lstrip(b" \t\n\r")
            self.first, self.first_at = stripped[0], self.fed + len(chunk) - len(stripped)
        if self.progress is not None:
            self._bound(chunk)
            self._scan(chunk)
        elif self.slow_from is not None or self.stop_at is not None:
            self._track(chunk)
        self.chunk_start = self.fed
        self.fed += len(chunk)
        return chunk

    def _number_run(self) -> int:
        """Bytes to feed when feeding one at a time: a run of number characters whole (yajl
        re-reads a cut token from its start: quadratic), else 1."""
        while True:
            run = len(self.pending) - len(self.pending.lstrip(_NUMBER))
            more = self._read(CHUNK_BYTES) if run == len(self.pending) else b""
            if not more:
                return max(run, 1)
            self.pending += more

    def _bound(self, chunk: bytes) -> None:
        """Refuse a member no passage within the cap can be: over ``longest`` characters
        counting 12 bytes an escape and 4 a character otherwise."""
        done = self.progress()
        if done != self.done:  # a member ended in the last chunk: the next starts after self.fed
            self.done, self.mark, self.escapes = done, self.fed, 0
        self.escapes += chunk.count(b"\\")
        pending = self.fed + len(chunk) - self.mark
        if self.longest is not None and (pending - 11 * self.escapes) // 4 > self.longest:
            self.fh.close()
            raise over_limit(self.path, self.max_chars, f"passage {done + 1} is still unfinished after {pending:,} "
                             "bytes of JSON, longer than a passage within this limit can be")

    def _scan(self, chunk: bytes, final: bool = False) -> None:
        """Refuse a lone surrogate escape; the last 12 bytes wait for the next chunk (a pair
        may be cut there)."""
        window = self.carry + chunk
        final = final or not chunk
        end = len(window) if final else len(window) - 12
        resume = None
        if _HINT.search(window):
            for m in _ESCAPES.finditer(window):
                if m.end() > end:
                    resume = m.start()
                    break
                if m.group(1) is not None:
                    self.fh.close()
                    raise _LoneSurrogate(self.carry_at + m.start(), m.group(1).decode().lower())
        if resume is None:
            resume = max(end, 0)
            while resume and window[resume - 1] == 0x5C:  # not inside a run of backslashes
                resume -= 1
        self.carry, self.carry_at = window[resume:], self.carry_at + resume

    def _track(self, chunk: bytes) -> None:
        self.last = (self.line, self.column)
        newlines = chunk.count(b"\n")
        if newlines:
            self.line += newlines
            self.column = 1 + len(chunk[chunk.rindex(b"\n") + 1:].translate(None, _CONTINUATION))
        else:
            self.column += len(chunk.translate(None, _CONTINUATION))
        self.recent = (self.recent + chunk)[-64:]


class _LoneSurrogate(Exception):
    def __init__(self, offset: int, hex_digits: str):
        self.offset, self.hex = offset, hex_digits


def passages(spec, path: Path):
    """Batches ``(ids, texts, None, place)`` of a course knowledge source."""
    ids, texts = [], []
    count = 0
    feed = _Feed(path, spec.max_passage_chars, progress=lambda: count + len(ids))
    events = ijson.basic_parse(feed, buf_size=CHUNK_BYTES, use_float=True)
    try:
        try:
            event, _ = next(events)
            if event != "start_map":
                raise _error(path, feed, _TOP_LEVEL, stop_at=feed.first_at)
            pid = None
            for event, value in events:
                if event == "map_key":
                    pid = value
                elif event == "string":
                    ids.append(pid)
                    texts.append(value)
                    if len(ids) == BATCH:
                        yield _batch(path, ids, texts, count)
                        count += len(ids)
                        ids, texts = [], []
                elif event == "end_map":
                    break
                else:
                    kind = {"start_map": "an object", "start_array": "a list"}.get(event) or kind_of(value)
                    n = count + len(ids) + 1
                    raise _error(path, feed, f"passage {n} (id {pid!r}): text must be a string, got {kind}",
                                 member=n)
            for _ in events:  # the parser refuses what follows the object
                pass
        except _LoneSurrogate as lone:
            raise _lone(path, feed, lone) from None
        except (ijson.JSONError, UnicodeDecodeError) as exc:
            raise _parse_error(path, feed, exc) from None
    finally:
        feed.fh.close()
    if ids:
        yield _batch(path, ids, texts, count)
    elif count == 0:
        raise InputError(path, None, "no passages (empty JSON object)")


def _batch(path, ids, texts, before):
    if "" in ids:
        raise InputError(path, f"passage {before + ids.index('') + 1}", "the passage id is empty")
    return ids, texts, None, lambda i: f"passage {before + i + 1}"


def _parse_error(path, feed: _Feed, exc: Exception) -> InputError:
    """What ijson refused: a lone surrogate, bad UTF-8, or the parser's error."""
    try:
        feed._scan(b"", final=True)
    except _LoneSurrogate as lone:
        return _lone(path, feed, lone)
    _check_utf8(path, feed.raw)
    if feed.first is None:
        return InputError(path, None, "empty file (expected a JSON object of passages)")
    if feed.first != ord("{"):
        return _error(path, feed, _TOP_LEVEL, stop_at=feed.first_at)
    return _error(path, feed, None)


def _lone(path, feed: _Feed, lone: _LoneSurrogate) -> InputError:
    return _error(path, feed, f"the id or text holds a lone surrogate \\u{lone.hex} (not valid Unicode)",
                  stop_at=lone.offset, passage=True)


def _check_utf8(path, upto: int) -> None:
    """Raise for the first bad UTF-8 byte before ``upto`` (or the file's end)."""
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    at = 0
    with open_binary(path) as fh:
        while True:
            block = fh.read(min(CHUNK_BYTES, upto - at) if at < upto else 1)  # past upto: is this the end?
            try:
                decoder.decode(block, final=not block)
            except UnicodeDecodeError as exc:
                raise InputError(path, f"byte {max(at - len(decoder.getstate()[0]) + exc.start, 0)}",
                                 "invalid UTF-8") from None
            if not block or at >= upto:
                return
            at += len(block)


def _error(path, feed: _Feed, message, *, stop_at=None, member=None, passage=False) -> InputError:
    """An InputError at the byte ``stop_at``, at member ``member``'s value, or where the
    parser fails (``message`` None: the parser's own, in our words), found by reading again."""
    slow_from = max(feed.chunk_start - 64, 0) if stop_at is None else None
    again = _Feed(path, slow_from=slow_from, stop_at=stop_at)
    done = depth = back = 0
    parser = None
    try:
        for event, value in ijson.basic_parse(again, buf_size=CHUNK_BYTES, use_float=True):
            if depth == 1 and event != "map_key" and event != "end_map":
                done += 1
                if done == member:
                    back = _value_start(again, event, value)
                    break
            depth += event.startswith("start") - event.startswith("end")
    except _Stop:
        pass
    except (ijson.JSONError, UnicodeDecodeError) as exc:
        parser = str(exc).splitlines()[0].split(": ", 1)[-1].rstrip(".")
    finally:
        again.fh.close()
    line, column = (again.line, again.column) if stop_at is not None or parser == "premature EOF" else again.last
    place = f"line {line}, column {column - back}"
    if passage:
        place = f"passage {done + 1} ({place})"
    if message is None:
        if parser == "premature EOF":
            message = "truncated JSON (the file ends inside the object)"
        elif parser == "trailing garbage":
            message = "unexpected data after the JSON object"
        elif parser and parser.startswith("invalid object key") and again.recent[-1:] == b"}":
            message = "trailing comma before '}'"
        elif parser in ("integer overflow", "numeric (floating point) overflow"):
            message = f"passage {done + 1}: text must be a string, got a number"
        else:
            message = f"invalid JSON: {parser or 'not a JSON object of passages'}"
    return InputError(path, place, message)


def _value_start(feed: _Feed, event: str, value) -> int:
    """How many columns before the byte that emitted ``event`` its value starts."""
    if event in ("start_map", "start_array"):
        return 0
    if event == "null":
        return 3
    if event == "boolean":
        return 3 if value else 4
    before = feed.recent[:-1]  # a number is emitted at the byte after it
    return len(before) - len(before.rstrip(_NUMBER))


# --------------------------------------------------------------------------- claims and predictions

#: The most bytes a claims or predictions file read whole may hold (FEVER's 145K training
#: claims are 30 MB).
MAX_WHOLE_BYTES = 1 << 28


def _load_object(path: Path, what: str) -> dict:
    """A small JSON object read whole, a key twice refused."""
    with open_binary(path) as fh:
        try:
            raw = fh.read(MAX_WHOLE_BYTES + 1)
        except READ_ERRORS as exc:
            raise read_failure(path, 0, exc) from None
    if len(raw) > MAX_WHOLE_BYTES:
        raise InputError(path, None, f"holds more than {MAX_WHOLE_BYTES:,} bytes, more than a {what} file in this "
                         "format (read whole) may: write it as JSON lines")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(path, f"byte {exc.start}", "invalid UTF-8") from None
    if not text.strip():
        raise InputError(path, None, f"empty file (expected a JSON object of {what})")
    obj = decode_object(path, None, text, what=f"a JSON object of {what}")
    if not obj:
        raise InputError(path, None, f"no {what} (empty JSON object)")
    for key in obj:
        if not key:
            raise InputError(path, "key ''", "empty claim id")
        check_unicode(path, f"claim {key!r}", key, "the claim id")
    return obj


def is_claims(record: dict, name: str) -> bool:
    """A one-line course file: an object whose values are all objects (not named ``.jsonl``)."""
    return all(isinstance(v, dict) for v in record.values()) and not name.endswith((".jsonl", ".ndjson"))


def read_claims(path: Path, require_labels: bool, columns: dict) -> list[Claim]:
    obj = _load_object(path, "claims")
    claims = []
    for cid, entry in obj.items():
        if not isinstance(entry, dict):
            looks_like_record = any(k in obj for k in ("claim", "claim_text", "claim_id"))
            raise InputError(path, f"claim {cid!r}", "expected an object with 'claim_text'"
                             + (f"; this looks like one JSON-lines record ({FORMATS_HINT})" if looks_like_record
                                else f" ({FORMATS_HINT})"))
        text = claim_text(path, cid, entry.get("claim_text"), "'claim_text'")
        label = claim_label(path, cid, entry.get("claim_label"), required=require_labels)
        evidences = evidence_ids(path, cid, entry.get("evidences"), required=require_labels and needs_evidence(label))
        claims.append(Claim(cid, text, label, evidences))
    return claims


def claims_notes(claims, one_line_pages: bool) -> list[str]:
    empty = [c.id for c in claims if c.label is not None and not c.evidences]
    return [f"{plural(len(empty), 'labelled claim')} without evidence (first: {empty[0]!r}): written with an "
            "empty 'evidences' list"] if empty else []


def write_claims(path: Path, claims) -> None:
    write_json_atomic(path, {c.id: claim_record(c, "claim_text", "claim_label", with_id=False) for c in claims})


def read_predictions(path: Path) -> dict[str, dict]:
    return {cid: prediction(path, cid, entry) for cid, entry in _load_object(path, "predictions").items()}


class PredictionsStream:
    """The leaderboard format written to the open file ``fh`` claim by claim (the bytes of
    one JSON object, never held whole); :meth:`close` after the last claim."""

    def __init__(self, fh, path: Path, texts: bool = True):
        self.json, self.texts = JsonObjectStream(fh), texts

    def add(self, c, evidences: list, labels: dict | None = None) -> None:
        entry = {"claim_text": c.text} if self.texts else {}
        if labels is not None:
            entry["claim_label"] = labels[c.id]
        entry["evidences"] = list(evidences)
        self.json.add(c.id, entry)

    def close(self) -> None:
        self.json.close()


def write_passages(dest: Path, records, titled: bool, notes: list[str], rename=str) -> None:
    """``{"id": "text", ...}``, one passage a line, from ``(id, text, title)`` records."""
    if titled:
        notes.append("titles are not kept (course has no titles; the JSONL target keeps them)")
    with atomic_path(dest) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        fh.write("{")
        for n, (pid, text, _title) in enumerate(records):
            fh.write(("," if n else "") + "\n" + dumps_json(rename(pid), indent=None).rstrip("\n") + ": "
                     + dumps_json(text, indent=None).rstrip("\n"))
        fh.write("\n}\n")
