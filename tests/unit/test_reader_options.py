"""One set of reader options everywhere: the CLI's flags and the library's keyword arguments.

Walks every command's parser: a command that reads a knowledge source has every source
option, one that reads claims has every claims option, each with the library's default;
and the library functions the commands call take the same names."""

import argparse
import inspect
import json
import re

import pytest

from helpers import DEMO, assert_one_line_error, in_process, shared_file
import factcheck
from factcheck.formats.evidence import source_spec
from factcheck.cli import build_parser
from factcheck.cli import options
from factcheck.errors import InputError
from factcheck.formats import claims as claims_mod
from factcheck.formats import convert
from factcheck.formats import evidence as evidence_mod
from factcheck.evaluation.evaluate import evaluate_files
from factcheck.evaluation.fever import fever_score_files
from factcheck.pipeline.run import RunConfig, run_pipeline
from factcheck.tagging.job import TagJob

SOURCE = set(evidence_mod.SOURCE_OPTIONS)
CLAIMS = {f"claims_{o}" for o in claims_mod.CLAIM_OPTIONS}
READS_CLAIMS = {"claims", "groundtruth", "train", "dev", "test"}
# command -> the library function whose keyword arguments its reader flags are
CALLS = {"tag": [evidence_mod.source_spec, factcheck.build_index], "run": [RunConfig],
         "train": [factcheck.build_index], "retrieve": [factcheck.build_index], "predict": [factcheck.build_index],
         "ablation": [factcheck.build_index], "train-rerank": [factcheck.build_index],
         "evaluate": [evaluate_files, fever_score_files], "convert claims": [convert.convert_claims],
         "convert evidence": [convert.convert_evidence], "convert predictions": [convert.convert_predictions]}


def commands():
    """(name, parser) of every command and sub-command."""
    out = []

    def walk(prefix, parser):
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            out.append((prefix, parser))
        for action in subs:
            for name, sub in action.choices.items():
                walk(f"{prefix} {name}".strip(), sub)
    walk("", build_parser())
    return out


def dests(parser):
    return {a.dest: a for a in parser._actions}


def test_every_command_reading_a_source_or_claims_has_every_reader_option():
    seen = set()
    for name, parser in commands():
        d = dests(parser)
        if "evidence" in d:
            indexing = not name.startswith("convert")
            wanted = SOURCE if indexing else SOURCE - {"index_titles"}
            assert wanted <= set(d), f"{name} reads a knowledge source but lacks {sorted(wanted - set(d))}"
            seen.add(name)
        if READS_CLAIMS & set(d) and name not in ("serve", "check"):
            assert CLAIMS <= set(d), f"{name} reads claims but lacks {sorted(CLAIMS - set(d))}"
            seen.add(name)
        for opt in (SOURCE | CLAIMS) & set(d):
            assert d[opt].default is None, f"{name} {opt}: default {d[opt].default!r}, the library's is None"
    assert set(CALLS) <= seen | {"evaluate"}, set(CALLS) - seen


def test_the_library_takes_the_cli_reader_options_as_keywords():
    for name, parser in commands():
        if name not in CALLS:
            continue
        flags = (SOURCE | CLAIMS) & set(dests(parser))
        for fn in CALLS[name]:
            if fn is RunConfig:  # the reader options grouped: RunConfig(source={...}, claims={...})
                config = RunConfig(source={o: None for o in SOURCE}, claims={o: None for o in claims_mod.CLAIM_OPTIONS})
                assert flags == SOURCE | CLAIMS and {*config.source, *(f"claims_{o}" for o in config.claims)} == flags
                continue
            params = inspect.signature(fn).parameters
            used = flags & (SOURCE | CLAIMS if fn is convert.convert_claims else
                            CLAIMS if fn in (evaluate_files, fever_score_files, convert.convert_predictions)
                            else SOURCE)
            missing = used - set(params)
            assert not missing, f"{name}: {fn.__name__} lacks {sorted(missing)}"
            for p in used:
                assert params[p].default is None, (fn.__name__, p)
    for fn, names in ((claims_mod.read_claims, claims_mod.CLAIM_OPTIONS),
                      (evidence_mod.source_spec, evidence_mod.SOURCE_OPTIONS)):
        params = inspect.signature(fn).parameters
        assert set(names) <= set(params) and all(params[n].default is None for n in names), fn.__name__


