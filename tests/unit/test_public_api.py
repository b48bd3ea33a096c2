"""The public API: ``import factcheck`` is the library surface.

The README's "Use it from Python" block is executed here as written, so the example a
newcomer copies is known to work.
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys

import pytest

import factcheck

from helpers import ROOT


def readme_example() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Use it from Python", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 1, "the section should hold exactly one python block"
    return blocks[0]


def test_all_lists_the_api_and_every_name_resolves_to_its_one_definition():
    assert {"build_index", "TagIndex", "BM25Retriever", "TagRuleRetriever", "RerankRetriever",
            "make_classifier", "FactChecker", "read_claims", "evaluate", "InputError"} <= set(factcheck.__all__)
    for name in factcheck.__all__:
        obj = getattr(factcheck, name)
        module = importlib.import_module(factcheck._API[name])
        assert getattr(module, name) is obj, name
        defined_in = getattr(obj, "__module__", module.__name__)
        assert defined_in.startswith("factcheck"), (name, defined_in)
    with pytest.raises(AttributeError):
        factcheck.no_such_name  # noqa: B018


def test_import_is_lazy():
    """``import factcheck`` must not pull in numpy, scikit-learn or the app (``--help`` speed)."""
    code = "import sys, factcheck; print(sorted(m for m in ('numpy', 'sklearn', 'fastapi') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.stdout.strip() == "[]"


def test_readme_example_runs(tmp_path, capsys, monkeypatch):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "demo").symlink_to(ROOT / "data" / "demo")
    monkeypatch.chdir(tmp_path)
    exec(compile(readme_example(), "README.md (Use it from Python)", "exec"), {"__name__": "__readme__"})
    out = capsys.readouterr().out
    assert "evidence F" in out and "->" in out
    assert (tmp_path / "out" / "api-demo" / "index" / "manifest.json").is_file()


def test_fact_checker_takes_plain_strings_keyed_by_position(tmp_path):
    index = factcheck.build_index(ROOT / "data" / "demo" / "evidence.json", tmp_path / "index", progress=False)
    bm25 = factcheck.BM25Retriever(k=2).fit(index)
    train = factcheck.read_claims(ROOT / "data" / "demo" / "train-claims.json", require_labels=True)
    X = [(c.text, index.texts_of(s.ids)) for c, s in zip(train, bm25.retrieve([c.text for c in train]))]
    checker = factcheck.FactChecker(index, bm25, factcheck.make_classifier().fit(X, [c.label for c in train]), {})
    one = checker.check("Sea levels are rising.")
    many = checker.check(["Sea levels are rising.", "The Arctic is cooling."])
    assert list(one.labels) == ["0"] and list(many.labels) == ["0", "1"]
    assert one.labels["0"] == many.labels["0"] and one.evidences["0"] == many.evidences["0"]
    assert set(many.labels.values()) <= set(factcheck.LABELS)


def test_library_errors_name_parameters_not_flags():
    with pytest.raises(factcheck.InputError) as err:
        factcheck.make_retriever("no-such-method")
    assert err.value.one_line().startswith("method: ") and "--" not in err.value.one_line()
    assert err.value.one_line({"method": "--method"}).startswith("--method: ")
