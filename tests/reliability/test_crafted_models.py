"""Model files made only of trusted types, with crafted values: one line, never a crash;
and model files that are the same bytes for the same training.

Each case edits the loaded demo classifier (or reranker) and saves it back with skops, as
anyone who can write the model directory could (the reranker's sha256 is resealed in the
classifier's meta too). Before the checks: tracebacks from scikit-learn (a ``coef_`` of
the wrong shape, short ``classes_``, NaN weights), ``serve`` dying in its warm-up, a label
``<script>`` accepted, labels silently swapped, a 2.5 MB file inflating a 2 GiB ``coef_``.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import pytest

from helpers import ROOT, assert_one_line_error, in_process, run_cli

CLAIM = "Sea levels are rising."


def _load(path: Path):
    import skops.io as sio
    data = path.read_bytes()
    return sio.load(io.BytesIO(data), trusted=sio.get_untrusted_types(data=data))


def _dump(obj, path: Path) -> None:
    import skops.io as sio
    sio.dump(obj, path)  # plain skops, as an attacker would


@pytest.fixture()
def run(demo_run, tmp_path) -> Path:
    dest = tmp_path / "run"
    source = demo_run
    dest.mkdir()
    for name in ("model", "index"):
        shutil.copytree(source / name, dest / name, symlinks=True)
    return dest


def _lr(obj):
    return obj["model"].steps[1][1]


def _vec(obj):
    return obj["model"].steps[0][1].vectorizers_["claim"]


def _set_vocab(obj, value):
    vocabulary = _vec(obj).vocabulary_
    vocabulary[next(iter(vocabulary))] = value


def _script_label(obj):
    classes = _lr(obj).classes_.astype(object)
    classes[0] = "<script>alert(1)</script>"
    _lr(obj).classes_ = classes.astype(str)
    obj["meta"]["labels"][0] = classes[0]  # consistent with the meta: only the label itself is wrong


CLASSIFIER_CASES = {
    "coef_ of the wrong shape": lambda o: setattr(_lr(o), "coef_", _lr(o).coef_[:, :-1]),
    "all-NaN coef_": lambda o: _lr(o).coef_.fill(np.nan),
    "short classes_": lambda o: setattr(_lr(o), "classes_", _lr(o).classes_[:-1]),
    "classes_ reordered (every label wrong)": lambda o: setattr(_lr(o), "classes_", _lr(o).classes_[::-1]),
    "a <script> label": _script_label,
    "idf_ shorter than the vocabulary": lambda o: setattr(_vec(o)._tfidf, "idf_", _vec(o)._tfidf.idf_[:-1]),
    "a scaler for other features": lambda o: setattr(o["model"].steps[0][1].scaler_, "mean_", np.zeros(3)),
}


@pytest.mark.parametrize("case", list(CLASSIFIER_CASES))
def test_crafted_classifier_is_refused_in_one_line(run, case):
    path = run / "model" / "classifier.skops"
    obj = _load(path)
    CLASSIFIER_CASES[case](obj)
    _dump(obj, path)
    assert_one_line_error(in_process("check", "--run", run, CLAIM), "classifier.skops", "classifier")


def _repacked(edit):
    """Edit the claim vocabulary's terms and pack them again."""
    def packed(pair):
        from factcheck.tagging.packing import pack_strings, strings_of
        terms = strings_of(*pair)
        edit(terms)
        return pack_strings(terms)
    return packed


def _with(pair, at, value):
    buf, off = (a.copy() for a in pair)
    (buf if at == "buf" else off)[-1 if at == "offsets" else 0] = value
    return buf, off


VOCABULARY_CASES = {  # None: saved as a dict, as files before the packed vocabularies held it
    "a negative vocabulary column (a dict)": (lambda o: _set_vocab(o, -1), None),
    "a vocabulary column past the idf (a dict)": (lambda o: _set_vocab(o, 10**6), None),
    "a term twice in a packed vocabulary": (None, _repacked(lambda t: t.__setitem__(0, t[1]))),
    "a packed vocabulary one term short of the idf": (None, _repacked(lambda t: t.pop())),
    "packed offsets past the buffer": (None, lambda pair: _with(pair, "offsets", len(pair[0]) + 5)),
    "a packed vocabulary that is not UTF-8": (None, lambda pair: _with(pair, "buf", 0xFF)),
}


