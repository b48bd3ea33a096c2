"""The Dask backend: the tagging job on a real multi-process Dask cluster.

The cluster is a ``LocalCluster`` of 2 worker processes that the tests start and stop
themselves; the job reaches it only through its scheduler address, exactly as it would
reach a scheduler on another machine (``factcheck tag --backend dask --scheduler ...``).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap

import pytest

from helpers import DEMO, assert_one_line_error, run_cli
from factcheck.formats.evidence import source_spec
from factcheck.tagging import store
from factcheck.tagging.job import TagJob

distributed = pytest.importorskip("distributed")

FAST_CONNECT = {"DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "2s"}
# The scheduler's HTTP server (on even without a dashboard) on a free port, not 8787.
NO_FIXED_PORT = {"scheduler_kwargs": {"dashboard_address": "127.0.0.1:0"}}


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, **NO_FIXED_PORT) as c:
        yield c


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _same_files(a, b) -> None:
    names = ["manifest.json", *store.read_manifest(a).files()]
    assert len(names) > 4
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


@pytest.mark.slow
def test_cluster_run_is_byte_identical_to_local_run(tmp_path, real_sample_20k, cluster):
    local = tmp_path / "local"
    TagJob(progress=False, jobs=1, shard_size=5000).run(source_spec(real_sample_20k), local)
    # Through the CLI, from another working directory and with a relative --out: the
    # workers' working directory is not the driver's.
    proc = run_cli("tag", real_sample_20k, "--out", "idx-dask", "--shard-size", "5000",
                   "--backend", "dask", "--scheduler", cluster.scheduler_address, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "20000 passages in 4 shards" in proc.stdout
    on_dask = tmp_path / "idx-dask"
    _same_files(local, on_dask)
    exports = []
    for index in (local, on_dask):
        dest = tmp_path / f"{index.name}.jsonl"
        proc = run_cli("export-tags", index, "--out", dest)
        assert proc.returncode == 0, proc.stderr
        exports.append(dest.read_bytes())
    assert exports[0] == exports[1] and exports[0].count(b"\n") == 20000
    # Both map stages really ran on this cluster (its scheduler lives in this process).
    assert {"count_shard", "tag_shard"} <= set(cluster.scheduler.task_prefixes)


@pytest.mark.slow
def test_own_local_cluster_is_started_once_per_run(tmp_path, monkeypatch):
    import dask.distributed
    started = []

    class CountingCluster(dask.distributed.LocalCluster):
        def __init__(self, *args, **kwargs):
            started.append(kwargs.get("n_workers"))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(dask.distributed, "LocalCluster", CountingCluster)
    src = source_spec(DEMO / "evidence.json")
    TagJob(progress=False, jobs=1, shard_size=7).run(src, tmp_path / "local")
    TagJob(progress=False, jobs=2, shard_size=7, backend="dask").run(src, tmp_path / "dask")
    assert started == [2]  # one cluster for both map stages (6 shards each)
    _same_files(tmp_path / "local", tmp_path / "dask")


@pytest.mark.slow
def test_output_directory_workers_cannot_see_is_one_line(tmp_path, cluster):
    from factcheck.errors import InputError
    from factcheck.tagging.backends import WorkerPool
    with WorkerPool("dask", scheduler=cluster.scheduler_address) as pool:
        pool.check_shared(DEMO / "evidence.json")  # visible: no error
        with pytest.raises(InputError, match="not visible to Dask worker.*shared by this machine"):
            pool.check_shared(tmp_path / "only-on-the-driver")


@pytest.mark.slow
@pytest.mark.parametrize("address, message", [
    ("tcp://127.0.0.1:{port}", "cannot connect"),
    ("127.0.0.1", "not a scheduler address"),
    ("foo://127.0.0.1:{port}", "not a scheduler address"),
])
def test_bad_or_unreachable_scheduler_is_one_line_exit_2(tmp_path, address, message):
    address = address.format(port=_free_port())
    out = tmp_path / "out"
    proc = run_cli("tag", DEMO / "evidence.json", "--out", out, "--backend", "dask",
                   "--scheduler", address, env=FAST_CONNECT)
    assert_one_line_error(proc, f"--scheduler {address}", message)
    assert not (out / "manifest.json").exists()


@pytest.mark.slow
def test_scheduler_without_workers_is_one_line_exit_2(tmp_path):
    with distributed.LocalCluster(n_workers=0, processes=True, dashboard_address=None,
                                  **NO_FIXED_PORT) as empty:
        proc = run_cli("tag", DEMO / "evidence.json", "--out", tmp_path / "out", "--backend", "dask",
                       "--scheduler", empty.scheduler_address, env=FAST_CONNECT)
    assert_one_line_error(proc, "no workers connected", "dask worker")


@pytest.mark.slow
def test_worker_that_keeps_dying_is_an_error_not_a_hang():
    """A task that kills its worker every time (as an out-of-memory kill would) must end
    the stage with one InputError; joblib 1.6's Dask backend waited forever instead."""
    script = textwrap.dedent("""
        import os, signal
        from factcheck.errors import InputError
        from factcheck.tagging.backends import WorkerPool

        def die(i):
            os.kill(os.getpid(), signal.SIGKILL)

        if __name__ == "__main__":
            try:
                with WorkerPool("dask", 2) as pool:
                    pool.map(die, [(1,)], desc="dying", progress=False)
            except InputError as exc:
                print("InputError:", exc.one_line({"backend": "--backend", "scheduler": "--scheduler"}))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert "InputError: --backend dask: dying stopped" in proc.stdout, proc.stdout + proc.stderr
    assert "KilledWorker" in proc.stdout

