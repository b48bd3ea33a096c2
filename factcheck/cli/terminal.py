"""Where text meets a terminal: control characters (C0 and C1 but tab and newline, DEL, lone
surrogates) and format characters (Unicode's Cf: bidi overrides and isolates, zero-width
ones) are shown as escapes (``\\u001b``, ``\\u202e``), on stdout when it is a terminal and on
every stderr line we print, so text from a file cannot move the cursor, clear the screen or
reorder what follows it. A :func:`field` (an id, a title) escapes line breaks and tabs too,
wherever it is printed: a row of output stays one row.
"""

from __future__ import annotations

import contextlib
import re
import sys

# Unicode 15's Cf, listed (re has no \p{Cf}; tests/reliability/test_one_line.py checks it against unicodedata).
FORMAT = ("\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e"
          "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
          "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f")
CONTROL = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff{FORMAT}]")
FIELD = re.compile(f"[\x00-\x1f\x7f-\x9f\ud800-\udfff\u2028\u2029{FORMAT}]")


def escaped(text: str) -> str:
    """``text`` with every control and format character as ``\\uXXXX``."""
    return CONTROL.sub(_escape, text)


def field(text) -> str:
    """One field of a printed row (an id, a title), on one line: :func:`escaped`, and line
    breaks and tabs as escapes too."""
    return FIELD.sub(_escape, str(text))


def _escape(match) -> str:
    code = ord(match.group())
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


class EscapedStream:
    """A text stream whose writes are :func:`escaped`; everything else is the stream's."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        return self._stream.write(escaped(text))

    def __getattr__(self, name):
        return getattr(self._stream, name)


@contextlib.contextmanager
def escaped_stdout():
    """stdout escaped while the block runs, if it is a terminal."""
    original = sys.stdout
    if getattr(original, "isatty", lambda: False)():
        sys.stdout = EscapedStream(original)
    try:
        yield
    finally:
        sys.stdout = original