@pytest.mark.parametrize("case", list(VOCABULARY_CASES))
def test_crafted_vocabulary_is_refused_in_one_line(run, case, monkeypatch):
    """The vocabularies are saved packed, and older files held dicts: both are checked."""
    from sklearn.base import BaseEstimator
    from factcheck.classification.features import ClaimEvidenceFeatures
    edit, edit_packed = VOCABULARY_CASES[case]
    path = run / "model" / "classifier.skops"
    obj = _load(path)
    if edit_packed is None:
        monkeypatch.setattr(ClaimEvidenceFeatures, "__getstate__", BaseEstimator.__getstate__)
        edit(obj)
    else:
        packing = ClaimEvidenceFeatures.__getstate__

        def getstate(self):
            state = packing(self)
            return {**state, "vocabularies_": {**state["vocabularies_"],
                                               "claim": edit_packed(state["vocabularies_"]["claim"])}}
        monkeypatch.setattr(ClaimEvidenceFeatures, "__getstate__", getstate)
    _dump(obj, path)
    monkeypatch.undo()
    assert_one_line_error(in_process("check", "--run", run, CLAIM), "classifier.skops", "classifier")


def test_a_dict_vocabulary_as_older_files_hold_it_still_loads(run, monkeypatch):
    """A classifier saved before the packed vocabularies gives the same verdict."""
    from sklearn.base import BaseEstimator
    from factcheck.classification.features import ClaimEvidenceFeatures
    before = in_process("check", "--run", run, CLAIM)
    path = run / "model" / "classifier.skops"
    obj = _load(path)
    with monkeypatch.context() as m:
        m.setattr(ClaimEvidenceFeatures, "__getstate__", BaseEstimator.__getstate__)
        _dump(obj, path)
    assert b"vocabularies_" not in zipfile.ZipFile(path).read("schema.json")
    after = in_process("check", "--run", run, CLAIM)
    assert (after.returncode, after.stdout) == (0, before.stdout)


def _tree(obj):
    """The first tree, made a valid three-node tree (a split on feature 0 and two leaves:
    the demo's trees are single leaves) for the edits below to break."""
    predictor = obj["model"].clf._predictors[0][0]
    nodes = np.zeros(3, dtype=predictor.nodes.dtype)
    nodes["is_leaf"] = [0, 1, 1]
    nodes["left"][0], nodes["right"][0] = 1, 2
    nodes["num_threshold"][0] = 0.5
    nodes["value"] = [0.0, -0.1, 0.1]
    predictor.nodes = nodes
    return nodes


def _reseal_rerank(run: Path) -> None:
    """Record the edited reranker's sha256 in the classifier's meta, as an attacker could."""
    from factcheck.formats.files import sha256_file
    path = run / "model" / "classifier.skops"
    obj = _load(path)
    obj["meta"]["rerank_sha256"] = sha256_file(run / "model" / "rerank.skops")
    _dump(obj, path)


RERANK_CASES = {  # (edit, run check in a child process: the compiled predictor reads out of bounds)
    "a valid three-node tree (accepted)": (lambda o: _tree(o), False),
    "a tree child outside the tree": (lambda o: _tree(o)["left"].__setitem__(0, 10**6), True),
    "a tree child pointing back (a loop)": (lambda o: _tree(o)["left"].__setitem__(0, 0), True),
    "a split on a feature the model has not": (lambda o: _tree(o)["feature_idx"].__setitem__(0, 10**4), True),
    "a negative candidate depth": (lambda o: o["candidates"].__setitem__("depth", -5), False),
    "feature columns past the features": (lambda o: o["model"]._cols.__setitem__(0, 999), False),
    "memory offsets that do not line up": (lambda o: o["memory"].__setitem__(
        "evidence_offsets", o["memory"]["evidence_offsets"][:-1]), False),
    "memory stems that do not line up": (lambda o: o["memory"].__setitem__(
        "stem_offsets", o["memory"]["stem_offsets"][:-1]), False),
    "memory texts cut inside a character": (lambda o: o["memory"].__setitem__(
        "texts", (np.frombuffer("é".encode() * 3, dtype=np.uint8).copy(), np.array([0, 1, 6], dtype=np.int64))),
        False),
    "memory lists that do not line up (format /2)": (lambda o: o.update(format="factcheck-rerank/2", memory={
        "claim_ids": ["a", "b"], "texts": ["x"], "evidences": [[], []]}), False),
}


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.slow) if RERANK_CASES[c][1] else c  # in a child
                                  for c in RERANK_CASES])
def test_crafted_reranker_is_refused_in_one_line(run, case):
    edit, child = RERANK_CASES[case]
    path = run / "model" / "rerank.skops"
    obj = _load(path)
    edit(obj)
    _dump(obj, path)
    _reseal_rerank(run)
    argv = ("check", "--run", run, "--method", "rerank", CLAIM)
    proc = run_cli(*argv, timeout=120) if child else in_process(*argv)
    if case.endswith("(accepted)"):  # the checks refuse what is broken, not what is unusual
        assert proc.returncode == 0, proc.stderr
        return
    assert_one_line_error(proc, "rerank.skops", "reranker")


