"""What a user's file or argument holds meets one line (exit 2) or a correct answer, never a
traceback: numbers of any size, JSON of another shape, text that would drive a terminal,
unbalanced quotes, bytes that are not UTF-8, empty and huge texts.

Each test names what the code before it did.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from helpers import DEMO, assert_one_line_error, in_process

TESTS = Path(__file__).resolve().parents[1]
BEIR = TESTS / "data" / "beir-tiny"


# ---------------------------------------------------------------------- numbers

@pytest.mark.parametrize("digits", [400, 5000])
def test_a_qrels_grade_of_hundreds_of_digits_is_one_line(tmp_path, digits):
    """Before: 400 digits, an OverflowError traceback (the grade became a float in the metrics)."""
    qrels, run = tmp_path / "qrels.txt", tmp_path / "run.trec"
    qrels.write_text(f"q1 0 d1 1\nq1 0 d2 {'9' * digits}\n", "utf-8")
    run.write_text("q1 Q0 d1 1 0.5 x\n", "utf-8")
    line = assert_one_line_error(in_process("evaluate-retrieval", "--qrels", qrels, "--trec-run", run),
                                 str(qrels), "line 2", "the relevance grade must be an integer")
    assert len(line) < 300, line  # the number is shown cut, with its length


def test_a_fever_line_number_of_5000_digits_is_one_line(tmp_path):
    """Before: ValueError 'Exceeds the limit (4300 digits)' as a traceback."""
    pages = tmp_path / "wiki-pages"
    pages.mkdir()
    lines = "0\tThe sea is salty.\n" + "9" * 5000 + "\tA sentence."
    (pages / "wiki-001.jsonl").write_text(json.dumps({"id": "Sea", "text": "", "lines": lines}) + "\n", "utf-8")
    assert_one_line_error(in_process("tag", pages, "--out", tmp_path / "idx", "--jobs", "1"),
                          "wiki-001.jsonl", "line 1", "the line number must be an integer")


def test_a_trec_run_score_that_is_no_finite_number_is_one_line(tmp_path):
    qrels, run = tmp_path / "qrels.txt", tmp_path / "run.trec"
    qrels.write_text("q1 0 d1 1\n", "utf-8")
    run.write_text("q1 Q0 d1 1 0.5 x\nq1 Q0 d2 2 " + "9" * 5000 + "e9999 x\n", "utf-8")
    assert_one_line_error(in_process("evaluate-retrieval", "--qrels", qrels, "--trec-run", run),
                          str(run), "line 2", "the score must be a finite number")


def test_a_passage_line_number_too_large_for_a_fever_page_is_one_line(tmp_path):
    """Before: converting ``P:999999999999`` to FEVER wiki pages built a list of every line
    number up to it (10**12 strings: memory exhausted; reasoned from the code, not run)."""
    src = tmp_path / "e.json"
    src.write_text(json.dumps({"P:0": "A sentence.", "P:999999999999": "Another."}), "utf-8")
    assert_one_line_error(in_process("convert", "evidence", src, "--to", "fever", "--out", tmp_path / "w.jsonl"),
                          str(src), "'P:999999999999'", "at most 65,536 lines")
    assert not (tmp_path / "w.jsonl").exists()


def test_a_claim_id_of_5000_digits_converts_to_fever(tmp_path):
    """Before: int() of the id raised 'Exceeds the limit' as a traceback; now it stays a string."""
    src = tmp_path / "c.jsonl"
    cid = "7" * 5000
    src.write_text(json.dumps({"id": cid, "claim": "Seas rise."}) + "\n", "utf-8")
    proc = in_process("convert", "claims", src, "--to", "fever", "--out", tmp_path / "f.jsonl")
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "f.jsonl").read_text("utf-8"))["id"] == cid


# ---------------------------------------------------------------------- a run's JSON files

@pytest.fixture()
def run_copy(demo_run, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(demo_run, out, symlinks=True)
    return out


@pytest.mark.parametrize("text", ["[]", '{"run": 5}', '"metrics"', '{"run": {"data_dir": 7}}'])
def test_serve_reads_a_metrics_json_of_another_shape_in_one_line_or_leaves_it_out(run_copy, text):
    """Before: ``[]`` and ``{"run": 5}`` were an AttributeError traceback at start-up."""
    from factcheck.errors import InputError
    from factcheck.serve.artefacts import load_artefacts
    (run_copy / "metrics.json").write_text(text, "utf-8")
    try:
        a = load_artefacts(run_copy)
    except InputError as exc:
        assert "metrics.json" in exc.one_line() and "expected a JSON object" in exc.one_line()
        assert not text.startswith("{")
    else:
        assert isinstance(a.metrics, dict)


def test_serve_command_with_a_metrics_list_is_one_line(run_copy):
    (run_copy / "metrics.json").write_text("[]", "utf-8")
    assert_one_line_error(in_process("serve", "--run", run_copy), "metrics.json", "expected a JSON object")


def _paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, prefix + (k,))


def _replaced(obj, path, value):
    if not path:
        return value
    return {**obj, path[0]: _replaced(obj[path[0]], path[1:], value)}


def test_the_results_page_renders_whatever_shape_a_metrics_field_has(demo_run):
    """The page is tolerant by design: any field of ``metrics.json`` replaced by any JSON value
    leaves rows out, never a server error (before: ``{"run": 5}`` was a 500)."""
    import warnings

    from hypothesis import HealthCheck, given, settings, strategies as st
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient
    from factcheck.serve.app import create_app

    client = TestClient(create_app(demo_run, warm_up=False), raise_server_exceptions=True)
    artefacts = client.app.state.explain.artefacts
    metrics = artefacts.metrics
    paths = list(_paths(metrics))
    json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                               lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                          max_size=3), max_leaves=8)

    @settings(max_examples=300, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.sampled_from(paths), json_values)
    def check(path, value):
        artefacts.metrics = _replaced(metrics, path, value)
        assert client.get("/results").status_code == 200

    try:
        check()
    finally:
        artefacts.metrics = metrics


# ---------------------------------------------------------------------- text meeting a terminal

EVIL = "Sea levels rise \x1b]0;PWNED\x07\x1b[2J fast, \x9b2J says the \x7f record."


class _Terminal:
    """stdout as a terminal: what the user's screen receives."""

    def __init__(self):
        import io
        self.buffer = io.StringIO()

    def write(self, text):
        return self.buffer.write(text)

    def flush(self):
        pass

    def isatty(self):
        return True


