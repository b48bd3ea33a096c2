"""A failed command leaves no output directory it created for nothing.

A command that creates its output directory (and any missing parents) removes them
again when it fails before writing anything worth keeping; a directory the user had
stays, and so does whatever a rerun can resume from (a finished shard).
"""

from __future__ import annotations

import shutil

import pytest

from helpers import DEMO, assert_one_line_error, in_process, run_cli


def _bad_claims_data(tmp_path):
    data = tmp_path / "data"
    shutil.copytree(DEMO, data)
    (data / "dev-claims.json").write_text('{"1": {"claim_text": 5}}', encoding="utf-8")
    return data


def test_a_failed_run_removes_the_directory_it_created(tmp_path):
    out = tmp_path / "new" / "run"
    proc = in_process("run", "--data-dir", _bad_claims_data(tmp_path), "--out", out, "--quiet")
    assert_one_line_error(proc, "dev-claims.json", "must be a string")
    assert not (tmp_path / "new").exists()


def test_a_failed_run_leaves_a_directory_the_user_had(tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    proc = in_process("run", "--data-dir", _bad_claims_data(tmp_path), "--out", out, "--quiet")
    assert proc.returncode == 2
    assert out.is_dir() and not list(out.iterdir())


@pytest.mark.parametrize("content, message", [
    ('{"a": "warming", "a": "cooling"}', "duplicate passage id"),
    ('{"a": "the", "b": "and of"}', "no passage contains a word to tag"),
])
def test_a_failed_tag_removes_the_directory_it_created(tmp_path, content, message):
    src = tmp_path / "evidence.json"
    src.write_text(content, encoding="utf-8")
    proc = in_process("tag", src, "--out", tmp_path / "new" / "idx", "--jobs", "1")
    assert_one_line_error(proc, message)
    assert not (tmp_path / "new").exists()


def test_build_index_that_fails_removes_the_directory_it_created(tmp_path):
    from factcheck import build_index
    from factcheck.errors import InputError
    src = tmp_path / "evidence.json"
    src.write_text('{"a": "warming", "a": "cooling"}', encoding="utf-8")
    with pytest.raises(InputError, match="duplicate passage id"):
        build_index(src, tmp_path / "idx", progress=False)
    assert not (tmp_path / "idx").exists()


def test_a_failed_selftest_removes_the_directory_it_created(tmp_path):
    corpus = tmp_path / "papers.csv"
    corpus.write_text("id,title,abstract\n1,Sea level,the\n2,Ice,and of\n", encoding="utf-8")
    proc = in_process("selftest", corpus, "--query-column", "title", "--text-column", "abstract",
                      "--out", tmp_path / "out", "--jobs", "1")
    assert_one_line_error(proc, "no passage contains a word to tag")
    assert not (tmp_path / "out").exists()


def test_the_lock_removes_only_a_directory_it_created_holding_nothing_worth_keeping(tmp_path):
    from factcheck.tagging.outdir import DirectoryLock
    for name, leave, kept in [("scratch", "work/plan.json", False), ("shard", "work/done/x.json", True)]:
        out = tmp_path / name / "out"
        with pytest.raises(KeyError), DirectoryLock(out):
            (out / leave).parent.mkdir(parents=True)
            (out / leave).write_text("{}")
            raise KeyError(name)
        assert (tmp_path / name).exists() == kept, name
        assert not (out / ".factcheck-lock").exists()
    had = tmp_path / "had"
    had.mkdir()
    with pytest.raises(KeyError), DirectoryLock(had):
        raise KeyError("had")
    assert had.is_dir()


@pytest.mark.slow
def test_predict_on_workers_into_a_new_directory(tmp_path, demo_run):
    # Workers' batches into a --out whose parents are missing: made, and nothing else left there.
    dest = tmp_path / "new" / "sub" / "p.json"
    proc = run_cli("predict", "--claims", DEMO / "dev-claims.json", "--index", demo_run / "index",
                   "--model", demo_run / "model", "--out", dest, "--jobs", "2", "--batch-size", "3")
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in dest.parent.iterdir()) == ["p.explain.json", "p.json"]


@pytest.mark.slow
def test_a_failed_predict_on_workers_leaves_no_directory(tmp_path, demo_run):
    pytest.importorskip("distributed")
    dest = tmp_path / "new" / "p.json"
    proc = run_cli("predict", "--claims", DEMO / "dev-claims.json", "--index", demo_run / "index",
                   "--model", demo_run / "model", "--out", dest, "--jobs", "2", "--backend", "dask",
                   "--scheduler", "tcp://127.0.0.1:9", env={"DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "2s"})
    assert_one_line_error(proc, "--scheduler", "cannot connect")
    assert not (tmp_path / "new").exists()
