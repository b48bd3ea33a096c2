"""Where shard tasks run: in-process, on local worker processes (loky), or on Dask.

All three go through joblib, so the task code is the same everywhere; tasks read and
write shard files in the output directory (shared storage on a cluster), so only small
arguments travel through the scheduler. Results come back in task order, and nothing a
task writes depends on which worker ran it -- the output bytes are the same for any
backend or number of jobs.
"""

from __future__ import annotations

import contextlib
import os
import sys

from joblib import Parallel, delayed, parallel_config
from tqdm.auto import tqdm

from factcheck.errors import InputError

BACKENDS = ("loky", "dask")


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def resolve_jobs(jobs: int | None) -> int:
    if jobs is None or jobs == 0:
        return 1
    if jobs < 0:
        return max(1, available_cores() + 1 + jobs)
    return jobs


@contextlib.contextmanager
def dask_client(scheduler: str | None, workers: int):
    """A distributed Client: the given scheduler, or a LocalCluster of processes we own."""
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:  # pragma: no cover - dask is a declared dependency
        raise InputError(None, None, "--backend dask needs dask[distributed] installed") from None
    if scheduler:
        try:
            client = Client(scheduler, timeout="20s")
        except OSError as exc:
            raise InputError(None, f"--scheduler {scheduler}", f"cannot connect ({exc})") from None
        try:
            yield client
        finally:
            client.close()
        return
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                      dashboard_address=None, silence_logs="error") as cluster, Client(cluster) as client:
        yield client


def parallel_map(func, arglist: list[tuple], *, jobs: int = 1, backend: str = "loky",
                 scheduler: str | None = None, desc: str = "", quiet: bool | None = None) -> list:
    """Run ``func(*args)`` for every args tuple; results in input order."""
    if backend not in BACKENDS:
        raise InputError(None, "--backend", f"unknown backend {backend!r}; expected one of {', '.join(BACKENDS)}")
    if not arglist:
        return []
    jobs = resolve_jobs(jobs)
    bar = tqdm(total=len(arglist), desc=desc, unit=" shards", disable=quiet, file=sys.stderr)
    try:
        if backend == "dask":
            with dask_client(scheduler, jobs) as client:
                n_workers = max(1, len(client.scheduler_info().get("workers", {})) or jobs)
                with parallel_config(backend="dask"):
                    return _run(func, arglist, n_workers, bar)
        if jobs == 1 or len(arglist) == 1:
            results = []
            for args in arglist:
                results.append(func(*args))
                bar.update(1)
            return results
        with parallel_config(backend="loky"):
            return _run(func, arglist, min(jobs, len(arglist)), bar)
    finally:
        bar.close()


def _run(func, arglist, n_jobs, bar):
    results = []
    for result in Parallel(n_jobs=n_jobs, return_as="generator")(delayed(func)(*a) for a in arglist):
        results.append(result)
        bar.update(1)
    return results