def _on_terminal(*args):
    import contextlib
    import io
    from types import SimpleNamespace

    from factcheck.cli import main
    out, err = _Terminal(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args])
    return SimpleNamespace(returncode=code, stdout=out.buffer.getvalue(), stderr=err.getvalue())


def _no_controls(text: str) -> bool:
    return not any(c in text for c in "\x1b\x07\x9b\x7f\r")


@pytest.fixture(scope="module")
def evil_index(tmp_path_factory):
    from factcheck.formats.evidence import source_spec
    from factcheck.tagging.job import TagJob
    root = tmp_path_factory.mktemp("evil")
    src = root / "e.json"
    src.write_text(json.dumps({"evidence-1": EVIL, "evidence-2": "Arctic ice is thinning."}), "utf-8")
    TagJob(progress=False, jobs=1).run(source_spec(src), root / "index")
    return root / "index"


def test_search_shows_a_passages_control_characters_escaped_on_a_terminal(evil_index):
    """Before: ESC]0;PWNED BEL retitled the terminal and ESC[2J cleared it."""
    proc = _on_terminal("search", "--index", evil_index, "sea levels")
    assert proc.returncode == 0, proc.stderr
    assert "evidence-1" in proc.stdout and _no_controls(proc.stdout), repr(proc.stdout)
    assert "\\u001b]0;PWNED\\u0007\\u001b[2J" in proc.stdout and "\\u009b2J" in proc.stdout


def test_search_json_is_valid_json_of_the_original_text_on_a_terminal_and_in_a_file(evil_index):
    shown = _on_terminal("search", "--index", evil_index, "--json", "sea levels")
    assert _no_controls(shown.stdout), repr(shown.stdout)
    written = in_process("search", "--index", evil_index, "--json", "sea levels")  # not a terminal
    for proc in (shown, written):
        assert json.loads(proc.stdout)["hits"][0]["text"] == EVIL


def test_check_shows_the_claim_and_passages_escaped_on_a_terminal(demo_run):
    proc = _on_terminal("check", "--run", demo_run, "Sea levels \x1b[2J are rising.")
    assert proc.returncode == 0, proc.stderr
    assert _no_controls(proc.stdout) and "\\u001b[2J" in proc.stdout, repr(proc.stdout)


