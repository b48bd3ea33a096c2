"""Where shard tasks run: in-process, on local worker processes (loky), or on Dask.

The task code is the same everywhere (loky runs it through joblib, Dask through its
futures API); tasks read and write shard files in the output directory (shared storage
on a cluster), so only small arguments travel through the scheduler. Results come back
in task order, and nothing a task writes depends on which worker ran it -- the output
bytes are the same for any backend or number of jobs.

How this bounds memory: a task's arguments are a path, a shard number and a key, never
passages, and a task returns nothing; the one shared argument (the vocabulary) goes to
each worker once. So neither the scheduler nor the driver holds shard data on a
worker's behalf, and a worker holds one shard at a time (plus its per-process stem
memo, bounded by the vocabulary of the text it has seen): peak memory is set by
``--shard-size`` and the vocabulary, not by the corpus size.

One :class:`WorkerPool` serves every map stage of a job. For Dask that means one
connection to the given scheduler -- or one ``LocalCluster`` we start and own -- per
run instead of one per stage; for loky, one set of worker processes, shut down when the
pool closes. Why shut down: idle workers would stay alive for joblib's 300 s idle
timeout, ~550 MB that ``factcheck run`` on 1.2M passages would carry through retriever
training, on top of its own peak (docs/decisions.md).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import importlib
import itertools
import logging
import os
import signal
import sys
import threading
from pathlib import Path

from tqdm.auto import tqdm

from factcheck.errors import InputError
from factcheck.tagging.heap import keep_freed_memory

BACKENDS = ("loky", "dask")
CLUSTER_HINT = "needs the optional extra dask[distributed]: pip install -e '.[cluster]'"
# The environment variables that size native thread pools (BLAS, OpenMP, numexpr) in a
# worker process; set per worker so N workers do not each start one thread per core.
NATIVE_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                      "BLIS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")


@contextlib.contextmanager
def sigint_for_this_process_only():
    """Block SIGINT in this thread while worker processes (and the threads that start more
    of them) are created: a process started meanwhile inherits the blocked signal (fork and
    exec keep the mask), so a terminal's Ctrl-C -- SIGINT to the whole foreground process
    group -- interrupts this process alone, which then stops its workers. Why: workers
    interrupted while importing printed their KeyboardInterrupt tracebacks after
    "interrupted". A Ctrl-C that arrives inside the block is delivered as it ends.

    The resource trackers (multiprocessing's and loky's helper processes) are started
    first: starting multiprocessing's unblocks SIGINT in the calling thread when it is done
    (Python 3.11), which re-opened the window for every worker started after it."""
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


def _dask_timeout() -> float:
    """Dask's own connect timeout (``DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT``), in seconds."""
    import dask
    from dask.utils import parse_timedelta
    return parse_timedelta(dask.config.get("distributed.comm.timeouts.connect"), default="seconds")


@contextlib.contextmanager
def dask_client(scheduler: str | None, workers: int):
    """A distributed Client: the given scheduler, or a LocalCluster of processes we own.

    Connection problems become one-line InputErrors (exit 2): a malformed address, a
    scheduler that does not answer within Dask's connect timeout, or one with no workers.
    Dask's own log lines are silenced meanwhile: every failure it would log reaches the
    user as that one line instead (see :meth:`WorkerPool.map`).
    """
    try:
        from dask.distributed import Client, LocalCluster
        from distributed.comm import get_address_host_port
        from distributed.utils import silence_logging_cmgr
    except ImportError:
        raise InputError(None, "dask", CLUSTER_HINT, param="backend") from None
    if not scheduler:
        # silence_logs takes a logging level (worker processes reject level names). The
        # scheduler serves HTTP even without a dashboard, by default on port 8787; a free
        # loopback port instead avoids a "port in use" warning when two runs overlap.
        with sigint_for_this_process_only():  # its event loop thread starts the worker processes
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                   dashboard_address=None, scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
                                   silence_logs=logging.CRITICAL)
        client = None
        try:
            client = Client(cluster, set_as_default=False)
            yield client
        except BaseException:
            # Shutting the cluster down after its workers died can fail inside distributed
            # itself (seen in 1 of ~5 runs of the keeps-dying test: "can only join a started
            # process" while a nanny restarts a killed worker); the error already on its way
            # (one line, naming what stopped) is the one to report.
            for closable in (client, cluster):
                with contextlib.suppress(Exception):
                    if closable is not None:
                        closable.close()
            raise
        client.close()
        cluster.close()
        return
    try:
        # Checked first: distributed leaves a half-made Client behind on a bad address,
        # whose finaliser prints a traceback at exit.
        get_address_host_port(scheduler)
    except ValueError as exc:
        raise InputError(None, scheduler, f"not a scheduler address ({exc}); "
                         "expected tcp://HOST:PORT", param="scheduler") from None
    timeout = _dask_timeout()
    with silence_logging_cmgr(logging.CRITICAL), _connected(Client, scheduler, timeout) as client:
        yield client


