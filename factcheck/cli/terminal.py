"""Where text meets a terminal: control characters (C0 and C1 but tab and newline, DEL, lone
surrogates) are shown as escapes (``\\u001b``), on stdout when it is a terminal and on every
stderr line we print, so text from a file cannot move the cursor or clear the screen.
"""

from __future__ import annotations

import contextlib
import re
import sys

CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def escaped(text: str) -> str:
    """``text`` with every control character as ``\\uXXXX``."""
    return CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


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
