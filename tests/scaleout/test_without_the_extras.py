"""The optional extras stay optional: without Dask, ``--backend dask`` is one line saying
what to install (and writes nothing); without any extra, the Quick start's run works.

The extras are hidden from a child process (``sys.modules[name] = None`` makes their
import fail), so these tests run whatever is installed."""

from __future__ import annotations


import pytest

from helpers import DEMO, assert_one_line_error, cli_without

EXTRAS = ("dask", "distributed", "wordllama", "onnxruntime", "tokenizers", "onnx")


@pytest.mark.slow
@pytest.mark.parametrize("command", ["tag", "run"])
def test_dask_backend_without_the_extra_is_one_line_saying_what_to_install(command, tmp_path):
    out = tmp_path / "out"
    args = ([DEMO / "evidence.json", "--out", out] if command == "tag"
            else ["--data-dir", DEMO, "--out", out, "--quiet"])
    proc = cli_without(("dask", "distributed"), command, *args, "--backend", "dask")
    line = assert_one_line_error(proc, "--backend dask", "pip install -e '.[cluster]'")
    assert line.startswith(f"factcheck {command}: error:")
    assert not out.exists()  # checked before the output directory is made


@pytest.mark.slow
def test_the_quick_start_run_needs_no_extra(tmp_path):
    proc = cli_without(EXTRAS, "run", "--data-dir", DEMO, "--out", tmp_path / "demo", "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "demo" / "dev-claims-predictions.json").is_file()
