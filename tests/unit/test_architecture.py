"""The package's layers, checked by import-linter (the contracts are in pyproject.toml).

Layers, highest first: ``cli`` → ``serve`` → ``pipeline`` → ``system``, ``training``,
``reporting`` → ``evaluation`` → ``retrieval``, ``classification`` → ``tagging`` →
``scoring`` → ``formats``, ``text`` → ``errors``, ``progress``. A module imports its own
package and lower layers only, never a sibling on its line; every subpackage has a
layer; nothing but the CLI imports the package root (the public API); and no two
packages or modules import each other, directly or round a longer loop. grimp, which
import-linter runs on, reads imports inside functions too: a lazy import is still a
dependency.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _lint(config: Path) -> tuple[int, str]:
    """``lint-imports --config CONFIG --no-cache``: its exit status and report. The use
    case, not ``importlinter.cli.lint_imports``, which reconfigures logging for the whole
    process (disabling every logger that exists, the package's too)."""
    import contextlib
    import io

    from importlinter import cli  # noqa: F401 (importing it sets up import-linter's adapters)
    from importlinter.application.use_cases import lint_imports
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        passed = lint_imports(config_filename=str(config), cache_dir=None, no_logo=True)
    return (0 if passed else 1), out.getvalue()


def test_the_import_contracts_are_kept():
    code, report = _lint(ROOT / "pyproject.toml")
    assert code == 0, report


def test_the_contracts_catch_a_lazy_upward_import_and_a_package_without_a_layer(tmp_path, monkeypatch):
    """The same contracts on a copy of the layout (named ``fakecheck``) must be able to fail."""
    import tomllib
    pkg = tmp_path / "fakecheck"
    for name in ("pipeline", "text", "tagging", "formats", "retrieval", "classification", "evaluation", "system",
                 "training", "reporting", "serve", "cli", "extra"):
        (pkg / name).mkdir(parents=True)
        (pkg / name / "__init__.py").write_text("")
    for name in ("__init__", "__main__", "errors", "progress", "hashing", "pipeline/run"):
        (pkg / f"{name}.py").write_text("")
    (pkg / "text" / "x.py").write_text(textwrap.dedent("""
        def f():
            from fakecheck.pipeline import run
    """))
    config = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["importlinter"]
    lines = [f"[importlinter]\nroot_package = {config['root_package']}\n"]
    for i, contract in enumerate(config["contracts"]):
        lines.append(f"[importlinter:contract:{i}]")
        for key, value in contract.items():
            value = "\n    " + "\n    ".join(value) if isinstance(value, list) else value
            lines.append(f"{key} = {value}")
    (tmp_path / "setup.cfg").write_text("\n".join(lines).replace("factcheck", "fakecheck") + "\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    code, report = _lint(tmp_path / "setup.cfg")
    assert code == 1
    assert "fakecheck.text.x -> fakecheck.pipeline.run (l.3)" in report  # inside a function
    assert "fakecheck.extra" in report  # a subpackage with no layer