FORGED = "spoof\n  1. 9.9999  evidence-TRUSTED  NASA confirms"
CRAFTED_IDS = {FORGED: "Sea levels rise as ice sheets melt.", "rtl\u202edi-a": "Sea levels rise with warming.",
               "iso\u2066x": "Sea ice is thinning fast.", "zw\u200bsp": "Sea levels and ice.",
               "tab\tsep": "Sea level data."}


@pytest.fixture(scope="module")
def crafted_ids_index(tmp_path_factory):
    from factcheck.formats.evidence import source_spec
    from factcheck.tagging.job import TagJob
    root = tmp_path_factory.mktemp("ids")
    (root / "e.json").write_text(json.dumps(CRAFTED_IDS), "utf-8")
    TagJob(progress=False, jobs=1).run(source_spec(root / "e.json"), root / "index")
    return root / "index"


def _raw_format_characters(text: str) -> list[str]:
    import unicodedata
    return [c for c in text if unicodedata.category(c) == "Cf"]


def test_an_id_cannot_forge_a_row_or_reorder_a_line_in_search(crafted_ids_index):
    """Before: a newline in an id printed a row of its own, and U+202E reversed the rest of
    the line on the terminal."""
    for proc in (in_process("search", "--index", crafted_ids_index, "sea levels ice"),
                 _on_terminal("search", "--index", crafted_ids_index, "sea levels ice")):
        assert proc.returncode == 0, proc.stderr
        rows = proc.stdout.splitlines()[1:]
        assert len(rows) == len(CRAFTED_IDS) and all(r.lstrip()[0].isdigit() for r in rows), proc.stdout
        assert "spoof\\u000a  1. 9.9999  evidence-TRUSTED" in proc.stdout and "tab\\u0009sep" in proc.stdout
        assert not _raw_format_characters(proc.stdout), repr(proc.stdout)
        assert all(e in proc.stdout for e in ("rtl\\u202edi-a", "iso\\u2066x", "zw\\u200bsp"))


def test_an_id_cannot_forge_a_row_or_reorder_a_line_in_check(crafted_ids_index, demo_run):
    for claim, shown in (("Sea levels rise as ice sheets melt.", "spoof\\u000a  1. 9.9999  evidence-TRUSTED"),
                         ("Sea levels rise with warming.", "rtl\\u202edi-a")):
        proc = in_process("check", "--index", crafted_ids_index, "--model", demo_run / "model", claim)
        assert proc.returncode == 0, proc.stderr
        rows = [line for line in proc.stdout.splitlines() if line[:4].strip().rstrip(".").isdigit()]
        assert len(rows) == 1 and rows[0].startswith(f" 1. {shown}"), proc.stdout
        assert not _raw_format_characters(proc.stdout), repr(proc.stdout)


@pytest.mark.filterwarnings("ignore:.*trained against another tag index")
@pytest.mark.parametrize("page", ["/", "/compare"])
def test_an_id_cannot_reorder_the_ids_after_it_on_a_page(page, crafted_ids_index, demo_run):
    """Before: an unterminated U+202E in one id reversed the ids after it in the same block;
    each id, title and claim is now its own bidi isolate (``<bdi>``)."""
    import re
    import warnings
    from urllib.parse import urlencode
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient
    from factcheck.serve.app import create_app
    client = TestClient(create_app(None, crafted_ids_index, demo_run / "model", warm_up=False))
    html = client.get(f"{page}?{urlencode({'claim': 'Sea levels rise with warming and ice.'})}").text
    assert "<bdi>rtl\u202edi-a</bdi>" in html
    outside = re.sub(r"<[^>]*>", "", re.sub(r"<bdi>[^<]*</bdi>", "", html))  # attributes are not shown
    assert not _raw_format_characters(outside), [c for c in outside if c in "\u202e\u2066\u200b"]


