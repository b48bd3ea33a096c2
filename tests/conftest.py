"""Fixtures shared by every test folder, and the rule that keeps the fast loop fast.

Fixtures: the real course data (when present), the demo index, and the demo runs -- one
``factcheck run`` of data/demo per mode (and one with ``--method rerank``), each built
once per session in this process and shared by every test that only reads a run (copy
it before changing anything in it: a changed shared run fails at the end of the session).
Helpers (paths, CLI runners, checks) are in ``helpers.py``.

The rule: a test that starts a process -- a child process, worker processes, a server, a
browser, a cluster -- is marked ``slow``, so ``pytest -m "not slow"`` (the fast loop)
starts none. An audit hook sees every process this interpreter starts; a test not marked
``slow`` that starts one, itself or through a fixture it uses, fails naming the process.
``pytest --show-processes`` lists the processes each test started and the runs it made.
"""

from __future__ import annotations

import gzip
import json
import multiprocessing.process
import os
import sys
from pathlib import Path

import pytest

from helpers import DEMO, OPEN_INSTALLED, make_run, run_cli, shared_file, written_files

# As ``factcheck.cli.main`` sets them for a real command (here before numpy is imported):
# native thread pools of one thread, so a run made in this process computes what the
# command computes.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")


# ---------------------------------------------------------------------- the data

@pytest.fixture(scope="session")
def proxy_corpus() -> dict:
    with gzip.open(shared_file("evidence.json.gz"), "rt", encoding="utf-8") as fh:
        return json.load(fh)


@pytest.fixture(scope="session")
def real_sample_20k(tmp_path_factory, proxy_corpus) -> Path:
    """A real 20K-passage sample (every 15th passage of the proxy corpus), course format."""
    items = list(proxy_corpus.items())[::15][:20000]
    path = tmp_path_factory.mktemp("sample") / "sample-20k.json"
    path.write_text(json.dumps(dict(items), ensure_ascii=False), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def demo_index(tmp_path_factory) -> Path:
    from factcheck.formats.evidence import source_spec
    from factcheck.tagging.job import TagJob
    out = tmp_path_factory.mktemp("demo") / "index"
    TagJob(progress=False).run(source_spec(DEMO / "evidence.json"), out)
    return out


# ---------------------------------------------------------------------- the demo runs

def _shared_run(tmp_path_factory, name: str, *extra: str, says: str = ""):
    """A demo run built once (its summary line must contain ``says``); after the session,
    fails if a test changed what it wrote."""
    out = tmp_path_factory.mktemp(name) / "run"
    proc = make_run(out, *extra)
    assert says in proc.stdout, proc.stdout
    before = written_files(out)
    yield out
    after = written_files(out)
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert not changed, f"a test changed the shared {name} (copy it first): {changed[:5]}"


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory):
    """``factcheck run --data-dir data/demo --out RUN --quiet --jobs 1`` (course mode), made in
    this process: a run directory to read (index, model, predictions, explanations,
    metrics, report, plots). tests/pipeline/test_demo_runs.py checks that it holds what the
    command writes."""
    yield from _shared_run(tmp_path_factory, "demo-run")


@pytest.fixture(scope="session")
def open_demo_run(tmp_path_factory):
    """The demo run in the open mode (``--mode open``); skips without the open extra."""
    if not OPEN_INSTALLED:
        pytest.skip("needs the open extra (pip install -e '.[open]')")
    yield from _shared_run(tmp_path_factory, "open-demo-run", "--mode", "open", says="open mode")


@pytest.fixture(scope="session")
def reranked_demo_run(tmp_path_factory):
    """The demo run made with ``--method rerank``: its evidence is the reranker's and its
    classifier reads another retriever's passages (chosen with it by cross-validation) --
    the case where the app must show what a verdict was computed from."""
    runs = _shared_run(tmp_path_factory, "reranked-demo-run", "--method", "rerank")
    out = next(runs)
    run = json.loads((out / "metrics.json").read_text("utf-8"))["run"]
    assert run["retriever"]["chosen"] == "rerank"
    assert run["classifier"]["reader"] != "rerank", "this run no longer reads another retriever's passages"
    yield out
    next(runs, None)


@pytest.fixture(scope="session")
def demo_command(tmp_path_factory):
    """The README's demo command as a user types it, ``factcheck run --data-dir data/demo
    --out RUN`` (progress on, every core), in a child process: ``(RUN, its
    CompletedProcess)``, for the tests of what the command prints (they are slow)."""
    out = tmp_path_factory.mktemp("demo-command") / "run"
    proc = run_cli("run", "--data-dir", DEMO, "--out", out)
    assert proc.returncode == 0, proc.stderr
    return out, proc


@pytest.fixture(scope="session")
def quiet_demo_command(tmp_path_factory):
    """``factcheck run --data-dir data/demo --out RUN --quiet`` (every core) in a child
    process: ``(RUN, its CompletedProcess)``."""
    out = tmp_path_factory.mktemp("quiet-demo-command") / "run"
    proc = run_cli("run", "--data-dir", DEMO, "--out", out, "--quiet")
    assert proc.returncode == 0, proc.stderr
    return out, proc


