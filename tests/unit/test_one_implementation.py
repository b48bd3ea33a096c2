"""Concepts written once: each check reads the package's source for a second copy."""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "factcheck"


def _sources():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(PACKAGE).as_posix(), path.read_text("utf-8")


def _holding(pattern: str) -> list[str]:
    return [name for name, text in _sources() if re.search(pattern, text)]


def test_files_are_hashed_in_one_place():
    assert _holding(r"hashlib\.file_digest") == ["hashing.py"]
    assert _holding(r"(?m)^def (_?sha256|file_sha256|sha256_(file|fileobj|bytes))\(") == ["hashing.py"]


def test_every_stem_goes_through_the_one_memo():
    from factcheck.scoring.counting import count_terms
    from factcheck.serve.highlight import highlight_spans
    from factcheck.text.analyzer import analyze, token_ids
    from factcheck.text.analyzer import split_stems
    split_stems("quokkas9 here")
    highlight_spans("Zyzzyvas sleep", {"zyzzyva"})
    count_terms(["axolotls swim"])
    analyze("Pangolins roll")
    memo = token_ids("stems")
    assert {"quokkas", "zyzzyvas", "axolotls", "pangolins"} <= memo.of.keys()
    assert memo.term("pangolins") == "pangolin" and memo.term("the") == ""
    assert _holding(r"TextAnalyzer\(\)") == ["text/analyzer.py"]
    assert _holding(r"class TokenIds") == ["text/analyzer.py"]


def test_corpora_are_counted_by_the_one_counter():
    """The reranker's term index is counted by scoring.counting, through the process's memo."""
    from factcheck.retrieval.rerank.terms import TermIndex
    from factcheck.text.analyzer import token_ids
    TermIndex.build_batches([(0, ["Quetzals9 fly"])])
    assert "quetzals" in token_ids("stems").of
    assert _holding(r"word_tokens_of_texts\(") == ["scoring/counting.py", "text/analyzer.py"]
    assert _holding(r"\bTokenIds\(") == ["text/analyzer.py"]


def test_term_major_matrices_are_transposed_in_one_place():
    """Unit-major rows become term-major in scoring/matrix.py only (TermMatrix.from_units, and
    TermFill a batch at a time), and only it writes an array through a writable map."""
    assert _holding(r"\.tocsc\(") == ["scoring/matrix.py"]
    assert _holding(r"open_memmap\(|np\.memmap\(") == ["scoring/matrix.py"]


def test_positive_integers_are_checked_by_check_number():
    assert _holding(r"must be a positive integer|must be at least \d+, got") == []
    import argparse
    from factcheck.cli.options import positive_int
    from factcheck.cli.workbench import int_list
    for parse, text, message in ((positive_int, "0", "must be at least 1, got 0"),
                                 (int_list, "1,0", "must be at least 1, got 0"),
                                 (int_list, "1,x", "expected an integer, got 'x'")):
        try:
            parse(text)
        except argparse.ArgumentTypeError as exc:
            assert str(exc) == message
        else:
            raise AssertionError(text)


def test_the_cli_format_choices_come_from_the_registries():
    from factcheck.cli import options
    from factcheck.formats import claims, convert, evidence
    assert options.SOURCE_FORMATS is evidence.FORMATS and options.CLAIM_FORMATS is claims.CLAIM_FORMATS
    assert options.PREDICTION_FORMATS is claims.PREDICTION_FORMATS and convert.EVIDENCE_TARGETS
    assert _holding(r'(format|--to)", .*choices=\(') == []


def test_every_format_checks_ids_alike(tmp_path):
    import pytest
    from factcheck.errors import InputError
    from factcheck.formats.claims import read_claims
    from factcheck.formats.qrels import read_queries
    cases = [("claims.jsonl", "fever", '{"claim": "x", "evidence": []}\n', "line 1: missing 'id'"),
             ("claims.jsonl", "fever", '{"id": true, "claim": "x", "evidence": []}\n',
              "line 1: 'id' must be a string or an integer, got a boolean"),
             ("cf.jsonl", "climate-fever", '{"claim_id": [1], "claim": "x", "evidences": []}\n',
              "line 1: 'claim_id' must be a string or an integer, got a list"),
             ("claims.csv", "csv", "id,claim\n,x\n", "'id' is empty")]
    for name, format, text, message in cases:
        (tmp_path / name).write_text(text, "utf-8")
        with pytest.raises(InputError) as err:
            read_claims(tmp_path / name, format=format)
        assert message in str(err.value), (format, str(err.value))
    (tmp_path / "queries.jsonl").write_text('{"_id": "q\\ud800", "text": "x"}\n', "utf-8")
    with pytest.raises(InputError, match="lone surrogate"):  # the query id, as passage ids are checked
        read_queries(tmp_path / "queries.jsonl")


