"""The package's layers, checked by walking every import.

Layers, lowest first: ``errors`` → ``formats``, ``text`` → ``tagging`` → ``retrieval``,
``classification`` → ``evaluation`` → ``system``, ``training``, ``reporting`` → ``pipeline``
→ ``serve`` → ``cli``.
A module may import its own layer's package and anything lower; never a higher layer,
never a sibling layer (``retrieval`` ↔ ``classification``), and no two modules may
import each other, directly or round a longer loop -- imports inside functions count
too, since a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "factcheck"
LAYERS = {"errors": 0, "progress": 0, "formats": 1, "text": 1, "tagging": 2, "retrieval": 3, "classification": 3,
          "evaluation": 4, "system": 5, "training": 5, "reporting": 5, "pipeline": 6, "serve": 7, "cli": 8,
          "__main__": 9}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> str | None:
    """``factcheck.retrieval.bm25`` -> ``retrieval``; the package root (the public API) has none."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def imports_of(path: Path, module: str) -> set[str]:
    found = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "factcheck")
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative import: resolve against this module's package
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            if base.split(".")[0] == "factcheck":
                found.add(base)
    return found


def graph() -> dict[str, set[str]]:
    return {module_name(p): imports_of(p, module_name(p)) for p in sorted(PACKAGE.rglob("*.py"))}


def test_every_subpackage_has_a_layer():
    unknown = {layer(m) for m in graph() if layer(m) is not None} - set(LAYERS)
    assert not unknown, f"give these a layer in LAYERS: {sorted(unknown)}"


def test_no_module_imports_a_higher_or_sibling_layer():
    bad = []
    for module, deps in graph().items():
        here = layer(module)
        if here is None:  # the package root re-exports the API: it may import anything
            continue
        for dep in sorted(deps):
            there = layer(dep)
            if there is None:
                if dep == "factcheck" and LAYERS[here] < LAYERS["cli"]:
                    bad.append(f"{module} -> factcheck (the public API is for users, not for the package)")
                continue
            if there != here and LAYERS.get(there, 99) >= LAYERS.get(here, -1):
                bad.append(f"{module} ({here}) -> {dep} ({there})")
    assert not bad, "upward or sibling imports:\n" + "\n".join(bad)


def test_no_import_cycle():
    g = graph()
    edges = {m: {d for d in deps if d in g} for m, deps in g.items()}
    state, stack, cycles = {}, [], []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for d in sorted(edges[m]):
            if d == m:
                continue
            if state.get(d) == "open":
                cycles.append(stack[stack.index(d):] + [d])
            elif d not in state:
                visit(d)
        stack.pop()
        state[m] = "done"

    for m in sorted(edges):
        if m not in state:
            visit(m)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_the_checker_itself_catches_an_upward_import(tmp_path):
    """The walk must be able to fail: a fake upward import is seen."""
    fake = tmp_path / "factcheck" / "text" / "x.py"
    fake.parent.mkdir(parents=True)
    fake.write_text("def f():\n    from factcheck.pipeline import run\n")
    assert imports_of(fake, "factcheck.text.x") == {"factcheck.pipeline"}
    assert layer("factcheck.pipeline") == "pipeline" and LAYERS["pipeline"] > LAYERS["text"]
