"""The app's pages for a person, through FastAPI's TestClient: what the verdict read,
example claims, words (not stems) highlighted, human labels and rounded numbers,
parameters as tables, the retriever comparison, the API page, passage titles.

Two demo runs: the README's (BM25 throughout) and one with ``--method rerank``, whose
classifier reads another retriever's passages than the evidence it shows -- the case
where a page must show what the verdict was computed from.
"""

from __future__ import annotations

import json
import re
import warnings
from html.parser import HTMLParser
from urllib.parse import parse_qs, urlparse

import pytest

from helpers import DEMO, DEMO_CLAIM as CLAIM, DEMO_PASSAGES as PASSAGES
from factcheck.formats.claims import LABELS, read_claims
from factcheck.serve.present import EXAMPLES_PER_LABEL, LABEL_NAMES, RETRIEVER_NAMES, num
from factcheck.text.analyzer import analyze

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from factcheck.serve.app import build_app, create_app  # noqa: E402

DEV = read_claims(DEMO / "dev-claims.json", require_labels=True)


@pytest.fixture(scope="module")
def client(demo_run):
    return TestClient(create_app(demo_run, warm_up=False))


@pytest.fixture(scope="module")
def reader_client(reranked_demo_run):
    return TestClient(create_app(reranked_demo_run, warm_up=False))


class _Text(HTMLParser):
    """The text a person sees, split into what is inside a closed ``<details>`` (apart
    from its summary) and what is not; no style, no attributes."""

    def __init__(self):
        super().__init__()
        self.shown, self.hidden, self._details, self._summary, self._style = [], [], 0, 0, False

    def handle_starttag(self, tag, attrs):
        self._gap(tag)
        self._details += tag == "details"
        self._summary += tag == "summary"
        self._style |= tag == "style"

    def handle_endtag(self, tag):
        self._gap(tag)
        self._details -= tag == "details"
        self._summary -= tag == "summary"
        self._style &= tag != "style"

    def _gap(self, tag):  # block elements separate words; inline ones (mark, strong, a) do not
        if tag in _BLOCKS:
            self.handle_data(" ")

    def handle_data(self, data):
        if not self._style:
            (self.hidden if self._details and not self._summary else self.shown).append(data)


_BLOCKS = {"p", "div", "td", "th", "tr", "li", "ul", "h1", "h2", "h3", "br", "summary", "details", "table", "span"}


def text_of(html: str) -> tuple[str, str]:
    parser = _Text()
    parser.feed(html)
    return " ".join("".join(parser.shown).split()), " ".join("".join(parser.hidden).split())


def section(html: str, element_id: str) -> str:
    """The HTML of the card ``id=element_id`` (up to the next card)."""
    start = html.index(f'id="{element_id}"')
    end = html.find('<div class="card', start)
    return html[start:end if end > 0 else len(html)]


def hits_html(html: str) -> dict[str, str]:
    """Each evidence passage's HTML by id, on a check page."""
    why = section(html, "why")
    parts = re.split(r'(?=<div class="hit[^"]*" data-id=")', why)[1:]
    return {re.search(r'data-id="([^"]+)"', p).group(1): p for p in parts}


def api(client, claim, method="best"):
    r = client.get("/api/check", params={"claim": claim, "method": method})
    assert r.status_code == 200, r.text
    return r.json()


# ------------------------------------------------------------------ what the verdict read
def test_the_page_shows_the_passages_the_verdict_read_when_they_are_another_retrievers(reader_client):
    checked = 0
    for claim in [c.text for c in DEV] + [CLAIM]:
        data = api(reader_client, claim)
        read = data["classifier_read"]
        assert data["method"] == "rerank" and read["method"] != "rerank"
        html = reader_client.get("/", params={"claim": claim}).text
        card = section(html, "read")
        shown, _ = text_of(card)
        evidence = [h["id"] for h in data["hits"]]
        if read["ids"] == evidence:  # the reader happened to return the evidence itself
            assert (f"The classifier reads the passages of the {RETRIEVER_NAMES[read['method']]} ({read['method']}), "
                    "not the learned reranker's; for this claim they are the evidence below") in shown
            continue
        checked += 1
        assert "The verdict was computed from" in shown and "not from the learned reranker" in shown
        for pid in read["ids"]:
            assert f'data-id="{pid}"' in card
            words = " ".join(PASSAGES[pid].split())
            assert words in shown, (pid, words, shown)  # the text itself, not just the id
        assert shown.count("also evidence #") == len(set(read["ids"]) & set(evidence))
        assert shown.count("not in the evidence") == len(set(read["ids"]) - set(evidence))
        # one link shows the reader's passages as the evidence, and then they are the same
        link = re.search(r'id="switch-reader"|href="([^"]+)" id="switch-reader"', card)
        assert link and link.group(1), card
        switched = reader_client.get(link.group(1).replace("&amp;", "&"))
        query = parse_qs(urlparse(link.group(1).replace("&amp;", "&")).query)
        assert query == {"claim": [claim], "method": [read["method"]]}
        assert list(hits_html(switched.text)) == read["ids"]
        assert "the verdict and the evidence come from the same passages" in text_of(section(switched.text, "read"))[0]
        assert 'id="verdict" data-label="' + data["verdict"] + '"' in switched.text  # same reader, same verdict
    assert checked >= 3, checked


