"""Where shard tasks run: in this process, on joblib's loky workers, or on a Dask cluster.
Results come back in task order and nothing a task writes depends on its worker.
"""

from __future__ import annotations

import contextlib
import importlib
import itertools
import logging
import os
import signal
import threading
from pathlib import Path

from factcheck.errors import InputError, check_choice
from factcheck.progress import progress as progress_bar
from factcheck.tagging.heap import keep_freed_memory

BACKENDS = ("loky", "dask")
CLUSTER_HINT = "needs the optional extra dask[distributed]: pip install -e '.[cluster]'"
# The environment variables that size a worker's native thread pools (BLAS, OpenMP, numexpr).
NATIVE_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                      "BLIS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")


@contextlib.contextmanager
def sigint_for_this_process_only():
    """Block SIGINT while worker processes are created: they inherit the mask, so a Ctrl-C
    stops this process alone, which stops its workers (delivered as the block ends). The
    resource trackers start first: starting multiprocessing's unblocks SIGINT (Python 3.11)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    from multiprocessing import resource_tracker

    from joblib.externals.loky.backend import resource_tracker as loky_resource_tracker
    resource_tracker.ensure_running()
    loky_resource_tracker.ensure_running()
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def resolve_jobs(jobs: int | None) -> int:
    """joblib's convention: -1 = every core this process may use; None or 0 = 1."""
    if jobs is None or jobs == 0:
        return 1
    if jobs < 0:
        try:
            cores = len(os.sched_getaffinity(0))
        except AttributeError:  # not Linux
            cores = os.cpu_count() or 1
        return max(1, cores + 1 + jobs)
    return jobs


@contextlib.contextmanager
def dask_client(scheduler: str | None, workers: int):
    """A distributed Client: the given scheduler, or a LocalCluster of processes we own."""
    try:
        from dask.distributed import Client, LocalCluster
        from distributed.comm import get_address_host_port
        from distributed.utils import silence_logging_cmgr
    except ImportError:
        raise InputError(None, "dask", CLUSTER_HINT, param="backend") from None
    if not scheduler:
        # The scheduler serves HTTP even without a dashboard: a free loopback port avoids
        # "port in use" when two runs overlap.
        with sigint_for_this_process_only():  # its event loop thread starts the worker processes
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                   dashboard_address=None, scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
                                   silence_logs=logging.CRITICAL)
        client = None
        try:
            client = Client(cluster, set_as_default=False)
            yield client
        except BaseException:
            # Closing a cluster whose workers died can fail; the error on its way is the one to report.
            for closable in (client, cluster):
                with contextlib.suppress(Exception):
                    if closable is not None:
                        closable.close()
            raise
        client.close()
        cluster.close()
        return
    try:
        # Checked first: a half-made Client on a bad address prints a traceback at exit.
        get_address_host_port(scheduler)
    except ValueError as exc:
        raise InputError(None, scheduler, f"not a scheduler address ({exc}); "
                         "expected tcp://HOST:PORT", param="scheduler") from None
    import dask
    from dask.utils import parse_timedelta
    timeout = parse_timedelta(dask.config.get("distributed.comm.timeouts.connect"), default="seconds")
    with silence_logging_cmgr(logging.CRITICAL):
        try:
            client = Client(scheduler, timeout=timeout, set_as_default=False)
        except (OSError, ValueError, TypeError) as exc:  # OSError includes TimeoutError
            raise InputError(None, scheduler, f"cannot connect ({exc})", param="scheduler") from None
        try:
            try:
                client.wait_for_workers(1, timeout=timeout)
            except TimeoutError:
                raise InputError(None, scheduler, f"no workers connected within {timeout:g} s "
                                 f"(start some with `dask worker {scheduler}`)", param="scheduler") from None
            yield client
        finally:
            client.close()


def require_backend(backend: str) -> str:
    """``backend`` if known and installed (Dask is an optional extra)."""
    if check_choice(backend, "backend", BACKENDS) == "dask":
        try:
            importlib.import_module("distributed")  # the extra's package (dask comes with it)
        except ImportError:
            raise InputError(None, "dask", CLUSTER_HINT, param="backend") from None
    return backend


