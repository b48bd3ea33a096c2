"""The explain app end to end in headless Chromium: ``factcheck serve`` as a real
server process on a free loopback port, driven with Playwright.

Needs Debian's ``chromium`` at /usr/bin/chromium: skips with the reason when it is
absent, fails instead under FACTCHECK_REQUIRE_SHARED=1 (CI installs it).
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlencode

import httpx
import pytest

from helpers import DEMO, DEMO_CLAIM as CLAIM, DEMO_PASSAGES as PASSAGES, ROOT, require_or_skip
from harness.serving import ServerFailed, serving
from factcheck.formats.claims import LABELS, read_claims
from factcheck.serve.present import LABEL_NAMES
from factcheck.text.analyzer import stem_token

pytestmark = pytest.mark.slow  # a server process and a browser

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def chromium() -> Path:
    if not CHROMIUM.is_file():
        require_or_skip(f"needs Debian's chromium at {CHROMIUM} (apt-get install chromium); "
                        "not present on this machine")
    return CHROMIUM


def served(run, tmp_path_factory):
    """``factcheck serve --run RUN`` in a subprocess; yields its base URL, stops it afterwards."""
    log = tmp_path_factory.mktemp("serve-log") / "serve.log"
    try:
        with serving(["--run", run], log, cwd=ROOT) as (url, _):
            yield url
    except ServerFailed as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="module")
def server(chromium, demo_run, tmp_path_factory):
    yield from served(demo_run, tmp_path_factory)


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

            assert page.inner_text("#verdict") == LABEL_NAMES[expected["verdict"]]
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


# ------------------------------------------------------------------ the app for a person
# On a demo run made with --method rerank: the evidence is the reranker's, the classifier
# reads another retriever's passages (conftest.py's reranked_demo_run).
READ_CLAIMS = [CLAIM] + [c.text for c in read_claims(DEMO / "dev-claims.json", require_labels=True)]


@pytest.fixture(scope="module")
def reader_server(chromium, reranked_demo_run, tmp_path_factory):
    yield from served(reranked_demo_run, tmp_path_factory)


@pytest.fixture(scope="module")
def browser(chromium):
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(chromium), args=ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser):
    """A fresh page that fails the test on any console error (a CSP violation, a broken image)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    errors = []
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    yield pg
    context.close()
    assert errors == []


def passage_text(pid: str) -> str:
    return " ".join(PASSAGES[pid].split())


def test_the_verdict_shows_the_text_of_every_passage_it_read(reader_server, page):
    """Acceptance: for a claim whose reader differs from the retriever shown, the page
    shows the text of each passage the classifier read."""
    differing = []
    for claim in READ_CLAIMS:
        data = httpx.get(reader_server + "/api/check", params={"claim": claim}).json()
        read = data["classifier_read"]
        if read["method"] != data["method"] and read["ids"] != [h["id"] for h in data["hits"]]:
            differing.append((claim, data))
    assert len(differing) >= 3, "the reader run no longer has claims whose reader differs"
    for claim, data in differing:
        page.goto(reader_server + "/")
        page.fill("#claim", claim)
        page.click("#submit")  # method: the model's choice (the reranker)
        page.wait_for_selector("#verdict")
        assert page.inner_text("#verdict") == LABEL_NAMES[data["verdict"]]
        note = page.locator("#read-note")
        assert note.is_visible() and "not from the learned reranker" in note.inner_text()
        for pid in data["classifier_read"]["ids"]:
            shown = page.locator(f'#read .hit[data-id="{pid}"] .passage')
            assert shown.is_visible(), pid
            assert " ".join(shown.inner_text().split()) == passage_text(pid)
    # one click shows the reader's passages as the evidence: the same verdict, and now the same passages
    claim, data = differing[-1]  # the page on screen
    page.click("#switch-reader")
    page.wait_for_selector("#verdict")
    assert page.locator("#method").input_value() == data["classifier_read"]["method"]
    shown = page.locator("#why .hit").evaluate_all("els => els.map(e => e.dataset.id)")
    assert shown == data["classifier_read"]["ids"]
    assert page.inner_text("#verdict") == LABEL_NAMES[data["verdict"]]
    assert "come from the same passages" in page.inner_text("#read-note")