def test_every_format_character_is_escaped_for_a_terminal():
    """The listed Cf ranges hold every Cf character this Python's Unicode knows."""
    import sys
    import unicodedata

    from factcheck.cli.terminal import escaped, field
    cf = "".join(chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cf")
    assert not _raw_format_characters(escaped(cf)) and not _raw_format_characters(field(cf))
    assert escaped("a\nb\tc") == "a\nb\tc" and field("a\nb\tc\u2028") == "a\\u000ab\\u0009c\\u2028"


def test_an_error_line_shows_control_characters_escaped(tmp_path):
    missing = tmp_path / "no\x1b[2Jindex"
    proc = in_process("search", "--index", missing, "sea")
    line = assert_one_line_error(proc, "\\u001b[2J")
    assert _no_controls(line)


# ---------------------------------------------------------------------- messages and caps

def test_an_unbalanced_csv_quote_is_reported_where_it_opened(tmp_path):
    """Before: at the file's last line (line 6), where the reader ran out of data."""
    path = tmp_path / "e.csv"
    path.write_text('id,text\n1,"Sea levels rise.\n2,Ice melts.\n3,Seas warm.\n4,Storms grow.\n', "utf-8")
    assert_one_line_error(in_process("tag", path, "--out", tmp_path / "idx", "--jobs", "1"),
                          str(path), "line 2:", "never closed")


def test_search_refuses_a_query_that_is_not_utf8(evil_index):
    """Before: ``search --json`` wrote the argument's bytes back, invalid UTF-8 (exit 0)."""
    assert_one_line_error(in_process("search", "--index", evil_index, "--json", "sea \udcff level"),
                          "not valid UTF-8", "0xff")


def test_a_judged_query_with_an_empty_text_is_an_error(tmp_path):
    """The docs say so; before, it was scored as a query that matched nothing."""
    from factcheck.formats.evidence import source_spec
    from factcheck.tagging.job import TagJob
    TagJob(progress=False, jobs=1).run(source_spec(BEIR / "corpus.jsonl"), tmp_path / "idx")
    queries = tmp_path / "queries.jsonl"
    queries.write_text(json.dumps({"_id": "q1", "text": "sea level"}) + "\n" + json.dumps({"_id": "q2", "text": " "})
                       + "\n", "utf-8")
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td3\t1\n", "utf-8")
    assert_one_line_error(in_process("evaluate-retrieval", "--index", tmp_path / "idx", "--queries", queries,
                                     "--qrels", qrels), str(queries), "query 'q2'", "its text is empty")


@pytest.mark.parametrize("what", ["claims-file", "queries-file", "search", "check"])
def test_the_length_cap_of_claims_and_queries_is_one_option_named_alike(tmp_path, demo_run, evil_index, what):
    """Before: no cap (a 100 MB claim took 4.5-7 GB); passages had one, the app 2,000 characters."""
    long = "sea level " * 7000  # 70,000 characters: over the default cap
    if what == "claims-file":
        path = tmp_path / "claims.jsonl"
        path.write_text(json.dumps({"id": "c1", "claim": long}) + "\n", "utf-8")
        run = lambda *cap: in_process("retrieve", "--index", demo_run / "index", "--claims", path, "--out",
                                      tmp_path / "p.json", "--method", "bm25", *cap)
        flag, place = "--max-claim-chars", "claim 'c1'"
    elif what == "queries-file":
        from factcheck.errors import InputError
        from factcheck.formats.qrels import read_queries
        path = tmp_path / "queries.jsonl"
        path.write_text(json.dumps({"_id": "q1", "text": long}) + "\n", "utf-8")
        with pytest.raises(InputError, match="max_query_chars 65536: line 1 is 70,000 characters long"):
            read_queries(path)
        assert read_queries(path, max_query_chars=70000) == {"q1": long}
        return
    elif what == "search":
        run = lambda *cap: in_process("search", "--index", evil_index, long, *cap)
        flag, place = "--max-query-chars", "query 1"
    else:
        run = lambda *cap: in_process("check", "--run", demo_run, long, *cap)
        flag, place = "--max-claim-chars", "the claim"
    assert_one_line_error(run(), f"{flag} 65536: {place} is 70,000 characters long")
    assert run(flag, "70000").returncode == 0


def test_a_huge_number_in_a_course_source_is_placed_without_a_byte_at_a_time_reparse(tmp_path, monkeypatch):
    """Found by probing the ijson reader: the error's place was found by feeding the last
    buffer one byte at a time, and yajl re-reads a token cut by a feed from its start, so a
    number of 400,000 digits took 19 s (quadratic: 4 MB, hours). Counted in reads, not seconds."""
    from factcheck.errors import InputError
    from factcheck.formats import course
    from factcheck.formats.evidence import read_passages, source_spec
    path = tmp_path / "e.json"
    path.write_bytes(b'{"a": "ice", "b": ' + b"9" * 400_000 + b"}")
    reads = []
    original = course._Feed.read
    monkeypatch.setattr(course._Feed, "read", lambda self, n: reads.append(n) or original(self, n))
    with pytest.raises(InputError, match=r"line 1, column \d+: passage 2: text must be a string, got a number"):
        read_passages(source_spec(path))
    assert len(reads) < 200, len(reads)  # before: 6,882 reads, most of one byte


# ---------------------------------------------------------------------- found by probing the new index format

def _resealed_copy(demo_index, tmp_path, **changes):
    from factcheck.tagging import store
    root = tmp_path / "index"
    shutil.copytree(demo_index, root)
    data = json.loads((root / store.MANIFEST).read_text("utf-8"))
    data.pop(store.MANIFEST_CHECKSUM)
    store.write_manifest(root, {**data, **changes})
    return root


@pytest.mark.parametrize("version", ["\u00b2", "9" * 5000])
def test_a_manifest_format_version_int_refuses_is_one_line(demo_index, tmp_path, version):
    """Before: ``'²'.isdigit()`` is true and ``int('²')`` a ValueError traceback; so were 5,000 digits."""
    root = _resealed_copy(demo_index, tmp_path, format="factcheck-tag-index/" + version)
    assert_one_line_error(in_process("verify", root), "manifest.json", "not a factcheck-tag-index/4 manifest")


def test_a_manifest_nested_too_deeply_is_one_line(demo_index, tmp_path):
    """Before: a RecursionError traceback from every command that opens the index."""
    root = tmp_path / "index"
    shutil.copytree(demo_index, root)
    (root / "manifest.json").write_text("[" * 100_000 + "]" * 100_000, "utf-8")
    assert_one_line_error(in_process("verify", root), "manifest.json", "corrupt manifest")


@pytest.mark.slow
@pytest.mark.parametrize("split", ["[]", "[" * 100_000, "key"])
def test_a_crafted_split_record_of_an_unfinished_index_is_split_again(tmp_path, split):
    """Before: a list, deep nesting or a shard without its number was an AttributeError,
    RecursionError or KeyError traceback on the rerun."""
    import subprocess
    import sys

    from harness.crashpoints import crash_env
    from helpers import ROOT
    out = tmp_path / "index"
    killed = subprocess.run([sys.executable, "-m", "factcheck", "tag", str(DEMO / "evidence.json"), "--out", str(out),
                             "--jobs", "1"], cwd=ROOT, capture_output=True, env=crash_env("after-count"), timeout=300)
    assert killed.returncode < 0 and (out / "work" / "split.json").is_file()
    if split == "key":
        key = json.loads((out / "work" / "split.json").read_text("utf-8"))["key"]
        split = json.dumps({"key": key, "shards": [{"passages": 3}]})
    (out / "work" / "split.json").write_text(split, "utf-8")
    proc = in_process("tag", DEMO / "evidence.json", "--out", out, "--jobs", "1")
    assert proc.returncode == 0, proc.stderr
    assert in_process("verify", out).returncode == 0


def test_a_csv_evidence_cell_nested_too_deeply_is_one_line(tmp_path, demo_index):
    path = tmp_path / "claims.csv"
    path.write_text('id,claim,label,evidences\nc1,Seas rise.,SUPPORTS,"' + "[" * 100_000 + '"\n', "utf-8")
    assert_one_line_error(in_process("retrieve", "--index", demo_index, "--claims", path, "--out", tmp_path / "p.json",
                                     "--method", "bm25"), "line 2 (row 1)", "evidence cell")


def test_a_run_without_its_index_and_a_metrics_json_nested_too_deeply_is_one_line(run_copy):
    """``serve``/``check`` look for the index a run recorded in metrics.json: before, a RecursionError."""
    from factcheck.serve.artefacts import resolve_paths
    shutil.rmtree(run_copy / "index")
    (run_copy / "metrics.json").write_text("[" * 100_000, "utf-8")
    from factcheck.errors import InputError
    with pytest.raises(InputError, match="no such tag index directory"):
        resolve_paths(run_copy, None, None)
