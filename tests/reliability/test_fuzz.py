"""Fuzz: random damage to the arrays of a small real index and model, as anyone who can write
the directories could do it (checksums and the reranker's sha256 resealed), then
``factcheck check --json``. The index's ``.npy`` files are also crafted whole (object,
big-endian, 2-D Fortran-order and 0-d arrays, headers claiming huge shapes, files cut
short under the memory map), and so is its manifest. The answer must be one line and exit 2, or exit 0 with a
well-formed verdict (a label of the model's, evidence ids of the index, one finite
probability per label summing to 1) -- never a signal, never a traceback.

Each example runs in a forked child of this process (the index and model files are
prepared here), so a crash is seen as the child's signal instead of ending the test run.
Hypothesis draws reproducibly (``derandomize``): the same examples on every machine.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings, strategies as st

from helpers import reseal_index

CLAIM = "Sea levels are rising because of melting glaciers."


# ---------------------------------------------------------------------- mutations of one array

def _mutate(a, how: str, at: int, value) -> object:
    """``a`` changed one way: a value set, cut short, grown, cast, reshaped, shuffled."""
    a = np.array(a, copy=True)
    flat = a.reshape(-1) if a.size else a
    if how == "set" and a.size and not a.dtype.names:
        try:
            flat[at % a.size] = value
        except (ValueError, OverflowError, TypeError):
            flat[at % a.size] = np.array(value).astype(a.dtype, casting="unsafe") if a.dtype.kind != "U" else "x"
        return a
    if how == "set" and a.size and a.dtype.names:
        field = a.dtype.names[at % len(a.dtype.names)]
        try:
            a[field][at % len(a)] = value
        except (ValueError, OverflowError, TypeError):
            pass
        return a
    if how == "truncate":
        return a[: at % (len(a) + 1)] if a.ndim else a
    if how == "grow":
        return np.concatenate([a, a[: 1 + at % max(len(a), 1)]]) if a.ndim and len(a) else a
    if how == "cast":
        target = [np.int32, np.int64, np.float64, np.float32, np.uint8, np.int8][at % 6]
        try:
            return a.astype(target)
        except (ValueError, TypeError):
            return a
    if how == "reshape":
        return a.reshape(1, -1) if a.ndim == 1 else a.reshape(-1)
    if how == "shuffle" and a.ndim and len(a) > 1:
        np.random.default_rng(at).shuffle(a)
        return a
    return a


MUTATIONS = st.tuples(st.sampled_from(["set", "set", "set", "truncate", "grow", "cast", "reshape", "shuffle"]),
                      st.integers(0, 10**6),
                      st.one_of(st.integers(-2**40, 2**40), st.sampled_from([-1, 0, 1, 2**31, np.nan, np.inf, -np.inf]),
                                st.floats(allow_nan=True, allow_infinity=True)))


# ---------------------------------------------------------------------- what can be damaged

INDEX_ARRAYS = [("tags/tags-00000", key) for key in ("indptr", "terms", "weights")] + \
               [("passages/passages-00000", key) for key in ("id_offsets", "text_offsets", "texts", "ids")] + \
               [("vocabulary", key) for key in ("idf", "term_offsets", "tag_idf", "tag_terms")]
INDEX_TARGETS = [(folder, key, how) for folder, key in INDEX_ARRAYS for how in ("values", "file")]
FILE_CRAFTS = ["object", "big-endian", "fortran 2-D", "0-d", "huge shape", "cut short", "header byte"]


def _craft_file(path: Path, how: str, at: int) -> None:
    """Replace the ``.npy`` file at ``path`` by one crafted ``how``."""
    a = np.load(path, allow_pickle=False)
    if how == "object":
        np.save(path, np.array([a[:1].tolist(), None], dtype=object), allow_pickle=True)
    elif how == "big-endian":
        np.save(path, a.astype(a.dtype.newbyteorder(">")), allow_pickle=False)
    elif how == "fortran 2-D":
        np.save(path, np.asfortranarray(np.stack([a, a])), allow_pickle=False)
    elif how == "0-d":
        np.save(path, a[0] if len(a) else a.dtype.type(0), allow_pickle=False)
    elif how == "huge shape":  # the header claims far more than the file holds
        with open(path, "wb") as fh:
            np.lib.format.write_array_header_1_0(fh, {"descr": np.lib.format.dtype_to_descr(a.dtype),
                                                      "fortran_order": False, "shape": (2 ** 40 + at,)})
            fh.write(a.tobytes())
    else:
        data = bytearray(path.read_bytes())
        if how == "cut short":
            data = data[: at % len(data)]
        else:  # one byte of the header's text changed
            data[10 + at % 60] = b"( ),:'0123456789<>|fiuObFalseTrue"[at % 33]
        path.write_bytes(bytes(data))


MANIFEST_VALUES = st.one_of(st.integers(-2**63, 2**63), st.sampled_from([None, True, "", "x", [], {}, [2**40], 1.5]),
                            st.text(max_size=20))


def _leaves(node, path=()):
    """Every (path, value) of a JSON tree, containers included."""
    yield path, node
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in items:
        yield from _leaves(value, path + (key,))


def _lr(o):
    return o["model"].steps[1][1]


def _features(o):
    return o["model"].steps[0][1]


CLASSIFIER_TARGETS = {
    "coef_": (lambda o: _lr(o).coef_, lambda o, v: setattr(_lr(o), "coef_", v)),
    "intercept_": (lambda o: _lr(o).intercept_, lambda o, v: setattr(_lr(o), "intercept_", v)),
    "classes_": (lambda o: _lr(o).classes_, lambda o, v: setattr(_lr(o), "classes_", v)),
    "claim idf_": (lambda o: _features(o).vectorizers_["claim"]._tfidf.idf_,
                   lambda o, v: setattr(_features(o).vectorizers_["claim"]._tfidf, "idf_", v)),
    "evidence vocabulary_": (lambda o: np.array(list(_features(o).vectorizers_["evidence"].vocabulary_.values())),
                             lambda o, v: _set_vocabulary(_features(o).vectorizers_["evidence"], v)),
    "scaler mean_": (lambda o: _features(o).scaler_.mean_, lambda o, v: setattr(_features(o).scaler_, "mean_", v)),
    "scaler scale_": (lambda o: _features(o).scaler_.scale_, lambda o, v: setattr(_features(o).scaler_, "scale_", v)),
}


def _set_vocabulary(vectorizer, values) -> None:
    keys = list(vectorizer.vocabulary_)
    values = np.asarray(values).reshape(-1).tolist()
    vectorizer.vocabulary_ = {k: (int(v) if isinstance(v, (int, float)) and np.isfinite(v) else v)
                              for k, v in zip(keys, values)}


def _tree(o):
    return o["model"].clf._predictors[0][0]


RERANK_TARGETS = {
    "tree nodes": (lambda o: _tree(o).nodes, lambda o, v: setattr(_tree(o), "nodes", v)),
    "feature columns": (lambda o: o["model"]._cols, lambda o, v: setattr(o["model"], "_cols", v)),
    "baseline": (lambda o: o["model"].clf._baseline_prediction,
                 lambda o, v: setattr(o["model"].clf, "_baseline_prediction", v)),
    "bin mapper categorical": (lambda o: o["model"].clf._bin_mapper.is_categorical_,
                               lambda o, v: setattr(o["model"].clf._bin_mapper, "is_categorical_", v)),
}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory, demo_run) -> Path:
    """A copy of the session's demo run: the index (with its derived caches, so each
    example does not rebuild them) and the model."""
    source = demo_run
    dest = tmp_path_factory.mktemp("fuzz") / "run"
    dest.mkdir()
    for name in ("index", "model"):
        shutil.copytree(source / name, dest / name)
    return dest


def _skops(path: Path):
    import skops.io as sio
    data = path.read_bytes()
    return sio.load(io.BytesIO(data), trusted=sio.get_untrusted_types(data=data))


def _dump(obj, path: Path) -> None:
    import skops.io as sio
    sio.dump(obj, path)


def _reseal_rerank(run: Path) -> None:
    from factcheck.formats.files import sha256_file
    obj = _skops(run / "model" / "classifier.skops")
    obj["meta"]["rerank_sha256"] = sha256_file(run / "model" / "rerank.skops")
    _dump(obj, run / "model" / "classifier.skops")


def _damage(run: Path, target, mutation) -> str | None:
    """Apply one mutation; the retriever the check should use, or None when it cannot apply."""
    kind, what = target
    how, at, value = mutation
    if kind == "index":
        folder, key, craft = what
        path = run / "index" / folder / f"{key}.npy"
        if craft == "values":
            np.save(path, _mutate(np.load(path, allow_pickle=False), how, at, value), allow_pickle=False)
        else:
            _craft_file(path, FILE_CRAFTS[at % len(FILE_CRAFTS)], at)
        reseal_index(run / "index", shapes=bool(at % 2))
        return "tags" if folder.startswith("tags") or at % 3 == 0 else "bm25"
    if kind == "manifest":
        from factcheck.tagging import store
        data = json.loads((run / "index" / "manifest.json").read_text("utf-8"))
        data.pop(store.MANIFEST_CHECKSUM)
        leaves = [p for p, _ in _leaves(data) if p]
        *parent, last = leaves[at % len(leaves)]
        node = data
        for key in parent:
            node = node[key]
        node[last] = value if how != "truncate" else None
        store.write_manifest(run / "index", data)
        return "tags" if at % 2 else "bm25"
    targets = CLASSIFIER_TARGETS if kind == "classifier" else RERANK_TARGETS
    path = run / "model" / ("classifier.skops" if kind == "classifier" else "rerank.skops")
    obj = _skops(path)
    get, put = targets[what]
    try:
        put(obj, _mutate(get(obj), how, at, value))
        _dump(obj, path)
    except Exception:  # the mutation made something skops cannot save: nothing to test
        return None
    if kind == "rerank":
        _reseal_rerank(run)
        return "rerank"
    return "best"


def _check_in_a_child(run: Path, method: str) -> tuple[int | None, int | None, str, str]:
    """``factcheck check --json`` in a forked child: (exit status, signal, stdout, stderr)."""
    out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    pid = os.fork()
    if pid == 0:  # the child: run the command, report only through the exit status and files
        try:
            os.dup2(out.fileno(), 1)
            os.dup2(err.fileno(), 2)
            sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", closefd=False), write_through=True)
            sys.stderr = io.TextIOWrapper(os.fdopen(2, "wb", closefd=False), write_through=True)
            from factcheck.cli import main
            code = main(["check", "--run", str(run), "--method", method, "--json", CLAIM])
        except BaseException:
            import traceback
            traceback.print_exc()
            code = 99
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    out.seek(0)
    err.seek(0)
    text_out, text_err = out.read().decode("utf-8", "replace"), err.read().decode("utf-8", "replace")
    if os.WIFSIGNALED(status):
        return None, os.WTERMSIG(status), text_out, text_err
    return os.WEXITSTATUS(status), None, text_out, text_err


def _assert_well_formed(run: Path, stdout: str) -> None:
    from factcheck.tagging.index import TagIndex
    view = json.loads(stdout)
    probabilities = view["probabilities"]
    assert view["verdict"] in probabilities, view["verdict"]
    values = np.array(list(probabilities.values()), dtype=float)
    assert np.all(np.isfinite(values)) and abs(values.sum() - 1) < 1e-6, probabilities
    ids = set(TagIndex.load(run / "index").ids)
    assert all(hit["id"] in ids for hit in view["hits"]), view["hits"]


MODEL_TARGETS = st.one_of(st.tuples(st.just("classifier"), st.sampled_from(sorted(CLASSIFIER_TARGETS))),
                          st.tuples(st.just("rerank"), st.sampled_from(sorted(RERANK_TARGETS))))
INDEX_DAMAGE = st.one_of(st.tuples(st.just("index"), st.sampled_from(INDEX_TARGETS)),
                         st.tuples(st.just("manifest"), st.just(None)))


def _check_damage(pristine, target, mutation) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        run = Path(scratch) / "run"
        shutil.copytree(pristine, run)
        method = _damage(run, target, mutation)
        if method is None:
            return
        code, sig, stdout, stderr = _check_in_a_child(run, method)
        what = f"{target} {mutation}"
        event(f"{target[0]}: {'signal' if sig else 'exit'} {sig or code}")  # --hypothesis-show-statistics
        assert sig is None, f"{what}: killed by signal {sig}\n{stderr[-2000:]}"
        assert "Traceback" not in stderr, f"{what}: traceback\n{stderr[-3000:]}"
        if code == 2:
            assert len([line for line in stderr.splitlines() if line.strip()]) == 1, f"{what}: {stderr}"
        else:
            assert code == 0, f"{what}: exit {code}\n{stderr[-2000:]}"
            _assert_well_formed(run, stdout)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(target=MODEL_TARGETS, mutation=MUTATIONS)
def test_damaged_model_arrays_give_one_line_or_a_well_formed_answer(pristine, target, mutation):
    _check_damage(pristine, target, mutation)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(target=INDEX_DAMAGE, mutation=st.tuples(MUTATIONS, MANIFEST_VALUES))
def test_crafted_index_files_and_manifests_give_one_line_or_a_well_formed_answer(pristine, target, mutation):
    (how, at, value), manifest_value = mutation
    _check_damage(pristine, target, (how, at, manifest_value if target[0] == "manifest" else value))
