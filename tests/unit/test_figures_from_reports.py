"""Every figure with an interval that the README or docs/ quote comes from a report:
the same text ("0.200 [0.164, 0.238]") is in some reports/*.md. Rerunning a report and
forgetting the page that quotes it fails here."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIGURE = re.compile(r"(?<![\w.])[-−+]?\d+\.\d+ \[[-−+]?\d+\.\d+, [-−+]?\d+\.\d+\]")
# decisions.md is history (figures of commits since replaced, each with its commit);
# python-api.md's figures are doctest outputs on the demo, checked by the doctests.
EXEMPT = {"decisions.md", "python-api.md"}


def _norm(text: str) -> str:
    return text.replace("−", "-").replace("+", "")


def unreported_figures(root: Path = ROOT) -> list[str]:
    reports = _norm("\n".join(p.read_text("utf-8") for p in sorted((root / "reports").rglob("*.md"))))
    pages = [root / "README.md", *sorted(p for p in (root / "docs").glob("*.md") if p.name not in EXEMPT)]
    return [f"{page.relative_to(root)}: {figure}" for page in pages
            for figure in FIGURE.findall(page.read_text("utf-8")) if _norm(figure) not in reports]


def test_every_quoted_figure_is_in_a_report():
    assert unreported_figures() == []


def test_a_figure_no_report_holds_is_found(tmp_path):
    (tmp_path / "reports").mkdir()
    (tmp_path / "docs").mkdir()
    (tmp_path / "reports" / "r.md").write_text("| F | 0.200 [0.164, 0.238] |\n")
    (tmp_path / "README.md").write_text("F 0.200 [0.164, 0.238]; accuracy 0.506 [0.429, 0.584]\n")
    (tmp_path / "docs" / "decisions.md").write_text("was 0.100 [0.050, 0.150]\n")
    assert unreported_figures(tmp_path) == ["README.md: 0.506 [0.429, 0.584]"]
