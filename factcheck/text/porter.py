"""nltk's PorterStemmer, loaded without running nltk's costly package ``__init__``
(docs/decisions.md, "Tagging workers"): bare ``nltk`` and ``nltk.stem`` packages stand in
for the import, then are removed. Limits: a thread importing nltk meanwhile gets the bare
package, and the class is not a later full import's ``PorterStemmer``.
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
