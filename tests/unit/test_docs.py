"""The documentation is checked like code: README.md and docs/*.md must not point at things
that do not exist.

- every relative link resolves: the file exists, and a ``#anchor`` names a heading of the
  target page (GitHub's anchor rule);
- every ``factcheck COMMAND`` named in a code span or block is a command of the CLI
  (:data:`factcheck.cli.COMMANDS`), and every ``--option`` given to it is one of its options;
- every repository path named in a code span exists (a few removed files are named on
  purpose, with the commit of their last version: :data:`REMOVED`), and every
  ``python -m MODULE`` names a module that exists;
- every ```python block compiles; every page opens with a title and an introduction, and
  the README's map links every page;
- no file of the repository names a tracker issue.

Each checker returns its findings, so the self-tests at the end can show that each one
fails on a copy of the docs with a planted mistake. Fast: no subprocess, nothing imported
beyond the CLI's parser.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import shutil
from pathlib import Path

import pytest

from helpers import ROOT

# Files the docs name on purpose although they are gone: one-off probe scripts (their
# findings stay in reports/, docs/decisions.md gives the commit of each last version) and
# the benchmarks' paths before they moved to benchmarks/.
REMOVED = {
    "scripts/eval_rerank.py", "scripts/lsa_probe.py", "scripts/open_mode_probe.py",
    "scripts/open_rerank_probe.py", "scripts/open_classifier_probe.py",
    "scripts/bench_tagging.py", "scripts/make_bench_corpus.py",
}
# First path components that are the repository's own (a path in a code span starting with
# one of these must exist); the package's subpackages are also accepted without the prefix.
ROOTS = ("factcheck", "tests", "benchmarks", "scripts", "harness", "reports", "docs", "data", ".ci")
PACKAGE_PARTS = tuple(p.name for p in (ROOT / "factcheck").iterdir() if (p / "__init__.py").is_file())

FENCE = re.compile(r"^(```+|~~~+)(.*)$")
LINK = re.compile(r"!?\[([^\]]*)\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
COMMAND = re.compile(r"(?<![\w.-])factcheck ([a-z][a-z0-9-]*)([^`|;&\n]*)")
OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")
PY_MODULE = re.compile(r"\bpython3? -m ([A-Za-z_][\w.]*)")
TRACKER = re.compile(r"\bissues?[ -]?#?\d+|(?<![&\w])#\d{1,2}\b", re.IGNORECASE)


def doc_pages(root: Path) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def split_markdown(text: str) -> tuple[list[tuple[int, str]], list[tuple[int, str, str]]]:
    """(prose lines, code blocks): prose as (line number, text) outside fences; code blocks
    as (first line number, info string, body)."""
    prose, blocks = [], []
    fence, info, body, start = None, "", [], 0
    for n, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line.strip())
        if fence is None and m:
            fence, info, body, start = m.group(1), m.group(2).strip(), [], n
        elif fence is not None and line.strip().startswith(fence) and not line.strip()[len(fence):].strip():
            blocks.append((start, info, "\n".join(body)))
            fence = None
        elif fence is not None:
            body.append(line)
        else:
            prose.append((n, line))
    return prose, blocks


def code_texts(text: str) -> list[tuple[int, str]]:
    """Every code span and every line of every code block, with its line number."""
    prose, blocks = split_markdown(text)
    found = [(n, m.group(2)) for n, line in prose for m in CODE_SPAN.finditer(line)]
    for start, _, body in blocks:
        found += [(start + i + 1, line) for i, line in enumerate(body.splitlines())]
    return found


def github_anchor(heading: str) -> str:
    """GitHub's anchor of a heading: the rendered text lower-cased, punctuation other than
    hyphens and underscores dropped, each space a hyphen."""
    text = LINK.sub(lambda m: m.group(1), heading)
    text = text.replace("`", "").replace("*", "")
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors_of(page: Path) -> set[str]:
    prose, _ = split_markdown(page.read_text("utf-8"))
    seen: dict[str, int] = {}
    anchors = set()
    for _, line in prose:
        m = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if m:
            base = github_anchor(m.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            anchors.add(base if count == 0 else f"{base}-{count}")
    return anchors


def broken_links(root: Path) -> list[str]:
    bad = []
    for page in doc_pages(root):
        prose, _ = split_markdown(page.read_text("utf-8"))
        for n, line in prose:
            for m in LINK.finditer(CODE_SPAN.sub("", line)):
                target = m.group(2)
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                    continue
                path, _, anchor = target.partition("#")
                dest = (page.parent / path).resolve() if path else page
                where = f"{page.relative_to(root)}:{n}: {target}"
                if not dest.exists():
                    bad.append(f"{where}: no such file")
                elif anchor and dest.suffix == ".md" and anchor not in anchors_of(dest):
                    bad.append(f"{where}: no heading with this anchor in {dest.name}")
    return bad


def subcommand_options() -> dict[str, set[str]]:
    from factcheck.cli import COMMANDS, build_parser
    parser = build_parser()
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert set(subs) == {name for name, _, _ in COMMANDS}
    return {name: _options(sp) for name, sp in subs.items()}


def _options(parser) -> set[str]:
    """A command's option strings, with those of its own sub-commands (``convert claims``)."""
    found = set()
    for action in parser._actions:
        found.update(action.option_strings)
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= _options(sub)
    return found


