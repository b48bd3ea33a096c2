"""What a newcomer tries first, from the Python API and the command line.

Each test is one finding of a trial run against d18b6f9 (named in the test): the call a
user guesses from docs/python-api.md, docs/commands.md or ``--help``, and what it must do.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import re
from pathlib import Path

import pytest

import factcheck
from helpers import DEMO, ROOT, assert_one_line_error, in_process, usage_error

QUERY = "how much does long context cost for a model"
QUERY_MANY = "sea level ice carbon dioxide temperature climate warming emissions rainfall drought energy"


@pytest.fixture(scope="module")
def index(demo_index):
    return factcheck.TagIndex.load(demo_index)


@pytest.fixture(scope="module")
def bm25(index):
    return factcheck.BM25Retriever().fit(index)


@pytest.fixture(scope="module")
def checker(index, bm25):
    train = factcheck.read_claims(DEMO / "train-claims.json", require_labels=True)
    X = [(c.text, index.texts_of(s.ids)) for c, s in zip(train, bm25.retrieve([c.text for c in train]))]
    return factcheck.FactChecker(index, bm25, factcheck.make_classifier().fit(X, [c.label for c in train]))


def plain(value, path="") -> list[str]:
    """Where ``value`` holds something other than plain Python values (numpy scalars, ...)."""
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in plain(v, f"{path}.{k}")]
    if isinstance(value, (list, tuple)):
        return [p for i, v in enumerate(value) for p in plain(v, f"{path}[{i}]")]
    return [] if value is None or type(value) in (str, int, float, bool) else [f"{path}: {type(value).__name__}"]


# ---------------------------------------------------------------------- the Python API

def test_a_string_is_one_query_everywhere(bm25):
    # d18b6f9: factcheck.search(bm25, "how much ...", k=2) gave one result list per character.
    one = factcheck.search(bm25, QUERY, k=2)
    assert isinstance(one, factcheck.Ranking) and 0 < len(one) <= 2
    many = factcheck.search(bm25, [QUERY, "sea level"], k=2)
    assert isinstance(many, list) and len(many) == 2 and many[0] == one
    for call in (bm25.rank, bm25.retrieve, lambda q: bm25.retrieve(q, depth=5)):
        assert not isinstance(call(QUERY), list) and len(call([QUERY, QUERY])) == 2


def test_rank_takes_the_depth(bm25):
    # d18b6f9 (before the scoring core): bm25.rank(q, k=5) was a TypeError.
    assert len(bm25.rank("sea level rise ice", k=5)) == 5
    assert len(bm25.rank("sea level rise ice", k=2)) == 2
    assert bm25.rank("sea level rise ice", k=2).ids == bm25.rank("sea level rise ice", k=5).ids[:2]


def test_search_takes_an_index_and_a_wrong_argument_names_its_parameter(index, demo_index, bm25):
    # d18b6f9: factcheck.search(index, q) was an AttributeError about index_.
    by_index = factcheck.search(index, "sea level rise", k=3)
    assert by_index == factcheck.search(demo_index, "sea level rise", k=3) == factcheck.search(bm25, "sea level rise", k=3)
    assert by_index.texts == index.texts_of(by_index.ids)
    wrong = [(lambda: factcheck.search(42, "sea"), "retriever"),
             (lambda: factcheck.search(bm25, b"sea"), "queries"),
             (lambda: factcheck.search(bm25, "sea", k="5"), "k"),
             (lambda: bm25.rank(42), "claims"),
             (lambda: bm25.rank("sea", k=0), "k"),
             (lambda: factcheck.BM25Retriever().fit(42), "index"),
             (lambda: factcheck.evaluate([], {}), "predictions"),
             (lambda: factcheck.run_pipeline(DEMO, "out/x", "bm25"), "config"),
             (lambda: factcheck.RunConfig(claims="jsonl"), "claims"),
             (lambda: factcheck.RunConfig(source={"text": "body"}), "source"),
             (lambda: factcheck.judged_retrieval(42, {}, {}), "retriever"),
             (lambda: factcheck.read_claims(42), "path"),
             (lambda: factcheck.read_predictions(42), "path"),
             (lambda: factcheck.TagIndex.load(42), "root"),
             (lambda: factcheck.FactChecker(index, "bm25", None), "retriever"),
             (lambda: factcheck.FactChecker(index, bm25, None), "classifier")]
    for call, param in wrong:
        with pytest.raises((TypeError, ValueError)) as err:
            call()
        assert str(err.value).startswith(param), (param, str(err.value))


def test_scores_are_plain_floats_everywhere(bm25, index, request):
    # d18b6f9: np.float32 from rank, float from retrieve.
    ranking = bm25.rank(["Sea levels are rising."], 10)[0]
    assert {type(s) for s in ranking.scores} == {float} and {type(r) for r in ranking.rows} == {int}
    found = bm25.retrieve("Sea levels are rising.", depth=10)
    assert {type(s) for s in found.ranking.scores} == {float} and {type(h.score) for h in found.hits} == {float}
    for retriever in (factcheck.TagRuleRetriever(t_sim=0.1, t_overlap=0.1), factcheck.TfidfRetriever(),
                      factcheck.ChunkedRetriever(factcheck.BM25Retriever(), window=10, overlap=3)):
        selection = retriever.fit(index).retrieve("Sea levels are rising.", depth=5)
        assert plain(selection.to_json()) == [] and plain(dataclasses.asdict(selection.ranking)) == []
    dev = factcheck.read_claims(DEMO / "dev-claims.json", require_labels=True)
    result = factcheck.evaluate({c.id: {"evidences": s.ids, "claim_label": "SUPPORTS"}
                                 for c, s in zip(dev, bm25.retrieve([c.text for c in dev]))}, dev)
    assert all(plain(dataclasses.asdict(m)) == [] for m in result.metrics.values())
    checker = request.getfixturevalue("checker")
    verdict = checker.check("Sea levels are rising.")
    assert plain(verdict.probabilities) == [] and plain(verdict.explanation.to_json()) == []


def test_fact_checker_needs_no_meta(index, bm25, checker):
    # d18b6f9: FactChecker(index, retriever, classifier, meta={}) -- a dict nobody explains.
    required = [p.name for p in inspect.signature(factcheck.FactChecker).parameters.values()
                if p.default is inspect.Parameter.empty]
    assert required == ["index", "retriever", "classifier"]
    assert checker.mode == "course" and checker.check("Sea levels are rising.").label in checker.classifier.classes_


def test_a_verdict_explains_itself_with_an_object(checker, tmp_path):
    # d18b6f9: the explanation was a dict that check() filled in place.
    from factcheck.pipeline.run import write_verdicts
    claims = factcheck.read_claims(DEMO / "dev-claims.json")
    verdicts = checker.check(claims)
    why = verdicts[0].explanation
    assert isinstance(why, factcheck.Explanation) and why.ids == verdicts[0].evidences
    assert why.probabilities == verdicts[0].probabilities and why.classifier_read["ids"] == verdicts[0].evidences
    with pytest.raises(dataclasses.FrozenInstanceError):
        why.probabilities = {}
    write_verdicts(tmp_path / "p.json", claims, verdicts, checker)
    sidecar = json.loads((tmp_path / "p.explain.json").read_text())["claims"]
    for v in verdicts:  # the same keys, in the same order, with the same values
        assert list(sidecar[v.id].items()) == list(v.explanation.to_json().items())
        assert factcheck.Explanation.from_json(sidecar[v.id]) == v.explanation


def test_run_pipeline_takes_one_configuration_object(tmp_path):
    # d18b6f9: run_pipeline took 25 parameters, 9 of them by position.
    params = inspect.signature(factcheck.run_pipeline).parameters
    assert list(params) == ["data_dir", "out", "config", "options"]
    config = factcheck.RunConfig(method="bm25", claims={"format": "course"}, source={"format": "course"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.method = "tags"
    assert len(dataclasses.fields(factcheck.RunConfig)) <= 17  # 14, then the tuning cap, FEVER's evidence slots, the scoring cap
    with pytest.raises(factcheck.InputError, match="^method: unknown method 'nope'"):
        factcheck.run_pipeline(DEMO, tmp_path / "out", config, method="nope")
    assert not (tmp_path / "out").exists()


def test_the_root_api_keeps_what_a_user_calls():
    # d18b6f9: 49 names, among them METHODS, MODES, source_spec and run_retrieval.
    import importlib
    assert len(factcheck.__all__) <= 35
    moved = {"METHODS": "factcheck.retrieval.registry", "MODES": "factcheck.retrieval.registry",
             "source_spec": "factcheck.formats.evidence", "run_retrieval": "factcheck.retrieval.base",
             "TagJob": "factcheck.tagging.job", "PassageVectorJob": "factcheck.tagging.vectors",
             "read_qrels": "factcheck.formats.qrels", "read_trec_run": "factcheck.formats.qrels",
             "course_score": "factcheck.evaluation.course_metric", "LABELS": "factcheck.formats.claims"}
    api_doc = (ROOT / "docs" / "python-api.md").read_text()
    for name, module in moved.items():
        assert name not in factcheck.__all__ and hasattr(importlib.import_module(module), name), name
        assert f"{module}.{name}" in api_doc or (name in api_doc and module in api_doc), name
    assert {"build_index", "BM25Retriever", "make_classifier", "FactChecker", "Verdict", "run_pipeline", "RunConfig",
            "read_claims", "read_passages", "read_predictions", "evaluate", "search", "self_retrieval",
            "judged_retrieval", "InputError", "Ranking"} <= set(factcheck.__all__)


def test_k_is_the_depth_and_cutoffs_are_cutoffs():
    # d18b6f9: selftest --k meant the recall cut-offs 1,5,10; search --k a depth.
    for fn in (factcheck.self_retrieval, factcheck.judged_retrieval):
        params = inspect.signature(fn).parameters
        assert "k" in params and "cutoffs" in params and "ks" not in params and "depth" not in params, fn
    assert inspect.signature(factcheck.search).parameters["k"].default == 10
    proc = usage_error("selftest", DEMO / "evidence.json", "--query-column", "title", "--k", "1,5,10")
    assert_one_line_error(proc, "--k is the ranking depth", "--cutoffs")


# ---------------------------------------------------------------------- the command line

def k_default(command: str) -> str:
    from factcheck.cli import build_parser
    sub = next(a for a in build_parser()._actions if a.dest == "command").choices[command]
    action = next(a for a in sub._actions if "--k" in a.option_strings)
    return re.search(r"\(default: ([^)]*)\)", action.help).group(1)


def test_every_ranking_command_takes_k_with_the_default_its_help_states(demo_index, tmp_path):
    # d18b6f9: search --help said --k defaults to 5, search printed 10.
    assert k_default("search") == "10"
    proc = in_process("search", "--index", demo_index, "--json", QUERY_MANY)
    assert proc.returncode == 0 and len(json.loads(proc.stdout)["hits"]) == 10
    # retrieve: each method's own default, as its help states
    stated = {m: int(n) for n, ms in re.findall(r"(\d+) for ([a-z0-9]+(?:(?:, (?!\d)| and )[a-z0-9]+)*)",
                                                k_default("retrieve"))
              for m in re.split(", | and ", ms)}
    assert set(stated) == {"tags", "bm25", "tfidf", "dense", "hybrid", "pool"}
    for method, cls in (("tags", factcheck.TagRuleRetriever), ("bm25", factcheck.BM25Retriever),
                        ("tfidf", factcheck.TfidfRetriever), ("dense", factcheck.DenseRetriever),
                        ("hybrid", factcheck.HybridRetriever), ("pool", factcheck.PoolRetriever)):
        params = cls().get_params()
        assert params["k"] == stated[method], method  # one name for the evidence count, the tag rule's too
    out = tmp_path / "bm25.json"
    assert in_process("retrieve", "--index", demo_index, "--claims", DEMO / "dev-claims.json", "--out", out).returncode == 0
    assert max(len(p["evidences"]) for p in json.loads(out.read_text()).values()) == stated["bm25"]
    # selftest and evaluate-retrieval: the ranking depth
    assert k_default("selftest") == "100" and k_default("evaluate-retrieval").startswith("1000")
    papers = ROOT / "tests" / "data" / "workbench" / "papers.csv"
    proc = in_process("selftest", papers, "--id-column", "paper_id", "--text-column", "abstract",
                      "--query-column", "title", "--chunk-window", "0", "--method", "bm25", "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["depth"] == 100
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text("q1\t0\tevidence-8\t1\n")
    queries = tmp_path / "queries.tsv"
    queries.write_text("q1\tSea levels are rising.\n")
    proc = in_process("evaluate-retrieval", "--index", demo_index, "--queries", queries, "--qrels", qrels, "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["depth"] == 1000


def test_options_a_method_does_not_read_are_refused_or_unified(demo_index, tmp_path):
    # d18b6f9: search took --top-n, which only the tag rule read (and search never).
    proc = in_process("search", "--index", demo_index, "--json", "--top-n", "3", "the climate is warming")
    assert proc.returncode == 0 and len(json.loads(proc.stdout.splitlines()[0])["hits"]) == 3
    assert "--top-n is deprecated; use --k" in proc.stderr
    claims = DEMO / "dev-claims.json"
    out = tmp_path / "tags.json"
    proc = in_process("retrieve", "--index", demo_index, "--claims", claims, "--out", out, "--method", "tags",
                      "--k", "2", "--t-sim", "0.05", "--t-overlap", "0.05")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.with_name("tags.explain.json").read_text())["params"]["k"] == 2
    for args, flag in ((["--method", "bm25", "--t-sim", "0.5"], "--t-sim"), (["--method", "tags", "--k1", "1"], "--k1"),
                       (["--method", "rerank", "--k", "3"], "--k"), (["--chunk-overlap", "5"], "--chunk-overlap")):
        proc = in_process("retrieve", "--index", demo_index, "--claims", claims, "--out", tmp_path / "x.json", *args)
        assert_one_line_error(proc, f"error: {flag}")
        assert not (tmp_path / "x.json").exists()


def library_params() -> set[str]:
    """Every parameter the library's errors name: ``param="..."`` and ``ref("...")`` literals."""
    found = set()
    for path in (ROOT / "factcheck").rglob("*.py"):
        if "cli" in path.relative_to(ROOT / "factcheck").parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", getattr(node.func, "attr", ""))
                for kw in node.keywords:
                    if kw.arg == "param" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                        found.add(kw.value.value)
                if name == "ref" and node.args and isinstance(node.args[0], ast.Constant):
                    found.add(node.args[0].value)
    return found


