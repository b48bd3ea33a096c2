import functools
import json
import time

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.feature_extraction.text import TfidfVectorizer

from helpers import DEMO, assert_one_line_error, in_process, run_cli, run_python, sklearn_tag_vectorizer
from factcheck.formats.evidence import source_spec
from factcheck.tagging import job as job_module
from factcheck.tagging import store
from factcheck.tagging.index import TagIndex, export_tags
from factcheck.tagging.job import TagJob
from factcheck.scoring.topk import top_k_rows
from factcheck.tagging.vocabulary import top_terms
from factcheck.text.analyzer import TextAnalyzer


def build(tmp_path, passages: dict, name="idx", **kw) -> TagIndex:
    src = tmp_path / f"{name}.json"
    src.write_text(json.dumps(passages), encoding="utf-8")
    TagJob(progress=False, **kw).run(source_spec(src), tmp_path / name)
    return TagIndex.load(tmp_path / name)


def top_k_reference(terms, weights, k):
    """Slow, obviously correct: positive weights, by weight desc then term asc, at most k."""
    pairs = sorted(((t, w) for t, w in zip(terms, weights) if w > 0), key=lambda tw: (-tw[1], tw[0]))
    return pairs[:k]


def test_three_term_passage_gets_exactly_three_tags(tmp_path):
    idx = build(tmp_path, {"p1": "Glaciers retreat quickly.", "p2": "Oceans absorb heat and carbon.",
                           "p3": "Forests store carbon in wood and soil."})
    assert len(idx.tags(0)) == 3
    assert set(idx.tags(0)) == {"glacier", "retreat", "quickli"}
    assert all(w > 0 for w in idx.weights(0))


def test_tie_case_orders_by_stem(tmp_path):
    # Every term occurs once in p1 and in exactly one other passage: equal TF-IDF weights.
    idx = build(tmp_path, {"p1": "zebra apple mango", "p2": "zebra", "p3": "apple", "p4": "mango"})
    weights = idx.weights(0)
    assert weights[0] == weights[1] == weights[2] > 0
    assert idx.tags(0) == ["appl", "mango", "zebra"]


def test_empty_and_stopword_only_passages_get_empty_tags_and_are_counted(tmp_path):
    idx = build(tmp_path, {"a": "", "b": "the and of", "c": "solar power grows", "d": "1998 2020"})
    assert len(idx) == 4 and idx.ids == ["a", "b", "c", "d"]
    assert [idx.tags(i) for i in (0, 1, 3)] == [[], [], []]
    assert idx.manifest.data["empty_tags"] == 3


def test_top_k_rows_matches_reference_with_many_ties():
    rng = np.random.default_rng(0)
    for trial in range(30):
        dense = rng.choice([0.0, 0.0, 0.5, 0.25, 1.0], size=(40, 25))
        k = int(rng.integers(1, 12))
        m = sp.csr_matrix(dense)
        indptr, cols, vals = top_k_rows(m, k)
        for r in range(40):
            got = list(zip(cols[indptr[r]:indptr[r + 1]].tolist(), vals[indptr[r]:indptr[r + 1]].tolist()))
            terms = [f"t{c:03d}" for c in range(25)]
            want = [(int(t[1:]), w) for t, w in top_k_reference(terms, dense[r].tolist(), k)]
            assert got == want


def test_top_k_never_returns_explicit_zeros():
    m = sp.csr_matrix((np.array([0.0, 0.3, 0.0]), np.array([0, 1, 2]), np.array([0, 3])), shape=(1, 3))
    indptr, cols, vals = top_k_rows(m, 10)
    assert cols.tolist() == [1] and vals.tolist() == [0.3]


def test_vocabulary_cut_breaks_count_ties_by_term():
    terms = ["pear", "apple", "fig", "kiwi", "date"]
    counts = np.array([5, 3, 3, 3, 1])
    assert top_terms(terms, counts, 3) == ["apple", "fig", "pear"]  # kiwi loses the tie to apple, fig


