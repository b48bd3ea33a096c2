"""Judged-query metrics against ir_measures (trec_eval's definitions through pytrec_eval),
TREC run files as trec_eval reads them, the qrels and queries readers."""

import random

import ir_measures  # the reference (in the test extra)
import numpy as np
import pytest

from factcheck.errors import InputError
from factcheck.evaluation.ir_metrics import ir_measures_names, judged_metrics, per_query
from factcheck.formats.qrels import read_qrels, read_queries, read_trec_run, trec_order, write_trec_run

KS = (1, 3, 5, 10, 20)


def random_case(rnd: random.Random):
    """Random graded qrels (grades -1..3, some queries with nothing relevant) and a run in
    our rank order with heavily tied scores; some judged queries absent from the run and
    one run query without judgments."""
    docs = [f"d{i}" for i in range(rnd.randint(1, 40))]
    qrels = {}
    for q in range(rnd.randint(1, 8)):
        judged = rnd.sample(docs, rnd.randint(1, len(docs)))
        qrels[f"q{q}"] = {d: rnd.choice([-1, 0, 0, 1, 1, 2, 3]) for d in judged}
    run = {}
    for qid in [*qrels, "unjudged"]:
        if rnd.random() < 0.15:
            continue
        ranked = rnd.sample(docs, rnd.randint(0, len(docs)))
        run[qid] = [(d, rnd.choice([3.0, 2.0, 2.0, 1.0, 0.5, 1e-9, 0.0, -2.0])) for d in ranked]
    return qrels, run


def ir_measures_values(qrels, run_path):
    names = ir_measures_names(KS)
    measures = [ir_measures.parse_measure(m) for m in names.values()]
    qrels_list = [ir_measures.Qrel(q, d, g) for q, judged in qrels.items() for d, g in judged.items()]
    got = {}
    for m in ir_measures.iter_calc(measures, qrels_list, list(ir_measures.read_trec_run(str(run_path)))):
        got[(str(m.measure), m.query_id)] = m.value
    aggregate = ir_measures.calc_aggregate(measures, qrels_list, list(ir_measures.read_trec_run(str(run_path))))
    return names, got, {str(k): v for k, v in aggregate.items()}


@pytest.mark.parametrize("seed", range(4))
def test_metrics_equal_ir_measures_on_random_runs_and_graded_qrels(tmp_path, seed):
    rnd = random.Random(seed)
    for case in range(60):
        qrels, run = random_case(rnd)
        path = tmp_path / f"run-{case}.trec"
        write_trec_run(path, run)
        ours = per_query(run, qrels, KS)
        names, theirs, aggregate = ir_measures_values(qrels, path)
        result = judged_metrics(run, qrels, KS)
        assert result.queries == len(qrels) and result.unjudged == ("unjudged" in run)
        for name, measure in names.items():
            for qid in qrels:  # ir_measures scores every judged query, 0 when the run lacks it
                assert ours[name][qid] == pytest.approx(theirs[(measure, qid)], abs=1e-9), (name, qid, case)
            assert result.metrics[name].value == pytest.approx(aggregate[measure], abs=1e-9), name


@pytest.mark.parametrize("seed", range(3))
def test_a_foreign_run_file_is_read_and_scored_as_trec_eval_reads_it(tmp_path, seed):
    # A run written by another tool: ties in the scores, lines in any order, ranks that
    # disagree with the scores. trec_eval sorts by score, ties by docid descending.
    rnd = random.Random(100 + seed)
    for case in range(40):
        qrels, run = random_case(rnd)
        lines = [f"{q} Q0 {d} {rnd.randint(1, 99)} {s!r} foreign\n" for q, ranking in run.items() for d, s in ranking]
        rnd.shuffle(lines)
        path = tmp_path / f"foreign-{case}.trec"
        path.write_text("".join(lines))
        back = read_trec_run(path)
        for q, ranking in run.items():
            if ranking:
                assert back[q] == trec_order(ranking)
        ours = per_query(back, qrels, KS)
        names, theirs, _ = ir_measures_values(qrels, path)
        for name, measure in names.items():
            for qid in qrels:
                if measure == "RR@10":
                    # ir_measures computes RR@10 with its msmarco provider, which breaks score
                    # ties its own way (not trec_eval's); trec_eval's RR cut at 10 is the reference.
                    rr = theirs[("RR", qid)]
                    assert ours[name][qid] == pytest.approx(rr if rr >= 0.1 else 0.0, abs=1e-9)
                    continue
                assert ours[name][qid] == pytest.approx(theirs[(measure, qid)], abs=1e-9), (name, qid, case)


def test_a_run_file_keeps_our_order_through_trec_eval_sorting(tmp_path):
    # Ties, scores equal in float32 but not in float64, huge and negative ones, zeros.
    rnd = random.Random(7)
    run = {}
    for q in range(50):
        values = [1.0, 1.0 + 1e-12, 1.0 - 1e-12, 0.5, 0.5, 3e38, 3.5e38, -1e-30, 0.0, 0.0, -7.25, 1e-45]
        run[f"q{q}"] = [(f"doc{rnd.randint(0, 10**6)}-{i}", rnd.choice(values)) for i in range(rnd.randint(1, 30))]
    path = tmp_path / "ours.trec"
    assert write_trec_run(path, run, tag="t") == sum(map(len, run.values()))
    back = read_trec_run(path)
    for q, ranking in run.items():
        assert [d for d, _ in back[q]] == [d for d, _ in ranking]
        written = [s for _, s in back[q]]
        assert all(np.float32(a) > np.float32(b) for a, b in zip(written, written[1:]))  # strict, even in float32
    lines = path.read_text().splitlines()
    assert lines[0].split()[1] == "Q0" and lines[0].split()[3] == "1" and lines[0].split()[5] == "t"
    # ir_measures reads the same order (its RR equals ours on a query whose first document is relevant)
    qrels = {q: {ranking[0][0]: 1} for q, ranking in run.items()}
    names, theirs, _ = ir_measures_values(qrels, path)
    assert all(theirs[("RR", q)] == 1.0 for q in run)


