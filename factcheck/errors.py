"""Errors that reach users as one line naming the file and the place (anything else is a
bug and keeps its traceback), and the library's checks of parameter values, worded as the
command line's checks of its flags."""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from numbers import Integral, Real

__all__ = ["FactcheckWarning", "InputError", "IntegrityError", "Interval", "as_path", "check_choice",
           "check_number", "install_hint", "ref", "require_extra", "validate_params"]

_REF = re.compile("\u27e8([A-Za-z_][\\w.]*)\u27e9")


def ref(param: str) -> str:
    """Another parameter named inside an error message, rendered as the caller spells it
    (``text_column`` from Python, ``--claims-text-column`` from the command line).

    Example
    -------
    >>> error = InputError(None, None, f"name it with {ref('text_column')}", param="format")
    >>> str(error), error.one_line({"format": "--format", "text_column": "--text-column"})
    ('format: name it with text_column', '--format: name it with --text-column')
    """
    return f"\u27e8{param}\u27e9"


class InputError(ValueError):
    """A problem with something the user gave us (exit status 2, no traceback); a :class:`ValueError`.

    Parameters
    ----------
    path : str or Path or None
        The file at fault, if any.
    place : str or None
        Where in it (``line 12``, ``claim-1234``); with ``param``, the value at fault.
    message : str
        What is wrong and, where it helps, what to do.
    param : str or None, keyword-only
        The library parameter at fault (``"method"``); the CLI renders it, and those named in
        ``message`` through :func:`ref`, as its flags (``one_line({"method": "--method"})``).

    Example
    -------
    >>> str(InputError("claims.json", "line 3", "invalid JSON"))
    'claims.json: line 3: invalid JSON'
    >>> InputError(None, None, "unknown method 'x'", param="method").one_line({"method": "--method"})
    "--method: unknown method 'x'"
    >>> InputError(None, "tcp://h:1", "cannot connect", param="scheduler").one_line()
    'scheduler tcp://h:1: cannot connect'
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
        flags = flags or {}
        name = flags.get(self.param, self.param) if self.param else None
        where = " ".join(p for p in (name, self.place) if p)
        parts = [p for p in (self.path, where) if p]
        prefix = ": ".join(parts)
        message = _REF.sub(lambda m: flags.get(m[1], m[1]), self.message)
        text = f"{prefix}: {message}" if prefix else message
        return " ".join(text.split())  # never more than one line

    def renamed(self, names: dict[str, str]) -> "InputError":
        """The same error with its parameters renamed by ``names`` (``{"format": "claims.format"}``)."""
        message = _REF.sub(lambda m: ref(names.get(m[1], m[1])), self.message)
        return type(self)(self.path, self.place, message, param=names.get(self.param, self.param))


def _rebuild(cls, path, place, message, param):
    return cls(path, place, message, param=param)


class IntegrityError(InputError):
    """An index on disk does not match its manifest (corrupt, truncated, missing, extra).

    Parameters
    ----------
    path, place, message, param
        As for :class:`InputError`.

    Example
    -------
    >>> str(IntegrityError("out/index", "shard 3", "checksum mismatch; rebuild it"))
    'out/index: shard 3: checksum mismatch; rebuild it'
    """


class FactcheckWarning(UserWarning):
    """Something the user should know that does not stop the run; the CLI shows it as one line.

    Parameters
    ----------
    message : str
        The warning, one line.

    Example
    -------
    >>> str(FactcheckWarning("too few hold-out claims to choose; using bm25"))
    'too few hold-out claims to choose; using bm25'
    """


def check_number(value, param: str, *, integer: bool = False, low: float | None = None,
                 high: float | None = None):
    """``value`` if it is a finite number (an integer if ``integer``; never a bool) within the
    inclusive bounds ``low`` and ``high``, else an :class:`InputError` naming ``param``.

    Example
    -------
    >>> check_number(1.5, "b", low=0, high=1)
    Traceback (most recent call last):
    ...
    factcheck.errors.InputError: b: must be in [0, 1], got 1.5
    """
    kind = Integral if integer else Real
    if isinstance(value, bool) or not isinstance(value, kind):
        raise InputError(None, None, f"expected {'an integer' if integer else 'a number'}, got {value!r}",
                         param=param)
    if not math.isfinite(value) or (low is not None and value < low) or (high is not None and value > high):
        if high is not None:
            where = f"in [{low:g}, {high:g}]" if low is not None else f"at most {high:g}"
        elif low is not None:
            where = f"at least {low:g}" if integer else f"finite and at least {low:g}"
        else:
            where = "finite"
        raise InputError(None, None, f"must be {where}, got {value!r}", param=param)
    return value


def check_choice(value, param: str, choices) -> str:
    """``value`` if it is one of ``choices``, else an :class:`InputError` naming ``param``.

    Example
    -------
    >>> check_choice("sum", "fusion", ("max", "rrf"))
    Traceback (most recent call last):
    ...
    factcheck.errors.InputError: fusion: unknown fusion 'sum'; expected one of max, rrf
    """
    if not isinstance(value, str) or value not in choices:
        raise InputError(None, None, f"unknown {param} {value!r}; expected one of {', '.join(choices)}",
                         param=param)
    return value


@dataclass(frozen=True)
class Interval:
    """A parameter's constraint: a number of ``kind`` (int or float) in ``[low, high]`` (None: no bound).

    Example
    -------
    >>> Interval(float, 0, 1).describe(), Interval(int, 1).describe()
    ('in [0, 1]', '>= 1')
    """

    kind: type
    low: float | None = None
    high: float | None = None

    def check(self, value, param: str):
        return check_number(value, param, integer=self.kind is int, low=self.low, high=self.high)

    def describe(self) -> str:
        """The bounds as a command's help shows them."""
        return f"in [{self.low:g}, {self.high:g}]" if self.high is not None else f">= {self.low:g}"


