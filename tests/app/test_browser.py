"""The explain app end to end in headless Chromium: ``factcheck serve`` as a real
server process on a free loopback port, driven with Playwright.

Needs Debian's ``chromium`` at /usr/bin/chromium: skips with the reason when it is
absent, fails instead under FACTCHECK_REQUIRE_SHARED=1 (CI installs it).
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from helpers import DEMO, ROOT, require_or_skip, run_cli
from harness.serving import ServerFailed, serving
from factcheck.text.analyzer import stem_token

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
CLAIM = "Burning fossil fuels is the biggest source of human carbon dioxide emissions."


@pytest.fixture(scope="module")
def chromium() -> Path:
    if not CHROMIUM.is_file():
        require_or_skip(f"needs Debian's chromium at {CHROMIUM} (apt-get install chromium); "
                        "not present on this machine")
    return CHROMIUM


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    """The demo run test_serve.py builds (shared through the session's base temp dir)."""
    out = tmp_path_factory.getbasetemp() / "serve-demo-run"
    if not (out / "metrics.json").is_file():
        proc = run_cli("run", "--data-dir", DEMO, "--out", out, "--quiet", "--jobs", "1")
        assert proc.returncode == 0, proc.stderr
    return out


@pytest.fixture(scope="module")
def server(chromium, demo_run, tmp_path_factory):
    """``factcheck serve`` in a subprocess; yields its base URL, stops it afterwards."""
    log = tmp_path_factory.mktemp("serve-log") / "serve.log"
    try:
        with serving(["--run", demo_run], log, cwd=ROOT) as (url, _):
            yield url
    except ServerFailed as exc:
        pytest.fail(str(exc))


def test_type_a_claim_and_see_the_shared_tags_highlighted(server, chromium, tmp_path):
    from playwright.sync_api import sync_playwright

    expected = httpx.get(server + "/api/check", params={"claim": CLAIM, "method": "tags"}).json()
    shared = {t for h in expected["hits"] for t in h["shared_tags"]}
    assert shared
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(chromium), args=ARGS)
        try:
            page = browser.new_page()
            errors = []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.goto(server + "/")
            page.fill("#claim", CLAIM)
            page.select_option("#method", "tags")
            page.click("#submit")
            page.wait_for_selector("#verdict")

            assert page.inner_text("#verdict") == expected["verdict"]
            assert page.inner_text("#path") == expected["path"]
            assert "t_sim" in page.inner_text("#thresholds")
            marks = page.locator(".hit mark").all_inner_texts()
            assert marks, page.content()
            assert all(stem_token(w.lower()) in shared for w in marks), (marks, shared)
            assert "Burning" in marks
            page.screenshot(path=str(tmp_path / "check.png"), full_page=True)

            page.select_option("#method", "bm25")  # switch retriever on the same claim
            page.click("#submit")
            page.wait_for_selector("#verdict")
            assert page.inner_text("#path") == "ranked"
            assert page.locator(".hit mark").count() > 0

            page.goto(server + "/results")  # the plots load through the fixed route
            images = page.locator("img.plot")
            assert images.count() >= 1
            for i in range(images.count()):
                assert images.nth(i).evaluate("img => img.complete && img.naturalWidth > 0")
            assert errors == []  # e.g. no Content-Security-Policy violations
        finally:
            browser.close()
