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


@pytest.mark.slow
def test_import_is_lazy():
    """``import factcheck`` must not pull in numpy, scikit-learn, the app or the plots (``--help`` speed;
    the app and the plots are extras)."""
    code = ("import sys, factcheck; "
            "print(sorted(m for m in ('numpy', 'sklearn', 'fastapi', 'matplotlib') if m in sys.modules))")
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
    assert out.startswith("0 ") and "The cat sat on the mat." in out.splitlines()[0]  # the in-memory search
    assert (tmp_path / "out" / "api-demo" / "index" / "manifest.json").is_file()


@pytest.fixture(scope="module")
def checker(tmp_path_factory):
    index = factcheck.build_index(ROOT / "data" / "demo" / "evidence.json", tmp_path_factory.mktemp("api") / "index",
                                  progress=False)
    bm25 = factcheck.BM25Retriever(k=2).fit(index)
    train = factcheck.read_claims(ROOT / "data" / "demo" / "train-claims.json", require_labels=True)
    X = [(c.text, index.texts_of(s.ids)) for c, s in zip(train, bm25.retrieve([c.text for c in train]))]
    return factcheck.FactChecker(index, bm25, factcheck.make_classifier().fit(X, [c.label for c in train]))


def test_fact_checker_answers_one_string_with_one_verdict_and_a_list_in_input_order(checker):
    texts = ["Sea levels are rising.", "The Arctic is cooling.", "Sea levels are rising."[::-1]]
    one = checker.check(texts[0])
    many = checker.check(texts)
    assert isinstance(one, factcheck.Verdict) and isinstance(many, factcheck.Verdicts)
    assert len(many) == 3 and [v.text for v in many] == texts
    assert many[0] == one  # the same claim alone or among others: the same verdict
    assert many.labels == [v.label for v in many] and set(many.labels) <= set(checker.classifier.classes_)
    assert many.evidences[1] == many[1].evidences == checker.retriever.retrieve(texts[1]).ids
    assert many[-1].text == texts[-1] and [v.text for v in many[1:]] == texts[1:]
    assert many.probabilities[0] == one.probabilities and abs(sum(one.probabilities.values()) - 1) < 1e-9
    assert len(checker.check([])) == 0


def test_fact_checker_keeps_claim_ids_reachable_by_id(checker):
    claims = [factcheck.Claim("claim-b", "The Arctic is cooling."), factcheck.Claim("claim-a", "Sea levels are rising.")]
    verdicts = checker.check(claims)
    assert verdicts.ids == ["claim-b", "claim-a"] and list(verdicts.by_id) == ["claim-b", "claim-a"]
    assert verdicts.by_id["claim-a"] == verdicts[1] and verdicts[1].id == "claim-a"
    assert checker.check(claims[1]).label == verdicts.by_id["claim-a"].label
    assert verdicts.predictions() == {v.id: {"evidences": v.evidences, "claim_label": v.label} for v in verdicts}
    assert list(verdicts.predictions()) == ["claim-b", "claim-a"]  # the order written to the leaderboard file


def test_fact_checker_refuses_duplicate_claim_ids_before_any_work(checker, monkeypatch):
    monkeypatch.setattr(checker.retriever, "retrieve", lambda *a: pytest.fail("retrieved before checking ids"))
    with pytest.raises(factcheck.InputError) as err:
        checker.check([factcheck.Claim("c1", "Sea levels are rising."), factcheck.Claim("c1", "Ice melts.")])
    assert err.value.one_line() == "claims [1]: duplicate claim id 'c1' (also at [0])"


def test_library_errors_name_parameters_not_flags():
    with pytest.raises(factcheck.InputError) as err:
        factcheck.make_retriever("no-such-method")
    assert err.value.one_line().startswith("method: ") and "--" not in err.value.one_line()
    assert err.value.one_line({"method": "--method"}).startswith("--method: ")


def test_a_ranking_is_a_sequence_of_hits(demo_index):
    found = factcheck.search(demo_index, "Sea levels are rising.", k=3)
    assert len(found) == 3 and len(list(found)) == 3
    first, last = found[0], found[-1]
    assert isinstance(first, factcheck.Hit) and type(first.score) is float
    assert (first.id, first.score, first.title, first.text) == (found.ids[0], found.scores[0], None, found.texts[0])
    assert last.id == found.ids[2] and [h.id for h in found] == found.ids
    assert found[1:].ids == found.ids[1:] and found[1:].texts == found.texts[1:]
    assert found.ids[0] in found and "no-such-id" not in found
    with pytest.raises(IndexError):
        found[3]
    with pytest.raises(TypeError, match="integers or slices"):
        found["evidence-8"]
    ranked = factcheck.BM25Retriever().fit(demo_index).rank("Arctic ice is melting.", k=2)
    assert [(h.id, h.row, h.text) for h in ranked] == [(i, r, None) for i, r in zip(ranked.ids, ranked.rows)]


@pytest.mark.slow
def test_search_imports_no_plotting_app_or_statistics_it_does_not_use(demo_index):
    """``factcheck search`` loads what ranking needs: not matplotlib, the app, model selection,
    nor the passage vectors' module in the course mode; the workbench module alone does not load
    scipy.stats (nor scikit-learn). The retrievers are scikit-learn estimators, so scikit-learn
    itself is loaded (docs/decisions.md, "A lighter install")."""
    heavy = ("matplotlib", "fastapi", "uvicorn", "jinja2", "sklearn.model_selection", "factcheck.tagging.vectors")
    code = (f"import sys\nfrom factcheck.cli import main\nmain(['search', '--index', {str(demo_index)!r}, 'sea level'])\n"
            f"print(sorted(m for m in {heavy!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.stdout.strip().splitlines()[-1] == "[]"
    code = ("import sys, factcheck.pipeline.workbench\n"
            "print(sorted(m for m in ('scipy.stats', 'sklearn', 'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.stdout.strip() == "[]"