@contextlib.contextmanager
def _connected(Client, scheduler: str, timeout: float):
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
    """``backend`` if known and installed: Dask is an optional extra, so its absence is one
    line saying what to install, raised before a job creates its output directory."""
    if backend not in BACKENDS:
        raise InputError(None, None, f"unknown backend {backend!r}; expected one of {', '.join(BACKENDS)}",
                         param="backend")
    if backend == "dask":
        try:
            importlib.import_module("distributed")  # the extra's package (dask comes with it)
        except ImportError:
            raise InputError(None, "dask", CLUSTER_HINT, param="backend") from None
    return backend


class WorkerPool:
    """Runs the map stages of one job; for Dask it holds one client for all of them.

    Use as a context manager. The Dask client (and the LocalCluster, when no scheduler
    is given) is created on first need -- :meth:`start`, :meth:`check_shared` or a
    non-empty :meth:`map` -- and closed when the context exits.
    """

    def __init__(self, backend: str = "loky", jobs: int | None = 1, scheduler: str | None = None,
                 keep_heap: bool = False):
        self.backend = require_backend(backend)
        self.jobs = resolve_jobs(jobs)
        self.scheduler = scheduler
        # Local workers keep their freed heap between tasks (see factcheck.tagging.heap):
        # for the tagging job's short-lived workers, whose tasks allocate alike.
        self.keep_heap = keep_heap
        self._stack = contextlib.ExitStack()
        self._client = None
        self._loky = None

    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, *exc) -> None:
        # The exception on its way (if any) goes to the client's context, so a failing
        # cluster shutdown after dead workers cannot replace the one-line error (the
        # keeps-dying test failed 1 in ~5 runs under load when this passed no exception).
        self._client = None
        self._stack.__exit__(*exc)

    def close(self) -> None:
        self.__exit__(None, None, None)

    def _executor(self):
        """The loky worker processes of this pool (started on first use, shut down on exit)."""
        if self._loky is None:
            from joblib.externals.loky import get_reusable_executor
            # Each worker's share of the cores for native thread pools (as joblib's own
            # loky backend sets them): the open mode's embedding tasks multiply matrices.
            threads = str(max(1, available_cores() // self.jobs))
            env = {var: threads for var in NATIVE_THREAD_VARS}
            with sigint_for_this_process_only():
                self._loky = get_reusable_executor(max_workers=self.jobs, env=env,
                                                   initializer=keep_freed_memory if self.keep_heap else None)
            self._stack.callback(self._shutdown_loky)
        return self._loky

    def _submit(self, func, *args):
        with sigint_for_this_process_only():  # submit starts (or restarts) the worker processes
            return self._executor().submit(func, *args)

    def _shutdown_loky(self) -> None:
        executor, self._loky = self._loky, None
        # Not kill_workers=True, even after Ctrl-C (which the workers never see): joblib
        # 1.6's loky then raised KeyError/InvalidStateError in its manager thread, printed
        # after "interrupted". The tasks not started are cancelled; a running one finishes
        # its shard (kept for the rerun).
        executor.shutdown(wait=True)

    def start(self) -> "WorkerPool":
        """Connect to the scheduler (or start the LocalCluster) now, to fail early."""
        if self.backend == "dask" and self._client is None:
            self._client = self._stack.enter_context(dask_client(self.scheduler, self.jobs))
        return self

    def warm_up(self, func) -> None:
        """Start the local worker processes now and have each run ``func`` (imports), so
        they are ready when the first task comes; the caller does not wait (call it only
        when there will be several tasks). Dask workers are long-lived and in-process
        runs have none: nothing to do."""
        if self.backend == "loky" and self.jobs > 1:
            for _ in range(self.jobs):
                self._submit(func)

    def check_shared(self, path: Path) -> None:
        """Dask: every worker must see ``path`` (a file the driver just wrote in the output
        directory), or its tasks would fail on "missing shard" one by one."""
        if self.backend != "dask":
            return
        path = Path(path).resolve()
        seen = self.start()._client.run(os.path.exists, str(path))
        blind = sorted(worker for worker, ok in seen.items() if not ok)
        if blind:
            raise InputError(path, None, f"not visible to Dask worker(s) {', '.join(blind)}: the output "
                             "directory must be on storage shared by this machine and every worker")

    def map(self, func, arglist: list[tuple], desc: str = "", quiet: bool | None = None,
            common=None) -> list:
        """Run ``func(*args)`` for every args tuple -- ``func(*args, common)`` when ``common``
        is given -- and return the results in input order. ``common`` is one argument
        shared by every call (the vocabulary): Dask sends it to each worker once instead
        of inside every task."""
        if not arglist:
            return []
        return self.stream(func, arglist, desc, quiet, common, total=len(arglist))

    def stream(self, func, args_iter, desc: str = "", quiet: bool | None = None, common=None,
               total: int | None = None, on_done=None) -> list:
        """As :meth:`map`, but each args tuple is submitted as soon as ``args_iter`` yields
        it, so workers start while the caller is still producing work (the tagging job
        counts shard 0 while its driver reads shard 1). An error of ``args_iter`` (bad
        input) cancels what has not started and propagates as is. ``on_done(args)`` is
        called in this process for each task, in input order, as soon as it and every
        task before it have finished (Dask: once every task is submitted); the tagging
        job merges a shard's counts there while the workers count the next ones. An
        error of ``on_done`` stops the map like a task's own error."""
        extra = () if common is None else (common,)
        bar = tqdm(total=total, desc=desc, unit=" shards", disable=quiet, file=sys.stderr)
        done = _InOrder(bar, on_done)
        try:
            if self.backend == "dask":
                return self._dask_map(func, args_iter, common, desc, done)
            args_iter = iter(args_iter)
            first = list(itertools.islice(args_iter, 2))
            if self.jobs == 1 or len(first) < 2:
                # In process: produce everything first, as a plain map would (one core
                # gains nothing from interleaving, and the order of files written stays
                # the crash tests' order); a single task starts no worker processes.
                tasks = first + list(args_iter)
                results = []
                for i, args in enumerate(tasks):
                    results.append(func(*args, *extra))
                    done.add(args)
                    done.finished(i)
                return results
            return self._loky_map(func, itertools.chain(first, args_iter), extra, done)
        finally:
            bar.close()

    def _loky_map(self, func, args_iter, extra, done: "_InOrder") -> list:
        futures = []
        try:
            for args in args_iter:
                futures.append(self._submit(func, *args, *extra))
                done.add(args)
                done.settle(futures)
            while not done.all_reported(futures):
                waiting = [f for f in futures if not f.done()]
                if waiting:
                    concurrent.futures.wait(waiting, return_when=concurrent.futures.FIRST_COMPLETED)
                done.settle(futures)
            return [f.result() for f in futures]
        except BaseException:
            for future in futures:
                future.cancel()
            raise

    def _dask_map(self, func, arglist, common, desc, done: "_InOrder") -> list:
        # Dask futures directly rather than joblib's Dask backend: when a worker dies
        # with a task too often (KilledWorker), joblib 1.6's backend never reports the
        # failure and Parallel waits forever.
        from distributed import as_completed
        client = self.start()._client
        futures = []
        try:
            extra = () if common is None else tuple(client.scatter([common], broadcast=True, hash=False))
            for args in arglist:  # one by one: an error while producing them cancels those sent
                futures.append(client.submit(func, *args, *extra, pure=False))
                done.add(args)
            position = {future.key: i for i, future in enumerate(futures)}
            for future in as_completed(futures, loop=client.loop):
                # as_completed also yields futures cancelled under it (scheduler lost):
                # never count those as done.
                if future.status != "finished":
                    future.result()  # raises the task's own error, KilledWorker or cancelled
                    raise RuntimeError(f"dask task {future.key} ended as {future.status}")
                done.finished(position[future.key])
            return client.gather(futures)  # input order
        except _cluster_failures() as exc:
            param, place = ("scheduler", self.scheduler) if self.scheduler else ("backend", "dask")
            raise InputError(None, place, f"{desc or 'map'} stopped, the Dask cluster failed "
                             f"({type(exc).__name__}: {exc}); finished shards are kept: "
                             "rerun the same command to resume", param=param) from None
        except BaseException:
            client.cancel(futures)  # a task failed (e.g. a corrupt shard): leave nothing queued
            raise


def _cluster_failures() -> tuple[type[BaseException], ...]:
    """What distributed raises when the cluster, not a task, fails: the scheduler is
    lost, or a task's worker died too often (e.g. killed for memory)."""
    import asyncio
    import concurrent.futures

    from distributed.comm.core import CommClosedError
    from distributed.scheduler import KilledWorker
    # distributed's FutureCancelledError is a concurrent.futures.CancelledError.
    return CommClosedError, KilledWorker, concurrent.futures.CancelledError, asyncio.CancelledError


class _InOrder:
    """Reports finished tasks to a stream's bar and ``on_done``: the bar counts each task
    as it finishes, ``on_done`` gets each task's args in input order."""

    def __init__(self, bar, on_done):
        self.bar, self.on_done = bar, on_done
        self.args: list[tuple] = []
        self.ready: set[int] = set()
        self.reported = 0

    def add(self, args: tuple) -> None:
        self.args.append(args)

    def finished(self, i: int) -> None:
        self.ready.add(i)
        self.bar.update(1)
        while self.reported in self.ready:
            self.ready.discard(self.reported)
            if self.on_done is not None:
                self.on_done(self.args[self.reported])
            self.reported += 1

    def settle(self, futures) -> None:
        """Note the loky futures that have finished; a task's own error stops the map now."""
        for i in range(self.reported, len(futures)):
            if i not in self.ready and futures[i].done():
                futures[i].result()
                self.finished(i)

    def all_reported(self, futures) -> bool:
        return self.reported == len(futures)