def test_weights_are_bit_identical_to_sklearn_fit_on_the_whole_corpus(tmp_path):
    passages = json.loads((DEMO / "evidence.json").read_text())
    idx = build(tmp_path, passages, max_features=60, top_k=50, shard_size=7)
    vocab = idx.vocabulary
    ref = TfidfVectorizer(analyzer=TextAnalyzer(), vocabulary=vocab).fit(list(passages.values()))
    assert np.array_equal(ref.idf_, idx.passage_vectorizer.idf_)
    matrix = ref.transform(list(passages.values())).tocsr()
    for row in range(len(idx)):
        dense = matrix[row].toarray().ravel()
        want = top_k_reference(vocab, dense.tolist(), 50)
        assert list(zip(idx.tags(row), idx.weights(row))) == want


def test_no_zero_weight_and_sorted_tags_on_real_sample(tmp_path, real_sample_20k):
    out = tmp_path / "idx"
    TagJob(progress=False, shard_size=5000).run(source_spec(real_sample_20k), out)
    idx = TagIndex.load(out)
    assert len(idx) == 20000
    assert (idx.tag_weights > 0).all()
    lengths = np.diff(idx.tag_indptr)
    assert lengths.max() <= 10
    vocab = idx.vocabulary
    for row in range(0, 20000, 97):
        tags, weights = idx.tags(row), idx.weights(row)
        assert [(-w, t) for t, w in zip(tags, weights)] == sorted((-w, t) for t, w in zip(tags, weights))
        assert len(set(tags)) == len(tags) and set(tags) <= set(vocab)


@pytest.mark.slow
def test_export_identical_for_jobs_and_shard_sizes(tmp_path, real_sample_20k):
    exports = []
    for jobs, shard in [(1, 1000), (2, 1000), (1, 7000), (2, 7000)]:
        out = tmp_path / f"idx-{jobs}-{shard}"
        TagJob(progress=False, jobs=jobs, shard_size=shard).run(source_spec(real_sample_20k), out)
        dest = tmp_path / f"tags-{jobs}-{shard}.jsonl"
        export_tags(out, dest)
        exports.append(dest.read_bytes())
    assert len(set(exports)) == 1
    assert exports[0].count(b"\n") == 20000
    # Same shard size, different jobs: every file byte-identical, manifest included.
    for name in ["manifest.json", *store.read_manifest(tmp_path / "idx-1-1000").files()]:
        assert (tmp_path / "idx-1-1000" / name).read_bytes() == (tmp_path / "idx-2-1000" / name).read_bytes()


def _crash_a_run_at(tmp_path, monkeypatch, task: str, nth: int, text: str):
    """Tag a 50-passage source into ``ref``, then into ``resumed`` with ``job.<task>``
    raising on its ``nth`` call; returns (source, ref, resumed), the real task restored."""
    passages = {f"p{i}": text.format(w=w, i=i % 7) for i, w in
                enumerate(["ice", "heat", "sea", "coal", "wind", "sun", "rain", "snow", "salt", "soil"] * 5)}
    src = tmp_path / "e.json"
    src.write_text(json.dumps(passages))
    ref = tmp_path / "ref"
    TagJob(progress=False, shard_size=6).run(source_spec(src), ref)
    calls = {"n": 0}
    real_task = getattr(job_module, task)

    def crashing(*args):
        calls["n"] += 1
        if calls["n"] == nth:
            raise RuntimeError("simulated crash")
        return real_task(*args)

    out = tmp_path / "resumed"
    monkeypatch.setattr(job_module, task, crashing)
    with pytest.raises(RuntimeError):
        TagJob(progress=False, shard_size=6).run(source_spec(src), out)
    monkeypatch.setattr(job_module, task, real_task)
    assert not (out / "manifest.json").exists()
    return src, ref, out


def _assert_same_index(out, ref):
    for name in ["manifest.json", *store.read_manifest(ref).files()]:
        assert (out / name).read_bytes() == (ref / name).read_bytes(), name


def test_interrupted_run_resumes_to_identical_bytes(tmp_path, monkeypatch):
    src, ref, out = _crash_a_run_at(tmp_path, monkeypatch, "tag_shard", 4, "{w} warming glacier record {i} ocean")
    finished = {p.relative_to(out): p.stat().st_mtime_ns for p in (out / "tags").glob("tags-*/*.npy")}
    assert len(finished) == 3 * 3  # three shards of three arrays
    TagJob(progress=False, shard_size=6).run(source_spec(src), out)
    for name, mtime in finished.items():  # completed shards were verified and skipped
        assert (out / name).stat().st_mtime_ns == mtime
    _assert_same_index(out, ref)
    assert not (out / "work").exists()