# Parameters of Python calls no command passes on (a command's input is a file, not a value).
PYTHON_ONLY = {"claims", "queries", "retriever", "config", "source", "params", "index", "groundtruth",
               "predictions_format", "one_line_pages", "candidates", "cutoff", "memory", "inner", "window",
               "overlap", "model", "rrf_depth", "fusion_depth", "report",
               "C", "class_weight", "groups", "gold", "y", "path"}


def test_cli_errors_name_flags_and_python_errors_name_parameters(tmp_path):
    # d18b6f9: a run error said --claims-text-column and text_column in the same line.
    statement = tmp_path / "train.jsonl"
    statement.write_text("".join(json.dumps({"id": cid, "statement": c["claim_text"], "claim_label": c["claim_label"],
                                             "evidences": c["evidences"]}) + "\n"
                                 for cid, c in json.loads((DEMO / "train-claims.json").read_text()).items()))
    proc = in_process("run", "--data-dir", DEMO, "--out", tmp_path / "out", "--train", statement, "--quiet")
    line = assert_one_line_error(proc, "--claims-text-column: no 'claim' or 'claim_text' field",
                                 "name it with --claims-text-column", "choose one with --claims-format")
    from factcheck.cli import _command_flags, build_parser
    parser = build_parser()
    params = [p for p in _command_flags(parser, "run") if "_" in p or "." in p]
    assert not [p for p in params if re.search(rf"(?<![\w.-]){re.escape(p)}(?![\w-])", line)], line
    with pytest.raises(factcheck.InputError) as err:
        factcheck.run_pipeline(DEMO, tmp_path / "out", train=statement, progress=False)
    assert "--" not in str(err.value) and str(err.value).count("claims.text_column") == 2
    # one mapping: every parameter a library error names is some command's flag
    commands = next(a for a in parser._actions if a.dest == "command").choices
    flags = {}
    for command in commands:
        flags.update(_command_flags(parser, command))
    unmapped = {p for p in library_params() if p not in flags and p not in PYTHON_ONLY}
    assert not unmapped, f"parameters named by library errors with no flag: {sorted(unmapped)}"
    for param, flag in flags.items():
        assert flag.startswith("--") or flag.isupper() or flag == "index", (param, flag)


