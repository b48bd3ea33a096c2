"""Crafted index files whose checksums were recomputed: refused in one line, never a crash.

Each case edits one array (or the manifest) of a copy of the demo index, reseals the
manifest as an attacker could, then runs ``verify`` and ``check --method tags``. The two
cases that crashed the code before the structural checks (``double free``: exit 134;
SIGSEGV in scipy's ``tocsc``: exit 139) run ``check`` in a child process, so the test
process survives them there; the others run in this process. ``verify`` must refuse
what ``check`` would choke on.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import joblib
import numpy as np
import pytest

from helpers import assert_one_line_error, in_process, reseal_index, run_cli


def _load(path: Path) -> dict:
    from factcheck.formats.safe_load import load_joblib_arrays
    return dict(load_joblib_arrays(path))


def _edit(index: Path, rel: str, change) -> None:
    obj = _load(index / rel)
    change(obj)
    joblib.dump(obj, index / rel)


def _shuffle_inner_offsets(o):
    inner = o["text_offsets"][1:-1].copy()
    np.random.default_rng(0).shuffle(inner)
    o["text_offsets"][1:-1] = inner


def _invalid_utf8(o):
    o["text_bytes"][o["text_offsets"][:-1]] = 0xFF  # every text starts with a byte UTF-8 never has


def _duplicate_term(o):
    from factcheck.tagging.packing import pack_strings, unpack_strings
    terms = unpack_strings(o["term_bytes"], o["term_offsets"])
    terms[1] = terms[0]
    o["term_bytes"], o["term_offsets"] = pack_strings(terms)


def _foreign_tag_term(o):
    from factcheck.tagging.packing import pack_strings, unpack_strings
    terms = unpack_strings(o["term_bytes"], o["term_offsets"])
    terms[0] = "zzzznotinthevocabulary"
    o["term_bytes"], o["term_offsets"] = pack_strings(terms)


TAGS, PASSAGES = "tags/tags-00000.joblib", "passages/passages-00000.joblib"
CRASHED = ("negative terms (double free before)", "indptr jumps (SIGSEGV in tocsc before)")
CASES = {
    # (file, change, what the one line names)
    "negative terms (double free before)": (TAGS, lambda o: o["terms"].__setitem__(slice(0, 5), -1), "negative"),
    "indptr jumps (SIGSEGV in tocsc before)": (TAGS, lambda o: o["indptr"].__setitem__(5, 999), "'indptr'"),
    "terms past the vocabulary": (TAGS, lambda o: o["terms"].__setitem__(0, 10**6), "'terms'"),
    "short indptr": (TAGS, lambda o: o.__setitem__("indptr", o["indptr"][:-1]), "'indptr'"),
    "float weights of another length": (TAGS, lambda o: o.__setitem__("weights", o["weights"][:3]), "'weights'"),
    "NaN weights": (TAGS, lambda o: o["weights"].__setitem__(0, np.nan), "'weights'"),
    "too many tags for top_k": (TAGS, lambda o: o.update(indptr=np.concatenate([[0], o["indptr"][2:], [o["indptr"][-1]]])),
                                "top_k"),
    "shuffled text offsets (wrong texts before)": (PASSAGES, _shuffle_inner_offsets, "'text_offsets'"),
    "float text bytes": (PASSAGES, lambda o: o.__setitem__("text_bytes", o["text_bytes"].astype(np.float64)),
                         "'text_bytes'"),
    "invalid UTF-8 text": (PASSAGES, _invalid_utf8, "UTF-8"),
    "a count the manifest does not say": (PASSAGES, lambda o: o.__setitem__("count", o["count"] - 1), "count"),
    "a term listed twice": ("models/passage_tfidf.joblib", _duplicate_term, "listed twice"),
    "a tag term outside the passage vocabulary": ("models/tag_tfidf.joblib", _foreign_tag_term, "passage vocabulary"),
    "a negative idf": ("models/tag_tfidf.joblib", lambda o: o["idf"].__setitem__(0, -1.0), "'idf'"),
}


@pytest.fixture()
def index(demo_index, tmp_path) -> Path:
    dest = tmp_path / "index"
    shutil.copytree(demo_index, dest, ignore=shutil.ignore_patterns("bm25", "rerank", "chunks"))
    return dest


@pytest.fixture(scope="module")
def model(demo_run) -> Path:
    return demo_run / "model"  # the session's shared demo run


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.slow) if c in CRASHED else c  # in a child
                                  for c in CASES])
def test_crafted_shard_is_refused_by_verify_and_by_every_reader(index, model, case):
    rel, change, named = CASES[case]
    _edit(index, rel, change)
    reseal_index(index)
    assert_one_line_error(in_process("verify", index), rel, named)
    run = run_cli if case in CRASHED else in_process
    proc = run("check", "--index", index, "--model", model, "--method", "tags", "Sea levels are rising.")
    assert_one_line_error(proc, rel, named)


@pytest.mark.parametrize("field, value", [("passages_file", "../outside.joblib"),
                                          ("tags_file", "/etc/passwd"), ("start", 1), ("passages", 10**9)])
def test_crafted_manifest_is_refused_before_any_file_it_names_is_read(index, tmp_path, field, value):
    """A manifest naming a file outside the index (sealed as an attacker could) used to be
    followed: ``verify`` hashed, and the readers loaded, whatever it named."""
    shutil.copy(index / PASSAGES, tmp_path / "outside.joblib")
    data = json.loads((index / "manifest.json").read_text("utf-8"))
    data["shards"][0][field] = value
    (index / "manifest.json").write_text(json.dumps(data), "utf-8")
    reseal_index(index)  # the sha256s of whatever the edited names point to
    assert_one_line_error(in_process("verify", index), "manifest.json", "not a well-formed manifest")


def test_the_index_still_loads_and_every_check_holds_on_a_real_corpus(real_sample_20k, tmp_path):
    """No false alarm: a real 20K-passage sample (non-ASCII text, empty tags) passes."""
    from factcheck.formats.evidence import source_spec
    from factcheck.tagging import store
    from factcheck.tagging.index import TagIndex
    from factcheck.tagging.job import TagJob
    out = tmp_path / "index"
    TagJob(progress=False, shard_size=7000).run(source_spec(real_sample_20k), out)
    store.check_loadable(out, store.verify_index(out))
    index = TagIndex.load(out)
    assert len(index) == 20000 and len(index.texts) == 20000