def commands_named(root: Path) -> list[tuple[str, int, str, str]]:
    """(page, line, command, what follows it) for every ``factcheck COMMAND`` in code."""
    found = []
    for page in doc_pages(root):
        for n, code in code_texts(page.read_text("utf-8")):
            # tags|bm25 and a table cell's escaped tags\|bm25 are alternatives; a shell pipe
            # has spaces around it.
            for m in COMMAND.finditer(re.sub(r"\\?\|(?=\S)", "/", code)):
                found.append((str(page.relative_to(root)), n, m.group(1), m.group(2)))
    return found


def unknown_commands(root: Path) -> list[str]:
    options = subcommand_options()
    bad = []
    for page, n, command, rest in commands_named(root):
        where = f"{page}:{n}: factcheck {command}"
        if command not in options:
            bad.append(f"{where}: no such command")
            continue
        for option in OPTION.findall(rest):
            if option not in options[command]:
                bad.append(f"{where}: no option {option}")
    return bad


def undocumented_commands(root: Path) -> list[str]:
    named = {command for _, _, command, _ in commands_named(root)}
    return [f"factcheck {c}: named nowhere in README.md or docs/" for c in subcommand_options() if c not in named]


def placeholder(parts: list[str]) -> bool:
    """``benchmarks.X``, ``scripts/NAME.py``: a name in capitals stands for any."""
    return any(re.fullmatch(r"[A-Z][A-Z_]*", part.split(".")[0]) for part in parts)


def missing_paths(root: Path) -> list[str]:
    bad = []
    for page in doc_pages(root):
        for n, code in code_texts(page.read_text("utf-8")):
            for token in code.split():
                token = token.strip("()[],;:'\"").split("::")[0]
                first = token.split("/")[0]
                if "/" not in token or token.startswith(("/", "..")) or first not in ROOTS + PACKAGE_PARTS:
                    continue
                rel = token if first in ROOTS else f"factcheck/{token}"
                if rel in REMOVED or any(ch in rel for ch in "{}<>|") or placeholder(rel.split("/")):
                    continue
                exists = any(root.glob(rel)) if "*" in rel else (root / rel).exists()
                if not exists:
                    bad.append(f"{page.relative_to(root)}:{n}: {token}: no such path")
            for m in PY_MODULE.finditer(code):
                module = m.group(1)
                top, *rest = module.split(".")
                if placeholder(rest):
                    continue
                if top in ROOTS:
                    base = root.joinpath(top, *rest)
                    ok = base.with_suffix(".py").is_file() or (base / "__init__.py").is_file() \
                        or (base / "__main__.py").is_file()
                else:
                    ok = importlib.util.find_spec(top) is not None
                if not ok:
                    bad.append(f"{page.relative_to(root)}:{n}: python -m {module}: no such module")
    return bad


