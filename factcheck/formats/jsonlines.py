"""JSON lines, the one record primitive every JSONL reader builds on.

One JSON object a line (blank lines skipped), streamed from a plain or gzipped file with
the line number of each record, so every reader above it (generic JSONL passages and
claims, FEVER, Climate-FEVER, BEIR) names the same place the same way and refuses the
same things: invalid JSON, a value that is not an object, a key twice in one object
(``json.loads`` would keep the last one silently), a line over a length cap (checked
before ``json.loads``, which would otherwise build the whole value first).

Example
-------
>>> from pathlib import Path
>>> _ = Path("claims.jsonl").write_text('{"id": 1, "claim": "CO2 is a gas."}\\n')
>>> [(place, record["claim"]) for place, record in iter_records(Path("claims.jsonl"))]
[('line 1', 'CO2 is a gas.')]
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

from factcheck.errors import InputError
from factcheck.formats.course_json import TOO_LONG_NUMBER, kind_of
from factcheck.formats.utf8_stream import Utf8Stream

__all__ = ["iter_records", "first_record", "DuplicateKey", "decode_object"]


class DuplicateKey(ValueError):
    """A key seen twice in one JSON object (raised by :func:`decode_object`'s hook)."""

    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _no_duplicates(pairs):
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen = set()
        for k, _ in pairs:
            if k in seen:
                raise DuplicateKey(k)
            seen.add(k)
    return obj


def decode_object(path, place: str, line: str, *, max_chars: int | None = None, what: str = "a JSON object"):
    """One line as a JSON object, or the one-line InputError saying why not."""
    if max_chars is not None:
        n = len(line) - line.endswith("\n")  # the record, not its line break
        if n > max_chars:
            raise InputError(path, place, f"record of {n:,} characters, over the limit of {max_chars:,} (max_chars)")
    try:
        obj = json.loads(line, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as exc:
        raise InputError(path, f"{place}, column {exc.colno}", f"invalid JSON: {exc.msg}") from None
    except DuplicateKey as dup:
        raise InputError(path, place, f"duplicate key {dup.key!r} in one JSON object") from None
    except RecursionError:
        raise InputError(path, place, "JSON nested too deeply") from None
    except ValueError:  # an integer of over 4,300 digits
        raise InputError(path, place, f"invalid JSON: {TOO_LONG_NUMBER}") from None
    if not isinstance(obj, dict):
        raise InputError(path, place, f"expected {what}, got {kind_of(obj)}")
    return obj


def iter_records(path: Path, *, max_chars: int | None = None, what: str = "a JSON object",
                 max_passage_chars: int | None = None) -> Iterator[tuple[str, dict]]:
    """``(place, object)`` for every non-blank line of ``path``, in file order.

    Parameters
    ----------
    path : Path
        A JSON-lines file (``.gz`` read transparently).
    max_chars : int or None
        Refuse a line longer than this many characters before decoding it.
    what : str
        How an error names the expected record (``'a JSON object with "id" and "text"'``).
    max_passage_chars : int or None
        A knowledge source's passage cap: a line longer than a record within it can be is
        refused while it streams, before it is held whole
        (:meth:`~factcheck.formats.utf8_stream.Utf8Stream.lines`).

    ``place`` is ``"line N"`` (1-based, blank lines counted), the form every error uses.
    """
    path = Path(path)
    stream = Utf8Stream(path)
    try:
        for lineno, line in enumerate(stream.lines(max_passage_chars), start=1):
            if not line or line.isspace():
                continue
            yield f"line {lineno}", decode_object(path, f"line {lineno}", line, max_chars=max_chars, what=what)
    finally:
        stream.close()


def first_record(path: Path, *, max_chars: int | None = None) -> dict | None:
    """The first record of a JSON-lines file (what format detection looks at), or None when
    the first non-blank line is not a JSON object on its own (a pretty-printed JSON file)."""
    stream = Utf8Stream(Path(path))
    try:
        for line in stream.lines():
            if line.strip():
                try:
                    return decode_object(path, "line 1", line, max_chars=max_chars)
                except InputError:
                    return None
        return None
    finally:
        stream.close()
