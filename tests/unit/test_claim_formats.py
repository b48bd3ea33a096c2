"""Claims files in every format: course JSON, JSONL, CSV, FEVER, Climate-FEVER; detection,
field options, label sets and the one-line errors."""

import json
import warnings

import pytest

from helpers import DEMO
from factcheck.errors import FactcheckWarning, InputError
from factcheck.formats.claims import (FEVER_LABELS, LABELS, Claim, detect_claims_format, label_set, read_claims,
                                      read_predictions, write_claims)
from factcheck.formats.records import iter_records

FEVER = DEMO.parent.parent / "tests" / "data" / "fever"
CLIMATE = DEMO.parent.parent / "tests" / "data" / "climate-fever" / "climate-fever.jsonl"


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def course_claims():
    return read_claims(DEMO / "train-claims.json", require_labels=True)


# ---------------------------------------------------------------- the new user's files

def test_a_jsonl_file_of_id_and_claim_is_read(tmp_path):
    # Today's main: "line 2, column 1: invalid JSON: Extra data".
    p = write(tmp_path, "claims.jsonl", '{"id": "c1", "claim": "Sea levels rise."}\n'
                                        '{"id": 2, "claim": "CO2 is a gas."}\n')
    claims = read_claims(p)
    assert [(c.id, c.text, c.label, c.evidences) for c in claims] == [
        ("c1", "Sea levels rise.", None, []), ("2", "CO2 is a gas.", None, [])]


def test_a_one_line_jsonl_file_is_read_even_named_json(tmp_path):
    # Today's main: "claim 'id': expected an object with 'claim_text'".
    for name in ("one.jsonl", "one.json"):
        p = write(tmp_path, name, '{"id": "c1", "claim": "Sea levels rise."}\n')
        assert [(c.id, c.text) for c in read_claims(p)] == [("c1", "Sea levels rise.")]


def test_a_csv_claims_file_is_read(tmp_path):
    # Today's main: "invalid JSON: Expecting value".
    p = write(tmp_path, "claims.csv", 'id,claim_text,claim_label,evidences\n'
                                      'c1,"Sea levels rise, fast.",SUPPORTS,evidence-1 evidence-2\n'
                                      'c2,CO2 is a gas.,REFUTES,"[""Page with space:3""]"\n')
    claims = read_claims(p, require_labels=True)
    assert [(c.id, c.text, c.label, c.evidences) for c in claims] == [
        ("c1", "Sea levels rise, fast.", "SUPPORTS", ["evidence-1", "evidence-2"]),
        ("c2", "CO2 is a gas.", "REFUTES", ["Page with space:3"])]


def test_other_field_names_are_options_named_like_the_evidence_readers(tmp_path):
    p = write(tmp_path, "q.jsonl", '{"qid": "q1", "sentence": "Ice melts.", "gold": "SUPPORTS", "docs": ["d1"]}\n')
    (c,) = read_claims(p, id_column="qid", text_column="sentence", label_column="gold", evidence_column="docs",
                       require_labels=True)
    assert (c.id, c.text, c.label, c.evidences) == ("q1", "Ice melts.", "SUPPORTS", ["d1"])
    t = write(tmp_path, "q.tsv", "qid\tsentence\nq1\tIce melts.\n")
    assert [(c.id, c.text) for c in read_claims(t, id_column="qid", text_column="sentence")] == [("q1", "Ice melts.")]


def test_an_unreadable_claims_file_names_the_expected_formats(tmp_path):
    # Today's main named no format at all.
    p = write(tmp_path, "claims.jsonl", '{"id": "q1", "sentence": "Ice melts."}\n')
    with pytest.raises(InputError) as err:
        read_claims(p)
    msg = err.value.one_line()
    assert err.value.param == "text_column" and "'claim' or 'claim_text'" in msg and "found 'id', 'sentence'" in msg
    for fmt in ("course JSON", "JSON lines", "CSV", "FEVER", "Climate-FEVER"):
        assert fmt in msg
    lines = write(tmp_path, "lines.json", '{"c1": {"claim_text": "a"}}\n{"c2": {"claim_text": "b"}}\n')
    with pytest.raises(InputError, match=r"line 2, column 1: invalid JSON: Extra data \(one JSON value a line is "
                                         r"JSON lines"):
        read_claims(lines)
    for bad in ('["not", "claims"]', '{"c1": "just a string"}'):
        with pytest.raises(InputError, match="course JSON|JSON object of claims"):
            read_claims(write(tmp_path, "bad.json", bad))


def test_claims_errors_name_parameters_and_places(tmp_path):
    p = write(tmp_path, "c.jsonl", '{"id": "a", "claim": "x"}\n{"id": "a", "claim": "y"}\n')
    with pytest.raises(InputError, match=r"claim 'a': duplicate claim id"):
        read_claims(p)
    p = write(tmp_path, "c2.jsonl", '{"id": "a", "claim": "x", "claim": "y"}\n')
    with pytest.raises(InputError, match=r"line 1: duplicate key 'claim'"):
        read_claims(p)
    with pytest.raises(InputError) as err:
        read_claims(DEMO / "dev-claims.json", id_column="qid")
    assert err.value.param == "id_column" and "JSONL and CSV claims only" in err.value.one_line()
    with pytest.raises(InputError) as err:
        read_claims(DEMO / "dev-claims.json", format="xml")
    assert err.value.param == "format" and "course, jsonl, csv, fever, climate-fever" in err.value.one_line()
    unlabelled = write(tmp_path, "u.csv", "id,claim\nc1,x\n")
    with pytest.raises(InputError, match="claim 'c1': missing 'label'"):
        read_claims(unlabelled, require_labels=True)