def test_the_reader_passages_are_highlighted_like_the_evidence(reader_client):
    data = api(reader_client, CLAIM)
    card = section(reader_client.get("/", params={"claim": CLAIM}).text, "read")
    claim_stems = set(analyze(CLAIM))
    marks = re.findall(r'<mark title="stem: ([^"]+)">([^<]+)</mark>', card)
    assert marks
    for stem, word in marks:
        assert stem in claim_stems and analyze(word) == [stem], (stem, word)
    for pid in data["classifier_read"]["ids"]:
        shared = claim_stems & set(analyze(PASSAGES[pid]))
        assert {s for s, _ in re.findall(r'<mark title="stem: ([^"]+)">([^<]+)</mark>', card.split(f'data-id="{pid}"')[1]
                                         .split('data-id="')[0])} == shared


def test_when_the_reader_is_the_retriever_the_page_says_so(client):
    html = client.get("/", params={"claim": CLAIM}).text
    shown, _ = text_of(section(html, "read"))
    assert "the verdict and the evidence come from the same passages" in shown
    assert "switch-reader" not in html


def test_the_dev_explorer_says_what_each_verdict_read(reader_client, reranked_demo_run):
    sidecar = json.loads((reranked_demo_run / "dev-claims-predictions.explain.json").read_text("utf-8"))["claims"]
    html = reader_client.get("/dev").text
    checked = 0
    for claim in DEV:
        read = sidecar[claim.id]["classifier_read"]
        card = html.split(f'id="{claim.id}"')[1].split('<div class="card claim"')[0]
        retrieved = [h["id"] for h in sidecar[claim.id]["hits"]]
        if read["ids"] == retrieved:
            assert "The verdict read the evidence passages above." in text_of(card)[0]
            continue
        checked += 1
        note = card[card.index('<details class="small read-note"'):]
        assert all(f'data-id="{pid}"' in note for pid in read["ids"])
        shown, hidden = text_of(note)
        assert f"The verdict read {len(read['ids'])} passage" in shown
        for pid in read["ids"]:
            assert " ".join(PASSAGES[pid].split()) in hidden
    assert checked >= 3, checked


# ------------------------------------------------------------------ examples on the landing page
def test_the_landing_page_offers_dev_claims_per_label(client):
    html = client.get("/").text
    card = section(html, "examples")
    links = re.findall(r'<a class="example" href="([^"]+)">([^<]+)</a>', card)
    by_label = {label: [c for c in DEV if c.label == label][:EXAMPLES_PER_LABEL] for label in LABELS}
    expected = [c for label in LABELS for c in by_label[label]]
    assert [text for _, text in links] == [c.text for c in expected]
    for href, text in links:
        url = urlparse(href.replace("&amp;", "&"))
        assert url.path == "/" and parse_qs(url.query) == {"claim": [text]}  # a plain link, no script
        page = client.get(href.replace("&amp;", "&"))
        assert page.status_code == 200 and 'id="verdict"' in page.text
    shown, _ = text_of(card)
    for label in LABELS:
        assert f"Gold: {LABEL_NAMES[label]}" in shown


def test_without_dev_claims_the_landing_page_says_how_to_get_examples(demo_run):
    run = demo_run
    bare = TestClient(create_app(index_dir=run / "index", model_dir=run / "model", warm_up=False))
    card = section(bare.get("/").text, "examples")
    assert "--dev-claims FILE" in card and 'class="example"' not in card