@pytest.mark.slow
def test_rerun_is_a_verified_noop_and_other_params_are_refused(tmp_path):
    src = DEMO / "evidence.json"
    out = tmp_path / "idx"
    assert run_cli("tag", src, "--out", out, "--jobs", "1").returncode == 0
    before = (out / "manifest.json").stat().st_mtime_ns
    again = run_cli("tag", src, "--out", out, "--jobs", "1")
    assert again.returncode == 0 and "nothing to do" in again.stderr
    assert (out / "manifest.json").stat().st_mtime_ns == before
    other = run_cli("tag", src, "--out", out, "--top-k", "5")
    assert_one_line_error(other, "manifest.json", "different run", "--force")
    forced = run_cli("tag", src, "--out", out, "--top-k", "5", "--force")
    assert forced.returncode == 0
    assert json.loads((out / "manifest.json").read_text())["params"]["top_k"] == 5


@pytest.mark.parametrize("name, content, place", [
    ("truncated.json", b'{"evidence-1": "Sea levels rise", "evidence-2": "Ice me', "line 1"),
    ("nonstring.json", b'{"evidence-1": "Sea levels rise", "evidence-2": 42}', "line 1, column 49"),
    ("dup.jsonl", b'{"id": "a", "text": "x"}\n{"id": "b", "text": "y"}\n{"id": "a", "text": "z"}\n', "line 3"),
    ("badutf8.json", b'{"evidence-1": "Sea \xe9 levels"}', "byte 20"),
    ("empty.json", b"", "empty file"),
])
def test_bad_input_one_line_error_exit_2_and_no_manifest(tmp_path, name, content, place):
    src = tmp_path / name
    src.write_bytes(content)
    out = tmp_path / "out"
    proc = in_process("tag", src, "--out", out, "--jobs", "1")
    assert_one_line_error(proc, str(src), place)
    assert not (out / "manifest.json").exists()


def test_export_tags_cli_writes_one_line_per_passage(tmp_path, demo_index):
    dest = tmp_path / "tags.jsonl"
    proc = in_process("export-tags", demo_index, "--out", dest)
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(l) for l in dest.read_text().splitlines()]
    passages = json.loads((DEMO / "evidence.json").read_text())
    assert [l["id"] for l in lines] == list(passages)
    empty = [l for l in lines if not l["tags"]]
    assert [l["id"] for l in empty] == ["evidence-36"] and empty[0]["weights"] == []
    assert all(len(l["tags"]) == len(l["weights"]) <= 10 for l in lines)


@pytest.mark.slow
def test_fixed_input_reruns_after_a_bad_input_error_without_force(tmp_path):
    src = tmp_path / "e.json"
    src.write_text('{"a": "glaciers retreat", "b": 7}')
    out = tmp_path / "idx"
    assert_one_line_error(run_cli("tag", src, "--out", out, "--jobs", "1"), "got a number")
    src.write_text('{"a": "glaciers retreat", "b": "oceans warm"}')
    proc = run_cli("tag", src, "--out", out, "--jobs", "1")
    assert proc.returncode == 0, proc.stderr
    assert json.loads((out / "manifest.json").read_text())["passages"] == 2


# ---------------------------------------------------------------- fast counting == the analyzer

from collections import Counter  # noqa: E402

from hypothesis import given, settings, strategies as st  # noqa: E402

from factcheck.scoring.counting import count_terms  # noqa: E402
from factcheck.text.analyzer import word_tokens, word_tokens_of_texts  # noqa: E402

_WORDS = st.sampled_from(["The", "sea", "levels", "ROSE", "rising", "co2", "1998", "Niño", "İstanbul",
                          "q", "Q", "QQ", "well-known", "and", " ", "\n", ".", "ﬁne", "ǅ"])


