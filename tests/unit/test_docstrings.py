"""Every public name documents itself, numpydoc style, with an example that runs.

For each name in ``factcheck.__all__``: a docstring with a summary line, a Parameters
section naming exactly the signature's parameters, a Returns section for a function
that returns something, and an Example section. The examples are then run as doctests
(against the demo data, in a temporary directory): an example is marked
``# doctest: +SKIP`` only where it needs data a test does not have (a trained run).
"""

from __future__ import annotations

import doctest
import importlib
import inspect
import pydoc
import re

import pytest

import factcheck

from helpers import OPEN_INSTALLED, ROOT

# Names that left the package root for their modules (docs/python-api.md lists them): held
# to the same standard, their examples run too.
SUBMODULE_NAMES = {
    "factcheck.formats.evidence": ("source_spec",), "factcheck.tagging.job": ("TagJob",),
    "factcheck.tagging.vectors": ("PassageVectorJob",), "factcheck.training.rerank": ("train_reranker",),
    "factcheck.retrieval.base": ("run_retrieval",),
    "factcheck.classification.model": ("load_classifier", "save_classifier"),
    "factcheck.evaluation.evaluate": ("evaluate_files",), "factcheck.evaluation.course_metric": ("course_score",),
    "factcheck.evaluation.ir_metrics": ("judged_metrics",), "factcheck.pipeline.workbench": ("rank_queries",),
    "factcheck.formats.qrels": ("read_queries", "read_qrels", "read_trec_run", "write_trec_run"),
}
# The methods a user calls on the estimators and the system; each is held to the same
# standard as a public function (Parameters, Returns).
MAIN_METHODS = {"fit", "rank", "retrieve", "check", "run", "load", "save"}
# Examples that need the open extra (pretrained embeddings).
OPEN_NAMES = {"DenseRetriever", "HybridRetriever", "PassageVectorJob", "PoolRetriever"}


def public_callables():
    moved = [(name, getattr(importlib.import_module(module), name))
             for module, names in SUBMODULE_NAMES.items() for name in names]
    return [(name, getattr(factcheck, name)) for name in factcheck.__all__] + moved


def sections(doc: str) -> dict[str, list[str]]:
    """numpydoc sections: title (a line underlined with dashes) -> its lines."""
    lines = doc.splitlines()
    out, current = {"": []}, ""
    for i, line in enumerate(lines):
        if i + 1 < len(lines) and re.fullmatch(r"-{3,}", lines[i + 1].strip()) and line.strip():
            current = line.strip()
            out[current] = []
        elif not re.fullmatch(r"-{3,}", line.strip()):
            out[current].append(line)
    return out


def documented_parameters(lines: list[str]) -> set[str]:
    """Names on the unindented lines of a Parameters section (``a, b : int`` -> a, b)."""
    names = set()
    for line in lines:
        if line and not line[0].isspace():
            head = line.split(" : ")[0]
            names.update(n.strip().lstrip("*") for n in head.split(","))
    return names


def signature_parameters(obj) -> list[str] | None:
    target = obj.__init__ if inspect.isclass(obj) else obj
    if inspect.isclass(obj) and obj.__init__ is object.__init__:
        return []
    try:
        sig = inspect.signature(target)
    except (TypeError, ValueError):
        return None
    params = [p for p in sig.parameters.values() if p.name not in ("self", "cls")]
    variadic = [inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD]
    if params and [p.kind for p in params] == variadic[:len(params)]:
        return None  # a built-in's (*args, **kwargs): nothing to compare against
    return [p.name for p in params]


def returns_something(func) -> bool:
    annotation = inspect.signature(func).return_annotation
    return annotation not in ("None", None)


def problems_of(name: str, obj, *, example_required: bool = True) -> list[str]:
    doc = inspect.getdoc(obj)
    if not doc or not doc.strip():
        return [f"{name}: no docstring"]
    found = []
    parts = sections(doc)
    if not parts[""] or not parts[""][0].strip():
        found.append(f"{name}: no summary line")
    params = signature_parameters(obj)
    if params is None or params:
        if "Parameters" not in parts:
            found.append(f"{name}: no Parameters section")
        elif params:
            documented = documented_parameters(parts["Parameters"])
            missing = [p for p in params if p not in documented]
            extra = sorted(documented - set(params))
            if missing or extra:
                found.append(f"{name}: Parameters do not match the signature (missing {missing}, extra {extra})")
    if not inspect.isclass(obj) and returns_something(obj) and "Returns" not in parts:
        found.append(f"{name}: no Returns section")
    if example_required and not any(t in parts for t in ("Example", "Examples")):
        found.append(f"{name}: no Example section")
    elif example_required and ">>>" not in "\n".join(parts.get("Example", parts.get("Examples", []))):
        found.append(f"{name}: the Example section has no >>> example")
    return found


