"""The explain app (``factcheck serve``) through FastAPI's TestClient, on a demo run.

The app is built once per module on the session's demo run (conftest.py); a second tiny
run, on a copy of the demo data with a ``<script>`` in one passage, checks that passage
text is always escaped.
"""

from __future__ import annotations

import json
import shutil
import warnings

import pytest

from helpers import DEMO, DEMO_CLAIM, DEMO_PASSAGES, make_run
from factcheck.formats.claims import LABELS, Claim, read_claims
from factcheck.text.analyzer import TextAnalyzer, stem_token, word_tokens

with warnings.catch_warnings():  # starlette may warn that httpx is deprecated for its TestClient
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from factcheck.serve.app import build_app, create_app  # noqa: E402
from factcheck.serve.highlight import highlight_spans, segments  # noqa: E402

DEV = read_claims(DEMO / "dev-claims.json", require_labels=True)
PASSAGES = DEMO_PASSAGES
CLAIM = DEMO_CLAIM
SCRIPT = '<script>alert("pwned")</script>'
SCRIPT_CLAIM = "Burning coal, oil and natural gas is the largest source of human emissions."


@pytest.fixture(scope="module")
def app(demo_run):
    return create_app(demo_run)


@pytest.fixture(scope="module")
def client(app):
    return TestClient(app)


def api(client, claim, method="best"):
    r = client.get("/api/check", params={"claim": claim, "method": method})
    assert r.status_code == 200, r.text
    return r.json()


# --------------------------------------------------------------------- the JSON API
def test_api_check_explains_every_hit(client):
    data = api(client, CLAIM, "tags")
    assert data["method"] == "tags" and data["verdict"] in LABELS
    assert list(data["probabilities"]) == list(LABELS)
    assert sum(data["probabilities"].values()) == pytest.approx(1.0)
    assert data["verdict"] == max(data["probabilities"], key=data["probabilities"].get)
    assert data["path"] in ("filtered", "fallback")
    assert set(data["thresholds"]) == {"t_sim", "t_overlap", "k"}
    assert data["hits"] and len(data["hits"]) <= data["thresholds"]["k"]
    assert data["hits"][0]["id"] == "evidence-3"
    claim_stems = set(data["details"]["claim_tags"])
    for hit in data["hits"]:
        assert hit["text"] == PASSAGES[hit["id"]]
        assert hit["combined"] == pytest.approx(hit["cosine"] + hit["overlap"])
        assert set(hit["shared_tags"]) <= set(hit["passage_tags"]) & claim_stems
        assert hit["highlight"], hit
        for span in hit["highlight"]:
            word = hit["text"][span["start"]:span["end"]]
            assert stem_token(word.lower()) == span["stem"] and span["stem"] in hit["shared_tags"]
        marked = {s["stem"] for s in hit["highlight"]}
        assert marked == set(hit["shared_tags"])  # every shared tag occurs in its passage


def test_api_agrees_with_the_library(app, client, demo_run):
    from factcheck.system.checker import FactChecker
    system = FactChecker.load(demo_run / "index", demo_run / "model")
    for claim in DEV[:4]:
        data = api(client, claim.text)
        verdict = system.check(Claim("x", claim.text))
        assert [h["id"] for h in data["hits"]] == verdict.evidences
        assert data["verdict"] == verdict.label
        assert data["probabilities"] == pytest.approx(verdict.probabilities)
        assert data["path"] == verdict.explanation.path


def test_every_tuned_retriever_can_be_chosen(client, demo_run):
    methods = client.get("/api/methods").json()
    chosen = json.loads((demo_run / "metrics.json").read_text())["run"]["retriever"]["chosen"]
    assert methods["best"] == chosen
    assert {"tags", "bm25"} <= set(methods["methods"])
    assert api(client, CLAIM)["method"] == chosen
    bm25 = api(client, CLAIM, "bm25")
    assert bm25["method"] == "bm25" and bm25["path"] == "ranked" and bm25["thresholds"] is None
    assert [h["rank"] for h in bm25["hits"]] == list(range(1, len(bm25["hits"]) + 1))
    assert all("bm25" in h and h["highlight"] for h in bm25["hits"])
    assert all(h["shared_tags_source"] == "shared_terms" for h in bm25["hits"])  # stems, not tags


def test_reranker_hits_are_explained_too(client):
    if "rerank" not in client.get("/api/methods").json()["methods"]:
        pytest.skip("this run trained no reranker")
    data = api(client, CLAIM, "rerank")
    assert data["method"] == "rerank" and data["path"] == "reranked" and data["hits"]
    for hit in data["hits"]:
        assert hit["shared_tags_source"] in ("shared_terms", "computed")
        assert {s["stem"] for s in hit["highlight"]} <= set(hit["shared_tags"])
        assert "score" in hit["scores"]
    html = client.get("/", params={"claim": CLAIM, "method": "rerank"}).text
    assert 'id="path">reranked' in html and "<mark" in html