def python_blocks_that_do_not_compile(root: Path) -> list[str]:
    bad = []
    for page in doc_pages(root):
        for start, info, body in split_markdown(page.read_text("utf-8"))[1]:
            if info.split()[:1] == ["python"]:
                try:
                    compile(body, f"{page.name}:{start}", "exec")
                except SyntaxError as exc:
                    bad.append(f"{page.relative_to(root)}:{start}: {exc.msg}")
    return bad


def pages_without_an_introduction(root: Path) -> list[str]:
    """A page opens with a level-1 title, then a paragraph of prose (not a list, a table, a
    heading or code), so that it reads on its own."""
    bad = []
    for page in sorted((root / "docs").glob("*.md")):
        lines = page.read_text("utf-8").splitlines()
        first = next((i for i, line in enumerate(lines) if line.strip()), None)
        if first is None or not lines[first].startswith("# "):
            bad.append(f"{page.name}: does not open with a '# Title'")
            continue
        body = next((line for line in lines[first + 1:] if line.strip()), "")
        if re.match(r"^\s*([#|>*-]|```|\d+\.|\[)", body):
            bad.append(f"{page.name}: the title is not followed by an introductory paragraph")
    return bad


def pages_missing_from_the_readme_map(root: Path) -> list[str]:
    readme = (root / "README.md").read_text("utf-8")
    linked = {Path(m.group(2).partition("#")[0]).name for m in LINK.finditer(readme)
              if m.group(2).startswith("docs/")}
    return [f"docs/{p.name}: not in the README's documentation map"
            for p in sorted((root / "docs").glob("*.md")) if p.name not in linked]