def test_the_runs_dev_predictions_are_read_at_the_dev_explorers_first_view(demo_run, tmp_path):
    """Not at start-up (the explanations of 20K claims were a fifth of it): an unreadable file
    is a page that says so, and the next view reads it again."""
    import shutil
    run = tmp_path / "run"
    shutil.copytree(demo_run, run, symlinks=True)
    sidecar = run / "dev-claims-predictions.explain.json"
    good = sidecar.read_bytes()
    sidecar.write_text("[]", "utf-8")
    c = TestClient(create_app(run, warm_up=False))
    assert c.get("/healthz").status_code == 200 and c.app.state.explain.artefacts.predictions is None
    page = c.get("/dev")
    assert page.status_code == 500 and "dev predictions cannot be read" in page.text
    sidecar.write_bytes(good)
    page = c.get("/dev")
    assert page.status_code == 200 and c.app.state.explain.artefacts.explain


# ------------------------------------------------------------------ words, labels, numbers, tables
def test_words_are_highlighted_as_they_appear_and_stems_stay_in_details(client):
    data = api(client, CLAIM, "tags")
    html = client.get("/", params={"claim": CLAIM, "method": "tags"}).text
    pages = hits_html(html)
    assert list(pages) == [h["id"] for h in data["hits"]]
    for hit in data["hits"]:
        shown, hidden = text_of(pages[hit["id"]])
        words = re.findall(r'<span class="word">([^<]+)</span>', pages[hit["id"]])
        assert words, pages[hit["id"]]
        assert all(w in hit["text"] for w in words)  # as written in the passage
        assert {analyze(w)[0] for w in words} == set(hit["shared_tags"])
        stems_only = [s for s in hit["shared_tags"] + hit["passage_tags"]
                      if not re.search(rf"\b{re.escape(s)}\b", hit["text"], re.I)]
        for stem in stems_only:  # e.g. "emiss", "sourc": never outside a details row
            assert not re.search(rf"\b{stem}\b", shown), (stem, shown)
            assert re.search(rf"\b{stem}\b", hidden), (stem, hidden)
    assert "emiss" in {s for h in data["hits"] for s in h["shared_tags"]}  # the case above was exercised


@pytest.mark.parametrize("method", ["tags", "bm25", "rerank"])
def test_labels_are_for_people_and_numbers_are_rounded(client, reader_client, method):
    for c in (client, reader_client):
        html = c.get("/", params={"claim": CLAIM, "method": method}).text
        shown, hidden = text_of(html)
        for raw, name in LABEL_NAMES.items():
            assert raw not in shown, raw
            assert name in shown
        assert not re.search(r"\d\.\d{5,}", shown + " " + hidden), re.findall(r"\S*\d\.\d{5,}\S*", shown + hidden)
        for field in ("shared_terms", "shared_tags", "top_probability", "passed_filter", "shared_bigrams",
                      "cited_by_similar_claim", "{'", '{"', "': "):
            assert field not in shown, field
        data = api(c, CLAIM, method)
        for label, p in data["probabilities"].items():
            assert f"{LABEL_NAMES[label]} {p:.3f}" in shown


def test_parameters_are_small_tables(reader_client):
    data = api(reader_client, CLAIM, "rerank")
    html = reader_client.get("/", params={"claim": CLAIM, "method": "rerank"}).text
    params = section(html, "result").split('id="params"')[1]
    rows = re.findall(r"<tr><td>([^<]+) <code class=\"muted\">([^<]+)</code></td><td class=\"num\">([^<]+)", params)
    flat = {f"{k}.{kk}": vv for k, v in data["retriever_params"].items() if isinstance(v, dict) for kk, vv in v.items()}
    assert {key for _, key, _ in rows} >= set(flat) | {"features", "memory_claims"}
    for name, key, value in rows:
        assert name != key and "_" not in name, (name, key)  # a name for a person beside the field
        if key in flat:
            assert value == f"{flat[key]:g}" if isinstance(flat[key], float) else str(flat[key])
    assert "25 names" in params
    cutoff = data["details"]["cutoff"]
    why, _ = text_of(section(html, "why"))
    assert f"passages at most {cutoff['max_k']}" in why and "probability at least" in why


def test_num_rounds_for_people():
    assert [num(x) for x in (24.3153, 0.6371233, 316312, 1.0, 0.0004123, None, 7, 123.456)] == [
        "24.32", "0.637", "316,312", "1", "0.00041", "—", "7", "123.5"]
    assert num(0.5, 3) == "0.500"