# ---------------------------------------------------------------------- processes need `slow`

class _ProcessAudit:
    """Every process this interpreter starts (from any thread: a server's, a cluster's),
    charged to the test running and to every fixture being set up at the time."""

    EVENTS = frozenset({"subprocess.Popen", "os.fork", "os.forkpty", "os.posix_spawn", "os.spawn",
                        "os.system", "os.exec"})

    def __init__(self):
        self.item = None         # the test in setup, call or teardown
        self.setting_up = []     # the fixtures being set up, innermost last
        self.by_test = {}        # nodeid -> [what it started]
        self.by_fixture = {}     # FixtureDef -> the first thing its setup started
        self.runs = {}           # nodeid -> [`factcheck run`s], with --show-processes

    def saw(self, what: str) -> None:
        for fixturedef in self.setting_up:
            self.by_fixture.setdefault(fixturedef, what)
        self.by_test.setdefault(self.item.nodeid if self.item else "(outside any test)", []).append(what)

    def audit(self, event, args):
        if event not in self.EVENTS:
            return
        what = event
        if event == "subprocess.Popen":
            argv = args[1] if isinstance(args[1], (list, tuple)) else [args[1]]
            argv = [os.fsdecode(a) if isinstance(a, (bytes, os.PathLike)) else str(a) for a in argv]
            what = "process: " + " ".join(a if len(a) <= 60 else a[:57] + "..." for a in argv)
            if argv[1:4] == ["-m", "factcheck", "run"]:
                self.ran(what)
        self.saw(what)

    def ran(self, what: str) -> None:
        self.runs.setdefault(self.item.nodeid if self.item else "(outside any test)", []).append(what)

    def why_slow(self, item) -> str | None:
        """Why ``item`` must be marked slow, or None."""
        started = self.by_test.get(item.nodeid)
        if started:
            return f"started a {started[0]}"
        info = getattr(item, "_fixtureinfo", None)  # what each fixture name resolved to for this test
        for defs in (info.name2fixturedefs.values() if info is not None else ()):
            if defs and defs[-1] in self.by_fixture:
                return f"uses the fixture {defs[-1].argname!r}, which started a {self.by_fixture[defs[-1]]}"
        return None


_AUDIT = _ProcessAudit()
sys.addaudithook(_AUDIT.audit)  # for the whole session (a hook cannot be removed); cheap per event

# multiprocessing's spawn and loky start workers without an audit event: count their start.
_start = multiprocessing.process.BaseProcess.start


def _audited_start(self, *args, **kwargs):
    _AUDIT.saw(f"worker process ({type(self).__name__})")
    return _start(self, *args, **kwargs)


multiprocessing.process.BaseProcess.start = _audited_start


def pytest_addoption(parser):
    parser.addoption("--show-processes", action="store_true",
                     help="list the processes each test started and the `factcheck run`s it made")


def pytest_configure(config):
    if config.getoption("--show-processes"):  # count the runs made in this process too
        import factcheck.pipeline.run as run_module
        real = run_module._run_pipeline

        def counted(data_dir, out, *args, **kwargs):
            _AUDIT.ran(f"in this process: factcheck run --data-dir {data_dir} --out {out}")
            return real(data_dir, out, *args, **kwargs)
        run_module._run_pipeline = counted


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef, request):
    _AUDIT.setting_up.append(fixturedef)
    try:
        return (yield)
    finally:
        _AUDIT.setting_up.pop()


def _check(item) -> None:
    if item.get_closest_marker("slow") is None and (why := _AUDIT.why_slow(item)):
        pytest.fail(f"{why}: a test that starts a process, itself or through a fixture, must be "
                    "marked slow (see docs/development.md)", pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    _AUDIT.item = item
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    result = yield  # (a test that fails on its own reports that, not this)
    _check(item)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    started = len(_AUDIT.by_test.get(item.nodeid, ()))
    try:
        return (yield)
    finally:
        _AUDIT.item = None
        if len(_AUDIT.by_test.get(item.nodeid, ())) > started:  # a finalizer started one
            _check(item)


def pytest_terminal_summary(terminalreporter, config):
    if not config.getoption("--show-processes"):
        return
    terminalreporter.section("processes started")
    for nodeid, started in sorted(_AUDIT.by_test.items()):
        terminalreporter.write_line(f"{len(started):4d}  {nodeid}")
        for what in started:
            terminalreporter.write_line(f"        {what[:200]}")
    terminalreporter.section("factcheck runs")
    for nodeid, runs in sorted(_AUDIT.runs.items()):
        for what in runs:
            terminalreporter.write_line(f"{nodeid}: {what[:200]}")
    terminalreporter.write_line(
        f"{sum(map(len, _AUDIT.by_test.values()))} processes started by {len(_AUDIT.by_test)} tests; "
        f"{sum(map(len, _AUDIT.runs.values()))} `factcheck run`s")
