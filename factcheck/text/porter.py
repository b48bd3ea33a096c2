"""nltk's PorterStemmer, loaded without running nltk's package ``__init__`` (which costs
1.1-1.6 CPU-s per process: docs/decisions.md, "Tagging workers").

For the import, ``sys.modules`` holds bare package objects for ``nltk`` and ``nltk.stem``;
afterwards every ``nltk`` entry added is removed, so a later ``import nltk`` gets the whole
package. With nltk already imported, or if the bare load fails, the normal import is used.
Two limits: a thread importing nltk during the ~10 ms window would get the bare package
(factcheck loads the stemmer before it starts threads), and the class is not a later full
import's ``PorterStemmer`` (``isinstance`` and pickling fail; nothing pickles it).
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
