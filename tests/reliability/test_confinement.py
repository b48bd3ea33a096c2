"""Nothing is written or deleted outside the output directory it was given.

A symbolic link inside ``--out`` (``passages/``, ``tags/``, ``models/``, ``work/``,
``vectors/``, the lock file, a run's ``model/`` or ``plots/``) is refused in one line,
with or without ``--force``, before anything is touched; ``wipe`` checks every path it
deletes. Each test fails on the code before the check (it wrote or deleted through the link).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from helpers import DEMO, assert_one_line_error, in_process


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture()
def elsewhere(tmp_path) -> Path:
    """A folder of the user's, outside every output directory, holding files with our names."""
    folder = tmp_path / "users-own"
    folder.mkdir()
    for name in ("passages-00000/ids.npy", "tags-00000/terms.npy", "tags-00001/indptr.npy", "tags-00002.joblib",
                 "tags-00003/weights.npy", "plan.json", "terms.npy", "idf.npy", "classifier.skops", "x.png",
                 ".tmp-tags-00004.abcd1234"):  # a temporary's name: the clean-up after a refusal deleted it
        (folder / name).parent.mkdir(exist_ok=True)
        (folder / name).write_text(f"the user's {name}")
    return folder


@pytest.mark.parametrize("name", ["passages", "tags", "vocabulary", "models", "work", "vectors"])
def test_a_symlinked_folder_under_out_is_refused_and_never_written(tmp_path, elsewhere, name):
    out = tmp_path / "out"
    out.mkdir()
    (out / name).symlink_to(elsewhere, target_is_directory=True)
    before = _snapshot(elsewhere)
    proc = in_process("tag", DEMO / "evidence.json", "--out", out, "--jobs", "1")
    assert_one_line_error(proc, str(out / name), "symbolic link")
    assert _snapshot(elsewhere) == before  # before the fix: the passages shard overwritten, plan.json written


def test_force_never_deletes_through_a_symlinked_tags_folder(tmp_path, elsewhere):
    """An index of ours (so ``--force`` may replace it) whose ``tags/`` was made a link."""
    out = tmp_path / "out"
    assert in_process("tag", DEMO / "evidence.json", "--out", out, "--jobs", "1").returncode == 0
    shutil.rmtree(out / "tags")
    (out / "tags").symlink_to(elsewhere, target_is_directory=True)
    before = _snapshot(elsewhere)
    proc = in_process("tag", DEMO / "evidence.json", "--out", out, "--jobs", "1", "--top-k", "5", "--force")
    assert_one_line_error(proc, str(out / "tags"), "symbolic link")
    assert _snapshot(elsewhere) == before  # before the fix: the tags shards deleted
    assert (out / "manifest.json").is_file()  # nothing of ours was deleted either


def test_a_symlinked_shard_inside_our_folder_is_refused(tmp_path, elsewhere):
    out = tmp_path / "out"
    (out / "passages").mkdir(parents=True)
    (out / "passages" / "passages-00000").symlink_to(elsewhere / "passages-00000", target_is_directory=True)
    before = _snapshot(elsewhere)
    proc = in_process("tag", DEMO / "evidence.json", "--out", out, "--jobs", "1", "--force")
    assert_one_line_error(proc, "passages-00000", "symbolic link")
    assert _snapshot(elsewhere) == before


def test_a_symlinked_lock_file_is_never_truncated(tmp_path, elsewhere):
    out = tmp_path / "out"
    out.mkdir()
    (out / ".factcheck-lock").symlink_to(elsewhere / "plan.json")
    before = _snapshot(elsewhere)
    proc = in_process("tag", DEMO / "evidence.json", "--out", out, "--jobs", "1")
    assert_one_line_error(proc, ".factcheck-lock", "symbolic link")
    assert _snapshot(elsewhere) == before  # before the fix: truncated and given our pid


def test_wipe_refuses_a_link_and_deletes_nothing(tmp_path, elsewhere):
    from factcheck.errors import InputError
    from factcheck.tagging import outdir
    out = tmp_path / "out"
    assert in_process("tag", DEMO / "evidence.json", "--out", out, "--jobs", "1").returncode == 0
    ours = _snapshot(out)
    (out / "work").symlink_to(elsewhere, target_is_directory=True)
    before = _snapshot(elsewhere)
    with pytest.raises(InputError, match="symbolic link"):
        outdir.wipe(out)
    assert _snapshot(elsewhere) == before and _snapshot(out) == ours


def test_out_itself_may_be_a_link(tmp_path):
    """The directory the user named is theirs to place anywhere."""
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real, target_is_directory=True)
    assert in_process("tag", DEMO / "evidence.json", "--out", tmp_path / "link", "--jobs", "1").returncode == 0
    assert (real / "manifest.json").is_file()