def test_library_messages_name_no_flags():
    # A message raised from Python names parameters (ref()); a flag only inside a command to run.
    flag = re.compile(r"(?<![\w`-])--[a-z][a-z0-9-]+")
    found = []
    for path in (ROOT / "factcheck").rglob("*.py"):
        if "cli" in path.relative_to(ROOT / "factcheck").parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "").endswith("Error"):
                text = "".join(n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str))
                text = re.sub(r"`[^`]*`", "", text)  # commands to run: `factcheck tag ... --force`
                found += [f"{path.name}:{node.lineno}: {m}" for m in flag.findall(text)]
    assert found == []


def test_selftest_keeps_the_titles_its_queries_come_from(tmp_path):
    # d18b6f9: selftest --query-column title kept no titles; search on its index showed bare ids.
    papers = ROOT / "tests" / "data" / "workbench" / "papers.csv"
    proc = in_process("selftest", papers, "--id-column", "paper_id", "--text-column", "abstract",
                      "--query-column", "title", "--chunk-window", "0", "--method", "bm25", "--out", tmp_path / "st")
    assert proc.returncode == 0, proc.stderr
    proc = in_process("search", "--index", tmp_path / "st" / "index", "--json", "sparse matrix retrieval")
    hits = json.loads(proc.stdout)["hits"]
    assert hits[0]["id"] == "p08" and hits[0]["title"] == "Sparse matrices for fast retrieval"
    assert "Sparse matrices for fast retrieval" not in hits[0]["text"]  # shown, not indexed
    assert factcheck.search(tmp_path / "st" / "index", "sparse matrix retrieval").titles[0] == hits[0]["title"]