def test_detection_from_name_and_first_record(tmp_path):
    assert detect_claims_format(DEMO / "dev-claims.json") == "course"
    assert detect_claims_format(FEVER / "train.jsonl") == "fever"
    assert detect_claims_format(FEVER / "shared_task_test.jsonl") == "jsonl"  # id + claim only: same claims
    assert detect_claims_format(CLIMATE) == "climate-fever"
    assert detect_claims_format(write(tmp_path, "x.csv", "id,claim\n")) == "csv"
    one_line_course = write(tmp_path, "c.json", json.dumps({"c1": {"claim_text": "x"}}))
    assert detect_claims_format(one_line_course) == "course"


def test_a_wrong_guess_is_an_error_not_garbage(tmp_path):
    # The first record looks like FEVER; the second is not a FEVER claim.
    p = write(tmp_path, "f.jsonl", '{"id": 1, "label": "SUPPORTS", "claim": "x", "evidence": [[[1, 2, "P", 0]]]}\n'
                                   '{"id": 2, "label": "SUPPORTS", "claim": "y", "evidence": "P:0"}\n')
    with pytest.raises(InputError, match=r"line 2 \(claim '2'\): 'evidence' must be a list of evidence sets"):
        read_claims(p)
    # Read as CSV, a JSON file has no header with the needed columns.
    with pytest.raises(InputError, match="id_column"):
        read_claims(DEMO / "dev-claims.json", format="csv")


# ---------------------------------------------------------------- every format reads the same claims

@pytest.mark.parametrize("fmt, name", [("course", "c.json"), ("jsonl", "c.jsonl"), ("csv", "c.csv"),
                                       ("fever", "c.fever.jsonl"), ("climate-fever", "c.cf.jsonl")])
def test_written_claims_read_back_the_same(tmp_path, fmt, name):
    claims = course_claims()
    if fmt == "fever":  # FEVER ids are page:line
        claims = [Claim(c.id, c.text, c.label, [e + ":0" for e in c.evidences]) for c in claims]
    p = tmp_path / name
    write_claims(p, claims, fmt)
    back = read_claims(p, require_labels=True)
    assert detect_claims_format(p) == fmt
    assert [(c.id, c.text, c.label, c.evidences) for c in back] == \
        [(c.id, c.text, c.label, c.evidences) for c in claims]


def test_fever_claims_keep_evidence_sets():
    claims = {c.id: c for c in read_claims(FEVER / "train.jsonl", format="fever")}
    assert claims["102"].evidence_sets == [["Carbon_dioxide:1"], ["Greenhouse_effect:3"]]
    assert claims["102"].evidences == ["Carbon_dioxide:1", "Greenhouse_effect:3"]
    assert claims["115"].label == "NOT ENOUGH INFO" and claims["115"].evidence_sets == []
    dev = {c.id: c for c in read_claims(FEVER / "shared_task_dev.jsonl", format="fever")}
    assert dev["203"].evidence_sets == [["Antarctic_ice_sheet:4"], ["Sea_level_rise:3", "Antarctic_ice_sheet:0"]]
    test = read_claims(FEVER / "shared_task_test.jsonl")
    assert [c.label for c in test] == [None] * 3 and test[0].id == "301"


def test_fever_evidence_errors(tmp_path):
    cases = [('"evidence": [[[1, 2, "P"]]]', "expected [annotation_id, evidence_id, page, line]"),
             ('"evidence": [[[1, 2, "P", -1]]]', "non-negative integer"),
             ('"evidence": [[[1, 2, "P", 0], [1, null, null, null]]]', "mixes sentences"),
             ('"evidence": [[[1, 2, 7, 0]]]', "page must be a string")]
    for evidence, words in cases:
        p = write(tmp_path, "f.jsonl", '{"id": 5, "label": "SUPPORTS", "claim": "x", ' + evidence + "}\n")
        with pytest.raises(InputError, match="line 1 \\(claim '5'\\)") as err:
            read_claims(p)
        assert words in err.value.one_line()


def test_climate_fever_gold_rule():
    claims = {c.id: c for c in read_claims(CLIMATE, require_labels=True)}
    # NOT_ENOUGH_INFO claim: all five sentences are gold (the course's pattern)
    assert len(claims["9"].evidences) == 5 and claims["9"].label == "NOT_ENOUGH_INFO"
    # others: the sentences not labelled NOT_ENOUGH_INFO
    assert claims["1"].evidences == ["Sea level rise:3", "Sea level rise:6"]
    assert claims["4"].label == "DISPUTED" and len(claims["4"].evidences) == 2


