"""Streaming parser of the course's knowledge-source format: one JSON object ``{"id": "text", ...}``.

The object is often a single 160 MB line, and the tagging driver must stay within memory
bounded by a shard, so it is parsed incrementally rather than by ``json.load``.

Two paths, one behaviour:

* the **fast path** takes, in one regular-expression match, the run of complete
  ``"id": "text",`` members at the front of the buffer and decodes them with one call of
  the standard library's C JSON decoder (pairs kept as a list: order and repeated ids
  survive). Why: the careful path costs ~2.8 µs of Python per passage -- 3.4 s of a 1.2M
  corpus whose ``json.load`` takes 1.5 s -- and it runs on the tagging driver while the
  workers wait (in a profile of the tagging job, its biggest single lever).
* the **careful path** parses one member at a time with the C string scanner and names
  the line and column of anything wrong.

The fast path never decides what is an error: whenever its run does not decode cleanly
(a control character, a bad escape, an escaped surrogate, an empty id -- or anything else
it does not understand), that run goes through the careful path, member by member, so
every error message and place is the careful path's. A member the fast path cannot match
(the last one before ``}``, one cut by the buffer end, a non-string text) always takes the
careful path. ``tests/unit/test_readers.py`` compares both paths on valid and broken inputs.
"""

from __future__ import annotations

import json
import re
from json.decoder import scanstring
from operator import itemgetter
from pathlib import Path
from typing import Callable, Iterator

from factcheck.errors import InputError
from factcheck.formats.files import LONE_SURROGATE, check_unicode
from factcheck.formats.utf8_stream import MAX_PASSAGE_CHARS, Utf8Stream, over_limit

_WS = re.compile(r"[ \t\n\r]*")
# JSON whitespace and strings only (not \s: the decoder accepts these four characters).
# A member that does not match fails in linear time without possessive quantifiers too:
# a string's characters are either a quote, a backslash starting a two-character escape
# or neither, so each backtracking step fails at once. Why not possessive (``*+``, 3.11's
# new syntax): Debian 12's Python 3.11.2 over-matches ``(?:...)++`` past the last member
# to the buffer's end (a CPython bug fixed in a later 3.11 release), and the fast path
# never engaged there.
_STRING = r'"[^"\\]*(?:\\.[^"\\]*)*"'
_SPACE = r"[ \t\n\r]*"
_MEMBERS = re.compile(rf"(?:{_SPACE}{_STRING}{_SPACE}:{_SPACE}{_STRING}{_SPACE},)+")
# An escape that may decode to a lone surrogate (the careful path checks each string).
SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_PAIRS = json.JSONDecoder(object_pairs_hook=list)
_FIRST, _SECOND = itemgetter(0), itemgetter(1)

Batch = tuple[list[str], list[str], Callable[[int], str]]
TOO_LONG_NUMBER = "a number with more than 4,300 digits (more than Python converts)"


def numbered(first: int) -> Callable[[int], str]:
    """The places of a batch whose first passage is number ``first`` (1-based)."""
    return lambda i: f"passage {first + i}"


class _NeedMore(Exception):
    pass


