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

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import assert_one_line_error, in_process, reseal_index, run_cli


def _edit(index: Path, folder: str, change) -> None:
    """``change(arrays)`` on the arrays of ``folder`` (name -> a writable copy), saved back."""
    arrays = {p.stem: np.load(p, allow_pickle=False) for p in (index / folder).glob("*.npy")}
    change(arrays)
    for name, a in arrays.items():
        np.save(index / folder / f"{name}.npy", a, allow_pickle=False)


def _shuffle_inner_offsets(o):
    inner = o["text_offsets"][1:-1].copy()
    np.random.default_rng(0).shuffle(inner)
    o["text_offsets"][1:-1] = inner


def _invalid_utf8(o):
    o["texts"][o["text_offsets"][:-1]] = 0xFF  # every text starts with a byte UTF-8 never has


def _cut_a_character(o):
    o["texts"][:2] = [0xC3, 0xA9]  # "é" starts the first text...
    o["text_offsets"][1] = 1  # ...and the second starts inside it


def _replace_terms(o, change, prefix=""):
    from factcheck.tagging.packing import pack_strings, unpack_strings
    terms = unpack_strings(o[f"{prefix}terms"], o[f"{prefix}term_offsets"])
    change(terms)
    o[f"{prefix}terms"], o[f"{prefix}term_offsets"] = pack_strings(terms)


class Payload:
    """Unpickling it creates ``marker``: proof that code ran."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


TAGS, PASSAGES, VOCABULARY = "tags/tags-00000", "passages/passages-00000", "vocabulary"
# Resealed with the manifest's shapes as they were: the header check names the array.
HEADER_CASES = ("short indptr", "weights of another length", "2-D indptr", "0-d terms")
CRASHED = ("negative terms (double free before)", "indptr jumps (SIGSEGV in tocsc before)")
CASES = {
    # (folder, change, file the one line names, what it says)
    "negative terms (double free before)": (TAGS, lambda o: o["terms"].__setitem__(slice(0, 5), -1), "terms.npy",
                                            "negative"),
    "indptr jumps (SIGSEGV in tocsc before)": (TAGS, lambda o: o["indptr"].__setitem__(5, 999), "indptr.npy",
                                               "indptr"),
    "terms past the vocabulary": (TAGS, lambda o: o["terms"].__setitem__(0, 10**6), "terms.npy", "vocabulary"),
    "short indptr": (TAGS, lambda o: o.__setitem__("indptr", o["indptr"][:-1]), "indptr.npy", "shape"),
    "weights of another length": (TAGS, lambda o: o.__setitem__("weights", o["weights"][:3]), "weights.npy", "shape"),
    "NaN weights": (TAGS, lambda o: o["weights"].__setitem__(0, np.nan), "weights.npy", "finite"),
    "too many tags for top_k": (TAGS, lambda o: o.update(indptr=np.concatenate([[0], o["indptr"][2:], [o["indptr"][-1]]])),
                                "indptr.npy", "top_k"),
    "big-endian weights": (TAGS, lambda o: o.__setitem__("weights", o["weights"].astype(">f8")), "weights.npy", ">f8"),
    "int64 terms": (TAGS, lambda o: o.__setitem__("terms", o["terms"].astype(np.int64)), "terms.npy", "<i8"),
    "2-D indptr": (TAGS, lambda o: o.__setitem__("indptr", o["indptr"].reshape(1, -1)), "indptr.npy", "shape"),
    "0-d terms": (TAGS, lambda o: o.__setitem__("terms", np.int32(3)), "terms.npy", "shape"),
    "shuffled text offsets (wrong texts before)": (PASSAGES, _shuffle_inner_offsets, "text_offsets.npy", "decreases"),
    "float text bytes": (PASSAGES, lambda o: o.__setitem__("texts", o["texts"].astype(np.float64)), "texts.npy",
                         "<f8"),
    "invalid UTF-8 text": (PASSAGES, _invalid_utf8, "texts.npy", "UTF-8"),
    "an offset inside a character": (PASSAGES, _cut_a_character, "text_offsets.npy", "UTF-8 character"),
    "a term listed twice": (VOCABULARY, lambda o: _replace_terms(o, lambda t: t.__setitem__(1, t[0])), "terms.npy",
                            "listed twice"),
    "a tag term outside the passage vocabulary": (
        VOCABULARY, lambda o: _replace_terms(o, lambda t: t.__setitem__(0, "zzzznotinthevocabulary"), "tag_"),
        "tag_terms.npy", "passage vocabulary"),
    "a negative idf": (VOCABULARY, lambda o: o["tag_idf"].__setitem__(0, -1.0), "tag_idf.npy", "positive"),
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
def test_crafted_array_is_refused_by_verify_and_by_every_reader(index, model, case):
    folder, change, name, named = CASES[case]
    _edit(index, folder, change)
    reseal_index(index, shapes=case not in HEADER_CASES)
    assert_one_line_error(in_process("verify", index), f"{folder}/{name}", named)
    run = run_cli if case in CRASHED else in_process
    proc = run("check", "--index", index, "--model", model, "--method", "tags", "Sea levels are rising.")
    assert_one_line_error(proc, f"{folder}/{name}", named)


@pytest.mark.parametrize("case", ["short indptr", "weights of another length"])
def test_crafted_shapes_in_the_manifest_too_are_refused(index, case):
    """The manifest resealed with the crafted shapes: its own relations refuse them."""
    folder, change, name, _ = CASES[case]
    _edit(index, folder, change)
    reseal_index(index, shapes=True)
    assert_one_line_error(in_process("verify", index), "manifest.json", f"{folder}")


def test_an_object_array_is_refused_without_unpickling_it(index, tmp_path):
    """``allow_pickle=False`` refuses it: the payload's ``__reduce__`` never runs."""
    marker = tmp_path / "pwned"
    np.save(index / TAGS / "terms.npy", np.array([Payload(marker)], dtype=object), allow_pickle=True)
    reseal_index(index)
    for command in (("verify", index), ("export-tags", index, "--out", tmp_path / "t.jsonl")):
        assert_one_line_error(in_process(*command), f"{TAGS}/terms.npy", "unreadable array")
    assert not marker.exists()


