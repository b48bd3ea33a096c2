"""An index built in memory (``factcheck.build_index(passages)`` without a directory): the
tagging job's arrays without its files, accepted wherever an index is, saved as ``tag``
writes one."""

from __future__ import annotations

import json
import sys
import tempfile
import types
from pathlib import Path

import pytest
from sklearn.base import clone

import factcheck
from factcheck.formats.evidence import source_spec
from factcheck.tagging.index import TagIndex
from factcheck.tagging.job import TagJob

from helpers import DEMO

PASSAGES = {"p1": "Sea levels are rising faster than before.", "p2": "Arctic sea ice shrinks each September.",
            "p3": "Cats sleep most of the day.", "p4": "More carbon dioxide can increase crop growth.",
            "p5": "Glaciers retreat as the climate warms."}
QUERIES = ["sea level rise", "cat", "Arctic ice", "nothing in common xyzzy"]


def files_of(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def tagged(tmp_path, passages: dict, name="tagged", **kw) -> Path:
    src = tmp_path / f"{name}.jsonl"
    src.write_text("".join(json.dumps({"id": k, "text": v}) + "\n" for k, v in passages.items()), encoding="utf-8")
    TagJob(progress=False, **kw).run(source_spec(src), tmp_path / name)
    return tmp_path / name


def retrievers():
    return [factcheck.BM25Retriever(k=3), factcheck.TfidfRetriever(k=3), factcheck.TagRuleRetriever(0.1, 0.1, 3),
            factcheck.ChunkedRetriever(factcheck.BM25Retriever(k=2), window=4, overlap=1)]


def test_a_list_a_dict_and_a_file_build_in_memory_and_every_retriever_fits_them(tmp_path):
    listed = factcheck.build_index(list(PASSAGES.values()))
    assert listed.root is None and list(listed.ids) == ["0", "1", "2", "3", "4"]
    assert listed.text(2) == PASSAGES["p3"] and "in memory" in repr(listed)
    index = factcheck.build_index(PASSAGES)
    disk = TagIndex.load(tagged(tmp_path, PASSAGES))
    assert list(index.ids) == list(PASSAGES) and index.tags(2) == disk.tags(2)
    for retriever in retrievers():
        got = [s.to_json() for s in clone(retriever).fit(index).retrieve(QUERIES, depth=4)]
        want = [s.to_json() for s in clone(retriever).fit(disk).retrieve(QUERIES, depth=4)]
        assert got == want, retriever
    found = factcheck.search(index, "sea level rise", k=2)
    assert found[0].id == "p1" and found[0].text == PASSAGES["p1"]
    judged = factcheck.judged_retrieval(index, {"q": "cats"}, {"q": {"p3": 1}}, k=3, progress=False)
    assert judged.metrics["recall@1"].value == 1.0
    from_file = factcheck.build_index(DEMO / "evidence.json")
    assert from_file.root is None and len(from_file) == 40


def test_saved_in_memory_index_is_byte_for_byte_what_tag_writes(tmp_path):
    # The same file: every byte, the manifest included (the same plan key, so the same caches).
    factcheck.build_index(DEMO / "evidence.json", shard_size=16).save(tmp_path / "saved")
    TagJob(progress=False, shard_size=16).run(source_spec(DEMO / "evidence.json"), tmp_path / "tagged")
    assert files_of(tmp_path / "saved") == files_of(tmp_path / "tagged")
    # Passages given in memory: the same arrays (their manifest describes no file).
    factcheck.build_index(PASSAGES).save(tmp_path / "dict")
    tagged(tmp_path, PASSAGES, "from-file")
    saved, tag = files_of(tmp_path / "dict"), files_of(tmp_path / "from-file")
    assert saved.keys() == tag.keys()
    assert {k: v for k, v in saved.items() if k != "manifest.json"} == \
        {k: v for k, v in tag.items() if k != "manifest.json"}
    reopened = TagIndex.load(tmp_path / "dict")  # verified, memory-mapped
    assert reopened.root == tmp_path / "dict" and list(reopened.ids) == list(PASSAGES)
    reopened.save(tmp_path / "copy")  # an index opened from a directory saves as well
    assert files_of(tmp_path / "copy") == saved
    assert json.loads(saved["manifest.json"])["input"]["format"] == "memory"


def test_build_index_with_out_saves_and_reopens_and_save_keeps_or_refuses(tmp_path):
    index = factcheck.build_index(PASSAGES, tmp_path / "idx")
    assert index.root == tmp_path / "idx" and (tmp_path / "idx" / "manifest.json").is_file()
    again = factcheck.build_index(PASSAGES)
    assert again.save(tmp_path / "idx") == tmp_path / "idx"  # the same index: kept
    with pytest.raises(factcheck.InputError, match="holds another index"):
        factcheck.build_index(["Glaciers melt."]).save(tmp_path / "idx")
    factcheck.build_index(["Glaciers melt."]).save(tmp_path / "idx", force=True)
    assert list(TagIndex.load(tmp_path / "idx").ids) == ["0"]
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(factcheck.InputError, match="did not write"):
        again.save(tmp_path / "busy")
    assert (tmp_path / "busy" / "notes.txt").read_text() == "mine"
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(factcheck.InputError, match="symbolic link"):
        again.save(tmp_path / "link")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["busy", "idx", "link"]  # no temporaries left


def test_in_memory_work_writes_no_file(tmp_path, monkeypatch):
    scratch, cwd = tmp_path / "tmp", tmp_path / "cwd"
    scratch.mkdir()
    cwd.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    monkeypatch.chdir(cwd)
    index = factcheck.build_index(PASSAGES)
    for retriever in retrievers():
        retriever.fit(index).retrieve(QUERIES, depth=3)
    factcheck.search(index, "cats")
    assert list(scratch.iterdir()) == [] and list(cwd.iterdir()) == []


class _Column:
    def __init__(self, values):
        self.values = values

    def tolist(self):
        return list(self.values)


class _Frame:
    """What the reader uses of a pandas DataFrame: ``columns``, ``len`` and ``frame[column].tolist()``."""

    def __init__(self, data: dict):
        self.data = data
        self.columns = list(data)

    def __len__(self):
        return len(next(iter(self.data.values())))

    def __getitem__(self, column):
        return _Column(self.data[column])


@pytest.fixture
def stand_in_pandas(monkeypatch):
    """pandas may not be installed: a module named pandas whose DataFrame is :class:`_Frame`."""
    real = sys.modules.get("pandas")
    if real is not None:
        return real.DataFrame
    monkeypatch.setitem(sys.modules, "pandas", types.SimpleNamespace(DataFrame=_Frame))
    return _Frame


def test_a_data_frame_gives_ids_texts_and_titles_by_column(stand_in_pandas):
    frame = stand_in_pandas({"id": [11, 12, 13], "title": ["Sea level", "Cats", float("nan")],
                             "abstract": ["Seas rise.", "Cats nap.", "Dogs bark."]})
    index = factcheck.build_index(frame, text_column="abstract")
    assert list(index.ids) == ["11", "12", "13"] and index.title(1) == "Cats" and index.text(1) == "Cats nap."
    assert index.title(2) is None  # a missing title (NaN) is none
    assert factcheck.search(index, "cat")[0].title == "Cats"
    titled = factcheck.build_index(frame, text_column="abstract", index_titles=True)
    assert titled.text(0) == "Sea level\nSeas rise."
    no_id = factcheck.build_index(stand_in_pandas({"text": ["a cat", "a dog"]}))
    assert list(no_id.ids) == ["0", "1"] and not no_id.has_titles
    with pytest.raises(factcheck.InputError, match="text_column: no column 'body'"):
        factcheck.build_index(frame, text_column="body")
    with pytest.raises(factcheck.InputError, match="row 1 of evidence: 'abstract' must be a string"):
        factcheck.build_index(stand_in_pandas({"id": ["a", "b"], "abstract": ["x", float("nan")]}),
                              text_column="abstract")


@pytest.mark.parametrize("evidence, options, message", [
    ([], {}, "evidence: no passages"),
    (["a", 3], {}, "evidence[1]: a passage's text must be a string, got a number"),
    ({"a": "x", "": "y"}, {}, "evidence['']: 'the key' is empty"),
    (["cats"], {"text_column": "body"}, "text_column: applies to a file or a DataFrame"),
    (["cats"], {"format": "csv"}, "format: applies to a file"),
    (["cats"], {"index_titles": True}, "index_titles: evidence has no titles"),
    (["cats" * 10], {"max_passage_chars": 5}, "more than this limit"),
    (["the and of", ""], {}, "evidence: no passage contains a word to tag"),
    (["cats"], {"top_k": 0}, "top_k: must be at least 1, got 0"),
])
def test_bad_passages_in_memory_are_one_line_errors_naming_the_parameter(evidence, options, message):
    with pytest.raises(factcheck.InputError) as err:
        factcheck.build_index(evidence, **options)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_duplicate_ids_in_a_frame_are_refused(stand_in_pandas):
    with pytest.raises(factcheck.InputError, match=r"duplicate passage id 'a' \(first seen at row 0\)"):
        factcheck.build_index(stand_in_pandas({"id": ["a", "a"], "text": ["x", "y"]}))


def test_dense_retrieval_needs_a_saved_index_with_vectors():
    with pytest.raises(factcheck.InputError, match="index: the dense retriever reads the passage vectors"):
        factcheck.DenseRetriever().fit(factcheck.build_index(PASSAGES))


def test_self_retrieval_of_a_data_frame_or_an_index_equals_that_of_the_csv(tmp_path, stand_in_pandas):
    rows = {"id": ["d1", "d2", "d3"], "title": ["Sea level rise", "Arctic sea ice decline", ""],
            "abstract": ["Global mean sea level rose about 20 cm.", "Satellites show Arctic sea ice shrinking.",
                         "More carbon dioxide can increase crop growth."]}
    csv = tmp_path / "papers.csv"
    csv.write_text("id,title,abstract\n" + "".join(f"{i},{t},{a}\n" for i, t, a in zip(*rows.values())),
                   encoding="utf-8")
    options = {"methods": ("tfidf", "bm25"), "chunk_window": 4, "chunk_overlap": 1, "progress": False}
    from_csv = factcheck.self_retrieval(csv, "title", text_column="abstract", **options)
    frame = factcheck.self_retrieval(stand_in_pandas(rows), "title", text_column="abstract", **options)
    index = factcheck.build_index(stand_in_pandas(rows), text_column="abstract")
    from_index = factcheck.self_retrieval(index, "title", **options)
    for result in (frame, from_index):
        assert (result.queries, result.skipped_empty) == (from_csv.queries, from_csv.skipped_empty) == (2, 1)
        assert [(r.method, r.units, r.metrics) for r in result.results] == \
            [(r.method, r.units, r.metrics) for r in from_csv.results]
    assert frame.corpus["format"] == "DataFrame" and from_index.corpus["format"] == "index"
    with pytest.raises(factcheck.InputError, match="query_column: an index's queries are its stored titles"):
        factcheck.self_retrieval(factcheck.build_index(PASSAGES), "title")
    with pytest.raises(factcheck.InputError, match="source: a self-retrieval test reads each row's query"):
        factcheck.self_retrieval(list(PASSAGES.values()), "title")
    with pytest.raises(factcheck.InputError, match="query_column abstract: the query column must not be the id"):
        factcheck.self_retrieval(stand_in_pandas(rows), "abstract", text_column="abstract")


def test_a_reranker_trains_and_ranks_on_an_in_memory_index_as_on_disk(demo_index):
    from factcheck.formats.claims import read_claims
    from factcheck.formats.splits import train_holdout_split
    from factcheck.retrieval.rerank.candidates import CandidateConfig
    from factcheck.retrieval.rerank.model import ModelConfig
    from factcheck.training.rerank import train_reranker
    fit, holdout = train_holdout_split(read_claims(DEMO / "train-claims.json"))
    grid = (ModelConfig(learning_rate=0.1, max_iter=20, max_leaf_nodes=7, min_samples_leaf=5, negative_rate=1.0),)
    claims = ["Sea levels are rising.", "Arctic ice is melting.", "zzz qqq"]
    found = []
    for index in (factcheck.build_index(DEMO / "evidence.json"), TagIndex.load(demo_index)):
        reranker = train_reranker(index, fit, holdout, configs=(CandidateConfig(memory_k=5),), grid=grid)
        found.append([s.to_json() for s in reranker.retrieve(claims, depth=5)])
    assert found[0] == found[1]


def test_save_replaces_a_damaged_copy_only_with_force_and_never_writes_through_a_link(tmp_path):
    index = factcheck.build_index(PASSAGES)
    index.save(tmp_path / "idx")
    damaged = next((tmp_path / "idx" / "passages").rglob("texts.npy"))
    damaged.write_bytes(damaged.read_bytes()[:-1] + b"!")
    with pytest.raises(factcheck.InputError, match="holds another index \\(or a damaged one\\)"):
        index.save(tmp_path / "idx")
    index.save(tmp_path / "idx", force=True)
    assert files_of(tmp_path / "idx") == files_of(index.save(tmp_path / "fresh"))
    target = tmp_path / "target"
    index.save(target)
    (tmp_path / "link").symlink_to(target)
    for force in (False, True):
        with pytest.raises(factcheck.InputError, match="symbolic link"):
            factcheck.build_index(["Glaciers melt."]).save(tmp_path / "link", force=force)
    assert list(TagIndex.load(target).ids) == list(PASSAGES)


UNICODE = ["Ça fond: les glaciers reculent, naïve café résumé.", "東京 sea levels rise; Straße über Øresund.",
           "the of 42 and", "", "Cats sleep; CATS slept, a cat's nap.", "Ελληνικά κείμενα και ρίζες."]


@pytest.mark.parametrize("titles", [None, "stored", "indexed"])
def test_bm25_takes_the_in_memory_build_counts_the_same_arrays_as_counting_again(stand_in_pandas, titles):
    from factcheck.retrieval.bm25 import corpus_counts
    from factcheck.scoring.counting import count_corpus
    ids = [f"p{i}" for i in range(len(UNICODE))]
    if titles is None:
        index = factcheck.build_index(dict(zip(ids, UNICODE)), shard_size=2)
    else:
        frame = stand_in_pandas({"id": ids, "text": UNICODE,
                                 "title": ["Glaciers", "", "Nombres", "Vide", "Chats", "Ρίζα"]})
        index = factcheck.build_index(frame, title_column="title", index_titles=titles == "indexed", shard_size=2)
        assert index.has_titles and index.index_titles == (titles == "indexed")
    want = count_corpus(index.text_batches())  # what a fit counted before the build handed its counts over
    got = corpus_counts(index)
    assert index.take_stem_counts() is None  # handed over once: the index holds no second copy
    assert got.terms == want.terms and got.counts.n_units == want.counts.n_units == len(UNICODE)
    for a, b in [(got.counts.indptr, want.counts.indptr), (got.counts.indices, want.counts.indices),
                 (got.counts.data, want.counts.data), (got.lengths, want.lengths)]:
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    assert corpus_counts(index) is got  # later fits share it


def test_passages_in_memory_are_recorded_by_the_checksum_of_the_whole_whatever_the_shards(stand_in_pandas):
    from factcheck.tagging import store
    from factcheck.tagging.memory import collection_record
    ids = [f"p{i}" for i in range(len(UNICODE))]
    titles = ["Glaciers", "", "Nombres", "Vide", "Chats", "Ρίζα"]
    whole = [store.passage_arrays(ids, UNICODE, titles)]
    for size in (1, 4, 100):
        index = factcheck.build_index(stand_in_pandas({"id": ids, "text": UNICODE, "title": titles}),
                                      title_column="title", shard_size=size)
        assert index.manifest.data["input"] == collection_record(whole, True, False)
        untitled = factcheck.build_index(dict(zip(ids, UNICODE)), shard_size=size)
        assert untitled.manifest.data["input"] == collection_record([store.passage_arrays(ids, UNICODE)], False, False)