@pytest.mark.parametrize("name", ["model", "plots", "tuning", "index"])
def test_run_refuses_a_symlinked_folder_under_out(tmp_path, elsewhere, name):
    out = tmp_path / "run"
    out.mkdir()
    (out / name).symlink_to(elsewhere, target_is_directory=True)
    before = _snapshot(elsewhere)
    proc = in_process("run", "--data-dir", DEMO, "--out", out, "--quiet", "--jobs", "1")
    assert_one_line_error(proc, str(out / name), "symbolic link")
    assert _snapshot(elsewhere) == before


def test_train_refuses_a_symlinked_file_in_the_model_directory(tmp_path, elsewhere, demo_index):
    model = tmp_path / "model"
    model.mkdir()
    (model / "classifier.skops").symlink_to(elsewhere / "classifier.skops")
    before = _snapshot(elsewhere)
    proc = in_process("train", "--index", demo_index, "--claims", DEMO / "train-claims.json", "--model", model,
                      "--method", "bm25")
    assert_one_line_error(proc, "classifier.skops", "symbolic link")
    assert _snapshot(elsewhere) == before
    assert os.listdir(model) == ["classifier.skops"] and (model / "classifier.skops").is_symlink()


WORKBENCH = Path(__file__).resolve().parents[1] / "data" / "workbench" / "papers.csv"
SELFTEST = ("selftest", WORKBENCH, "--id-column", "paper_id", "--text-column", "abstract", "--query-column", "title",
            "--jobs", "1", "--chunk-window", "0")


def test_selftest_refuses_a_symlinked_index_under_out(tmp_path, elsewhere):
    """Before: selftest built its whole index in the link's target (exit 0); run refused it."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "index").symlink_to(elsewhere, target_is_directory=True)
    before = _snapshot(elsewhere)
    proc = in_process(*SELFTEST, "--out", out)
    assert_one_line_error(proc, str(out / "index"), "symbolic link")
    assert _snapshot(elsewhere) == before


@pytest.mark.parametrize("command", ["convert", "export-tags", "selftest", "retrieve"])
def test_no_writer_replaces_or_follows_a_link_at_its_output_name(tmp_path, elsewhere, demo_index, command):
    """The one rule, at every writer: a link at the name written is refused, the link and its
    target left as they were (before: the atomic rename replaced the user's link)."""
    target = elsewhere / "plan.json"
    link = tmp_path / ("selftest.json" if command == "selftest" else "out.json")
    link.symlink_to(target)
    before = _snapshot(elsewhere)
    args = {"convert": ("convert", "claims", DEMO / "dev-claims.json", "--to", "jsonl", "--out", link),
            "export-tags": ("export-tags", demo_index, "--out", link),
            "selftest": (*SELFTEST, "--out", tmp_path, "--index", tmp_path / "index"),
            "retrieve": ("retrieve", "--index", demo_index, "--claims", DEMO / "dev-claims.json", "--out", link,
                         "--method", "bm25")}[command]
    proc = in_process(*args)
    assert_one_line_error(proc, str(link), "symbolic link")
    assert _snapshot(elsewhere) == before and link.is_symlink()


def test_stale_temporaries_are_ours_by_shape_and_name_never_a_link(tmp_path, elsewhere):
    from factcheck.formats.files import remove_stale_temporaries
    ours = [".tmp-rerank.skops.ab12_x9z", ".tmp-confusion.png.k3j4h5g6"]
    kept = [".tmp-rerank.skops", ".tmp-notes.txt.ab12cd34", "rerank.skops", ".tmp-rerank.skops.AB12CD34"]
    for name in ours + kept:
        (tmp_path / name).write_text("x")
    (tmp_path / ".tmp-classifier.skops.zzzzzzzz").mkdir()  # a folder of ours (atomic_dir's)
    (tmp_path / ".tmp-classifier.skops.yyyyyyyy").symlink_to(elsewhere, target_is_directory=True)
    before = _snapshot(elsewhere)
    assert remove_stale_temporaries(tmp_path, ("*.skops", "*.png"), recursive=False) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(kept + [".tmp-classifier.skops.yyyyyyyy",
                                                                       "users-own"])
    assert _snapshot(elsewhere) == before


def test_a_device_or_fifo_at_an_output_name_is_refused_not_replaced(tmp_path, demo_index):
    """Before: the atomic rename replaced it with a regular file (as root, ``--out /dev/tty``
    would replace the terminal's device node)."""
    import stat
    fifo = tmp_path / "tags.jsonl"
    os.mkfifo(fifo)
    assert_one_line_error(in_process("export-tags", demo_index, "--out", fifo), str(fifo), "FIFO")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