@settings(max_examples=80, deadline=None)
@given(st.lists(st.lists(_WORDS, max_size=12).map(" ".join), max_size=20))
def test_count_terms_equals_the_analyzer_passage_by_passage(texts):
    # Slow, obviously correct reference: analyse each passage on its own, count its stems.
    # Batches of 3 texts: rows and columns must join up across batches.
    from factcheck.scoring import counting
    old_batch, counting.BATCH = counting.BATCH, 3
    try:
        counts = count_terms(texts)
    finally:
        counting.BATCH = old_batch
    assert counts.matrix.shape == (len(texts), len(counts.terms))
    assert counts.terms == sorted(counts.terms) and counts.matrix.has_canonical_format
    analyzer = TextAnalyzer()
    for row, text in enumerate(texts):
        got = counts.matrix.getrow(row)
        assert {counts.terms[j]: int(v) for j, v in zip(got.indices, got.data)} == Counter(analyzer(text))


@pytest.mark.slow
def test_a_bad_record_late_in_the_input_stops_a_two_worker_run_without_a_manifest(tmp_path):
    # Workers count the first shards while the driver still reads: the error at the end
    # of the input must still stop the run, one line, nothing that looks complete.
    src = tmp_path / "bad.json"
    body = ", ".join(f'"e{i}": "passage {i} about warming"' for i in range(50))
    src.write_text("{" + body + ', "e3": "a repeated id"}', encoding="utf-8")
    with pytest.raises(job_module.InputError, match="duplicate passage id 'e3'"):
        TagJob(progress=False, jobs=2, shard_size=10).run(source_spec(src), tmp_path / "idx")
    assert not (tmp_path / "idx" / "manifest.json").exists()


def test_tag_space_is_bit_identical_to_the_tag_vectoriser(tmp_path, real_sample_20k):
    # Built from the tag arrays, not by re-analysing tag strings: it must be the same matrix,
    # also when most tags fall outside a small tag vocabulary, and for passages with no tag.
    for tag_features in (1000, 7):
        TagJob(progress=False, tag_features=tag_features).run(source_spec(real_sample_20k), tmp_path / f"i{tag_features}")
        idx = TagIndex.load(tmp_path / f"i{tag_features}")
        got = idx.tag_space
        want = sklearn_tag_vectorizer(idx).transform(idx.tag_strings).tocsr()
        assert got.shape == want.shape and got.dtype == want.dtype
        assert np.array_equal(got.indptr, want.indptr) and np.array_equal(got.indices, want.indices)
        assert got.data.tobytes() == want.data.tobytes()
        assert (np.diff(got.indptr) == 0).any()  # some passages keep no tag in this space


@pytest.mark.slow
def test_one_task_starts_no_worker_processes():
    from factcheck.tagging.backends import WorkerPool
    with WorkerPool("loky", 2) as pool:
        assert pool.stream(abs, iter([(-3,)])) == [3]
        assert not pool.started_workers  # run in process, as a 1-shard input always was
        assert pool.stream(abs, iter([(-1,), (-2,), (-4,)])) == [1, 2, 4]
        assert pool.started_workers
    assert not _loky_workers()  # shut down with the pool


def _loky_workers() -> list:
    import multiprocessing
    return [p for p in multiprocessing.active_children() if "Loky" in type(p).__name__]


# Texts mostly ASCII (the translate path) with NULs, Q, controls and some non-ASCII (the
# regex path), in runs of either kind.
_ASCII_ISH = st.text(alphabet=st.sampled_from(list("aZq Q_9\t\n\x00\x01.,-'\x7f") + ["é", "İ", "ǅ", "٣", "\u00a0"]),
                     max_size=30)


@settings(max_examples=300, deadline=None)
@given(st.lists(_ASCII_ISH | st.text(max_size=20), max_size=12))
def test_word_tokens_of_texts_equals_word_tokens_text_by_text(texts):
    tokens, marker = word_tokens_of_texts(texts)
    assert tokens == [t for text in texts for t in word_tokens(text) + [marker]]


def test_the_ascii_translation_table_is_the_regex_word_rule():
    import re

    from factcheck.text.analyzer import _ASCII_WORDS
    for code in range(1, 128):  # NUL is the join marker; texts holding one take the regex path
        c = chr(code)
        assert (_ASCII_WORDS[code] != " ") == bool(re.fullmatch(r"\w", c)), repr(c)
        if _ASCII_WORDS[code] != " ":
            assert _ASCII_WORDS[code] == c.lower()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=8), max_size=10))