def test_bm25_weights_are_built_and_cached_in_one_place(demo_index, tmp_path):
    import shutil
    from factcheck.retrieval.bm25 import BM25Retriever
    from factcheck.retrieval.rerank.terms import TermIndex
    from factcheck.tagging.index import TagIndex
    assert _holding(r"bm25_weights\(") == ["retrieval/bm25.py", "scoring/bm25.py"]
    root = tmp_path / "index"
    shutil.copytree(demo_index, root)
    index = TagIndex.load(root)
    BM25Retriever(k1=1.2, b=0.75).fit(index)
    TermIndex.for_index(index).bm25(0.9, 0.4)
    # the cache entries keep their names: an index cached before is not built again
    assert (root / "bm25" / "lucene-k1_1.2-b_0.75").is_dir()
    assert len(list((root / "rerank").glob("bm25-*-k1_0.9-b_0.4"))) == 1


def test_parameters_are_declared_once(monkeypatch):
    """A parameter's bounds live in its class's ``_parameter_constraints``: the library's check
    and the command line's option (its type and its help) both read them there."""
    import argparse
    import importlib
    import inspect
    import pytest
    from factcheck.cli.options import add_pool_args, add_retriever_args, add_tag_args
    from factcheck.errors import InputError, Interval, validate_params
    from factcheck.retrieval.bm25 import BM25Retriever
    from factcheck.retrieval.registry import _CLASSES
    from factcheck.retrieval.rerank.candidates import CandidateConfig
    from factcheck.retrieval.rerank.cutoff import Cutoff
    from factcheck.retrieval.rerank.model import ModelConfig
    from factcheck.tagging.job import TagParams
    assert [name for name in _holding(r"check_number\(self\.") if name.startswith("retrieval/")] == []
    from factcheck.retrieval.pool import PoolRetriever
    monkeypatch.setattr(BM25Retriever, "_parameter_constraints", {"b": Interval(float, 0, 0.5)})
    monkeypatch.setattr(PoolRetriever, "_parameter_constraints", {**PoolRetriever._parameter_constraints,
                                                                  "combine": ("cosine", "rrf"),
                                                                  "bm25_weight": Interval(float, 1)})
    parser = argparse.ArgumentParser()
    add_retriever_args(parser)
    add_tag_args(parser)
    options = {a.dest: a for a in parser._actions}
    assert options["b"].help == "length normalisation (default: 0.75; in [0, 0.5])"
    # a tuple of strings: the option's choices, and its help's default
    assert options["combine"].choices == ("cosine", "rrf") and options["combine"].help.endswith(" (default: cosine)")
    assert options["bm25_weight"].help.endswith(" (default: 0; >= 1)")
    pool = argparse.ArgumentParser()
    add_pool_args(pool.add_argument_group("pool"))
    assert pool.parse_args(["--combine", "rrf"]).combine == "rrf"
    with pytest.raises(SystemExit):
        pool.parse_args(["--combine", "weighted"])
    assert options["shard_size"].help == "passages per shard file (default: 100000; >= 1)"
    assert options["b"].type("0.25") == 0.25 and options["top_k"].type("3") == 3
    with pytest.raises(argparse.ArgumentTypeError, match=r"^must be in \[0, 0\.5\], got 0\.75$"):
        options["b"].type("0.75")
    with pytest.raises(InputError, match=r"^b: must be in \[0, 0\.5\], got 0\.75$"):
        BM25Retriever()._check_params()
    with pytest.raises(InputError, match="^shard_size: must be at least 1, got 0$"):
        TagParams(shard_size=0).validate()
    with pytest.raises(InputError, match=r"^cutoff\.threshold: must be in \[0, 1\], got 2$"):
        validate_params(Cutoff(threshold=2), "cutoff.")
    # every declared constraint is of a parameter its class takes
    owners = [getattr(importlib.import_module(f"factcheck.retrieval.{m}"), c) for m, c in _CLASSES.values()]
    for owner in [*owners, TagParams, Cutoff, CandidateConfig, ModelConfig]:
        assert set(owner._parameter_constraints) <= set(inspect.signature(owner).parameters), owner


def test_ties_are_ordered_by_the_one_function():
    import numpy as np
    from factcheck.scoring.topk import rank_order, top_k
    assert _holding(r"np\.lexsort\(\(") == ["scoring/counting.py", "scoring/topk.py"]  # counting: distinct keys
    assert _holding(r"\brank_order\(") == ["retrieval/pool.py", "retrieval/rerank/retriever.py", "retrieval/tag_rule.py", "scoring/topk.py",
                                          "training/rerank.py"]
    rows, first, second = np.array([4, 2, 9, 1]), np.array([1.0, 1.0, 2.0, 1.0]), np.array([0.0, 0.5, 0.0, 0.0])
    assert rank_order(rows, first, second).tolist() == [2, 1, 3, 0]
    assert top_k(first, 4, rows)[0].tolist() == rows[rank_order(rows, first)].tolist() == [9, 1, 2, 4]