def iter_course(path: Path, max_chars: int = MAX_PASSAGE_CHARS) -> Iterator[Batch]:
    """Yield batches ``(ids, texts, place)`` in file order; ``place(i)`` names the i-th
    passage of a batch ("passage N"). Raise InputError at the first bad byte or member, or
    at a passage whose id or text is longer than ``max_chars`` characters -- checked while
    reading: a member still unfinished after :func:`~factcheck.formats.utf8_stream.raw_limit`
    characters is refused before more of it is held."""
    stream = Utf8Stream(path)
    # No member within the cap spans more than this many characters of JSON once each
    # backslash is counted as the 6 characters an escape may take (a character of text is
    # one character of JSON otherwise): an id and a text, plus room for quotes and spaces.
    longest = 2 * max_chars + (1 << 16)
    buf = stream.read()
    while not stream.eof and not buf.strip():
        buf += stream.read()
    lines_before = 0      # newlines in the text already dropped from buf
    col_before = 0        # characters after the last dropped newline
    record = 0            # passages yielded so far
    careful_until = -1    # a fast run that did not decode: members before this go one by one

    def where(i: int) -> str:
        i = min(i, len(buf))
        nl = buf.count("\n", 0, i)
        col = i - buf.rfind("\n", 0, i) if nl else col_before + i + 1
        return f"line {lines_before + nl + 1}, column {col}"

    def fail(i: int, message: str):
        stream.close()
        raise InputError(path, where(i), message)

    pos = _WS.match(buf, 0).end()
    if pos >= len(buf):
        fail(pos, "empty file (expected a JSON object of passages)")
    if buf[pos] != "{":
        fail(pos, 'expected a JSON object {"id": "text", ...} at the top level')
    pos += 1
    after_comma = False
    while True:
        if pos >= careful_until:
            run = _fast_run(buf, pos)
            if isinstance(run, int):  # matched, but must go member by member
                careful_until = run
            elif run is not None and (max(map(len, run[0])) > max_chars or max(map(len, run[1])) > max_chars):
                careful_until = run[2]  # a passage over the cap: the careful path names it
            elif run is not None:
                ids, texts, pos = run
                yield ids, texts, numbered(record + 1)
                record += len(ids)
                after_comma = True
                continue
        start = pos
        try:
            pid, text, pos, closed = _member(buf, pos, stream.eof, record + 1, fail)
        except _NeedMore:
            if stream.eof:
                fail(len(buf), "truncated JSON (the file ends inside the object)")
            pending = len(buf) - start
            if pending > longest and pending - 6 * buf.count("\\", start) > longest:
                stream.close()
                raise over_limit(path, max_chars, f"passage {record + 1} (from {where(start)}) is still unfinished "
                                 f"after {pending:,} characters of JSON, longer than a passage within this "
                                 "limit can be") from None
            dropped_nl = buf.count("\n", 0, start)
            if dropped_nl:
                lines_before += dropped_nl
                col_before = start - buf.rfind("\n", 0, start) - 1
            else:
                col_before += start
            buf = buf[start:] + stream.read()
            # The member at 0 was cut by the buffer's end: the careful path finishes it
            # (matching the pattern again over a member longer than a chunk, at every
            # chunk, cost seconds per megabyte); the fast path resumes after it.
            careful_until = max(careful_until - start, 1)
            pos = 0
            continue
        if pid is None:  # closing brace
            if after_comma:
                fail(pos - 1, "trailing comma before '}'")
            break
        record += 1
        place = f"passage {record}"
        if len(pid) > max_chars or len(text) > max_chars:
            stream.close()
            what, n = ("id", len(pid)) if len(pid) > max_chars else ("text", len(text))
            raise over_limit(path, max_chars, f"{place} (id {pid[:40]!r}) has a {what} of {n:,} characters, "
                             "more than this limit")
        check_unicode(path, place, pid, "the id")
        check_unicode(path, place, text, "the text")
        yield [pid], [text], numbered(record)
        after_comma = not closed
        if closed:
            break
    # Only whitespace may follow the object.
    while True:
        rest = _WS.match(buf, pos).end()
        if rest < len(buf):
            fail(rest, "unexpected data after the JSON object")
        if stream.eof:
            break
        lines_before += buf.count("\n")
        buf, pos = stream.read(), 0
    if record == 0:
        raise InputError(path, None, "no passages (empty JSON object)")


def _fast_run(buf: str, pos: int):
    """The complete ``"id": "text",`` members at ``buf[pos:]``, decoded at C speed:
    ``(ids, texts, end)``; None when no member matches; the run's end (an int) when the
    run matched but must take the careful path.

    The run's end is first guessed as the buffer's last ``",`` and the guess kept only if
    everything before it decodes as members with string texts: JSON is read left to
    right without look-ahead, so a prefix that decodes whole holds exactly the members
    the careful path would find there (a guess inside a string, e.g. at ``\\",``, fails
    to decode). Why guess: the regular expression that finds the end for certain costs
    as much as the decoding (21 ms per 4 MB buffer); it is the fallback.
    """
    guess = buf.rfind('",', pos) + 1
    if guess > pos:
        run = _decode_run(buf, pos, guess)
        if run is not None and not isinstance(run, int):
            return run
    m = _MEMBERS.match(buf, pos)
    if m is None:
        return None
    return _decode_run(buf, pos, m.end() - 1)


