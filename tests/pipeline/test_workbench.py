"""The workbench commands end to end: selftest on a CSV the tests ship, search, judged
queries on a tiny BEIR folder (scored against ir_measures), the one-line errors, and the
arXiv acceptance figures."""

import csv
import json

import ir_measures
import numpy as np
import pytest

from helpers import DEMO, TEST_DATA, assert_one_line_error, in_process, needs_open, run_cli, shared_file
from factcheck.formats.qrels import read_qrels, read_trec_run
from factcheck.text.analyzer import plain_terms

PAPERS = TEST_DATA / "workbench" / "papers.csv"
BEIR = TEST_DATA / "beir-tiny"
PAPER_ARGS = ("--id-column", "paper_id", "--text-column", "abstract")


def _rows():
    with open(PAPERS, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def sklearn_self_retrieval(ids, texts, queries):
    """An independent self-retrieval of whole documents: scikit-learn's sublinear TF-IDF and
    cosine, ties by row; the rank of each query's own row (None when it scores 0)."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    vec = TfidfVectorizer(analyzer=plain_terms, sublinear_tf=True).fit(texts)
    docs = vec.transform(texts)
    ranks = {}
    for row, (pid, query) in enumerate(zip(ids, queries)):
        if not query.strip():
            continue
        scores = (vec.transform([query]) @ docs.T).toarray()[0]
        own = scores[row]
        ranks[pid] = None if own == 0 else 1 + int(np.sum(scores > own) + np.sum(scores[:row] == own))
    return ranks


def test_selftest_on_a_shipped_csv_equals_an_independent_tfidf(tmp_path):
    out = tmp_path / "out"
    proc = in_process("selftest", PAPERS, *PAPER_ARGS, "--query-column", "title", "--analyzer", "plain", "--chunk-window", "20",
                      "--chunk-overlap", "5", "--out", out, "--jobs", "1", "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    rows = _rows()
    assert result["corpus"]["rows"] == len(rows) == 14  # p03's quoted line break is one row, not two
    assert result["skipped_empty"] == 2 and result["queries"] == 12  # p06 (empty), p14 (spaces)
    assert [(r["method"], r["units"]) for r in result["results"]] == [
        ("tfidf", "whole"), ("tfidf", "chunks"), ("bm25", "whole"), ("bm25", "chunks")]
    from factcheck.retrieval.chunking import chunk_passages
    assert result["corpus"]["chunks"] == len(chunk_passages([r["abstract"] for r in rows], 20, 5).texts)
    ranks = sklearn_self_retrieval([r["paper_id"] for r in rows], [r["abstract"] for r in rows],
                                   [r["title"] for r in rows])
    whole = result["results"][0]["metrics"]
    for k in (1, 5, 10):
        assert whole[f"recall@{k}"]["value"] == pytest.approx(
            np.mean([r is not None and r <= k for r in ranks.values()]), abs=1e-12)
    assert whole["mrr@10"]["value"] == pytest.approx(
        np.mean([1 / r if r is not None and r <= 10 else 0.0 for r in ranks.values()]), abs=1e-12)
    low, high = whole["recall@1"]["ci95"]
    assert low <= whole["recall@1"]["value"] <= high
    saved = json.loads((out / "selftest.json").read_text("utf-8"))
    assert saved["results"] == result["results"]
    table = (out / "selftest.md").read_text("utf-8")
    assert "| tfidf | chunks 20/5 " in table and "| bm25 | whole (14) |" in table and "2 rows with an empty query" in table
    assert (out / "index" / "tfidf" / "plain").is_dir()  # the index kept (and reused next time)


def test_selftest_reads_every_csv_the_pipeline_reads(tmp_path):
    # The same rows as TSV (tab separated, quoted where needed), gzipped, with a BOM: the
    # same figures, whatever the spelling of the file.
    import gzip
    rows = _rows()
    tsv = tmp_path / "papers.tsv"
    with open(tsv, "w", newline="", encoding="utf-8-sig") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]), delimiter="\t")
        writer.writeheader()
        writer.writerows(rows)
    gz = tmp_path / "papers.csv.gz"
    gz.write_bytes(gzip.compress(PAPERS.read_bytes()))
    results = []
    for i, path in enumerate((PAPERS, tsv, gz)):
        proc = in_process("selftest", path, *PAPER_ARGS, "--query-column", "title", "--method", "tfidf",
                          "--index", tmp_path / f"idx{i}", "--jobs", "1", "--json")
        assert proc.returncode == 0, proc.stderr
        result = json.loads(proc.stdout)
        assert (result["corpus"]["rows"], result["skipped_empty"]) == (14, 2)
        results.append([r["metrics"] for r in result["results"]])
    assert results[0] == results[1] == results[2]


def test_selftest_prints_a_table_and_reuses_its_index(tmp_path):
    args = ("selftest", PAPERS, *PAPER_ARGS, "--query-column", "title", "--index", tmp_path / "idx", "--jobs", "1",
            "--method", "tfidf", "--chunk-window", "0", "--analyzer", "stems")
    first = in_process(*args)
    assert first.returncode == 0, first.stderr
    assert "| method | units | R@1 | R@5 | R@10 | MRR@10 | MRR | no match |" in first.stdout
    assert first.stdout.count("| tfidf |") == 1 and "tfidf analyzer `stems`" in first.stdout
    again = in_process(*args)
    assert again.stdout == first.stdout and "nothing to do" in again.stderr


@pytest.mark.parametrize("args, needles", [
    (("--query-column", "subtitle"), ("papers.csv: --query-column: no column 'subtitle'", "line 1")),
    (("--query-column", "abstract"), ("--query-column abstract", "must not be the id or an indexed column")),
    (("--query-column", "title", "--method", "rerank"), ("--method rerank", "self-retrieval")),
    (("--query-column", "title", "--method", "dense"), ("--method", "open-mode")),
    (("--query-column", "title", "--chunk-window", "5", "--chunk-overlap", "5"), ("--chunk-overlap", "overlap < window")),
    (("--query-column", "title", "--method", "tfidf,bm2"), ("--method", "unknown method 'bm2'")),
    (("--query-column", "title", "--cutoffs", "0,5"), ("--cutoffs", "at least 1")),
    (("--query-column", "title", "--k", "0"), ("--k", "at least 1")),
    (("--query-column", "title", "--k", "5", "--cutoffs", "1,10"), ("--k", "at least 10")),
])
def test_selftest_bad_arguments_are_one_line_and_write_nothing(tmp_path, args, needles):
    out = tmp_path / "out"
    proc = in_process("selftest", PAPERS, *PAPER_ARGS, *args, "--out", out, "--jobs", "1")
    assert_one_line_error(proc, *needles)
    assert not (out / "selftest.json").exists() and not (out / "selftest.md").exists()


def test_selftest_bad_csv_is_one_line_naming_the_place(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text('paper_id,title,abstract\np1,A title,"an abstract\np2,Another,text\n', encoding="utf-8")
    proc = in_process("selftest", bad, *PAPER_ARGS, "--query-column", "title", "--out", tmp_path / "o")
    assert_one_line_error(proc, "bad.csv", "line")
    assert not (tmp_path / "o" / "selftest.json").exists()
    course = in_process("selftest", DEMO / "evidence.json", "--query-column", "title", "--out", tmp_path / "o")
    assert_one_line_error(course, "evidence.json", "CSV or JSONL collection, not course")


@pytest.fixture(scope="module")
def papers_index(tmp_path_factory):
    out = tmp_path_factory.mktemp("papers") / "index"
    proc = in_process("tag", PAPERS, *PAPER_ARGS, "--out", out, "--jobs", "1")
    assert proc.returncode == 0, proc.stderr
    return out


def test_search_ranks_free_text_and_shows_the_scores(papers_index):
    query = "how much does long context cost compared with retrieval"
    proc = in_process("search", "--index", papers_index, "--method", "tfidf", "--k", "3", query)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"{query}  (tfidf, top 3)" and lines[1].split()[2] == "p03" and len(lines) == 4
    as_json = in_process("search", "--index", papers_index, "--json", "--k", "2", query, "the of and")
    first, second = (json.loads(line) for line in as_json.stdout.splitlines())
    assert first["method"] == "bm25" and first["hits"][0]["id"] == "p03" and first["hits"][0]["rank"] == 1
    assert first["hits"][0]["score"] > first["hits"][1]["score"] > 0 and "Language models" in first["hits"][0]["text"]
    assert second == {"query": "the of and", "method": "bm25", "hits": []}
    nothing = in_process("search", "--index", papers_index, "the of and")
    assert "no passage shares a term with this query" in nothing.stdout


def test_a_titled_index_shows_titles_and_an_indexed_title_is_no_query(tmp_path):
    titled = tmp_path / "titled"
    proc = in_process("tag", PAPERS, *PAPER_ARGS, "--title-column", "title", "--out", titled, "--jobs", "1")
    assert proc.returncode == 0, proc.stderr
    shown = in_process("search", "--index", titled, "--method", "tfidf", "--k", "1", "--json", "sparse matrix retrieval")
    hit = json.loads(shown.stdout)["hits"][0]
    assert hit["id"] == "p08" and hit["title"] == "Sparse matrices for fast retrieval"
    assert hit["text"].startswith("Inverted indexes")  # the body, without its title
    table = in_process("search", "--index", titled, "--method", "tfidf", "--k", "1", "sparse matrix retrieval")
    assert "p08  Sparse matrices for fast retrieval — Inverted indexes" in table.stdout
    # The title stored beside the text (not indexed) may be the query; indexed, it may not.
    ok = in_process("selftest", PAPERS, *PAPER_ARGS, "--title-column", "title", "--query-column", "title",
                    "--method", "tfidf", "--chunk-window", "0", "--jobs", "1")
    assert ok.returncode == 0, ok.stderr
    plain = in_process("selftest", PAPERS, *PAPER_ARGS, "--query-column", "title", "--method", "tfidf",
                       "--chunk-window", "0", "--jobs", "1")
    assert ok.stdout.splitlines()[-1] == plain.stdout.splitlines()[-1]  # the same figures
    indexed = in_process("selftest", PAPERS, *PAPER_ARGS, "--title-column", "title", "--index-titles",
                         "--query-column", "title", "--jobs", "1")
    assert_one_line_error(indexed, "--query-column title", "must not be the id or an indexed column")


@needs_open
def test_selftest_open_mode_adds_the_dense_retrievers_whole_and_chunked(tmp_path):
    from factcheck.retrieval.chunking import ChunkedRetriever
    from factcheck.retrieval.dense import DenseRetriever
    from factcheck.tagging.index import TagIndex
    from factcheck.tagging.vectors import load_vectors
    out = tmp_path / "o"
    proc = in_process("selftest", PAPERS, *PAPER_ARGS, "--query-column", "title", "--mode", "open",
                      "--chunk-window", "20", "--chunk-overlap", "5", "--out", out, "--jobs", "1")
    assert proc.returncode == 0, proc.stderr
    result = json.loads((out / "selftest.json").read_text("utf-8"))
    assert [(r["method"], r["units"]) for r in result["results"]] == [
        (m, u) for m in ("tfidf", "bm25", "dense", "hybrid") for u in ("whole", "chunks")]
    assert all(0 <= r["metrics"]["recall@1"]["value"] <= 1 for r in result["results"])
    # The chunked dense retriever reads the chunks' own vectors (embedded into the chunk
    # index with the passages' model), and a document scores as its best chunk.
    chunked = ChunkedRetriever(DenseRetriever(), window=20, overlap=5).fit(TagIndex.load(out / "index"))
    chunk_vectors = load_vectors(chunked.chunk_index_.root).astype(np.float32)
    embedded = chunked.inner_.embedder_.embed(chunked.chunks_.texts, kind="passage")
    assert chunk_vectors.shape[0] == len(chunked.chunks_.owner) > len(chunked.index_)
    assert np.allclose(chunk_vectors, embedded, atol=2e-3)
    query = "sparse matrix retrieval"
    chunk_scores = chunked.inner_.scores(query)
    best = {}
    for chunk, owner in enumerate(chunked.chunks_.owner.tolist()):
        best[owner] = max(best.get(owner, -np.inf), float(chunk_scores[chunk]))
    expected = sorted(best, key=lambda row: (-best[row], row))
    ranking = chunked.rank(query, k=len(chunked.index_))
    assert ranking.rows == expected
    assert np.allclose(ranking.scores, [best[row] for row in expected], rtol=0, atol=0)


@pytest.fixture(scope="module")
def beir_index(tmp_path_factory):
    out = tmp_path_factory.mktemp("beir") / "index"
    proc = in_process("tag", BEIR / "corpus.jsonl", "--id-column", "_id", "--text-column", "text", "--out", out,
                      "--jobs", "1")
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.mark.parametrize("method", ["tfidf", "bm25", "tags"])
def test_judged_queries_on_a_beir_folder_equal_ir_measures(tmp_path, beir_index, method):
    run_out = tmp_path / "run.trec"
    proc = in_process("evaluate-retrieval", "--index", beir_index, "--queries", BEIR / "queries.jsonl",
                      "--qrels", BEIR / "qrels" / "test.tsv", "--method", method, "--run-out", run_out, "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["queries"] == 6 and result["skipped_unjudged"] == 1 and result["depth"] == 1000  # q6: no judgments
    qrels = read_qrels(BEIR / "qrels" / "test.tsv")
    measures = {name: ir_measures.parse_measure(m) for name, m in
                {"recall@1": "R@1", "recall@5": "R@5", "recall@10": "R@10", "recall@100": "R@100",
                 "mrr@10": "RR@10", "mrr": "RR", "ndcg@10": "nDCG@10", "map": "AP"}.items()}
    assert set(result["metrics"]) == set(measures)
    qrels_list = [ir_measures.Qrel(q, d, g) for q, judged in qrels.items() for d, g in judged.items()]
    reference = ir_measures.calc_aggregate(list(measures.values()), qrels_list,
                                           list(ir_measures.read_trec_run(str(run_out))))
    for name, measure in measures.items():
        assert result["metrics"][name]["value"] == pytest.approx(reference[measure], abs=1e-9), name
    # The run file, read back and sorted as trec_eval sorts it, is our ranking.
    from factcheck.pipeline.workbench import rank_queries
    from factcheck.formats.qrels import read_queries
    from factcheck.retrieval.registry import make_retriever
    from factcheck.tagging.index import TagIndex
    queries = {q: t for q, t in read_queries(BEIR / "queries.jsonl").items() if q in qrels}
    ours = rank_queries(make_retriever(method).fit(TagIndex.load(beir_index)), queries, 1000, progress=False)
    back = read_trec_run(run_out)
    assert {q: [d for d, _ in r] for q, r in ours.items() if r} == {q: [d for d, _ in r] for q, r in back.items()}
    # Scoring the written run file gives the same numbers.
    again = in_process("evaluate-retrieval", "--trec-run", run_out, "--qrels", BEIR / "qrels" / "test.tsv", "--json")
    assert json.loads(again.stdout)["metrics"] == result["metrics"]


def test_judged_queries_print_a_table(beir_index):
    proc = in_process("evaluate-retrieval", "--index", beir_index, "--queries", BEIR / "queries.jsonl",
                      "--qrels", BEIR / "qrels" / "test.tsv", "--method", "tfidf", "--depth", "5")
    assert proc.returncode == 0, proc.stderr
    assert "6 judged queries ranked by tfidf to depth 5; 1 queries without judgments skipped" in proc.stdout
    assert "| nDCG@10 |" in proc.stdout and "| MAP |" in proc.stdout


def test_judged_queries_bad_input_is_one_line(tmp_path, beir_index):
    no_queries = in_process("evaluate-retrieval", "--index", beir_index, "--qrels", BEIR / "qrels" / "test.tsv")
    assert_one_line_error(no_queries, "--queries", "needed with --index")
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text("q1\td1\t1\nq99\td2\t1\n")
    proc = in_process("evaluate-retrieval", "--index", beir_index, "--queries", BEIR / "queries.jsonl",
                      "--qrels", qrels)
    assert_one_line_error(proc, "qrels.tsv", "query 'q99'", "judged but not in the queries file")
    spaced = tmp_path / "spaced.jsonl"
    spaced.write_text('{"id": "a b", "text": "sea level"}\n{"id": "c", "text": "ice"}\n')
    assert in_process("tag", spaced, "--out", tmp_path / "sidx", "--jobs", "1").returncode == 0
    q = tmp_path / "q.jsonl"
    q.write_text('{"_id": "q1", "text": "sea"}\n')
    ok = tmp_path / "ok.tsv"
    ok.write_text("q1\tc\t1\n")
    proc = in_process("evaluate-retrieval", "--index", tmp_path / "sidx", "--queries", q, "--qrels", ok,
                      "--run-out", tmp_path / "r.trec")
    assert_one_line_error(proc, "r.trec", "'a b'", "cannot be written to a TREC run file")
    assert not (tmp_path / "r.trec").exists()


def test_tfidf_is_a_method_of_retrieve_with_chunks(tmp_path, demo_index):
    out = tmp_path / "pred.json"
    proc = in_process("retrieve", "--index", demo_index, "--claims", DEMO / "dev-claims.json", "--out", out,
                      "--method", "tfidf", "--chunk-window", "30", "--k", "3")
    assert proc.returncode == 0, proc.stderr
    predictions = json.loads(out.read_text("utf-8"))
    assert predictions and all(len(p["evidences"]) <= 3 for p in predictions.values())
    explain = json.loads(out.with_suffix(".explain.json").read_text("utf-8"))
    assert (explain["method"], explain["params"], explain["chunk_window"]) == ("tfidf", {"analyzer": "stems", "k": 3}, 30)


@pytest.mark.slow
def test_run_with_tfidf_named_tunes_and_uses_it(tmp_path):
    proc = run_cli("run", "--data-dir", DEMO, "--out", tmp_path / "run", "--method", "tfidf", "--jobs", "1")
    assert proc.returncode == 0, proc.stderr
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text("utf-8"))
    assert metrics["run"]["retriever"]["chosen"] == "tfidf" and metrics["run"]["retriever"]["chosen_by"] == "user"
    assert set(metrics["run"]["retriever"]["params"]) == {"analyzer", "k"}
    assert (tmp_path / "run" / "tuning" / "tfidf-sweep.csv").is_file()
    check = run_cli("check", "--run", tmp_path / "run", "Sea levels are rising.")
    assert check.returncode == 0, check.stderr


# ---------------------------------------------------------------- the arXiv acceptance figures

# Whole and chunked (60/20) recall@1/@5/@10 and MRR@10 of an independent implementation of
# the minimal pipeline's TF-IDF on the arXiv collection; ours must be within 0.01 of each.
ARXIV_TFIDF = {"whole": (0.858, 0.951, 0.965, 0.900), "chunks": (0.835, 0.940, 0.956, 0.881)}


@pytest.mark.shared
@pytest.mark.slow
def test_arxiv_self_retrieval_reproduces_the_independent_figures(tmp_path):
    from factcheck.formats.evidence import source_spec
    from factcheck.pipeline.workbench import self_retrieval
    spec = source_spec(shared_file("arxiv-abstracts.csv"), id_column="index", text_column="abstract")
    # The independent TF-IDF does not stem: the plain analyzer, as `selftest --analyzer plain`.
    result = self_retrieval(spec, "title", ("tfidf", "bm25"), index_dir=tmp_path / "idx", analyzer="plain",
                            progress=False)
    assert result.queries == 3397 and result.skipped_empty == 0
    got = {(r.method, r.units): r.metrics for r in result.results}
    for units, expected in ARXIV_TFIDF.items():
        m = got[("tfidf", units)]
        values = (m["recall@1"].value, m["recall@5"].value, m["recall@10"].value, m["mrr@10"].value)
        assert np.allclose(values, expected, rtol=0, atol=0.01), (units, values)
    # BM25 with the project's stems, beside it: better than the TF-IDF cosine here.
    assert got[("bm25", "whole")]["recall@1"].value > got[("tfidf", "whole")]["recall@1"].value + 0.03


def test_the_python_example_of_the_workbench_page_runs(tmp_path):
    import contextlib
    import io
    import os
    import re

    from helpers import ROOT
    page = (ROOT / "docs" / "workbench.md").read_text("utf-8")
    (block,) = re.findall(r"```python\n(.*?)```", page, flags=re.S)
    code = block.replace('"out/papers-index"', repr(str(tmp_path / "papers-index")))
    out, cwd = io.StringIO(), os.getcwd()
    os.chdir(ROOT)  # the page says: from the repository root
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code, "docs/workbench.md", "exec"), {})
    finally:
        os.chdir(cwd)
    first, second, third = out.getvalue().splitlines()
    assert first.startswith("[('tfidf', 'whole', ") and second.startswith("('p08', ") and second.endswith(" 1.0")
    assert third.startswith("p1 ") and third.endswith(" Sparse matrices make retrieval fast.")


def test_search_takes_a_run_as_check_and_serve_do(demo_run):
    from factcheck.system.checker import FactChecker
    query = "sea levels are rising"
    chosen = FactChecker.load(demo_run / "index", demo_run / "model").retriever
    assert chosen.name == "bm25"  # the demo run's choice, with its tuned k1 and b
    by_index = in_process("search", "--index", demo_run / "index", "--k1", chosen.k1, "--b", chosen.b, query)
    by_run = in_process("search", "--run", demo_run, query)
    assert by_index.returncode == by_run.returncode == 0, by_index.stderr + by_run.stderr
    assert by_run.stdout == by_index.stdout and "(bm25, top 10)" in by_run.stdout
    named = in_process("search", "--run", demo_run, "--method", "tfidf", "--json", query)
    assert named.stdout == in_process("search", "--index", demo_run / "index", "--method", "tfidf", "--json",
                                      query).stdout
    assert json.loads(named.stdout)["method"] == "tfidf"
    assert_one_line_error(in_process("search", "--run", demo_run, "--k1", "0.5", query),
                          "--k1: only with --method")
    assert in_process("search", "--run", demo_run, "--index", demo_run / "index", query).returncode == 2