def test_untied_scores_are_written_as_they_are(tmp_path):
    path = tmp_path / "r.trec"
    write_trec_run(path, {"q": [("a", 0.123456789012345), ("b", 0.1), ("c", -3.0)]})
    assert [line.split()[4] for line in path.read_text().splitlines()] == ["0.123456789012345", "0.1", "-3.0"]


def test_ids_a_trec_file_cannot_hold_are_refused_before_anything_is_written(tmp_path):
    path = tmp_path / "r.trec"
    for run in ({"q 1": [("a", 1.0)]}, {"q1": [("a b", 1.0)]}, {"q1": [("", 1.0)]}):
        with pytest.raises(InputError, match="cannot be written to a TREC run file"):
            write_trec_run(path, run)
    with pytest.raises(InputError, match="not finite"):
        write_trec_run(path, {"q1": [("a", float("nan"))]})
    assert not path.exists() and not list(tmp_path.iterdir())


# ---------------------------------------------------------------- readers

def test_qrels_in_trec_and_beir_layouts_read_the_same(tmp_path):
    trec = tmp_path / "qrels.trec"
    trec.write_text("q1 0 d1 2\nq1 0 d2 0\n\nq2 Q0 d1 -1\n")
    beir = tmp_path / "test.tsv"
    beir.write_text("query-id\tcorpus-id\tscore\r\nq1\td1\t2\r\nq1\td2\t0\r\nq2\td1\t-1\r\n")
    headless = tmp_path / "headless.tsv"
    headless.write_text("q1\td1\t2\nq1\td2\t0\nq2\td1\t-1")
    expected = {"q1": {"d1": 2, "d2": 0}, "q2": {"d1": -1}}
    assert read_qrels(trec) == read_qrels(beir) == read_qrels(headless) == expected


BAD_FILES = [
    (read_qrels, "bad.qrels", "q1 0 d1 1\nq1 0 d2\n", "line 2: expected 4 fields like the first line, found 3"),
    (read_qrels, "bad.qrels", "q1 0 d1 1\nq1 0 d1 2\n",
     "line 2: query 'q1' judges document 'd1' twice (first at line 1)"),
    (read_qrels, "bad.qrels", "q1\td1\t0.5\nq2\td1\t1\n", "line 1: the relevance grade must be an integer, got '0.5'"),
    (read_qrels, "bad.qrels", "query-id\tcorpus-id\tscore\nq1\td1\tyes\n",
     "line 2: the relevance grade must be an integer, got 'yes'"),
    (read_qrels, "bad.qrels", "q1 d1\n", "line 1: expected TREC qrels"),
    (read_qrels, "bad.qrels", "\n\n", "no judgments"),
    (read_queries, "queries.jsonl", '{"_id": "q1", "text": "a"}\n{"_id": "q1", "text": "b"}\n',
     "line 2: duplicate query id 'q1' (first seen at line 1)"),
    (read_queries, "queries.jsonl", '{"text": "a"}\n', 'line 1: missing "_id"'),
    (read_queries, "queries.jsonl", '{"_id": "q1", "text": 3}\n', 'line 1: "text" must be a string'),
    (read_queries, "queries.jsonl", '{"_id": "q1", "text": "a"\n', "line 1, column"),
    (read_queries, "queries.jsonl", '["q1", "a"]\n', "line 1: expected a JSON object"),
    (read_trec_run, "run.trec", "q1 Q0 d1 1 2.5\n", "line 1: expected 6 fields"),
    (read_trec_run, "run.trec", "q1 Q0 d1 1 high run\n", "line 1: the score must be a finite number, got 'high'"),
    (read_trec_run, "run.trec", "q1 Q0 d1 1 nan run\n", "the score must be a finite number"),
    (read_trec_run, "run.trec", "q1 Q0 d1 1 2 run\nq1 Q0 d1 2 1 run\n", "line 2: query 'q1' lists document 'd1' twice"),
]


@pytest.mark.parametrize("reader, name, body, message", BAD_FILES,
                         ids=[f"{r.__name__}-{i}" for i, (r, *_) in enumerate(BAD_FILES)])
def test_bad_qrels_queries_and_run_files_are_one_line_naming_the_place(tmp_path, reader, name, body, message):
    path = tmp_path / name
    path.write_text(body)
    with pytest.raises(InputError) as exc:
        reader(path)
    assert message in str(exc.value) and str(path) in str(exc.value) and "\n" not in str(exc.value)


def test_queries_from_beir_jsonl_and_tsv(tmp_path):
    jsonl = tmp_path / "queries.jsonl"
    jsonl.write_text('{"_id": "q1", "text": "sea level", "metadata": {}}\n\n{"_id": 7, "text": "ice"}\n')
    tsv = tmp_path / "topics.tsv"
    tsv.write_text("q1\tsea level\n7\tice\n")
    assert read_queries(jsonl) == read_queries(tsv) == {"q1": "sea level", "7": "ice"}




def test_a_ranking_listing_a_document_twice_is_refused():
    with pytest.raises(ValueError, match="document 'd1' is ranked twice"):
        per_query({"q": [("d1", 2.0), ("d1", 1.0)]}, {"q": {"d1": 1}})
