"""nltk's PorterStemmer, loaded without running nltk's package ``__init__``.

Why: ``import nltk.stem.porter`` first runs ``nltk/__init__.py``, which imports most of
nltk and, through it, scipy.stats and pandas: 1.1-1.6 s of CPU per process (measured
here, nltk 3.10), while the stemmer module itself needs only ``nltk.redos``,
``nltk.termsec`` and ``nltk.stem.api`` (~10 ms). Every tagging worker and every CLI
command that stems would pay it. The stemmer is nltk's own code either way;
``tests/unit/test_text.py`` checks its stems against a normally imported nltk's.

How: for the duration of the import, ``sys.modules`` holds bare package objects for
``nltk`` and ``nltk.stem`` (so their ``__init__`` files do not run); afterwards every
``nltk`` module entry added is removed again, so a later ``import nltk`` elsewhere in the
process gets the complete package. If any nltk module is already imported, or the bare
load fails (a future nltk whose stemmer needs more of its package), the normal import is
used. Two limits, both harmless here: a thread of the same process that imports nltk
during the ~10 ms window would get the bare package (factcheck loads the stemmer before
it starts threads: workers in ``warm_up``, the app at start-up); and the stemmer's class is
not ``nltk.stem.porter.PorterStemmer`` of a later full import, so ``isinstance`` checks
against that and pickling fail (nothing pickles it: the analyzer's memo is not pickled).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import sys
import threading
import types

__all__ = ["porter_stemmer"]

_LOADING = threading.Lock()


def _is_nltk(name: str) -> bool:
    return name == "nltk" or name.startswith("nltk.")


def _porter_module_alone() -> types.ModuleType:
    spec = importlib.util.find_spec("nltk")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("nltk is not installed as a package")
    root = list(spec.submodule_search_locations)[0]
    before = set(sys.modules)
    for name, path in (("nltk", root), ("nltk.stem", os.path.join(root, "stem"))):
        bare = types.ModuleType(name)
        bare.__path__ = [path]
        sys.modules[name] = bare
    try:
        return importlib.import_module("nltk.stem.porter")
    finally:
        for name in [n for n in sys.modules if _is_nltk(n) and n not in before]:
            del sys.modules[name]


@functools.cache
def porter_stemmer():
    """nltk's ``PorterStemmer()`` (default NLTK_EXTENSIONS mode), one per process.

    Example
    -------
    >>> porter_stemmer().stem("warming")
    'warm'
    """
    with _LOADING:
        module = None
        if not any(map(_is_nltk, sys.modules)):
            try:
                module = _porter_module_alone()
            except Exception:  # any failure of the shortcut: take nltk's normal import
                module = None
        if module is None:
            module = importlib.import_module("nltk.stem.porter")
        return module.PorterStemmer()