def test_example_claims_are_one_click_away(reader_server, page):
    page.goto(reader_server + "/")
    links = page.locator("#examples a.example")
    dev = read_claims(DEMO / "dev-claims.json", require_labels=True)
    assert links.count() == sum(min(2, sum(c.label == label for c in dev)) for label in LABELS)
    for i in range(links.count()):
        assert links.nth(i).get_attribute("href").startswith("/?claim=")
    text = links.nth(0).inner_text()
    links.nth(0).click()
    page.wait_for_selector("#verdict")
    assert page.locator("#claim").input_value() == text
    assert page.locator("#why .hit").count() > 0


def test_words_are_marked_in_the_text_and_stems_wait_in_a_details_row(reader_server, page):
    page.goto(reader_server + "/?" + urlencode({"claim": CLAIM, "method": "tags"}))
    page.wait_for_selector("#verdict")
    hits = page.locator("#why .hit")
    assert hits.count() > 0
    for i in range(hits.count()):
        hit = hits.nth(i)
        text = hit.locator(".passage").inner_text()
        marks = hit.locator(".passage mark").all_inner_texts()
        words = hit.locator(".word").all_inner_texts()
        assert words and set(words) <= {m for m in marks}, (words, marks)
        assert all(w in text for w in words)
        stems = hit.locator("details.stems .tag")
        assert stems.count() > 0 and not stems.first.is_visible()  # stems only on request
        hit.locator("details.stems summary").click()
        assert stems.first.is_visible()


def test_labels_read_as_words_and_numbers_are_rounded(reader_server, page):
    import re
    page.goto(reader_server + "/?" + urlencode({"claim": CLAIM}))
    page.wait_for_selector("#verdict")
    rows = page.locator("table.probs tr td:first-child").all_inner_texts()
    assert rows == [LABEL_NAMES[label] for label in LABELS]
    body = page.inner_text("body")
    assert not re.search(r"\d\.\d{5,}", body), re.findall(r"\S*\d\.\d{5,}\S*", body)
    assert "NOT_ENOUGH_INFO" not in body and "shared_terms" not in body and "top_probability" not in body
    page.click("#params summary")  # the retriever's parameters: a small table
    params = page.locator("#params table tr")
    assert params.count() > 5 and "cut-off: passages at most" in page.inner_text("#params")


def test_compare_puts_every_retriever_side_by_side(reader_server, page):
    methods = httpx.get(reader_server + "/api/methods").json()
    page.goto(reader_server + "/?" + urlencode({"claim": CLAIM}))
    page.click("#compare")  # the form's second button: no script, a plain GET to /compare
    page.wait_for_selector(".column")
    assert page.url.startswith(reader_server + "/compare?")
    columns = page.locator(".column").evaluate_all("els => els.map(e => e.dataset.method)")
    assert columns[0] == methods["best"] and sorted(columns) == sorted(methods["methods"])
    shared_rows = page.locator("#overlap tr.shared").evaluate_all("els => els.map(e => e.dataset.id)")
    assert shared_rows
    for pid in shared_rows:  # marked in every column that returned it
        marked = page.locator(f'.column .hit.shared[data-id="{pid}"]')
        assert marked.count() >= 2 and marked.first.locator(".badge.shared").is_visible()
    box = [page.locator(".column").nth(i).bounding_box() for i in range(len(columns))]
    assert len({round(b["y"]) for b in box}) == 1  # side by side, not stacked (1280 px wide)


def test_the_api_link_is_a_page_about_the_endpoints(reader_server, page):
    page.goto(reader_server + "/")
    page.click("#nav-api")
    page.wait_for_selector("h1")
    assert page.inner_text("h1") == "API"
    for card in ("#api-check", "#api-methods", "#api-healthz"):
        assert page.locator(card).is_visible()
    page.click("#example-check")
    record = json.loads(page.inner_text("body"))
    assert record["verdict"] in LABELS and record["hits"]