def _bomb(path: Path, coef_bytes: int) -> None:
    """Replace the classifier's ``coef_`` by a deflated array of ``coef_bytes`` bytes of
    zeros (zipfile streams it in; zeros deflate ~1000:1)."""
    import json
    src = zipfile.ZipFile(io.BytesIO(path.read_bytes()))
    rows = _lr(_load(path)).coef_.shape[0]
    found = []

    def walk(node):
        if isinstance(node, dict):
            if isinstance(node.get("coef_"), dict):
                found.append(node["coef_"]["file"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
    walk(json.loads(src.read("schema.json")))
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False,
                                                  "shape": (rows, coef_bytes // (8 * rows))})
    zeros = bytes(1 << 24)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compresslevel=1) as dst:
        for info in src.infolist():
            if info.filename != found[0]:
                dst.writestr(info, src.read(info))
                continue
            entry = zipfile.ZipInfo(info.filename)
            entry.compress_type = zipfile.ZIP_DEFLATED
            with dst.open(entry, "w", force_zip64=True) as fh:
                fh.write(header.getvalue())
                for _ in range(coef_bytes // len(zeros)):
                    fh.write(zeros)
    path.write_bytes(out.getvalue())


def test_a_model_that_would_inflate_past_the_limit_is_refused_before_inflating(run, monkeypatch):
    from factcheck.formats import safe_load
    monkeypatch.setattr(safe_load, "MODEL_SIZE_LIMIT", 32 << 20, raising=False)
    path = run / "model" / "classifier.skops"
    _bomb(path, 64 << 20)
    assert path.stat().st_size < 2 << 20
    assert_one_line_error(in_process("check", "--run", run, CLAIM), "classifier.skops", "more than the limit")


@pytest.mark.slow
def test_a_2_gib_coef_in_a_small_file_is_refused_with_the_default_limit(run):
    """The finding itself (a 2.5 MB file reached 4.4 GB before a traceback), in a child
    process capped at 1.5 GB of address space so the code before the cap fails fast."""
    path = run / "model" / "classifier.skops"
    _bomb(path, 2 << 30)
    assert path.stat().st_size < 8 << 20
    code = textwrap.dedent(f"""
        import resource, sys
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
        from factcheck.cli import main
        sys.exit(main(["check", "--run", {str(run)!r}, {CLAIM!r}]))
    """)
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert_one_line_error(proc, "classifier.skops", "more than the limit")


# ---------------------------------------------------------------------- byte-reproducible model files

FIT_AND_SAVE = """
    import sys
    from factcheck.classification.model import make_classifier, save_classifier
    from factcheck.formats.claims import read_claims
    claims = read_claims("data/demo/train-claims.json", require_labels=True)
    X = [(c.text, [c.text.split()[0]]) for c in claims]
    model = make_classifier(class_weight="balanced").fit(X, [c.label for c in claims])
    save_classifier(model, sys.argv[1], {"retriever": {"method": "bm25"}})
"""


@pytest.mark.slow
def test_the_same_training_gives_the_same_model_bytes_in_two_processes(tmp_path):
    """Before: skops wrote id() values and the current time (the files always differed)."""
    for name in ("a", "b"):
        proc = subprocess.run([sys.executable, "-c", textwrap.dedent(FIT_AND_SAVE), str(tmp_path / name)], cwd=ROOT,
                              capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "a" / "classifier.skops").read_bytes() == (tmp_path / "b" / "classifier.skops").read_bytes()


def test_canonical_files_load_the_same_model(run):
    """What is loaded does not change: the canonical file and skops's own give equal
    objects (the same predictions, and the same canonical bytes when saved again)."""
    import skops.io as sio

    from factcheck.formats.safe_load import canonical_skops
    obj = _load(run / "model" / "classifier.skops")
    plain = sio.dumps(obj)
    canon = canonical_skops(plain)
    assert canon != plain
    a = sio.load(io.BytesIO(plain), trusted=sio.get_untrusted_types(data=plain))
    b = sio.load(io.BytesIO(canon), trusted=sio.get_untrusted_types(data=canon))
    X = [(CLAIM, ["The sea level rose."]), ("CO2 is plant food.", [])]
    assert np.array_equal(a["model"].predict_proba(X), b["model"].predict_proba(X))
    assert canonical_skops(sio.dumps(a)) == canonical_skops(sio.dumps(b)) == canon
    assert zipfile.ZipFile(io.BytesIO(canon)).infolist()[0].date_time == (1980, 1, 1, 0, 0, 0)
