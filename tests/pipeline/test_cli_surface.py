"""The command-line surface a newcomer meets: help text, option names, warnings, `check`.

Walks every sub-command's parser (so a new option without help fails here), checks that
old option spellings still work with one warning line, that the demo run prints no
Python warning, and runs ``factcheck check`` on the demo run and on a small run over
real course data (text and ``--json``).
"""

from __future__ import annotations

import argparse
import gzip
import json
import re

import pytest

from helpers import DEMO, DEMO_CLAIM, assert_one_line_error, in_process, run_cli, shared_file
from factcheck.cli import build_parser
from factcheck.cli.options import Deprecated
from factcheck.formats.claims import LABELS
from factcheck.serve.check import check_claim, format_check

CLAIM = DEMO_CLAIM
# One option name per concept; these spellings may only appear as deprecated aliases.
OLD_SPELLINGS = {"--model-out", "--model-dir", "--index-dir", "--output", "--output-dir"}


def subparsers():
    parser = build_parser()
    (subs,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return subs.choices


def test_every_option_of_every_command_has_help():
    missing = []
    for name, sp in subparsers().items():
        assert sp.description and "%%" not in sp.format_help(), name
        for action in sp._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            if isinstance(action, Deprecated):  # hidden; the new spelling's help names it
                assert any(o in a.help for a in sp._actions if a.dest == action.dest and a is not action
                           for o in action.option_strings), (name, action.option_strings)
                continue
            if not action.help or action.help == argparse.SUPPRESS:
                missing.append(f"{name} {'/'.join(action.option_strings) or action.dest}")
    assert not missing, missing


def test_one_name_per_concept():
    uses = {}
    for name, sp in subparsers().items():
        for action in sp._actions:
            if isinstance(action, Deprecated):
                continue
            for opt in action.option_strings:
                assert opt not in OLD_SPELLINGS, (name, opt)
                if opt in ("--model", "--index"):
                    uses.setdefault(opt, []).append((name, action.help))
    # the model directory is --model in every command that reads or writes one
    assert {n for n, _ in uses["--model"]} >= {"train", "predict", "ablation", "serve", "check"}
    assert all("model directory" in h for _, h in uses["--model"]), uses["--model"]
    assert all("tag index" in h for _, h in uses["--index"]), uses["--index"]


@pytest.mark.slow
def test_help_renders_percent_signs_once():
    proc = run_cli("evaluate", "--help")
    assert proc.returncode == 0
    assert "95% intervals" in proc.stdout and "%%" not in proc.stdout


@pytest.mark.slow
def test_demo_run_prints_no_python_warning(demo_command):
    _, proc = demo_command  # the demo run exactly as the README's Quick start runs it (progress on)
    text = proc.stdout + proc.stderr
    assert not re.search(r"\w+Warning\b", text), text
    assert "site-packages" not in text
    ours = [line for line in proc.stderr.splitlines() if "warning" in line.lower()]
    assert ours == ["factcheck run: warning: the training hold-out has 3 claims, too few to choose a "
                    "retriever (need 30); using the default, bm25"], ours


def test_demo_retriever_is_the_stated_default_and_not_the_worst_on_dev(demo_run):
    out = demo_run
    run = json.loads((out / "metrics.json").read_text())["run"]
    assert run["retriever"]["chosen"] == "bm25" and run["retriever"]["chosen_by"] == "default"
    on_dev = {name: r["evidence_f"]["value"] for name, r in run["retrievers_on_dev"].items()}
    assert len(on_dev) == 3
    chosen = on_dev[run["retriever"]["chosen"]]
    assert chosen > min(on_dev.values()) or len(set(on_dev.values())) == 1, on_dev
    report = (out / "report.md").read_text()
    assert "too small to choose" in report
    assert "2024 system" not in report  # the 2024 figures belong to the course dev claims only
    assert "{'" not in report  # configuration as a table, not a dict dump
    assert "| **total (wall time)** |" in report


@pytest.mark.slow
def test_quiet_demo_run_is_quiet(quiet_demo_command):
    _, proc = quiet_demo_command
    assert proc.stderr.splitlines() == ["factcheck run: warning: the training hold-out has 3 claims, too few to "
                                        "choose a retriever (need 30); using the default, bm25"]


# The commands whose work shows progress (bars on a terminal, progress lines).
LONG_COMMANDS = {"tag", "retrieve", "selftest", "evaluate-retrieval", "run", "train", "predict", "ablation",
                 "train-rerank"}


def test_every_command_with_progress_takes_quiet():
    have = {name for name, sp in subparsers().items() if any("--quiet" in a.option_strings for a in sp._actions)}
    assert have == LONG_COMMANDS


def test_quiet_silences_bars_and_progress_lines_not_the_result(tmp_path, monkeypatch):
    import factcheck.progress
    monkeypatch.setattr(factcheck.progress, "_redraws", lambda: True)  # as on a terminal: bars drawn
    loud = in_process("tag", DEMO / "evidence.json", "--out", tmp_path / "a", "--jobs", "1")
    quiet = in_process("tag", DEMO / "evidence.json", "--out", tmp_path / "b", "--jobs", "1", "--quiet")
    assert loud.returncode == quiet.returncode == 0, loud.stderr + quiet.stderr
    assert loud.stderr.strip() and quiet.stderr == ""
    assert quiet.stdout.replace(str(tmp_path / "b"), "OUT") == loud.stdout.replace(str(tmp_path / "a"), "OUT")


def test_train_rerank_depth_is_k_as_everywhere():
    parser = build_parser()
    base = ["train-rerank", "--index", "i", "--claims", "c", "--rerank-model", "r"]
    assert parser.parse_args(base + ["--k", "40"]).k == 40
    assert parser.parse_args(base + ["--depth", "40"]).k == 40  # the old spelling (a warning when used)
    assert "--depth" not in subparsers()["train-rerank"].format_help().replace("--depth still works", "")


@pytest.mark.slow
def test_deprecated_spellings_still_work_with_one_warning(demo_run, tmp_path):
    out = demo_run
    proc = run_cli("train-rerank", "--index", out / "index", "--claims", DEMO / "train-claims.json",
                   "--out", tmp_path / "r.joblib")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == ["factcheck train-rerank: warning: --out is deprecated; use --rerank-model"]
    assert (tmp_path / "r.joblib").is_file()
    assert "1 claims" not in proc.stdout  # (its timing is not checked: no test reads the clock)
    parser = build_parser()
    args = parser.parse_args(["train", "--index", "i", "--claims", "c", "--model-out", "m"])
    assert str(args.model) == "m"
    with pytest.raises(SystemExit):  # both spellings at once is an error, not a silent pick
        parser.parse_args(["train", "--index", "i", "--claims", "c", "--model-out", "m", "--model", "n"])


def check_text_and_json(run_dir, claim, *extra):
    text = run_cli("check", "--run", run_dir, "--width", "100", *extra, claim)
    assert text.returncode == 0, text.stderr
    js = run_cli("check", "--run", run_dir, "--json", *extra, claim)
    assert js.returncode == 0, js.stderr
    view = json.loads(js.stdout)
    assert view["claim"] == claim and view["verdict"] in LABELS
    assert set(view["probabilities"]) == set(LABELS)
    assert abs(sum(view["probabilities"].values()) - 1) < 1e-6
    assert view["hits"], view
    out = text.stdout
    assert f"Verdict: {view['verdict']}" in out
    for label, p in view["probabilities"].items():
        assert re.search(rf"{label}\s+{p:5.3f}", out), (label, out)
    for i, hit in enumerate(view["hits"], 1):
        assert f"{i:2d}. {hit['id']}" in out
    assert out.count("why picked:") == len(view["hits"])
    assert max(map(len, out.splitlines())) <= 100
    # the same record as the library call (the app's /api/check builds it the same way)
    assert json.loads(json.dumps(check_claim(claim, run_dir, method=(extra or ("", "best"))[1]))) == view
    return view, out


@pytest.mark.slow
def test_check_on_the_demo_run(demo_run):
    out = demo_run
    view, text = check_text_and_json(out, CLAIM)
    assert view["method"] == view["best_method"] == "bm25"
    assert "BM25 score" in text and "shared stems: " in text  # BM25 matches stems; tags are the tag rule's
    for method, needle in (("tags", "tag cosine"), ("rerank", "reranker probability")):
        view = check_claim(CLAIM, out, method=method)
        text = format_check(view, 80)
        assert view["method"] == method and needle in text
        assert text.count("why picked:") == len(view["hits"]) and max(map(len, text.splitlines())) <= 80


@pytest.mark.slow
def test_check_bad_input_is_one_line(demo_run, tmp_path):
    out = demo_run
    assert_one_line_error(run_cli("check", "--run", out, "   "), "claim is empty")
    assert_one_line_error(run_cli("check", "--run", tmp_path / "nope", CLAIM), "no such run directory")


@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    """A run on real course data, small enough for the suite: the first 200 training claims
    (a 40-claim hold-out, so the retriever is chosen there), 40 dev, 10 test claims; the
    knowledge source is their gold passages plus every 150th proxy passage."""
    data = tmp_path_factory.mktemp("real-data")
    subsets = {"train-claims.json": 200, "dev-claims.json": 40, "test-claims-unlabelled.json": 10}
    gold = set()
    for name, n in subsets.items():
        claims = dict(list(json.loads(shared_file(name).read_text("utf-8")).items())[:n])
        gold |= {e for c in claims.values() for e in c.get("evidences", [])}
        (data / name).write_text(json.dumps(claims), encoding="utf-8")
    with gzip.open(shared_file("evidence.json.gz"), "rt", encoding="utf-8") as fh:
        items = list(json.load(fh).items())
    evidence = {k: v for k, v in items if k in gold} | dict(items[::150])
    (data / "evidence.json").write_text(json.dumps(evidence), encoding="utf-8")
    out = data.parent / "real-run"
    proc = run_cli("run", "--data-dir", data, "--out", out, "--quiet", "--jobs", "1")
    assert proc.returncode == 0, proc.stderr
    assert "Warning" not in proc.stderr and proc.stderr == "", proc.stderr
    return out


@pytest.mark.shared
@pytest.mark.slow
def test_check_on_a_real_data_run(real_run):
    run = json.loads((real_run / "metrics.json").read_text())["run"]
    assert run["retriever"]["chosen_by"] == "holdout" and run["retriever"]["holdout_claims"] >= 30
    view, _ = check_text_and_json(real_run, "Arctic sea ice has been shrinking since the 1970s.")
    assert view["method"] == run["retriever"]["chosen"]


@pytest.mark.slow
def test_fallback_share_only_for_retrievers_that_can_fall_back(demo_run, tmp_path):
    out = demo_run
    shown = {}
    for method in ("bm25", "tags"):
        pred = tmp_path / f"{method}.json"
        proc = run_cli("retrieve", "--index", out / "index", "--claims", DEMO / "dev-claims.json",
                       "--method", method, "--out", pred)
        assert proc.returncode == 0, proc.stderr
        assert "8 claims" in proc.stdout
        proc = run_cli("evaluate", "--predictions", pred, "--groundtruth", DEMO / "dev-claims.json")
        assert proc.returncode == 0, proc.stderr
        shown[method] = "fallback_share" in proc.stdout
    assert shown == {"bm25": False, "tags": True}