# ---------------------------------------------------------------- label sets

def test_label_set_comes_from_the_training_labels():
    assert label_set(["SUPPORTS", "REFUTES"]) == LABELS  # the course's four, in its order
    assert label_set(["SUPPORTS", "NOT ENOUGH INFO"]) == FEVER_LABELS
    assert label_set(["true", "false", "true"]) == ("false", "true")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert label_set(["SUPPORTS", "REFUTES", "SUPORTS"]) == ("REFUTES", "SUPORTS", "SUPPORTS")
    assert any(issubclass(w.category, FactcheckWarning) and "SUPORTS" in str(w.message) for w in caught)


def test_any_label_is_read_and_an_unknown_predicted_label_is_an_error(tmp_path):
    p = write(tmp_path, "c.jsonl", '{"id": "a", "claim": "x", "label": "MAYBE", "evidences": ["e1"]}\n')
    assert read_claims(p, require_labels=True)[0].label == "MAYBE"
    pred = write(tmp_path, "p.json", json.dumps({"a": {"claim_label": "MAYBE", "evidences": ["e1"]}}))
    assert read_predictions(pred, labels=["MAYBE", "NO"])["a"]["claim_label"] == "MAYBE"
    with pytest.raises(InputError, match="claim 'a': unknown label 'MAYBE'; expected one of SUPPORTS, REFUTES"):
        read_predictions(pred, labels=LABELS)


def test_fever_predictions_read_and_write(tmp_path):
    p = write(tmp_path, "pred.jsonl", '{"id": 201, "predicted_label": "SUPPORTS", '
                                      '"predicted_evidence": [["El_Niño", 2], ["Star_Wars:_Episode_I", 0]]}\n')
    preds = read_predictions(p)
    assert preds == {"201": {"evidences": ["El_Niño:2", "Star_Wars:_Episode_I:0"], "claim_label": "SUPPORTS"}}
    assert read_predictions(p, format="fever") == preds
    from factcheck.formats.claims import write_predictions
    out = tmp_path / "again.jsonl"
    write_predictions(out, preds, format="fever")  # what read_predictions returns, written again
    assert out.read_text(encoding="utf-8") == p.read_text(encoding="utf-8")
    with pytest.raises(InputError, match="not a FEVER sentence id"):
        write_predictions(tmp_path / "x.jsonl", {"1": {"evidences": ["evidence-3"]}}, format="fever")
    bad = write(tmp_path, "bad.jsonl", '{"id": 1, "predicted_label": "SUPPORTS", "predicted_evidence": [["P"]]}\n')
    with pytest.raises(InputError, match=r"line 1 \(claim '1'\): 'predicted_evidence' entries must be \[page, line\]"):
        read_predictions(bad)


# ---------------------------------------------------------------- the record primitive

def test_jsonl_records_refuse_duplicate_keys(tmp_path):
    p = write(tmp_path, "r.jsonl", '{"a": 1}\n\n  \n{"a": {"b": 1, "b": 2}}\n')
    with pytest.raises(InputError, match=r"line 4: duplicate key 'b'"):
        list(iter_records(p))
    p = write(tmp_path, "r2.jsonl", '{"a": 1}\n{"a": "' + "x" * 100 + '"}\n')
    assert [place for place, _ in iter_records(p)] == ["line 1", "line 2"]
    p = write(tmp_path, "r3.jsonl", '{"a": 1}\n[1, 2]\n')
    with pytest.raises(InputError, match=r"line 2: expected a JSON object, got a list"):
        list(iter_records(p))


def test_write_predictions_takes_what_read_predictions_returns(demo_run, tmp_path):
    """One shape both ways: the run's file read, then written with its claims, is the same bytes."""
    from factcheck.formats.claims import write_predictions
    from factcheck.system.checker import Verdict, Verdicts
    from factcheck.retrieval.base import Explanation
    original = demo_run / "dev-claims-predictions.json"
    claims = read_claims(DEMO / "dev-claims.json")
    write_predictions(tmp_path / "again.json", read_predictions(original), claims)
    assert (tmp_path / "again.json").read_bytes() == original.read_bytes()
    verdicts = Verdicts([Verdict("c1", "Sea levels are rising.", "SUPPORTS", Explanation("ranked", [{"id": "e8"}]))])
    write_predictions(tmp_path / "v.json", verdicts.predictions())  # no claims: no claim_text
    assert read_predictions(tmp_path / "v.json") == verdicts.predictions()
    assert "claim_text" not in (tmp_path / "v.json").read_text()
    with pytest.raises(InputError) as err:  # the former call (claims, evidences, labels) is refused in one line
        write_predictions(tmp_path / "x.json", claims, {c.id: [] for c in claims})
    assert err.value.param == "predictions" and "expected a dict of claim id -> prediction" in str(err.value)
    with pytest.raises(InputError, match="has no prediction"):
        write_predictions(tmp_path / "x.json", {}, claims)
    with pytest.raises(InputError, match="some predictions have a label and others not"):
        write_predictions(tmp_path / "x.json", {"a": {"evidences": [], "claim_label": "SUPPORTS"},
                                                "b": {"evidences": []}})
