"""The optional extras stay optional: without Dask, ``--backend dask`` is one line saying
what to install (and writes nothing); without the app, ``serve`` is one line naming the
``app`` extra and ``check`` still works; without matplotlib, ``run`` is one line naming the
``plots`` extra before any work; without any other extra, the Quick start's run works.

The extras are hidden (``sys.modules[name] = None`` makes their import fail), in a child
process or in this one, so these tests run whatever is installed."""

from __future__ import annotations

import json
import sys

import pytest

from helpers import DEMO, assert_one_line_error, cli_without, in_process

APP = ("fastapi", "starlette", "jinja2", "uvicorn")


def _hide(monkeypatch, *modules):
    """``modules`` as if not installed, and the app module imported afresh (its check runs at import)."""
    for name in modules:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delitem(sys.modules, "factcheck.serve.app", raising=False)


@pytest.mark.parametrize("missing", APP[:1] + APP[2:])
def test_serve_without_the_app_extra_is_one_line_naming_it(missing, monkeypatch, tmp_path):
    _hide(monkeypatch, missing)
    proc = in_process("serve", "--run", tmp_path / "no-run", "--port", "0")
    line = assert_one_line_error(proc, "the explain app needs the optional extra: pip install -e '.[app]'")
    assert line.startswith("factcheck serve: error:")


def test_the_app_module_without_the_extra_is_an_input_error(monkeypatch):
    import importlib

    from factcheck.errors import InputError
    _hide(monkeypatch, "fastapi")
    with pytest.raises(InputError, match=r"pip install -e '\.\[app\]'"):
        importlib.import_module("factcheck.serve.app")


def test_check_needs_no_app_extra(monkeypatch, demo_run):
    _hide(monkeypatch, *APP)
    proc = in_process("check", "--run", demo_run, "Sea levels are rising.", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["claim"] == "Sea levels are rising."
    assert "factcheck.serve.app" not in sys.modules


def test_run_without_the_plots_extra_is_one_line_before_any_work(monkeypatch, tmp_path):
    from factcheck.errors import InputError
    from factcheck.pipeline.run import RunConfig, run_pipeline
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    out = tmp_path / "demo"
    proc = in_process("run", "--data-dir", DEMO, "--out", out, "--quiet")
    line = assert_one_line_error(proc, "drawing a run's figures needs the optional extra: pip install -e '.[plots]'")
    assert line.startswith("factcheck run: error:")
    assert not out.exists()  # checked before the output directory is made
    with pytest.raises(InputError, match="plots"):
        run_pipeline(DEMO, out, RunConfig(progress=False))
    assert not out.exists()

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
