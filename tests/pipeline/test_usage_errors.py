"""Usage errors a newcomer makes: a misspelled option, command or choice.

Each is one line from the command that failed -- its name, its help pointer -- with the
nearest spelling that command has ("did you mean --quiet?"), also when the misspelling
leaves a required option missing. Parsed in this process (argparse raises SystemExit);
one test runs the real ``python -m factcheck`` for the exit status and stream.
"""

from __future__ import annotations

import pytest

from helpers import DEMO, assert_one_line_error, run_cli, usage_error
from factcheck.cli import build_parser


def line(*args) -> str:
    proc = usage_error(*args)
    return assert_one_line_error(proc)


RUN = ("run", "--data-dir", DEMO, "--out", "out/never-written")


def test_unrecognized_option_is_reported_by_its_command_with_the_near_miss():
    msg = line(*RUN, "--qiuet")
    assert msg == ("factcheck run: error: unrecognized arguments: --qiuet; did you mean --quiet? "
                   "(see `factcheck run --help`)")


def test_a_misspelled_required_option_is_named_not_just_missing():
    # --data-dir is optional (run's inputs can be named with --train/--dev/--test/--evidence
    # instead), so the typo is an unrecognized option -- still named with its near miss.
    msg = line("run", "--data-dri", DEMO, "--out", "out/x")
    assert msg.startswith("factcheck run: error: unrecognized arguments: --data-dri ")
    assert "did you mean --data-dir?" in msg
    assert msg.endswith("(see `factcheck run --help`)")
    # the --opt=value form and the missing --out named too
    msg = line("run", "--data-dri=data/demo")
    assert "required: --out" in msg and "--data-dir instead of --data-dri" in msg


def test_misspelled_command_gets_the_nearest_command():
    msg = line("rnu", "--data-dir", DEMO)
    assert msg == "factcheck: error: argument COMMAND: invalid choice: 'rnu'; did you mean 'run'? (see `factcheck --help`)"
    assert "did you mean 'train-rerank'?" in line("train-rerak")


def test_misspelled_choice_gets_the_nearest_choice():
    msg = line("check", "--run", "out/demo", "--method", "bmm25", "Sea levels rise.")
    assert msg.startswith("factcheck check: error: argument --method: invalid choice: 'bmm25'; did you mean 'bm25'?")
    far = line("check", "--run", "out/demo", "--method", "zzz", "Sea levels rise.")  # nothing close: the list
    assert "invalid choice: 'zzz' (choose from 'best', 'tags', 'bm25'" in far and "did you mean" not in far


def test_several_misspellings_each_get_their_own_suggestion():
    msg = line(*RUN, "--qiuet", "--jbos", "2")
    assert "unrecognized arguments: --qiuet --jbos 2" in msg
    assert "did you mean --quiet instead of --qiuet, --jobs instead of --jbos?" in msg


def test_nothing_close_means_no_suggestion():
    assert line(*RUN, "--frobnicate") == ("factcheck run: error: unrecognized arguments: --frobnicate "
                                          "(see `factcheck run --help`)")
    assert line(*RUN, "stray") == "factcheck run: error: unrecognized arguments: stray (see `factcheck run --help`)"


def test_a_command_option_before_the_command_says_where_it_goes():
    msg = line("--quiet", *RUN)
    assert msg.startswith("factcheck: error: unrecognized arguments: --quiet;")
    assert "--quiet is an option of `factcheck run`: put it after the command name" in msg


def test_hidden_deprecated_spellings_are_not_suggested():
    # train-rerank's old --out is still accepted but hidden from help: suggest the option help shows
    msg = line("train-rerank", "--index", "i", "--claims", "c", "--rerank-mdoel", "m")
    assert msg.startswith("factcheck train-rerank: error: one of the arguments --rerank-model is required;")
    assert "did you mean --rerank-model instead of --rerank-mdoel?" in msg
    msg = line("train-rerank", "--index", "i", "--claims", "c", "--rerank-model", "m", "--oot", "x")
    assert "--oot" in msg and "did you mean" not in msg  # not the hidden --out


def test_valid_abbreviations_and_negative_numbers_are_not_misspellings():
    args = build_parser().parse_args(["run", "--data", "d", "--out", "o", "--jobs", "-1", "--qui"])
    assert (str(args.data_dir), args.jobs, args.quiet) == ("d", -1, True)


def test_other_usage_errors_are_unchanged():
    assert line("run", "--data-dir") == ("factcheck run: error: argument --data-dir: expected one argument "
                                         "(see `factcheck run --help`)")
    assert line() == "factcheck: error: the following arguments are required: COMMAND (see `factcheck --help`)"


@pytest.mark.slow
def test_the_real_command_exits_2_with_one_line():
    proc = run_cli(*RUN, "--qiuet")
    assert_one_line_error(proc, "factcheck run: error:", "did you mean --quiet?", "`factcheck run --help`")
    assert proc.stdout == ""