def test_every_public_name_has_a_numpydoc_docstring_with_parameters_and_an_example():
    problems = []
    for name, obj in public_callables():
        problems += problems_of(name, obj)
        if inspect.isclass(obj) and not issubclass(obj, BaseException):
            for attr, member in vars(obj).items():
                if attr.startswith("_") or not callable(getattr(obj, attr)):
                    continue
                member = getattr(obj, attr)
                if attr in MAIN_METHODS:
                    problems += problems_of(f"{name}.{attr}", member, example_required=False)
                elif not inspect.getdoc(member):
                    problems.append(f"{name}.{attr}: no docstring")
    assert problems == []


def test_the_root_holds_no_constants_and_at_most_35_names():
    # d18b6f9: 49 names, among them METHODS, MODES and LABELS (now in their modules).
    assert not [n for n in factcheck.__all__ if not callable(getattr(factcheck, n))]
    assert len(factcheck.__all__) <= 35


def test_the_checker_can_fail():
    def bare(a, b):
        return a

    def good(a, b) -> int:
        """Summary.

        Parameters
        ----------
        a, b : int
            Numbers.

        Returns
        -------
        int

        Example
        -------
        >>> good(1, 2)
        1
        """
    assert {p.split(": ", 1)[1] for p in problems_of("bare", bare)} == {"no docstring"}
    good.__doc__ = good.__doc__.replace("a, b : int", "a : int")
    assert problems_of("good", good) == ["good: Parameters do not match the signature (missing ['b'], extra [])"]
    good.__doc__ = good.__doc__.split("Returns")[0]
    assert "good: no Returns section" in problems_of("good", good)
    assert "good: no Example section" in problems_of("good", good)


def test_help_shows_parameters_and_an_example():
    text = pydoc.render_doc(factcheck.BM25Retriever, renderer=pydoc.plaintext)
    for needle in ("Parameters", "k1 : float", "Example", ">>> bm25 = factcheck.BM25Retriever(k=3)",
                   "rank(self, claims, k", "retrieve(self, claims, depth", "get_params",
                   "set_params"):
        assert needle in text, needle


def doctests():
    finder = doctest.DocTestFinder(recurse=True, exclude_empty=True)
    seen = {}
    import factcheck.errors
    for name, obj in [("factcheck", factcheck), ("factcheck.errors", factcheck.errors), *public_callables()]:
        module = inspect.getmodule(obj)
        for test in finder.find(obj, name, module=module, globs=dict(vars(module))):
            if test.examples:
                seen.setdefault(test.name, (name, test))
    return sorted(seen.values(), key=lambda item: item[1].name)


DOCTESTS = doctests()


@pytest.fixture(scope="module")
def demo_cwd(tmp_path_factory):
    """A directory with ``data/demo`` in it, as the repository root has: examples use the
    demo data by its path and write under ``out/``."""
    root = tmp_path_factory.mktemp("doctest")
    (root / "data").mkdir()
    (root / "data" / "demo").symlink_to(ROOT / "data" / "demo")
    return root


@pytest.mark.parametrize("name, test", DOCTESTS, ids=[t.name for _, t in DOCTESTS])
def test_docstring_examples_run(name, test, demo_cwd, monkeypatch):
    if name in OPEN_NAMES and not OPEN_INSTALLED:
        pytest.skip("needs the open extra (pip install -e '.[open]')")
    monkeypatch.chdir(demo_cwd)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    output = []
    runner.run(test, out=output.append)
    assert runner.failures == 0, "".join(output)


def test_most_examples_really_run():
    """``+SKIP`` is for examples that need a trained run; the rest must execute."""
    examples = [ex for _, t in DOCTESTS for ex in t.examples]
    skipped = [ex for ex in examples if ex.options.get(doctest.SKIP)]
    assert len(examples) >= 100 and len(skipped) <= len(examples) // 4, (len(examples), len(skipped))