def validate_params(obj, prefix: str = "") -> None:
    """Check the parameters of ``obj`` that ``type(obj)._parameter_constraints`` declares, in
    order (name -> :class:`Interval`, or a tuple of the allowed strings): an :class:`InputError`
    naming the first bad one, ``prefix`` before its name. The one place a parameter's bounds
    are written (scikit-learn's convention): command-line options read them there too.

    Example
    -------
    >>> class Rule:
    ...     _parameter_constraints = {"t": Interval(float, 0, 1), "how": ("max", "rrf")}
    ...     t, how = 0.5, "sum"
    >>> validate_params(Rule(), "rule.")
    Traceback (most recent call last):
    ...
    factcheck.errors.InputError: rule.how: unknown rule.how 'sum'; expected one of max, rrf
    """
    for name, constraint in type(obj)._parameter_constraints.items():
        value = getattr(obj, name)
        if isinstance(constraint, tuple):
            check_choice(value, prefix + name, constraint)
        else:
            constraint.check(value, prefix + name)


def as_path(value, param: str) -> Path:
    """``value`` as a :class:`~pathlib.Path`, or an InputError naming ``param``.

    Example
    -------
    >>> as_path(42, "path")
    Traceback (most recent call last):
    ...
    factcheck.errors.InputError: path: expected a path (str or os.PathLike), got int
    """
    if not isinstance(value, (str, os.PathLike)):
        raise InputError(None, None, f"expected a path (str or os.PathLike), got {type(value).__name__}", param=param)
    return Path(value)


def install_hint(extra: str, what: str) -> str:
    """The one line saying which optional extra ``what`` needs and how to install it.

    Example
    -------
    >>> install_hint("app", "the explain app")
    "the explain app needs the optional extra: pip install -e '.[app]'"
    """
    return f"{what} needs the optional extra: pip install -e '.[{extra}]'"


def require_extra(extra: str, what: str, *modules: str, param: str | None = None) -> None:
    """Import ``modules``; an :class:`InputError` (:func:`install_hint`) if one is not installed.

    Example
    -------
    >>> require_extra("plots", "drawing figures", "no_such_module_for_the_example")
    Traceback (most recent call last):
    ...
    factcheck.errors.InputError: drawing figures needs the optional extra: pip install -e '.[plots]'
    """
    import importlib
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            raise InputError(None, None, install_hint(extra, what), param=param) from None