def tracker_numbers(root: Path) -> list[str]:
    """Code, docs, tests, scripts and reports never name tracker issues (the word issue with
    a number, or a number after #): readers cannot see the tracker; a design reason belongs
    in a comment or docs/decisions.md."""
    bad = []
    folders = ("factcheck", "tests", "benchmarks", "scripts", "harness", "docs", "reports", "data", ".ci")
    files = [root / "README.md", root / "pyproject.toml"]
    for folder in folders:
        files += [p for p in (root / folder).rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    for path in files:
        if path.suffix not in {".py", ".md", ".toml", ".html", ".txt", ".cfg", ".json", ""}:
            continue
        try:
            text = path.read_text("utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if TRACKER.search(line.replace("&#", "")):
                bad.append(f"{path.relative_to(root)}:{n}: {line.strip()[:80]}")
    return bad


# ---------------------------------------------------------------------------- the docs

def test_every_relative_link_resolves():
    assert broken_links(ROOT) == []


def test_every_command_named_is_a_command_with_those_options():
    assert unknown_commands(ROOT) == []


def test_every_command_is_documented():
    assert undocumented_commands(ROOT) == []


def test_every_path_and_module_named_exists():
    assert missing_paths(ROOT) == []


def test_every_python_block_compiles():
    assert python_blocks_that_do_not_compile(ROOT) == []


def test_every_page_has_a_title_and_an_introduction_and_is_in_the_readme_map():
    assert pages_without_an_introduction(ROOT) == []
    assert pages_missing_from_the_readme_map(ROOT) == []


def test_readme_stays_short():
    lines = (ROOT / "README.md").read_text("utf-8").splitlines()
    assert len(lines) <= 220, f"README.md has {len(lines)} lines; move detail to docs/"


def test_no_tracker_numbers_anywhere():
    assert tracker_numbers(ROOT) == []


# ------------------------------------------------------------- the checkers can fail

@pytest.fixture
def docs_copy(tmp_path):
    """README.md and docs/ copied, with the repository's other files linked in place."""
    for item in ROOT.iterdir():
        if item.name in ("README.md", "docs"):
            continue
        (tmp_path / item.name).symlink_to(item, target_is_directory=item.is_dir())
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    return tmp_path


def plant(root: Path, page: str, text: str) -> None:
    path = root / page
    path.write_text(path.read_text("utf-8") + "\n" + text + "\n", encoding="utf-8")


def test_github_anchors():
    assert github_anchor("The main job: `factcheck run`") == "the-main-job-factcheck-run"
    assert github_anchor("Tried, measured and dropped") == "tried-measured-and-dropped"
    assert github_anchor("Use it from Python") == "use-it-from-python"
    assert github_anchor("[the app](app.md) & **more**") == "the-app--more"


@pytest.mark.parametrize("link, reason", [
    ("[gone](no-such-page.md)", "no such file"),
    ("[gone](commands.md#no-such-heading)", "no heading"),
    ("[gone](#nor-here)", "no heading"),
    ("[gone](../factcheck/no_such_module.py)", "no such file"),
])
def test_a_broken_link_is_found(docs_copy, link, reason):
    assert broken_links(docs_copy) == []
    plant(docs_copy, "docs/commands.md", f"See {link}.")
    found = broken_links(docs_copy)
    assert len(found) == 1 and reason in found[0] and "docs/commands.md" in found[0]


@pytest.mark.parametrize("text, reason", [
    ("Run `factcheck frobnicate --out X`.", "no such command"),
    ("```bash\nfactcheck tag data/demo/evidence.json --out x --no-such-flag\n```", "no option --no-such-flag"),
    ("`factcheck retrieve --index I --claims C --out O --model M`", "no option --model"),
])
def test_an_unknown_command_or_option_is_found(docs_copy, text, reason):
    assert unknown_commands(docs_copy) == []
    plant(docs_copy, "docs/tagging.md", text)
    found = unknown_commands(docs_copy)
    assert len(found) == 1 and reason in found[0]


@pytest.mark.parametrize("text", [
    "`factcheck/pipeline/splits.py`", "`pipeline/classifier_cv.py`", "`python -m benchmarks.no_such_bench`",
    "`reports/no-such-report.md`", "`python -m scripts.bench_tagging`",
])
def test_a_stale_path_or_module_is_found(docs_copy, text):
    assert missing_paths(docs_copy) == []
    plant(docs_copy, "docs/benchmarks.md", f"Made by {text}.")
    assert len(missing_paths(docs_copy)) == 1


def test_a_python_block_that_does_not_compile_is_found(docs_copy):
    plant(docs_copy, "docs/python-api.md", "```python\nprint(factcheck.evaluate(\n```")
    assert len(python_blocks_that_do_not_compile(docs_copy)) == 1


def test_a_page_without_an_introduction_or_outside_the_map_is_found(docs_copy):
    (docs_copy / "docs" / "orphan.md").write_text("# Orphan\n\n| a | b |\n|---|---|\n", encoding="utf-8")
    assert pages_without_an_introduction(docs_copy) == ["orphan.md: the title is not followed by an "
                                                        "introductory paragraph"]
    assert pages_missing_from_the_readme_map(docs_copy) == ["docs/orphan.md: not in the README's documentation map"]


# Written with braces so that this file itself names no tracker issue.
@pytest.mark.parametrize("text", [f"fixed in issue {14}", f"see Issue-{15}", f"as #{12} asked",
                                  f"issues #{3} and #{4}"])
def test_a_tracker_number_is_found(tmp_path, text):
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("# x\n\nNothing here; &#34;quoted&#34; is fine, so is a 2-core box.\n")
    assert tracker_numbers(tmp_path) == []
    (tmp_path / "docs" / "page.md").write_text(f"# Page\n\nThis was {text}.\n")
    assert len(tracker_numbers(tmp_path)) == 1


def test_a_command_the_docs_never_name_is_found(docs_copy):
    assert undocumented_commands(docs_copy) == []
    for page in doc_pages(docs_copy):
        page.write_text(page.read_text("utf-8").replace("factcheck verify", "verify"), encoding="utf-8")
    assert undocumented_commands(docs_copy) == ["factcheck verify: named nowhere in README.md or docs/"]