@pytest.mark.parametrize("field, value", [("files", {"../outside.npy": {"sha256": "0" * 64, "shape": [1]}}),
                                          ("start", 1), ("passages", 10**9), ("shape", [-1]), ("shape", [1, 2]),
                                          ("titles", "yes")])
def test_crafted_manifest_is_refused_before_any_file_it_names_is_read(index, tmp_path, field, value):
    """A manifest naming a file outside the index (sealed as an attacker could) used to be
    followed: ``verify`` hashed, and the readers loaded, whatever it named."""
    data = json.loads((index / "manifest.json").read_text("utf-8"))
    if field == "files":
        data["files"].update(value)
    elif field == "shape":
        data["files"][f"{TAGS}/terms.npy"]["shape"] = value
    elif field == "titles":
        data["titles"] = value
    else:
        data["shards"][0][field] = value
    (index / "manifest.json").write_text(json.dumps(data), "utf-8")
    reseal_index(index)
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


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shape=st.lists(st.integers(0, 4), max_size=3), dtype=st.sampled_from(["<i8", "|u1", "<f8", ">f4", "<c16"]),
       flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 7)), max_size=3),
       resize=st.integers(-24, 24))
def test_an_npy_file_is_mapped_only_when_it_is_exactly_what_its_header_says(tmp_path, shape, dtype, flips, resize):
    """Any bytes: ``open_npy`` maps exactly the data numpy's own reader finds, or refuses in
    one line naming the file; never an exception of another kind, never a longer or shorter file."""
    from factcheck.errors import InputError
    from factcheck.formats.npy import open_npy, read_header
    path = tmp_path / "a.npy"
    with open(path, "wb") as fh:
        np.save(fh, np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape), allow_pickle=False)
    data = bytearray(path.read_bytes())
    for at, bit in flips:
        data[at % len(data)] ^= 1 << bit
    data = data[:len(data) + resize] if resize < 0 else data + b"\0" * resize
    path.write_bytes(bytes(data))
    try:
        npy = open_npy(tmp_path, "a.npy")
    except InputError as exc:
        line = exc.one_line()
        assert line.startswith(str(path)) and "\n" not in line
        return
    reference = np.load(path, allow_pickle=False)  # numpy's own reader accepts it too...
    assert npy.array.dtype == reference.dtype and npy.array.shape == reference.shape
    assert npy.array.tobytes() == reference.tobytes()
    with open(path, "rb") as fh:  # ...and the file holds not a byte more than the header describes
        assert read_header(fh)[2] + npy.array.nbytes == len(data)
    assert not npy.array.flags.writeable
