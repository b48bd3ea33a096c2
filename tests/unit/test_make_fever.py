"""The synthetic FEVER-shaped benchmark data (benchmarks/make_fever.py) at tiny sizes: the same
arguments give the same bytes, our own readers read it, every gold sentence is in the corpus,
and the claim counts and label proportions are FEVER's, scaled."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

import factcheck
from benchmarks import make_fever
from benchmarks.make_corpus import WordModel
from helpers import DEMO

SOURCE = DEMO / "evidence.json"  # the word model's corpus (the proxy in real use)
SCALE = 0.001  # 145 / 20 / 20 claims


def files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("fever") / "data"
    written = make_fever.write(out, 700, SOURCE, seed=7, claim_scale=SCALE, pages_per_file=40)
    return out, written


def test_the_same_arguments_give_the_same_bytes(made, tmp_path):
    out, _ = made
    again = make_fever.write(tmp_path / "again", 700, SOURCE, seed=7, claim_scale=SCALE, pages_per_file=40)
    assert files(tmp_path / "again") == files(out) and again == made[1]
    make_fever.write(tmp_path / "other", 700, SOURCE, seed=8, claim_scale=SCALE, pages_per_file=40)
    assert files(tmp_path / "other") != files(out)


def test_layout_and_wiki_pages_split_into_files_of_n_pages(made):
    out, written = made
    assert sorted(p.name for p in out.iterdir()) == ["shared_task_dev.jsonl", "shared_task_test.jsonl",
                                                     "train.jsonl", "wiki-pages"]
    wiki = sorted((out / "wiki-pages").iterdir())
    assert [p.name for p in wiki] == [f"wiki-{i:03d}.jsonl" for i in range(1, len(wiki) + 1)]
    records = [[json.loads(line) for line in p.read_text(encoding="utf-8").splitlines()] for p in wiki]
    assert all(len(r) == 40 for r in records[:-1]) and 1 <= len(records[-1]) <= 40
    assert records[0][0] == {"id": "", "text": "", "lines": ""}  # FEVER's dump opens with an empty page
    pages = [page for file in records for page in file][1:]
    assert len(pages) == written["pages"] and written["files"] == len(wiki)
    # About 4.6 sentences a page, as FEVER's 25M sentences in 5.4M pages.
    assert 3.5 < written["sentences"] / written["pages"] < 6
    lines = pages[0]["lines"].split("\n")
    assert [line.split("\t")[0] for line in lines] == [str(i) for i in range(len(lines))]
    assert pages[0]["text"] == " ".join(line.split("\t")[1] for line in lines)


def test_our_readers_read_it_and_every_gold_sentence_is_in_the_corpus(made):
    out, written = made
    from factcheck.formats.claims import detect_claims_format
    from factcheck.formats.evidence import detect_format
    assert detect_format(out / "wiki-pages") == "fever"  # read by FEVER's readers, not as generic JSONL
    assert detect_claims_format(out / "train.jsonl") == detect_claims_format(out / "shared_task_dev.jsonl") == "fever"
    ids, texts = factcheck.read_passages(out / "wiki-pages")
    assert len(ids) == len(set(ids)) == written["sentences"] == 700
    corpus = dict(zip(ids, texts))
    train = factcheck.read_claims(out / "train.jsonl", require_labels=True)
    dev = factcheck.read_claims(out / "shared_task_dev.jsonl", require_labels=True)
    test = factcheck.read_claims(out / "shared_task_test.jsonl")
    assert (len(train), len(dev), len(test)) == (145, 20, 20) == (written["train"], written["dev"], written["test"])
    assert all(c.label is None and not c.evidences for c in test)  # unlabelled, as FEVER's shared task's
    assert len({c.id for c in train + dev + test}) == 185
    for c in train + dev:
        assert all(e in corpus for s in c.evidence_sets for e in s)
        assert bool(c.evidences) == (c.label != "NOT ENOUGH INFO")
    sets = [s for c in train + dev for s in c.evidence_sets]
    assert any(len(s) == 2 for s in sets)  # some sets hold two sentences
    assert any(len(c.evidence_sets) > 1 for c in train + dev)  # some claims have alternative sets
    raw = [json.loads(line) for line in (out / "train.jsonl").read_text(encoding="utf-8").splitlines()]
    nei = [r for r in raw if r["label"] == "NOT ENOUGH INFO"]
    assert nei and all(r["verifiable"] == "NOT VERIFIABLE" and len(r["evidence"]) == 1
                       and r["evidence"][0][0][1:] == [None, None, None] for r in nei)


def test_claims_derive_from_their_gold_sentence(made):
    out, _ = made
    ids, texts = factcheck.read_passages(out / "wiki-pages")
    corpus = dict(zip(ids, texts))
    for c in factcheck.read_claims(out / "train.jsonl", require_labels=True):
        if c.label == "SUPPORTS" and len(c.evidence_sets[0]) == 1:
            gold = corpus[c.evidence_sets[0][0]].split()
            words = c.text.rstrip(".").split()[1:]
            assert sum(w in gold for w in words) >= len(words) - 2, (c.text, gold)


def test_label_proportions_are_fevers_within_rounding(made):
    out, _ = made
    for name, split in (("train.jsonl", "train"), ("shared_task_dev.jsonl", "dev")):
        labels = Counter(c.label for c in factcheck.read_claims(out / name, require_labels=True))
        fever = make_fever.FEVER_COUNTS[split]
        total = sum(labels.values())
        for label, full in zip(make_fever.LABELS, fever):
            assert abs(labels[label] - full * total / sum(fever)) < 1, (split, labels)


@pytest.mark.parametrize("scale", [1.0, 0.3, 0.0123])
def test_claim_counts_are_fevers_scaled(scale):
    counts = make_fever.claim_counts(scale)
    assert sum(counts["train"]) == round(145_449 * scale)
    if scale == 1:
        assert counts["train"] == (80_035, 29_775, 35_639)
    for split in ("dev", "test"):
        assert sum(counts[split]) == round(19_998 * scale) and max(counts[split]) - min(counts[split]) <= 1


def test_test_labels_on_request_in_thirds(tmp_path):
    make_fever.write(tmp_path / "d", 300, SOURCE, claim_scale=0.0015, test_labels=True)
    test = factcheck.read_claims(tmp_path / "d" / "shared_task_test.jsonl", require_labels=True)
    assert sorted(Counter(c.label for c in test).values()) == [10, 10, 10]


def test_the_word_generator_streams_the_same_text_in_blocks(monkeypatch):
    import numpy as np
    from benchmarks import make_corpus
    model = WordModel(json.loads(SOURCE.read_text(encoding="utf-8")).values())
    whole = list(model.sentences(np.random.default_rng(3), 50))
    assert len(whole) == 50 and all(s.split() for s in whole)
    assert list(model.sentences(np.random.default_rng(3), 50)) == whole
    monkeypatch.setattr(make_corpus, "BLOCK", 7)  # memory bounded by a block: many blocks, same count
    assert len(list(model.sentences(np.random.default_rng(3), 50))) == 50


def test_bad_arguments_are_one_line_errors_and_leave_nothing(tmp_path, capsys):
    (tmp_path / "taken").mkdir()
    cases = [(["--sentences", "0"], "--sentences"), (["--claim-scale", "0.00001"], "--claim-scale"),
             (["--source", str(tmp_path / "none.json")], "none.json")]
    for extra, words in cases:
        assert make_fever.main(["--out", str(tmp_path / "new"), "--source", str(SOURCE), *extra]) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and words in err and "Traceback" not in err
    assert make_fever.main(["--out", str(tmp_path / "taken"), "--source", str(SOURCE), "--sentences", "10"]) == 2
    assert "exists" in capsys.readouterr().err
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    assert make_fever.main(["--out", str(tmp_path / "link"), "--source", str(SOURCE), "--sentences", "10"]) == 2
    capsys.readouterr()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "taken"]  # no temporary left behind