def test_pack_strings_offsets_are_utf8_lengths(strings):
    from factcheck.tagging.packing import pack_strings, unpack_strings
    strings = [s for s in strings if not any(0xD800 <= ord(c) <= 0xDFFF for c in s)]  # no UTF-8 for those
    buf, offsets = pack_strings(strings)
    assert bytes(buf) == "".join(strings).encode("utf-8") and buf.dtype == np.uint8
    assert offsets.tolist() == np.cumsum([0] + [len(s.encode("utf-8")) for s in strings]).tolist()
    assert unpack_strings(buf, offsets) == strings


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(alphabet="abcQé", min_size=1, max_size=4), st.integers(0, 5), max_size=30),
       st.integers(1, 12))
def test_top_terms_equals_the_sort_by_count_then_term(counted, limit):
    terms = list(counted)
    counts = np.array([counted[t] for t in terms], dtype=np.int64)
    order = sorted(range(len(terms)), key=lambda i: (-int(counts[i]), terms[i]))
    assert top_terms(terms, counts, limit) == sorted(terms[i] for i in order[:limit])


def test_vocabulary_does_not_depend_on_the_order_shards_are_merged():
    from factcheck.tagging.vocabulary import TermStats, Vocabulary
    shards = [(["ice", "sea"], [3, 1], [2, 1], 4),
              (["heat", "sea"], [2, 5], [1, 3], 3),
              (["ice", "rain"], [1, 1], [1, 1], 2)]
    digests = set()
    for order in ([0, 1, 2], [2, 0, 1], [1, 2, 0]):
        stats = TermStats.empty()
        for i in order:
            terms, totals, df, n = shards[i]
            stats.add(terms, np.array(totals), np.array(df), n)
        vocab = Vocabulary.from_stats(stats, 3)
        digests.add(vocab.digest())
        assert vocab.terms == ["heat", "ice", "sea"]  # totals: sea 6, ice 4, heat 2, rain 1
    assert len(digests) == 1


def _record(seen, args, then=None):
    seen.append(args[0])
    if then is not None:
        then.touch()


def _nap(i, seconds):
    if seconds < 0:
        raise ValueError(f"task {i} failed")
    time.sleep(seconds)
    return i


def _wait_for(i, flag: str, outcome: str | None = None) -> bool:
    """Return once ``flag`` exists (True), or after a safety bound that only a broken
    stream runs into (False); ``outcome`` records which. The bound keeps a failure from
    hanging the suite; no assertion compares times."""
    from pathlib import Path
    if outcome:
        Path(outcome).write_text("running")
    for _ in range(2400):
        if Path(flag).exists():
            break
        time.sleep(0.05)
    found = Path(flag).exists()
    if outcome:
        Path(outcome).write_text("released" if found else "waited out")
    return found


@pytest.mark.slow
def test_stream_reports_each_finished_task_in_input_order():
    from factcheck.tagging.backends import WorkerPool
    for jobs in (1, 2):
        seen = []
        with WorkerPool("loky", jobs) as pool:
            # the first task finishes last: its successors wait for it to be reported
            got = pool.stream(_nap, iter([(0, 0.4), (1, 0.0), (2, 0.0), (3, 0.1)]),
                              on_done=functools.partial(_record, seen))
        assert got == [0, 1, 2, 3] and seen == [0, 1, 2, 3], jobs


@pytest.mark.slow
def test_stream_reports_a_finished_task_while_later_ones_run(tmp_path):
    """Task 1 can only finish once task 0 has been reported (its report creates the flag)."""
    from factcheck.tagging.backends import WorkerPool
    seen, flag = [], tmp_path / "task-0-reported"
    (tmp_path / "exists").touch()
    with WorkerPool("loky", 2) as pool:
        got = pool.stream(_wait_for, iter([(0, str(tmp_path / "exists")), (1, str(flag))]),
                          on_done=functools.partial(_record, seen, then=flag))
    assert seen == [0, 1] and got == [True, True]


