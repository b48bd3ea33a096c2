"""Errors that reach users as one line, naming the file and the place.

Bad input is the user's problem to fix, so it must say *where*; a traceback would
only say where in our code. Anything that is not an :class:`InputError` is a bug
and keeps its traceback.
"""

from __future__ import annotations


class InputError(Exception):
    """A problem with something the user gave us (exit status 2, no traceback).

    Parameters
    ----------
    path : str or Path or None
        The file at fault, if any.
    place : str or None
        Where in it (``line 12``, ``claim-1234``), or what else is at fault; with
        ``param``, the parameter's value at fault (rendered ``--scheduler ADDRESS``, as typed).
    message : str
        What is wrong and, where it helps, what to do.
    param : str or None, keyword-only
        The library parameter at fault (``"method"``, ``"chunk_window"``). Library code
        names parameters, never command-line flags; the CLI renders them as its flags
        (``one_line({"method": "--method"})``), a Python user sees the parameter name.

    Example
    -------
    >>> InputError(None, None, "unknown method 'x'", param="method").one_line()
    "method: unknown method 'x'"
    >>> InputError(None, None, "unknown method 'x'", param="method").one_line({"method": "--method"})
    "--method: unknown method 'x'"
    >>> InputError(None, "tcp://h:1", "cannot connect", param="scheduler").one_line({"scheduler": "--scheduler"})
    '--scheduler tcp://h:1: cannot connect'
    """

    def __init__(self, path, place: str | None, message: str, *, param: str | None = None):
        self.path = str(path) if path is not None else None
        self.place = place
        self.message = message
        self.param = param
        super().__init__(self.one_line())

    def __reduce__(self):
        # Errors raised in worker processes travel back pickled; keep them InputErrors.
        return (_rebuild, (type(self), self.path, self.place, self.message, self.param))

    def one_line(self, flags: dict[str, str] | None = None) -> str:
        """The error as one line; ``flags`` maps parameter names to how the caller spells them."""
        name = (flags or {}).get(self.param, self.param) if self.param else None
        # A parameter and its value read as the user typed them: "--scheduler ADDRESS".
        where = " ".join(p for p in (name, self.place) if p)
        parts = [p for p in (self.path, where) if p]
        prefix = ": ".join(parts)
        text = f"{prefix}: {self.message}" if prefix else self.message
        return " ".join(text.split())  # never more than one line


def _rebuild(cls, path, place, message, param):
    return cls(path, place, message, param=param)


class IntegrityError(InputError):
    """An index on disk does not match its manifest (corrupt, truncated, missing, extra)."""


class FactcheckWarning(UserWarning):
    """Something the user should know that does not stop the run (e.g. a default used
    because the data was too small to choose). The CLI shows it as one plain line."""
