"""The suite's own rule (conftest.py): a test that starts a process -- itself, through a
fixture, as a worker pool -- fails unless it is marked ``slow``, so the fast loop
(``pytest -m "not slow"``) starts none. Checked on a small suite run with this conftest."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from helpers import ROOT

pytestmark = pytest.mark.slow  # a pytest session in a child process

SUITE = '''
import multiprocessing
import subprocess
import sys

import pytest


@pytest.fixture(scope="module")
def child():
    return subprocess.run([sys.executable, "-c", "print(42)"], capture_output=True, text=True).stdout


def test_reads_nothing_but_memory():
    assert sum(range(4)) == 6


def test_starts_a_child():
    subprocess.run([sys.executable, "-c", "pass"], check=True)


@pytest.mark.slow
def test_starts_a_child_and_says_so():
    subprocess.run([sys.executable, "-c", "pass"], check=True)


def test_starts_a_worker():
    p = multiprocessing.get_context("spawn").Process(target=print)
    p.start()
    p.join()


@pytest.mark.slow
def test_sets_up_the_fixture_and_says_so(child):
    assert child == "42\\n"


def test_uses_the_fixture_set_up_by_another(child):
    assert child == "42\\n"


def test_fails_on_its_own():
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    assert 1 == 2, "its own failure"
'''


def test_a_test_that_starts_a_process_fails_unless_marked_slow(tmp_path):
    shutil.copy(ROOT / "tests" / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_suite.py").write_text(SUITE, encoding="utf-8")
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow: slow\n    shared: shared\n")
    path = os.pathsep.join([str(ROOT), str(ROOT / "tests")])  # the package and helpers.py
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider",
                           "--show-processes", "test_suite.py"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=600, env={"PYTHONPATH": path, "PATH": "/usr/bin:/bin"})
    outcome = {}
    for line in proc.stdout.splitlines():
        word, _, rest = line.partition(" ")
        if word in ("PASSED", "FAILED", "ERROR") and "::" in rest:
            outcome[rest.split("::")[1].split(" ")[0]] = word
    assert outcome == {
        "test_reads_nothing_but_memory": "PASSED",
        "test_starts_a_child": "FAILED",
        "test_starts_a_child_and_says_so": "PASSED",
        "test_starts_a_worker": "FAILED",
        "test_sets_up_the_fixture_and_says_so": "PASSED",
        "test_uses_the_fixture_set_up_by_another": "FAILED",
        "test_fails_on_its_own": "FAILED",
    }, proc.stdout + proc.stderr
    text = proc.stdout
    assert "started a process: " in text and "must be marked slow" in text
    assert "started a worker process (SpawnProcess)" in text
    assert "uses the fixture 'child', which started a process: " in text
    assert "its own failure" in text  # a test's own failure is reported as such
    assert "processes started by" in text  # --show-processes