@pytest.mark.slow
def test_a_failing_task_stops_the_stream_at_once_and_reports_nothing_after_it(tmp_path):
    """Task 0 waits until the test releases it, after the stream has raised for task 1 (or
    it is stopped with the workers): it must not have waited out its bound."""
    from factcheck.tagging.backends import WorkerPool
    seen, release, outcome = [], tmp_path / "release", tmp_path / "outcome"
    with WorkerPool("loky", 2) as pool:
        with pytest.raises(ValueError, match="task 1 failed"):
            pool.stream(_wait_for_or_fail, iter([(0, str(release), str(outcome)), (1, None, str(outcome)), (2, None, None)]),
                        on_done=functools.partial(_record, seen))
        release.touch()
    assert outcome.read_text() in ("running", "released")  # the error came while task 0 still ran
    assert not _loky_workers()
    assert seen == []  # task 0 had not finished; nothing after the failed task is reported


def _wait_for_or_fail(i, flag, outcome):
    if flag is None:
        if i == 1:  # once task 0 runs
            _wait_for(i, outcome)
            raise ValueError(f"task {i} failed")
        return i
    return _wait_for(i, flag, outcome)


def test_a_run_stopped_while_counting_resumes_to_identical_bytes(tmp_path, monkeypatch):
    # Resumed shards are merged into the totals after the stream, the others as they are
    # counted: the vocabulary and every file must be the uninterrupted run's.
    src, ref, out = _crash_a_run_at(tmp_path, monkeypatch, "count_shard", 3,
                                    "{w} warming glacier record {i} ocean {w}s")
    assert len(list((out / "work").glob("counts-*"))) == 2
    TagJob(progress=False, shard_size=6).run(source_spec(src), out)
    _assert_same_index(out, ref)


from sklearn.feature_extraction.text import TfidfTransformer  # noqa: E402

from factcheck.scoring.tfidf import tfidf_rows  # noqa: E402


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 12), st.integers(1, 40), st.integers(0, 2**32 - 1),
       st.sampled_from([np.int32, np.int64, np.float64]), st.booleans())
def test_tfidf_rows_is_bit_identical_to_sklearns_transform(n_rows, n_cols, seed, dtype, canonical):
    # Long rows and IDFs across many magnitudes make the order of a row's sum matter;
    # 1e-170 squares to 0.0, so some rows sum to zero (scikit-learn leaves those as they are).
    rng = np.random.default_rng(seed)
    dense = rng.integers(0, 4, size=(n_rows, n_cols)) * (rng.random((n_rows, n_cols)) < rng.random())
    counts = sp.csr_matrix(dense.astype(dtype))
    if not canonical:  # each entry split in two, the pieces shuffled within their row
        row_of = np.repeat(np.arange(n_rows), np.diff(counts.indptr))
        halves = counts.data // 2 if dtype != np.float64 else counts.data / 2
        rows = np.concatenate([row_of, row_of])
        order = np.lexsort((rng.random(len(rows)), rows))
        coo = sp.coo_matrix((np.concatenate([halves, counts.data - halves])[order],
                             (rows[order], np.concatenate([counts.indices, counts.indices])[order])),
                            shape=counts.shape)
        counts = sp.csr_matrix((coo.data, coo.col, counts.indptr * 2), shape=counts.shape)
        assert not counts.has_canonical_format or counts.nnz == 0
    idf = rng.choice([1e-170, 1.0, 1.7]) * 10.0 ** rng.uniform(-8, 8, n_cols)
    want = TfidfTransformer(norm="l2").fit(counts.copy())
    want.idf_ = idf
    want = sp.csr_matrix(want.transform(counts.copy()))
    got = tfidf_rows(counts, idf)
    assert np.array_equal(got.indptr, want.indptr) and np.array_equal(got.indices, want.indices)
    assert got.data.tobytes() == want.data.tobytes()


@pytest.mark.slow
def test_tagging_workers_import_neither_sklearn_nor_nltks_package():
    # Why it matters: those imports cost each worker ~1.3 CPU-s at start (docs/decisions.md).
    proc = run_python("import sys; from factcheck.tagging import tasks; tasks.warm_up(); "
                      "print(sorted(m for m in ('sklearn', 'pandas', 'scipy.stats', 'nltk') if m in sys.modules))")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