@pytest.mark.parametrize("params, status", [
    ({"claim": CLAIM, "method": "nope"}, 400),
    ({"claim": CLAIM, "method": "../model"}, 400),
    ({"claim": ""}, 422),
    ({"claim": "   \n "}, 422),
    ({}, 422),
    ({"claim": "x" * 2001}, 413),
    ({"claim": "carbon " * 400}, 413),
])
def test_api_rejects_bad_requests(client, params, status):
    r = client.get("/api/check", params=params)
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json") and r.json()["detail"]


def test_claim_at_the_limit_is_accepted(client):
    assert client.get("/api/check", params={"claim": ("sea level " * 200)[:2000]}).status_code == 200


def test_load_200_requests_without_errors(client):
    errors = []
    for i in range(200):
        claim = DEV[i % len(DEV)].text
        r = client.get("/api/check", params={"claim": claim, "method": ("best", "tags", "bm25")[i % 3]})
        if r.status_code != 200 or not r.json()["hits"]:
            errors.append((i, r.status_code, r.text[:200]))
    assert errors == []


# --------------------------------------------------------------------- the pages
def test_check_page_shows_verdict_scores_and_highlights(client):
    r = client.get("/", params={"claim": CLAIM, "method": "tags"})
    assert r.status_code == 200
    html = r.text
    assert '<mark title="stem: burn">Burning</mark>' in html
    assert 'id="path">' in html and "t_sim" in html and "cosine" in html and "overlap" in html
    assert 'id="verdict"' in html
    assert 'value="bm25"' in html and "the model's choice: BM25 retriever (bm25)" in html


@pytest.mark.parametrize("params, status", [
    ({"claim": ""}, 422), ({"claim": "x" * 2001}, 413), ({"claim": CLAIM, "method": "zzz"}, 400),
])
def test_check_page_errors_keep_the_form(client, params, status):
    r = client.get("/", params=params)
    assert r.status_code == status
    assert 'id="error"' in r.text and 'id="check-form"' in r.text


def test_claim_text_is_escaped_on_the_page(client):
    r = client.get("/", params={"claim": f"Glaciers melt {SCRIPT}"})
    assert r.status_code == 200
    assert SCRIPT not in r.text and "&lt;script&gt;" in r.text


def test_security_headers(client):
    r = client.get("/")
    csp = r.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src" not in csp
    assert r.headers["x-content-type-options"] == "nosniff"
    assert client.get("/docs").status_code == 404  # no CDN-backed docs pages


def test_only_loopback_hosts_when_asked(app):
    guarded = TestClient(build_app(app.state.explain, ["127.0.0.1", "localhost"]))
    assert guarded.get("/healthz").status_code == 400  # Host: testserver
    assert guarded.get("/healthz", headers={"host": "127.0.0.1:8000"}).status_code == 200


def test_results_page_shows_metrics_with_intervals(client, demo_run):
    metrics = json.loads((demo_run / "metrics.json").read_text())
    html = client.get("/results").text
    ef = metrics["intervals"]["evidence_f"]
    assert f"{ef['value']:.3f} [{ef['ci95'][0]:.3f}, {ef['ci95'][1]:.3f}]" in html
    for name in sorted(p.name for p in (demo_run / "plots").glob("*.png")):
        assert f'src="/plots/{name}"' in html


def test_plot_route_serves_only_listed_plots(client, demo_run):
    for png in (demo_run / "plots").glob("*.png"):
        r = client.get(f"/plots/{png.name}")
        assert r.status_code == 200 and r.headers["content-type"] == "image/png"
        assert r.content == png.read_bytes()
    for bad in ("metrics.json", "..%2Fmetrics.json", "%2e%2e%2fmetrics.json", "../metrics.json",
                "..%2F..%2Fmodel%2Fclassifier.joblib", "%2Fetc%2Fpasswd", "confusion", "CONFUSION.PNG"):
        r = client.get(f"/plots/{bad}")
        assert r.status_code == 404, bad
        assert b"PNG" not in r.content[:8]