class WorkerPool:
    """Runs the map stages of one job (a context manager), stopping its workers on exit.
    ``keep_heap``: local workers keep their freed heap (:mod:`.heap`)."""

    def __init__(self, backend: str = "loky", jobs: int | None = 1, scheduler: str | None = None,
                 keep_heap: bool = False):
        self.backend = require_backend(backend)
        self.jobs = resolve_jobs(jobs)
        self.scheduler = scheduler
        self.keep_heap = keep_heap
        self._stack = contextlib.ExitStack()
        self._client = None
        self._warm = None
        self.started_workers = False

    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, *exc) -> None:
        self._client = None
        self._stack.__exit__(*exc)  # with the exception on its way (see dask_client)

    def start(self) -> "WorkerPool":
        """Connect to the scheduler (or start the LocalCluster) now, to fail early."""
        if self.backend == "dask" and self._client is None:
            self._client = self._stack.enter_context(dask_client(self.scheduler, self.jobs))
        return self

    def warm_up(self, func) -> None:
        """Have each local worker run ``func`` (imports) first in the next stream."""
        if self.backend == "loky" and self.jobs > 1:
            self._warm = func

    def check_shared(self, path: Path) -> None:
        """Dask: every worker must see ``path`` (a file the driver just wrote)."""
        if self.backend != "dask":
            return
        path = Path(path).resolve()
        seen = self.start()._client.run(os.path.exists, str(path))
        blind = sorted(worker for worker, ok in seen.items() if not ok)
        if blind:
            raise InputError(path, None, f"not visible to Dask worker(s) {', '.join(blind)}: it must be on "
                             "storage shared by this machine and every worker")

    def map(self, func, arglist: list[tuple], desc: str = "", progress: bool | None = None, common=None) -> list:
        """``func(*args)`` (``func(*args, common)``) for every args tuple, results in input order."""
        if not arglist:
            return []
        return self.stream(func, arglist, desc, progress, common, total=len(arglist))

    def stream(self, func, args_iter, desc: str = "", progress: bool | None = None, common=None,
               total: int | None = None, on_done=None, on_result=None) -> list:
        """As :meth:`map`, each args tuple submitted as soon as ``args_iter`` yields it;
        ``on_done(args)`` runs here for each finished task, in input order; ``on_result(args,
        result)`` too, handed the result, which is then not kept (None in the list)."""
        def finish(args, result):  # here, in input order: what the list keeps
            if on_done is not None:
                on_done(args)
            return result if on_result is None else on_result(args, result)

        extra = () if common is None else (common,)
        args_iter = iter(args_iter)
        with progress_bar(desc=desc, total=total, unit="shards", enabled=progress) as bar:
            if self.backend == "dask":
                return self._dask_map(func, args_iter, common, desc, _InOrder(bar, finish))
            if self._warm is None:
                first = list(itertools.islice(args_iter, 2))
                args_iter = itertools.chain(first, args_iter)
            if self._warm is None and (self.jobs == 1 or len(first) < 2):
                # In process, every task produced first (the crash tests' order of writes).
                results = []
                for args in list(args_iter):
                    result = func(*args, *extra)
                    bar.update(1)
                    results.append(finish(args, result))
                return results
            return self._loky_map(func, args_iter, extra, bar, finish)

    def _loky_map(self, func, args_iter, extra, bar, finish) -> list:
        from joblib import Parallel, delayed
        given, skip, warm, self._warm = [], [], self._warm, None

        def calls():
            # The first submit starts the workers: SIGINT stays blocked until they exist
            # (warm-up or no-op calls meanwhile).
            with sigint_for_this_process_only():
                while len(skip) < 4 * self.jobs and ((warm and len(skip) < self.jobs) or not _loky_started()):
                    skip.append(True)
                    yield delayed(warm or int)()
            for args in args_iter:
                given.append(args)
                yield delayed(_task)(func, self.keep_heap, args + extra)

        if not self.started_workers:
            self.started_workers = True
            previous = threading.excepthook
            threading.excepthook = _without_loky_cancel_race(previous)
            self._stack.callback(setattr, threading, "excepthook", previous)  # after the workers stop
            self._stack.callback(_stop_loky_workers)
        results = []
        parallel = Parallel(n_jobs=self.jobs, backend="loky", return_as="generator", pre_dispatch="all",
                            batch_size=1, max_nbytes=None)
        for i, result in enumerate(parallel(calls())):
            if i < len(skip):
                continue  # a warm-up call's
            bar.update(1)
            results.append(finish(given[len(results)], result))
        return results

    def _dask_map(self, func, args_iter, common, desc, done: "_InOrder") -> list:
        # Futures rather than joblib's Dask backend: it never returns from a KilledWorker.
        from distributed import as_completed
        client = self.start()._client
        futures = []
        try:
            extra = () if common is None else tuple(client.scatter([common], broadcast=True, hash=False))
            for args in args_iter:  # one by one: an error while producing them cancels those sent
                futures.append(client.submit(func, *args, *extra, pure=False))
                done.args.append(args)
            position = {future.key: i for i, future in enumerate(futures)}
            for future in as_completed(futures, loop=client.loop):
                # as_completed also yields futures cancelled under it (scheduler lost)
                if future.status != "finished":
                    future.result()  # raises the task's own error, KilledWorker or cancelled
                    raise RuntimeError(f"dask task {future.key} ended as {future.status}")
                done.finished(position[future.key], future)
            return done.results  # input order
        except _cluster_failures() as exc:
            param, place = ("scheduler", self.scheduler) if self.scheduler else ("backend", "dask")
            raise InputError(None, place, f"{desc or 'map'} stopped, the Dask cluster failed "
                             f"({type(exc).__name__}: {exc}); finished shards are kept: "
                             "rerun the same command to resume", param=param) from None
        except BaseException:
            client.cancel(futures)  # a task failed (e.g. a corrupt shard): leave nothing queued
            raise