# ---------------------------------------------------------------- writes that fail

@pytest.mark.parametrize("array", [np.arange(10**6, dtype=np.int32), np.zeros((0, 3), np.float16),
                                   np.array(["sea", "level"]), np.arange(12.0).reshape(3, 4)])
def test_save_npy_writes_np_saves_bytes_and_a_full_disk_is_enospc(array, tmp_path):
    """/dev/full fails every write with ENOSPC, as a full disk does. numpy's own writer
    (tofile) says only "N requested and M written": no errno, no file."""
    import errno

    from factcheck.formats.files import save_npy
    save_npy(tmp_path / "a.npy", array)
    np.save(tmp_path / "b.npy", array, allow_pickle=False)
    assert (tmp_path / "a.npy").read_bytes() == (tmp_path / "b.npy").read_bytes()
    with pytest.raises(OSError) as err:
        save_npy("/dev/full", array)
    assert err.value.errno == errno.ENOSPC


def test_loky_s_cancellation_race_prints_nothing_and_other_thread_errors_still_do(capsys):
    """When a task fails, loky's manager thread may look up a call joblib just cancelled
    (KeyError in add_call_item_to_queue): 11 lines of traceback under the one-line error."""
    import threading

    from factcheck.tagging.backends import _without_loky_cancel_race
    namespace = {}
    exec(compile("def add_call_item_to_queue():\n    return {}[9]\n", "/x/joblib/externals/loky/process_executor.py",
                 "exec"), namespace)
    shown = []
    hook = _without_loky_cancel_race(lambda args: shown.append(args.exc_type))
    previous, threading.excepthook = threading.excepthook, hook
    try:
        for target in (namespace["add_call_item_to_queue"], lambda: {}[9], lambda: 1 / 0):
            thread = threading.Thread(target=target, name="ExecutorManagerThread")
            thread.start()
            thread.join()
    finally:
        threading.excepthook = previous
    assert shown == [KeyError, ZeroDivisionError]


def test_tags_are_read_from_each_shard_without_joining_them_at_load(tmp_path):
    # Tiny shards against one: every reader by row gives the same values, and opening the
    # index joins no tag array (each shard's stays mapped where it is).
    TagJob(progress=False, shard_size=7).run(source_spec(DEMO / "evidence.json"), tmp_path / "small")
    TagJob(progress=False).run(source_spec(DEMO / "evidence.json"), tmp_path / "one")
    small, one = TagIndex.load(tmp_path / "small"), TagIndex.load(tmp_path / "one")
    assert len(small.manifest.shards) == 6 and len(one.manifest.shards) == 1
    assert not {"tag_indptr", "tag_terms", "tag_weights"} & set(vars(small))
    rows = [39, 0, 6, 7, -1, 13, 14, 7, 20]
    for array in ("terms", "weights"):
        got, want = small.tag_rows(rows, array), one.tag_rows(rows, array)
        assert all(np.array_equal(g, w) and g.dtype == w.dtype for g, w in zip(got, want))
        whole = one.tag_rows(None, array)
        assert np.array_equal(whole[0], one.tag_indptr) and np.array_equal(small.tag_rows(None, array)[1], whole[1])
    assert np.array_equal(small.tag_counts(), np.diff(one.tag_indptr))
    assert np.array_equal(small.tag_counts(rows), np.diff(one.tag_indptr)[rows])
    assert [small.tags(r) for r in range(40)] == [one.tags(r) for r in range(40)]
    assert [small.weights(r) for r in range(40)] == [one.weights(r) for r in range(40)]
    a, b = small.tag_space_rows(rows), one.tag_space_rows(rows)
    assert (a != b).nnz == 0 and np.array_equal(a.indptr, b.indptr)
    with pytest.raises(IndexError):
        small.tag_rows([40])
    assert small.tag_rows([])[1].size == 0
    export_tags(tmp_path / "small", tmp_path / "small.jsonl")
    export_tags(tmp_path / "one", tmp_path / "one.jsonl")
    assert (tmp_path / "small.jsonl").read_bytes() == (tmp_path / "one.jsonl").read_bytes()