def test_evaluate_refusals_clean_failures_and_quiet_logs_hold_from_the_cli(tmp_path, demo_index):
    # d18b6f9: evaluate with the two files swapped exited 0 with a full report; failed
    # commands left the directories they had created.
    predictions = tmp_path / "retrieved.json"
    assert in_process("retrieve", "--index", demo_index, "--claims", DEMO / "dev-claims.json",
                      "--out", predictions).returncode == 0
    proc = in_process("evaluate", "--predictions", DEMO / "dev-claims.json", "--groundtruth", predictions)
    assert_one_line_error(proc, "--groundtruth", "did you swap --predictions and --groundtruth?")
    proc = in_process("evaluate", "--predictions", predictions, "--groundtruth", DEMO / "test-claims-unlabelled.json")
    assert_one_line_error(proc, "--groundtruth", "no claim has a gold label")
    # a labelled ground truth named as predictions, in a format predictions never have, is scored
    gold = tmp_path / "prediction-task-gold.jsonl"
    gold.write_text("".join(json.dumps({"id": cid, "claim": c["claim_text"], "label": c["claim_label"],
                                        "evidences": c["evidences"]}) + "\n"
                            for cid, c in json.loads((DEMO / "dev-claims.json").read_text()).items()))
    assert in_process("evaluate", "--predictions", predictions, "--groundtruth", gold).returncode == 0
    # failed commands leave no directory they created
    bad = tmp_path / "bad.csv"
    bad.write_text("index,body\n1,x\n")
    assert_one_line_error(in_process("tag", bad, "--out", tmp_path / "new" / "index"), "--id-column")
    assert_one_line_error(in_process("run", "--data-dir", DEMO, "--out", tmp_path / "run", "--evidence", bad,
                                     "--quiet"), "--id-column")
    assert not (tmp_path / "new").exists() and not (tmp_path / "run").exists()
    # progress bars off a terminal: no carriage returns in the log
    proc = in_process("tag", DEMO / "evidence.json", "--out", tmp_path / "idx")
    assert proc.returncode == 0 and "\r" not in proc.stderr


def test_search_is_a_ranking_and_retrieve_a_selection(bm25):
    """One verb, one result type: a retriever has no ``search`` giving a Selection beside
    factcheck.search's Ranking; retrieve's depth attaches the ranking from the same scoring."""
    assert not hasattr(bm25, "search")
    assert isinstance(factcheck.search(bm25, QUERY), factcheck.Ranking)
    found = bm25.retrieve(QUERY, depth=7)
    assert isinstance(found, factcheck.Selection) and found.ranking == bm25.rank(QUERY, 7)
    assert bm25.retrieve(QUERY).ranking is None and found.ids == bm25.retrieve(QUERY).ids
    with pytest.raises(factcheck.InputError, match="depth"):
        bm25.retrieve(QUERY, depth=-1)
