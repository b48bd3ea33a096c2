"""The bad-input matrix: every case is one line naming the file and the place,
exit status 2, no traceback, and no output that looks complete (no manifest for `tag`,
no predictions file for `retrieve`, nothing on stdout for `evaluate`); files that were
there before -- the input, a refused output directory -- are left untouched.

Cases already covered elsewhere, and not repeated here (see reports/reliability.md):
tests/unit/test_tagging.py::test_bad_input_one_line_error_exit_2_and_no_manifest -- truncated
course JSON, a text that is a number, duplicate JSONL ids, invalid UTF-8 (course JSON),
an empty evidence file; tests/unit/test_tagging.py::test_rerun_is_a_verified_noop_and_other_
params_are_refused -- an output directory holding a different run's manifest (refused,
then replaced with --force); tests/unit/test_readers.py -- the same errors at the reader level.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from helpers import DEMO, assert_one_line_error, in_process, run_cli

CLAIMS = json.loads((DEMO / "dev-claims.json").read_text("utf-8"))
FIRST = next(iter(CLAIMS))


def _with_label(label):
    return {**CLAIMS, FIRST: {**CLAIMS[FIRST], "claim_label": label}}


def _predictions(extra=None):
    pred = {cid: {"claim_text": c["claim_text"], "evidences": c["evidences"]} for cid, c in CLAIMS.items()}
    return {**pred, **(extra or {})}


@dataclass
class Case:
    command: str               # tag | retrieve | evaluate
    bad: str                   # the file (or directory) at fault, relative to the test's tmp dir
    content: bytes | dict | None  # its bytes, or a JSON object; None: see setup
    needles: tuple             # besides the bad file's path, the error line must contain these
    setup: dict = field(default_factory=dict)  # more files: relative path -> bytes/JSON
    argv: tuple = ()           # extra arguments
    out: str = "out"           # tag: the output directory, relative to the tmp dir


BAD_UTF8_JSONL = b'{"id": "a", "text": "ok"}\n{"id": "b", "text": "caf\xe9"}\n'
BAD_UTF8_CLAIMS = b'{"c1": {"claim_text": "caf\xe9"}}'


MATRIX = {
    # ---------------------------------------------------------------- evidence (factcheck tag)
    "evidence JSON is not an object": Case(
        "tag", "e.json", b'["evidence-1", "Sea levels rise"]', ("line 1, column 1", "JSON object")),
    "evidence JSON is a string": Case(
        "tag", "e.json", b'"Sea levels rise"', ("line 1, column 1", "JSON object")),
    "passage text is null": Case(
        "tag", "e.json", b'{"evidence-1": "Sea levels rise",\n "evidence-2": null}',
        ("line 2, column 16", "passage 2 (id 'evidence-2')", "got null")),
    "passage text is a list": Case(
        "tag", "e.json", b'{"evidence-1": ["Sea", "levels"]}', ("line 1, column 16", "passage 1", "got a list")),
    "passage text is a number (JSONL)": Case(
        "tag", "e.jsonl", b'{"id": "a", "text": "x"}\n{"id": "b", "text": 3.5}\n', ("line 2", "got a number")),
    "passage text is null (JSONL)": Case(
        "tag", "e.jsonl", b'{"id": "a", "text": null}\n', ("line 1", "got null")),
    "duplicate ids (course JSON)": Case(
        "tag", "e.json", b'{"e1": "ice", "e2": "sea", "e1": "heat"}',
        ("passage 3", "duplicate passage id 'e1'", "first seen at passage 1")),
    "duplicate ids (CSV)": Case(
        "tag", "e.csv", b'id,text\ne1,ice\ne2,sea\ne1,heat\n', ("line 4 (row 3)", "duplicate passage id 'e1'")),
    "invalid UTF-8 (JSONL)": Case(
        "tag", "e.jsonl", BAD_UTF8_JSONL, (f"byte {BAD_UTF8_JSONL.index(0xE9)}", "invalid UTF-8")),
    "CSV without the named columns": Case(
        "tag", "e.csv", b'pid,body\n1,Sea levels rise\n',
        ("--id-column: no column 'id' in the header", "line 1", "found 'pid', 'body'")),
    "CSV without the columns given by flags": Case(
        "tag", "e.csv", b'id,text\n1,Sea levels rise\n', ("--id-column: no column 'pid' in the header", "line 1"),
        argv=("--id-column", "pid", "--text-column", "body")),
    # found by the hardening review (more in tests/reliability/test_hardening.py)
    "CSV with an unclosed quote": Case(
        "tag", "e.csv", b'id,text\n1,"ice melts\n2,sea rises\n3,heat\n', ("line 2", "never closed")),
    "lone surrogate in a passage": Case(
        "tag", "e.json", b'{"e1": "ok", "e2": "sea \\ud800 ice"}', ("passage 2", "lone surrogate \\ud800")),
    "lone surrogate in a passage (JSONL)": Case(
        "tag", "e.jsonl", b'{"id": "a", "text": "\\udfff"}\n', ("line 1", "lone surrogate")),
    "JSONL nested 100,000 deep": Case(
        "tag", "e.jsonl", b'{"id": "a", "text": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n",
        ("line 1", "nested too deeply")),
    "empty passage id (course JSON)": Case(
        "tag", "e.json", b'{"e1": "ice", "": "sea"}', ("passage 2", "passage id is empty")),
    "no passage has a word to tag": Case(
        "tag", "e.json", b'{"e1": "", "e2": "the and of", "e3": "1998 2020"}', ("no passage contains a word",)),
    # ---------------------------------------------------------------- output directory (tag)
    "output directory holds an unfinished run of other input": Case(
        "tag", "out", None, ("unfinished run", "--force"),
        setup={"out/work/plan.json": {"plan_key": "another-run", "plan": {}},
               "out/work/split.json": {"key": "another-run", "shards": []}}),
    "output directory is not empty and not an index": Case(
        "tag", "out", None, ("not a tag index", "--force"), setup={"out/notes.txt": b"mine"}),
    "output path is a file": Case("tag", "out", b"not a directory", ("exists and is not a directory",)),
    "output path is under a file": Case(
        "tag", "blocker/out", None, ("cannot write here", "not a directory"), setup={"blocker": b"x"},
        out="blocker/out"),
    # ---------------------------------------------------------------- claims (factcheck retrieve)
    "claims: missing claim_text": Case(
        "retrieve", "claims.json", {**CLAIMS, FIRST: {"claim_label": "SUPPORTS"}},
        (f"claim '{FIRST}'", "missing 'claim_text'")),
    "claims: claim_text is a number": Case(
        "retrieve", "claims.json", {"c1": {"claim_text": 42}}, ("claim 'c1'", "'claim_text' must be a string")),
    "claims: empty file": Case("retrieve", "claims.json", b"", ("empty file",)),
    "claims: empty object": Case("retrieve", "claims.json", b"{}", ("no claims",)),
    "claims: truncated JSON": Case(
        "retrieve", "claims.json", b'{"c1": {"claim_text": "Sea levels ri', ("line 1, column 23", "invalid JSON")),
    "claims: not an object": Case(
        "retrieve", "claims.json", b'[{"claim_text": "x"}]', ("top level", "expected a JSON object of claims")),
    "claims: invalid UTF-8": Case(
        "retrieve", "claims.json", BAD_UTF8_CLAIMS, (f"byte {BAD_UTF8_CLAIMS.index(0xE9)}", "invalid UTF-8")),
    "claims: duplicate claim id": Case(
        "retrieve", "claims.json", b'{"c1": {"claim_text": "a"}, "c1": {"claim_text": "b"}}',
        ("key 'c1'", "duplicate key")),
    "claims: lone surrogate in claim_text": Case(
        "retrieve", "claims.json", b'{"c1": {"claim_text": "warming \\ud800"}}', ("claim 'c1'", "lone surrogate")),
    "claims: nested 100,000 deep": Case(
        "retrieve", "claims.json", b'{"c1": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", ("nested too deeply",)),
    "claims: empty claim id": Case(
        "retrieve", "claims.json", b'{"": {"claim_text": "Sea levels rise"}}', ("key ''", "empty claim id")),
    "retrieve output is a directory": Case(
        "retrieve", "pred.json", None, ("is a directory",), setup={"pred.json/keep": b""}),
    # ---------------------------------------------------------------- evaluate
    # Any label set is read (labels come from the training file): a label outside the ground
    # truth's label set is an error in the predictions.
    "predictions: unknown label": Case(
        "evaluate", "pred.json", _predictions({FIRST: {"evidences": ["evidence-1"], "claim_label": "MAYBE"}}),
        (f"claim '{FIRST}'", "unknown label 'MAYBE'", "SUPPORTS, REFUTES, NOT_ENOUGH_INFO, DISPUTED"),
        setup={"gt.json": CLAIMS}),
    "ground truth: unlabelled claims": Case(
        "evaluate", "gt.json", {FIRST: {"claim_text": "x"}}, ("--groundtruth", "no claim has a gold label"),
        setup={"pred.json": _predictions()}),
    "predictions for claims not in the ground truth": Case(
        "evaluate", "pred.json", _predictions({"claim-zzz": {"evidences": ["evidence-1"]}}),
        ("claim 'claim-zzz'", "not in the ground truth"), setup={"gt.json": CLAIMS}),
    "predictions: evidences not a list": Case(
        "evaluate", "pred.json", {FIRST: {"evidences": "evidence-1"}}, (f"claim '{FIRST}'", "'evidences' must be a list"),
        setup={"gt.json": CLAIMS}),
}


def _write(path: Path, content):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content if isinstance(content, bytes) else json.dumps(content).encode("utf-8"))


def _files(case: Case, tmp: Path) -> None:
    for rel, content in case.setup.items():
        _write(tmp / rel, content)
    if case.content is not None:
        _write(tmp / case.bad, case.content)


def _run(case: Case, tmp: Path, demo_index: Path, run=in_process):
    argv = list(case.argv)
    if case.command == "tag":
        out = tmp / case.out
        src = DEMO / "evidence.json" if case.bad == case.out else tmp / case.bad
        return run("tag", src, "--out", out, "--jobs", "1", *argv), out
    if case.command == "retrieve":
        claims = tmp / case.bad if case.bad == "claims.json" else DEMO / "dev-claims.json"
        return run("retrieve", "--index", demo_index, "--claims", claims, "--out", tmp / "pred.json",
                   "--method", "tags", *argv), None
    return run("evaluate", "--predictions", tmp / "pred.json", "--groundtruth", tmp / "gt.json", *argv), None


@pytest.mark.parametrize("name", list(MATRIX))
def test_bad_input(name, tmp_path, demo_index):
    check_case(name, tmp_path, demo_index, in_process)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["passage text is null", "claims: missing claim_text",
                                  "predictions: unknown label", "output path is under a file"])
def test_bad_input_through_the_real_command(name, tmp_path, demo_index):
    """The same, through ``python -m factcheck`` in a subprocess (a sample of the matrix)."""
    check_case(name, tmp_path, demo_index, run_cli)


def check_case(name, tmp_path, demo_index, run):
    case = MATRIX[name]
    _files(case, tmp_path)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert before or case.command == "tag"
    proc, out = _run(case, tmp_path, demo_index, run)
    line = assert_one_line_error(proc, str(tmp_path / case.bad), *case.needles)
    assert line.startswith(f"factcheck {case.command}: error: ")
    assert proc.stdout == ""  # nothing that looks like a result (evaluate prints its report here)
    if case.command == "tag":
        assert not (out / "manifest.json").exists()
    if case.command == "retrieve":
        assert not (tmp_path / "pred.json").is_file()
    # Files that were there before are left alone (a refused output directory included).
    for path, data in before.items():
        assert path.read_bytes() == data, path


# ---------------------------------------------------------------------- accepted inputs

def _tag_and_export(tmp_path, passages: dict):
    src = tmp_path / "e.json"
    src.write_text(json.dumps(passages), encoding="utf-8")
    out = tmp_path / "out"
    proc = in_process("tag", src, "--out", out, "--jobs", "1")
    assert proc.returncode == 0, proc.stderr
    exported = tmp_path / "tags.jsonl"
    proc = in_process("export-tags", out, "--out", exported)
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((out / "manifest.json").read_text("utf-8"))
    return manifest, [json.loads(l) for l in exported.read_text("utf-8").splitlines()]


def test_empty_passage_is_allowed_gets_empty_tags_and_is_counted(tmp_path):
    manifest, rows = _tag_and_export(tmp_path, {"e1": "Sea levels rise.", "e2": "", "e3": "   ", "e4": "the of 2020"})
    assert [r["id"] for r in rows] == ["e1", "e2", "e3", "e4"]
    assert [r["tags"] for r in rows[1:]] == [[], [], []] and rows[0]["tags"]
    assert manifest["empty_tags"] == 3 and manifest["shards"][0]["empty_tags"] == 3


def test_one_megabyte_passage_is_tagged(tmp_path):
    words = ["glacier", "ocean", "carbon", "warming", "forest", "drought", "methane", "aerosol",
             "permafrost", "monsoon", "albedo", "upwelling"]
    big = " ".join(words[(i * 7) % len(words)] if i % 13 else "ice" for i in range(140_000))
    assert len(big.encode()) > 1_000_000
    manifest, rows = _tag_and_export(tmp_path, {"small": "Sea ice melts", "big": big, "after": "Ocean heat"})
    assert [r["id"] for r in rows] == ["small", "big", "after"]
    assert manifest["passages"] == 3
    assert 0 < len(rows[1]["tags"]) <= 10 and all(w > 0 for w in rows[1]["weights"])
    assert rows[2]["tags"] == ["heat", "ocean"]  # "heat" is rarer than "ocean": higher IDF