_HEAP_KEPT = False


def _task(func, keep_heap: bool, args: tuple):
    global _HEAP_KEPT
    if keep_heap and not _HEAP_KEPT:
        keep_freed_memory()
        _HEAP_KEPT = True
    return func(*args)


def _loky_started() -> bool:
    import multiprocessing
    return any("loky" in type(p).__module__ for p in multiprocessing.active_children())


def _without_loky_cancel_race(previous):
    """``threading.excepthook`` less one loky race: when a task fails (a full disk), joblib
    cancels the queued calls and loky's manager thread may look one up after it is gone
    (``KeyError`` in ``add_call_item_to_queue``), printing an 11-line traceback under the
    failure's own one line. Every other thread exception goes to ``previous``."""
    import traceback

    def hook(args):
        frames = traceback.extract_tb(args.exc_traceback) if args.exc_traceback else []
        if args.exc_type is KeyError and frames and frames[-1].name == "add_call_item_to_queue" \
                and "loky" in frames[-1].filename:
            return
        previous(args)
    return hook


def _stop_loky_workers() -> None:
    """Stop joblib's loky workers now (joblib keeps them for reuse)."""
    from joblib.externals.loky import get_reusable_executor
    get_reusable_executor(reuse=True).shutdown(wait=True)


def _cluster_failures() -> tuple[type[BaseException], ...]:
    """What distributed raises when the cluster, not a task, fails."""
    import asyncio
    import concurrent.futures

    from distributed.comm.core import CommClosedError
    from distributed.scheduler import KilledWorker
    # distributed's FutureCancelledError is a concurrent.futures.CancelledError.
    return CommClosedError, KilledWorker, concurrent.futures.CancelledError, asyncio.CancelledError


class _InOrder:
    """A Dask stream's finished tasks: counted as they finish, their results finished in input order."""

    def __init__(self, bar, finish):
        self.bar, self.finish = bar, finish
        self.args: list[tuple] = []
        self.ready: dict[int, object] = {}
        self.results: list = []

    def finished(self, i: int, future) -> None:
        self.ready[i] = future
        self.bar.update(1)
        while len(self.results) in self.ready:
            future = self.ready.pop(len(self.results))
            self.results.append(self.finish(self.args[len(self.results)], future.result()))