# ------------------------------------------------------------------ comparison view
def test_compare_shows_every_retriever_side_by_side_and_marks_shared_passages(reader_client):
    methods = reader_client.get("/api/methods").json()
    order = [methods["best"], *[m for m in methods["methods"] if m != methods["best"]]]
    results = {m: api(reader_client, CLAIM, m) for m in order}
    html = reader_client.get("/compare", params={"claim": CLAIM}).text
    columns = re.findall(r'<div class="card column" data-method="([^"]+)">', html)
    assert columns == order
    returned_by = {}
    for m, r in results.items():
        for h in r["hits"]:
            returned_by.setdefault(h["id"], set()).add(m)
    parts = html.split('<div class="card column"')[1:]
    for m, part in zip(order, parts):
        ids = re.findall(r'<div class="hit ([^"]*)" data-id="([^"]+)"', part)
        assert [pid for _, pid in ids] == [h["id"] for h in results[m]["hits"]]
        for cls, pid in ids:
            assert ("shared" in cls.split()) == (len(returned_by[pid]) > 1), (m, pid)
        verdict = results[m]["verdict"]
        assert f'class="verdict {verdict}">{LABEL_NAMES[verdict]}<' in part
    overlap = section(html, "overlap")
    rows = re.findall(r'<tr class="(shared|)" data-id="([^"]+)">', overlap)
    assert {pid for _, pid in rows} == set(returned_by)
    assert {pid for cls, pid in rows if cls} == {pid for pid, ms in returned_by.items() if len(ms) > 1}
    assert any(len(ms) > 1 for ms in returned_by.values())  # the claim exercises the marking


def test_compare_is_reachable_without_script_and_checks_bad_input(reader_client):
    check = reader_client.get("/", params={"claim": CLAIM}).text
    assert 'formaction="/compare"' in check and 'href="/compare?claim=' in check
    assert reader_client.get("/compare").status_code == 200
    for params, status in (({"claim": ""}, 422), ({"claim": "x" * 2001}, 413)):
        r = reader_client.get("/compare", params=params)
        assert r.status_code == status and 'id="error"' in r.text


# ------------------------------------------------------------------ the API page
def test_the_api_link_opens_a_page_describing_the_endpoints(client):
    home = client.get("/").text
    assert re.search(r'<a href="/api"[^>]*>API</a>', home)
    r = client.get("/api")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    shown, _ = text_of(r.text)
    for endpoint in ("GET /api/check?claim=TEXT&method=NAME", "GET /api/methods", "GET /healthz", "/compare?claim=TEXT"):
        assert endpoint in shown, endpoint
    for field in ("verdict", "probabilities", "classifier_read", "hits", "highlight", "ranking_head"):
        assert field in shown
    example = re.search(r'href="([^"]+)" id="example-check"', r.text).group(1).replace("&amp;", "&")
    answer = client.get(example)
    assert answer.status_code == 200 and answer.json()["verdict"] in LABELS
    assert client.get("/api/methods").headers["content-type"].startswith("application/json")


# ------------------------------------------------------------------ passage titles
class _Titled:
    """An index whose knowledge source gave its passages titles (as FEVER pages do)."""
    has_titles = True

    def __init__(self, index):
        self._index = index

    def __getattr__(self, name):
        return getattr(self._index, name)

    def title(self, row: int) -> str:
        return f"Page of {self._index.ids[row]}"


def test_passage_titles_are_shown_when_the_index_has_them(reranked_demo_run):
    state = create_app(reranked_demo_run, warm_up=False).state.explain
    best = state.systems.by_method[state.systems.best]
    best.index = _Titled(best.index)
    c = TestClient(build_app(state))
    data = api(c, CLAIM)
    assert data["classifier_read"]["ids"] != [h["id"] for h in data["hits"]]
    html = c.get("/", params={"claim": CLAIM}).text
    for pid in [h["id"] for h in data["hits"]]:
        assert f'<span class="title">Page of {pid}</span>' in hits_html(html)[pid]
    assert f'<span class="title">Page of {data["classifier_read"]["ids"][0]}</span>' in section(html, "read")
    assert '<span class="title small">Page of ' in c.get("/compare", params={"claim": CLAIM}).text
    assert '<span class="title">Page of ' in c.get("/dev").text
