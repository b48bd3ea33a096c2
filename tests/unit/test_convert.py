"""``factcheck convert``: lossless where the formats allow, and what a target cannot hold is listed."""

import json

import pytest

from helpers import DEMO, ROOT, in_process, run_cli, shared_file
from factcheck.errors import InputError
from factcheck.formats.claims import read_claims, read_predictions
from factcheck.formats.convert import convert_claims, convert_evidence, convert_predictions
from factcheck.formats.evidence import read_passages, source_spec

FEVER = ROOT / "tests" / "data" / "fever"
CLIMATE = ROOT / "tests" / "data" / "climate-fever" / "climate-fever.jsonl"


def facts(claims):
    return [(c.id, c.text, c.label, c.evidences) for c in claims]


@pytest.mark.parametrize("to", ["course", "jsonl", "csv", "fever", "climate-fever"])
def test_course_claims_round_trip_through_every_format(tmp_path, to):
    there, back = tmp_path / f"there.{to}", tmp_path / "back.json"
    convert_claims(DEMO / "train-claims.json", there, to, one_line_pages=True)
    convert_claims(there, back, "course", claims_format=to, one_line_pages=(to == "fever"))
    assert facts(read_claims(back)) == facts(read_claims(DEMO / "train-claims.json"))


def test_fever_to_course_lists_the_flattened_sets(tmp_path):
    notes = convert_claims(FEVER / "train.jsonl", tmp_path / "c.json", "course")
    assert any("2 claims: FEVER's alternative evidence sets" in n for n in notes)
    assert any("annotation and evidence ids" in n for n in notes)
    c = {c.id: c for c in read_claims(tmp_path / "c.json")}
    assert c["102"].evidences == ["Carbon_dioxide:1", "Greenhouse_effect:3"] and c["115"].evidences == []
    again = tmp_path / "again.jsonl"
    convert_claims(tmp_path / "c.json", again, "fever")  # ids are page:line already
    assert facts(read_claims(again)) == facts(read_claims(FEVER / "train.jsonl"))


def test_climate_fever_to_course_and_back_with_the_sentences(tmp_path):
    course = tmp_path / "c.json"
    notes = convert_claims(CLIMATE, course, "course")
    assert any("per-sentence labels, votes, entropy and articles are not kept" in n for n in notes)
    assert facts(read_claims(course)) == facts(read_claims(CLIMATE))
    source = tmp_path / "sentences.jsonl"
    convert_evidence(CLIMATE, source, "jsonl")
    ids, texts, titles = read_passages(source_spec(source, title_column="title"), titles=True)
    assert len(ids) == 20 and titles[0] == "Sea level rise"
    cf = tmp_path / "cf.jsonl"
    notes = convert_claims(course, cf, "climate-fever", evidence=source, title_column="title")
    assert any("labels, votes and entropy are unknown" in n for n in notes)
    first = json.loads(cf.read_text(encoding="utf-8").splitlines()[0])
    assert first["evidences"][0] == {"evidence_id": "Sea level rise:3", "evidence_label": None,
                                     "article": "Sea level rise", "entropy": None, "votes": None,
                                     "evidence": texts[ids.index("Sea level rise:3")]}
    assert facts(read_claims(cf)) == facts(read_claims(CLIMATE))  # unlabelled sentences read back as gold


def test_evidence_to_fever_lists_what_a_line_cannot_hold(tmp_path):
    src = tmp_path / "e.jsonl"
    src.write_text('{"id": "P:0", "text": "one\\ttab"}\n{"id": "P:2", "text": "two\\nlines"}\n'
                   '{"id": "Q:0", "text": ""}\n{"id": "R:1", "text": "fine"}\n', encoding="utf-8")
    wiki = tmp_path / "wiki.jsonl"
    notes = convert_evidence(src, wiki, "fever")
    assert any("2 passages held tabs or newlines" in n for n in notes)
    assert any("1 passage with an empty text (first: 'Q:0')" in n for n in notes)
    pages = [json.loads(line) for line in wiki.read_text(encoding="utf-8").splitlines()]
    assert [p["id"] for p in pages] == ["P", "R"] and pages[0]["lines"] == "0\tone tab\n1\t\n2\ttwo lines"
    assert read_passages(source_spec(wiki)) == (["P:0", "P:2", "R:1"], ["one tab", "two lines", "fine"])
    with pytest.raises(InputError) as err:
        convert_evidence(DEMO / "evidence.json", tmp_path / "w.jsonl", "fever")
    assert err.value.param == "one_line_pages" and "'evidence-1' is not a FEVER sentence id" in str(err.value)


