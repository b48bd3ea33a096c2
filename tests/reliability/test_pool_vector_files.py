"""The pool retriever's vector cache (factcheck.tagging.pool_vectors) read from crafted
files: any segment bytes, links and FIFOs in its folders are one IntegrityError naming the
file, for the retriever and for verify alike, never a traceback or a hang."""

from __future__ import annotations

import hashlib
import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import needs_onnx, needs_open
from tiny_onnx import make_model
from factcheck.errors import IntegrityError

pytestmark = needs_onnx

TEXTS = ["sea level rise", "global temperature record", "arctic ice"]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return make_model(tmp_path_factory.mktemp("tiny") / "tiny", TEXTS)


@pytest.fixture()
def cache(model, tmp_path):
    """A cache in an index folder, holding the vectors of TEXTS (one segment)."""
    from factcheck.tagging.pool_vectors import PoolVectorCache
    from factcheck.text.embedding import load_embedder
    embedder = load_embedder(str(model))
    PoolVectorCache(tmp_path / "index", embedder).vectors(TEXTS)
    return lambda: PoolVectorCache(tmp_path / "index", embedder)


def _refused(cache, index):
    """Both readers refuse the cache in one IntegrityError; its message."""
    from factcheck.tagging.pool_vectors import verify_pool_vectors
    with pytest.raises(IntegrityError) as first:
        cache().vectors(TEXTS + ["a text not cached"])
    with pytest.raises(IntegrityError) as second:
        verify_pool_vectors(index)
    return str(first.value), str(second.value)


def _plant_segment(folder, data: bytes):
    (folder / f"segment-{hashlib.sha256(data).hexdigest()}.json").write_bytes(data)


@pytest.mark.parametrize("segment", [[1], "x", None, 3, {"format": "factcheck-pool-vectors/1", "texts": [],
                                                           "vectors": "vectors-\x00.npy"},
                                     {"format": "factcheck-pool-vectors/1", "texts": [], "vectors": "vectors-/etc"}])
def test_a_segment_of_another_shape_is_refused_by_name(cache, tmp_path, segment):
    cache()
    folder = next((tmp_path / "index" / "pool-vectors").iterdir())
    _plant_segment(folder, json.dumps(segment).encode())
    for message in _refused(cache, tmp_path / "index"):
        assert "segment-" in message and "not a factcheck-pool-vectors/1 segment" in message


@pytest.mark.parametrize("where", ["pool-vectors", "model", "segment", "model.json"])
def test_a_link_anywhere_in_the_cache_is_refused_on_read(cache, tmp_path, where):
    index = tmp_path / "index"
    base = index / "pool-vectors"
    folder = next(base.iterdir())
    target = {"pool-vectors": base, "model": folder, "model.json": folder / "model.json",
              "segment": next(folder.glob("segment-*.json"))}[where]
    outside = tmp_path / "outside"
    target.rename(outside)
    os.symlink(outside, target)
    for message in _refused(cache, index):
        assert "is a symbolic link; refusing to read through it" in message


def test_a_fifo_named_as_a_segment_is_refused_not_waited_on(cache, tmp_path):
    folder = next((tmp_path / "index" / "pool-vectors").iterdir())
    os.mkfifo(folder / ("segment-" + "1" * 64 + ".json"))  # the old reader blocked for ever on it
    for message in _refused(cache, tmp_path / "index"):
        assert "is not a regular file" in message


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.one_of(st.binary(max_size=200),
                      st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                                   lambda kids: st.lists(kids, max_size=3)
                                   | st.dictionaries(st.sampled_from(["format", "vectors", "texts", "dim"]), kids,
                                                     max_size=4), max_leaves=8).map(lambda v: json.dumps(v).encode())))
def test_any_segment_bytes_are_read_or_refused_in_one_error(cache, tmp_path, data):
    from factcheck.tagging.pool_vectors import verify_pool_vectors
    cache()
    folder = next((tmp_path / "index" / "pool-vectors").iterdir())
    planted = folder / f"segment-{hashlib.sha256(data).hexdigest()}.json"
    planted.write_bytes(data)
    try:
        for read in (lambda: cache().vectors(TEXTS), lambda: verify_pool_vectors(tmp_path / "index")):
            try:
                read()
            except IntegrityError as exc:
                assert "\n" not in str(exc) and planted.name in str(exc)
    finally:
        planted.unlink()


@needs_open
def test_searchs_pool_model_is_named_by_its_own_flag(tmp_path):
    # search has no --embedding-model: an unusable --pool-model was named by run's flag.
    from helpers import DEMO, assert_one_line_error, in_process
    from factcheck.formats.evidence import source_spec
    from factcheck.tagging.job import TagJob
    from factcheck.tagging.vectors import PassageVectorJob
    TagJob(progress=False).run(source_spec(DEMO / "evidence.json"), tmp_path / "index")
    PassageVectorJob(progress=False).run(tmp_path / "index")
    (tmp_path / "empty").mkdir()
    proc = in_process("search", "--index", tmp_path / "index", "--mode", "open", "--method", "pool",
                      "--pool-model", tmp_path / "empty", "sea level")
    assert_one_line_error(proc, "--pool-model: no model.onnx here")
    assert "--embedding-model" not in proc.stderr


@needs_open
@pytest.mark.slow  # training's cross-validation starts worker processes
def test_a_moved_pool_model_is_named_as_the_model_directorys_record(tmp_path):
    # predict's --embedding-model relocates the passage vectors' model, not the pool's: the
    # error named it as if it would help.
    import shutil
    from helpers import DEMO, assert_one_line_error, in_process
    from factcheck.formats.evidence import source_spec
    from factcheck.tagging.job import TagJob
    from factcheck.tagging.vectors import PassageVectorJob
    TagJob(progress=False).run(source_spec(DEMO / "evidence.json"), tmp_path / "index")
    PassageVectorJob(progress=False).run(tmp_path / "index")
    pool_model = make_model(tmp_path / "tiny", TEXTS)
    trained = in_process("train", "--claims", DEMO / "train-claims.json", "--index", tmp_path / "index",
                         "--model", tmp_path / "model", "--mode", "open", "--method", "pool",
                         "--pool-model", pool_model, "--pool-size", "2")
    assert trained.returncode == 0, trained.stderr
    shutil.rmtree(pool_model)
    proc = in_process("predict", "--claims", DEMO / "dev-claims.json", "--index", tmp_path / "index",
                      "--model", tmp_path / "model", "--out", tmp_path / "predictions.json")
    assert_one_line_error(proc, "no model.onnx here", f"the pool retriever's model, as {tmp_path / 'model'} records it")
    assert "--embedding-model" not in proc.stderr
    assert not (tmp_path / "predictions.json").exists()
