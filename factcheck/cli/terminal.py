"""Where text meets a terminal: a control character of a passage, a claim or a message is
shown as its escape (``\\u001b``), so text from a file can neither move the cursor, retitle
the window nor clear the screen.

* stdout, when it is a terminal, is :class:`EscapedStream` for the whole command; ``--json``
  output stays valid JSON of the same text (the escapes are JSON's own). Written to a file or
  a pipe, text is written as it is.
* the lines we print on stderr (the error, notes, warnings) go through :func:`escaped`
  wherever they go.

Tab and newline are kept; C0 and C1 controls, DEL and lone surrogates (bytes that were not
UTF-8) are escaped.
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
