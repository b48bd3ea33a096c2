"""A Dask cluster of separate processes on this machine, started the way ``docs/cluster.md``
tells a user to start one: ``dask scheduler`` and ``dask worker ADDRESS --nworkers N --nthreads 1``.

A command reaches it only through its address, as it would reach a scheduler on another
machine; a benchmark samples the two process trees (the scheduler; the worker command with
its nannies and worker processes) beside the command it measures.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

from harness.measure import reap_group


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the process group ``proc`` leads (Dask's own clean shutdown), then wait for all of it."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    reap_group(proc.pid)


def address(port: int) -> str:
    """The scheduler address of :func:`dask_cluster` on ``port``."""
    return f"tcp://127.0.0.1:{port}"


@contextlib.contextmanager
def dask_cluster(port: int, workers: int, scratch: Path, timeout: float = 120.0):
    """Yield ``[scheduler pid, worker command pid]`` of a cluster of ``workers`` single-threaded
    worker processes at :func:`address` ``(port)``, once every worker has joined; both process
    groups are stopped on exit. Their output goes to ``scratch``."""
    from distributed import Client  # the cluster extra: without it, this is the error

    where = address(port)
    dask = [sys.executable, "-m", "dask"]
    procs = []
    with contextlib.ExitStack() as stack:  # stopped in reverse: the workers first
        for name, cmd in (("scheduler", [*dask, "scheduler", "--host", "127.0.0.1", "--port", str(port),
                                         "--no-dashboard"]),
                          ("workers", [*dask, "worker", where, "--nworkers", str(workers), "--nthreads", "1",
                                       "--no-dashboard", "--local-directory", str(scratch / "dask-worker-space")])):
            with open(scratch / f"dask-{name}.log", "wb") as log:
                procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
            stack.callback(_stop, procs[-1])
        with Client(where, timeout=timeout, set_as_default=False) as client:
            client.wait_for_workers(workers, timeout=timeout)
        yield [p.pid for p in procs]