def test_dev_explorer_hits_and_misses(app, client, demo_run):
    html = client.get("/dev").text
    preds = json.loads((demo_run / "dev-claims-predictions.json").read_text())
    rows = {r["id"]: r for r in app.state.explain.dev().rows}
    assert list(rows) == [c.id for c in DEV]
    for claim in DEV:
        row, retrieved = rows[claim.id], preds[claim.id]["evidences"]
        assert f'id="{claim.id}"' in html
        assert [h["id"] for h in row["retrieved"]] == retrieved
        assert [h["is_gold"] for h in row["retrieved"]] == [e in claim.evidences for e in retrieved]
        assert [m["id"] for m in row["missed"]] == [e for e in claim.evidences if e not in retrieved]
        assert row["gold_label"] == claim.label and row["label"] == preds[claim.id]["claim_label"]
    hits = sum(h["is_gold"] for r in rows.values() for h in r["retrieved"])
    assert html.count('class="badge gold"') == hits
    assert html.count('class="badge missed"') == sum(len(r["missed"]) for r in rows.values())
    missed = client.get("/dev", params={"show": "missed"}).text
    for cid, r in rows.items():
        assert (f'id="{cid}"' in missed) == bool(r["missed"])
    assert client.get("/dev", params={"show": "../../etc"}).status_code == 400


def test_index_and_model_without_a_run(demo_run):
    c = TestClient(create_app(index_dir=demo_run / "index", model_dir=demo_run / "model",
                              dev_claims=DEMO / "dev-claims.json", warm_up=False))
    assert c.get("/api/check", params={"claim": CLAIM}).status_code == 200
    dev = c.get("/dev")
    assert dev.status_code == 200 and all(f'id="{claim.id}"' in dev.text for claim in DEV)
    assert "checked at first view" in dev.text
    results = c.get("/results")
    assert results.status_code == 200 and "without" in results.text
    assert c.get("/plots/confusion.png").status_code == 404


# --------------------------------------------------------------------- passage text is text
@pytest.fixture(scope="module")
def script_run(tmp_path_factory):
    data = tmp_path_factory.mktemp("script-data")
    for f in DEMO.glob("*.json"):
        shutil.copy(f, data / f.name)
    passages = dict(PASSAGES)
    passages["evidence-3"] = (f"Burning coal {SCRIPT} & oil <b>and</b> natural gas is the largest "
                              "source of human emissions.")
    (data / "evidence.json").write_text(json.dumps(passages), encoding="utf-8")
    # --method tags: this run only needs passages in an index and a model; it skips the
    # reranker's training (most of a demo run's time).
    out = tmp_path_factory.mktemp("script-run") / "run"
    make_run(out, "--method", "tags", data=data)
    return out


def test_passage_with_script_is_escaped(script_run):
    c = TestClient(create_app(script_run, warm_up=False))
    for method in ("tags", "bm25"):
        data = api(c, SCRIPT_CLAIM, method)
        assert "evidence-3" in [h["id"] for h in data["hits"]], data["hits"]
        assert any(SCRIPT in h["text"] for h in data["hits"])  # the API returns the text as it is
        html = c.get("/", params={"claim": SCRIPT_CLAIM, "method": method}).text
        assert "evidence-3" in html
        assert "<script" not in html and "<b>and</b>" not in html
        assert "&lt;script&gt;alert(&#34;pwned&#34;)&lt;/script&gt; &amp; " in html
        assert "&lt;b&gt;and&lt;/b&gt;" in html
    dev = c.get("/dev").text
    assert "evidence-3" in dev and "<script" not in dev and "&lt;script&gt;" in dev


# --------------------------------------------------------------------- pieces
def test_highlight_spans_follow_the_analyzer():
    analyzer = TextAnalyzer()
    for text in PASSAGES.values():
        stems = [analyzer.stem(t) for t in word_tokens(text)]
        every = {s for s in stems if s}
        spans = highlight_spans(text, every)
        assert [s["stem"] for s in spans] == [s for s in stems if s]
        assert "".join(piece for piece, _ in segments(text, spans)) == text
    assert highlight_spans("Ice sheets melt; an ICE-free sea.", {"ice"}) == [
        {"start": 0, "end": 3, "stem": "ice"}, {"start": 20, "end": 23, "stem": "ice"}]
    assert highlight_spans("", {"ice"}) == [] and highlight_spans("Ice", set()) == []


def test_serve_command_errors_are_one_line(tmp_path, capsys):
    from factcheck.cli import main  # in-process: a subprocess per case costs seconds of imports
    for argv, needle in ((["serve", "--run", str(tmp_path / "missing")], "no such run directory"),
                         (["serve"], "--run"),
                         (["serve", "--index", str(tmp_path), "--model", str(tmp_path / "m")], "no such model")):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and needle in err[0] and "Traceback" not in err[0], err
    with pytest.raises(SystemExit) as exc:
        main(["serve", "--help"])
    assert exc.value.code == 0 and "127.0.0.1" in capsys.readouterr().out