def _public_functions():
    """(name, function) of the root API's functions and its classes' public methods, and the converters."""
    for name in factcheck.__all__:
        obj = getattr(factcheck, name)
        if inspect.isfunction(obj):
            yield name, obj
        elif inspect.isclass(obj):
            yield from ((f"{name}.{m}", f) for m, f in vars(obj).items()
                        if inspect.isfunction(f) and not m.startswith("_"))
    yield from (("convert_claims", convert.convert_claims), ("convert_evidence", convert.convert_evidence),
                ("TagJob.run", TagJob.run), ("source_spec", evidence_mod.source_spec))


def _collection_parameters(fn) -> list[str]:
    """The parameters of ``fn`` its docstring calls a knowledge source or a SourceSpec."""
    doc = inspect.getdoc(fn) or ""
    found = []
    for name in inspect.signature(fn).parameters:
        entry = re.search(rf"^{name} : (.*(?:\n    .*)*)", doc, re.M)
        if entry and ("SourceSpec" in entry.group(1) or ("knowledge source" in entry.group(1)
                                                         and "index" not in entry.group(1))):
            found.append(name)
    return found


def test_every_public_function_reading_a_collection_takes_the_reader_options():
    # Today's main: self_retrieval took a SourceSpec only, read_passages and TagJob.run too.
    indexing = {"build_index", "TagJob.run", "self_retrieval", "source_spec"}
    readers = {name: fn for name, fn in _public_functions()
               if _collection_parameters(fn) or name in ("source_spec", "convert_evidence")}
    assert {"build_index", "TagJob.run", "read_passages", "self_retrieval", "source_spec",
            "convert_claims", "convert_evidence"} <= set(readers), sorted(readers)
    for name, fn in readers.items():
        params = inspect.signature(fn).parameters
        wanted = SOURCE if name in indexing else SOURCE - {"index_titles"}
        assert wanted <= set(params), f"{name} lacks {sorted(wanted - set(params))}"
        assert all(params[p].default is None for p in wanted), name


def test_self_retrieval_and_read_passages_take_a_path_and_the_options(tmp_path):
    papers = arxiv_like(tmp_path)
    assert factcheck.read_passages(papers, id_column="index", text_column="abstract") == (
        ["2501.1", "2501.2"], ["Sea ice is melting fast.", "Glaciers retreat in the Alps."])
    result = factcheck.self_retrieval(papers, query_column="title", id_column="index", text_column="abstract",
                                      methods=("bm25",), chunk_window=None, progress=False)
    assert result.corpus["rows"] == 2 and result.corpus["id_column"] == "index"
    spec = source_spec(papers, id_column="index", text_column="abstract")
    assert factcheck.self_retrieval(spec, "title", ("bm25",), chunk_window=None, progress=False).queries == 2
    with pytest.raises(InputError) as err:
        factcheck.self_retrieval(spec, "title", id_column="index")
    assert err.value.param == "id_column"
    with pytest.raises(InputError) as err:
        factcheck.read_passages(42)
    assert err.value.param == "source"


def test_the_cli_format_choices_are_the_readers():
    assert options.SOURCE_FORMATS == evidence_mod.FORMATS
    assert options.CLAIM_FORMATS == claims_mod.CLAIM_FORMATS
    d = dests(dict(commands())["run"])
    assert tuple(d["format"].choices) == evidence_mod.FORMATS
    assert tuple(d["claims_format"].choices) == claims_mod.CLAIM_FORMATS


# ---------------------------------------------------------------- the frictions of a new user

def arxiv_like(tmp_path):
    p = tmp_path / "papers.csv"
    p.write_text("index,title,abstract\n2501.1,Sea ice,Sea ice is melting fast.\n"
                 "2501.2,Glaciers,Glaciers retreat in the Alps.\n", encoding="utf-8")
    return p


def test_build_index_takes_the_reader_options(tmp_path):
    # Today's main: TypeError: TagJob.__init__() got an unexpected keyword argument 'id_column'.
    index = factcheck.build_index(arxiv_like(tmp_path), tmp_path / "idx", id_column="index", text_column="abstract",
                                  progress=False)
    assert index.ids == ["2501.1", "2501.2"]