def _decode_run(buf: str, pos: int, comma: int):
    """Decode ``buf[pos:comma]`` as members: ``(ids, texts, comma + 1)``, or ``comma + 1``
    when it does not decode cleanly (the careful path will say why, or read it)."""
    body = buf[pos:comma]
    end = comma + 1
    try:
        pairs = _PAIRS.decode("{" + body + "}")
    except (ValueError, RecursionError):  # control character, bad escape, cut string, ...
        return end
    ids = list(map(_FIRST, pairs))
    texts = list(map(_SECOND, pairs))
    if "" in ids or not set(map(type, texts)) <= {str}:  # C loops: 31K members a buffer
        return end
    # A lone surrogate can only come from an escape (the UTF-8 decoder refuses encoded
    # ones); an escaped pair decodes to one character, so only a lone one is found here.
    if SURROGATE_ESCAPE.search(body) and any(map(LONE_SURROGATE.search, ids + texts)):
        return end
    return ids, texts, end


def _member(buf: str, pos: int, eof: bool, number: int, fail):
    """Parse one ``"id": "text"`` member at ``pos`` (the careful path).

    Returns (id, text, next position, closed) where ``closed`` says the object ended
    after this member; (None, None, next, True) for the closing brace. Raises _NeedMore
    when the member runs past the end of the buffer.
    """
    i = _WS.match(buf, pos).end()
    if i >= len(buf):
        raise _NeedMore
    if buf[i] == "}":
        return None, None, i + 1, True
    if buf[i] != '"':
        fail(i, "expected a passage id (a JSON string)")
    pid_at = i
    pid, i = _scan(buf, i, eof, fail)
    i = _WS.match(buf, i).end()
    if i >= len(buf):
        raise _NeedMore
    if not pid:
        fail(pid_at, f"passage {number}: the passage id is empty")
    if buf[i] != ":":
        fail(i, "expected ':' after the passage id")
    i = _WS.match(buf, i + 1).end()
    if i >= len(buf):
        raise _NeedMore
    if buf[i] != '"':
        kind = _json_kind(buf, i)
        if kind is None and not eof:
            raise _NeedMore
        fail(i, f"passage {number} (id {pid!r}): text must be a string, got {kind or 'invalid JSON'}")
    text, i = _scan(buf, i, eof, fail)
    i = _WS.match(buf, i).end()
    if i >= len(buf):
        raise _NeedMore
    if buf[i] == ",":
        return pid, text, i + 1, False
    if buf[i] == "}":
        return pid, text, i + 1, True
    fail(i, "expected ',' or '}' after a passage")


def _scan(buf: str, quote_at: int, eof: bool, fail):
    try:
        return scanstring(buf, quote_at + 1, True)
    except json.JSONDecodeError as exc:
        # A string cut by the buffer end shows up as unterminated or as a cut escape.
        if not eof and (exc.msg.startswith("Unterminated string") or exc.pos >= len(buf) - 6):
            raise _NeedMore from None
        fail(exc.pos, exc.msg)


def _json_kind(buf: str, i: int) -> str | None:
    """Name the JSON value at ``buf[i]`` for an error message, or None if incomplete."""
    if buf[i] in "[{" and len(buf) - i > 1 and buf[i + 1] in "[{":
        return "a nested value"  # never parse it: 100,000 levels would overflow the stack
    try:
        value, _ = json.JSONDecoder().raw_decode(buf, i)
    except json.JSONDecodeError:
        return None
    except ValueError:  # an integer of over 4,300 digits: Python refuses to convert it
        return "a number"
    except RecursionError:
        return "a nested value"
    return kind_of(value)


def kind_of(value) -> str:
    """How an error message names a JSON value's type."""
    if value is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", list: "a list",
            dict: "an object"}.get(type(value), type(value).__name__)