def test_predictions_both_ways(tmp_path):
    course = tmp_path / "p.json"
    course.write_text(json.dumps({"201": {"claim_text": "x", "claim_label": "SUPPORTS", "evidences": ["El_Niño:2"]}}))
    fever = tmp_path / "p.jsonl"
    notes = convert_predictions(course, fever, "fever")
    assert "claim texts are not kept" in notes[0]
    assert json.loads(fever.read_text(encoding="utf-8")) == {"id": 201, "predicted_label": "SUPPORTS",
                                                             "predicted_evidence": [["El_Niño", 2]]}
    back = tmp_path / "back.json"
    notes = convert_predictions(fever, back, "course")
    assert any("written without 'claim_text'" in n for n in notes)
    assert read_predictions(back) == read_predictions(course)


def test_convert_command_prints_one_note_line_per_loss(tmp_path):
    proc = in_process("convert", "claims", FEVER / "train.jsonl", "--to", "course", "--out", tmp_path / "c.json")
    assert proc.returncode == 0, proc.stderr
    notes = proc.stderr.splitlines()
    assert notes and all(line.startswith("factcheck convert: note: ") for line in notes)
    proc = in_process("convert", "claims", DEMO / "dev-claims.json", "--to", "fever", "--out", tmp_path / "f.jsonl")
    assert proc.returncode == 2 and "--one-line-pages: passage id 'evidence-3'" in proc.stderr
    assert not (tmp_path / "f.jsonl").exists()


@pytest.mark.slow
def test_evaluate_metric_fever_on_course_predictions_converted_to_fever(tmp_path):
    # The course's example predictions and the dev claims, both written in FEVER's formats: the
    # FEVER scorer's label accuracy is the course metric's, and every FEVER figure is the one it
    # gives on the course files themselves (the conversion moves no claim, label or sentence).
    predictions, claims = shared_file("dev-claims-baseline.json"), shared_file("dev-claims.json")
    fever_predictions, fever_claims = tmp_path / "pred.jsonl", tmp_path / "dev.jsonl"
    for args in (("predictions", predictions, "--to", "fever", "--one-line-pages", "--out", fever_predictions),
                 ("claims", claims, "--to", "fever", "--one-line-pages", "--out", fever_claims)):
        proc = run_cli("convert", *args)
        assert proc.returncode == 0, proc.stderr
    assert fever_claims.read_text(encoding="utf-8").startswith('{"id": ')  # really FEVER's claims format

    def evaluate(*args):
        proc = run_cli("evaluate", "--json", *args)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)
    course = evaluate("--predictions", predictions, "--groundtruth", claims)
    fever = evaluate("--metric", "fever", "--predictions", fever_predictions, "--groundtruth", fever_claims)
    assert fever["claims"] == course["claims"] == 154
    assert fever["label_accuracy"] == course["accuracy"] == pytest.approx(54 / 154, abs=1e-15)
    direct = evaluate("--metric", "fever", "--predictions", predictions, "--groundtruth", claims)
    assert fever == direct


def test_converted_predictions_are_write_predictions_bytes(tmp_path):
    """convert writes through formats.claims.write_predictions: the same bytes, and a file mixing
    labelled and unlabelled predictions refused naming that file."""
    from factcheck.formats.claims import write_predictions
    src = tmp_path / "p.json"
    preds = {"c1": {"evidences": ["evidence-1"], "claim_label": "SUPPORTS"},
             "c2": {"evidences": [], "claim_label": "REFUTES"}}
    write_predictions(src, preds)
    convert_predictions(src, tmp_path / "p.jsonl", "fever", one_line_pages=True)
    write_predictions(tmp_path / "direct.jsonl", {cid: {**p, "evidences": [f"{e}:0" for e in p["evidences"]]}
                                                  for cid, p in preds.items()}, format="fever")
    assert (tmp_path / "p.jsonl").read_bytes() == (tmp_path / "direct.jsonl").read_bytes()
    src.write_text(json.dumps({"c1": {"evidences": [], "claim_label": "SUPPORTS"}, "c2": {"evidences": []}}))
    with pytest.raises(InputError, match="some predictions have a label and others not") as info:
        convert_predictions(src, tmp_path / "q.jsonl", "fever")
    assert info.value.path == str(src)