def test_build_index_takes_a_source_spec(tmp_path):
    # Today's main: a raw traceback (AttributeError inside source_spec).
    spec = source_spec(arxiv_like(tmp_path), id_column="index", text_column="abstract")
    assert factcheck.build_index(spec, tmp_path / "idx", progress=False).ids == ["2501.1", "2501.2"]
    with pytest.raises(InputError) as err:
        factcheck.build_index(spec, tmp_path / "idx2", title_column="title")
    assert err.value.param == "title_column"


def test_library_errors_name_parameters_not_flags(tmp_path):
    # Today's main: "... (set --id-column/--text-column)" from a Python call.
    with pytest.raises(InputError) as err:
        factcheck.build_index(arxiv_like(tmp_path), tmp_path / "idx", progress=False)
    msg = err.value.one_line()
    assert msg.startswith(f"{tmp_path / 'papers.csv'}: id_column: no column 'id'") and "--" not in msg
    with pytest.raises(InputError) as err:
        run_pipeline(DEMO, tmp_path / "out", evidence=arxiv_like(tmp_path), source={"text_column": "body"},
                     progress=False)
    assert err.value.param in ("source.id_column", "source.text_column") and "--" not in err.value.one_line()
    with pytest.raises(InputError) as err:
        run_pipeline(DEMO, tmp_path / "out2", claims={"format": "xml"}, progress=False)
    assert err.value.param == "claims.format"


def test_run_has_the_options_its_errors_name(tmp_path):
    # Today's main: `run --evidence arxiv.csv` said "set --id-column/--text-column", which run lacked.
    proc = in_process("run", "--data-dir", DEMO, "--out", tmp_path / "out", "--evidence", arxiv_like(tmp_path),
                      "--id-column", "index", "--text-column", "body", "--quiet")
    line = assert_one_line_error(proc, "--text-column: no column 'body' in the header")
    run_flags = {s for a in dict(commands())["run"]._actions for s in a.option_strings}
    for flag in ("--id-column", "--text-column", "--format", "--title-column", "--claims-format"):
        assert flag in run_flags
    assert "text_column" not in line


def test_every_command_accepts_a_csv_knowledge_source_and_jsonl_claims(tmp_path):
    claims = tmp_path / "q.jsonl"
    claims.write_text('{"id": "q1", "claim": "Sea ice is melting."}\n', encoding="utf-8")
    out = tmp_path / "pred.json"
    proc = in_process("retrieve", "--evidence", arxiv_like(tmp_path), "--id-column", "index", "--text-column",
                      "abstract", "--index", tmp_path / "idx", "--claims", claims, "--out", out, "--k", "1")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text())["q1"]["evidences"] == ["2501.1"]
    # the index is reused, and reader options without --evidence are refused, naming the flag
    proc = in_process("retrieve", "--index", tmp_path / "idx", "--claims", claims, "--out", out,
                      "--text-column", "abstract")
    assert_one_line_error(proc, "--text-column", "needs --evidence")


def test_the_shared_csv_through_run_options(tmp_path):
    csv = shared_file("arxiv-abstracts.csv")
    index = factcheck.build_index(csv, tmp_path / "ax", id_column="index", text_column="abstract",
                                  title_column="title", progress=False)
    assert len(index) == 3397 and index.title(0) and index.body(0) == index.text(0)


def test_a_csv_title_column_is_found_by_default_as_id_and_text_are(tmp_path):
    from factcheck.formats.evidence import source_spec
    csv = tmp_path / "docs.csv"
    csv.write_text("id,title,text\nd1,Cats,The cat sat.\nd2,Dogs,A dog barked.\n", encoding="utf-8")
    spec = source_spec(csv)
    assert (spec.title_column, spec.index_titles) == ("title", False)  # stored and shown, not indexed
    index = factcheck.build_index(csv)
    assert index.title("d1") == "Cats" and index.text("d1") == "The cat sat."
    assert factcheck.search(index, "cat")[0].title == "Cats"
    assert factcheck.build_index(csv, index_titles=True).text("d2") == "Dogs\nA dog barked."
    assert source_spec(csv, title_column="id").title_column == "id"  # named: as named
    assert source_spec(csv, text_column="title").title_column is None  # the text is not also the title
    untitled = tmp_path / "plain.csv"
    untitled.write_text("id,text\nd1,The cat sat.\n", encoding="utf-8")
    assert source_spec(untitled).title_column is None and not factcheck.build_index(untitled).has_titles
