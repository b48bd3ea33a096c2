"""Errors that reach users as one line, naming the file and the place.

Bad input is the user's problem to fix, so it must say *where*; a traceback would
only say where in our code. Anything that is not an :class:`InputError` is a bug
and keeps its traceback.
"""

from __future__ import annotations


class InputError(Exception):
    """A problem with a file the user gave us (exit status 2, no traceback)."""

    def __init__(self, path, place: str | None, message: str):
        self.path = str(path) if path is not None else None
        self.place = place
        self.message = message
        super().__init__(self.one_line())

    def __reduce__(self):
        # Errors raised in worker processes travel back pickled; keep them InputErrors.
        return (type(self), (self.path, self.place, self.message))

    def one_line(self) -> str:
        parts = [p for p in (self.path, self.place) if p]
        prefix = ": ".join(parts)
        text = f"{prefix}: {self.message}" if prefix else self.message
        return " ".join(text.split())  # never more than one line


class IntegrityError(InputError):
    """An index on disk does not match its manifest (corrupt, truncated, missing, extra)."""


class FactcheckWarning(UserWarning):
    """Something the user should know that does not stop the run (e.g. a default used
    because the data was too small to choose). The CLI shows it as one plain line."""
