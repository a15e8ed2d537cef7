"""Where independent simulator runs execute (a sweep's points): one registry, :data:`EXECUTORS`.

Each executor calls ``fn(*args)`` for every ``args`` of ``calls``, hands each result to
``on_result`` as it comes (in completion order), and on any exception or Ctrl-C stops what it
started, and only that, before re-raising. ``fn`` must be a module-level function and its
arguments and result picklable. The runs are deterministic, so every executor gives the same
results; they differ in where the runs go:

* ``local``: this machine. One at a time in this process with ``workers`` 1, else a
  :class:`concurrent.futures.ProcessPoolExecutor` of ``workers`` processes.
* ``dask``: a Dask cluster (``dask.distributed``, when installed): with no ``address``, a
  ``LocalCluster`` of ``workers`` single-threaded processes on loopback, started and stopped here;
  with one, the scheduler there, whose workers must import this project (the same code and
  venv) and see the results directory at the same absolute path (a shared filesystem). Only the
  runs this call submitted are cancelled on a stop; a remote cluster is left running.

A machine of 2 cores gains nothing from more than 2 workers; a Dask cluster is for sweeps larger
than one machine runs in the time at hand (README, *Scaling out*).
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

from common.errors import ConfigError

CONNECT_TIMEOUT_S = 10.0
"""How long ``dask`` tries to reach a scheduler at an address before giving up."""

Executor = Callable[[Callable[..., Any], Sequence[tuple], Callable[[Any], None], int, "str | None"], None]
"""``(fn, calls, on_result, workers, address)``."""


def run_local(fn: Callable[..., Any], calls: Sequence[tuple], on_result: Callable[[Any], None], workers: int,
              address: str | None = None) -> None:
    """Here, or in a local process pool of ``workers`` processes (module docstring)."""
    if address:
        raise ConfigError("--executor local runs on this machine; a scheduler address is for --executor dask")
    if workers == 1:
        for args in calls:
            on_result(fn(*args))
        return
    pool = ProcessPoolExecutor(max_workers=min(workers, len(calls)), initializer=_worker_init)
    try:
        futures = [pool.submit(fn, *args) for args in calls]
        # No timeout, as a simulated run has none (a trace may take hours); a worker that dies
        # breaks the pool, which raises here rather than hangs.
        for future in as_completed(futures):
            on_result(future.result())
        pool.shutdown()
    except BaseException:
        _stop_pool(pool)
        raise


def _worker_init() -> None:
    """A pool worker leaves Ctrl-C to its parent, which stops it (SIGTERM) and records what was done;
    a forked worker would otherwise inherit the command line's handlers."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _stop_pool(pool: ProcessPoolExecutor, timeout_s: float = 5.0) -> None:
    """Cancel what has not started and stop the pool's worker processes (SIGTERM, then SIGKILL after
    ``timeout_s``); nothing else. ``_processes`` is the executor's own record of its workers
    (Python 3.14 adds ``terminate_workers()``; this project runs on 3.11). The calls still queued
    for the stopped workers are dropped (``_call_queue``): its feeder thread would otherwise block
    writing a call larger than the pipe holds, and the interpreter wait for it at exit forever."""
    workers = list((pool._processes or {}).values())
    pool._call_queue.cancel_join_thread()
    pool.shutdown(wait=False, cancel_futures=True)
    for p in workers:
        if p.is_alive():
            p.terminate()
    for p in workers:
        p.join(timeout_s)
        if p.is_alive():
            p.kill()
            p.join(timeout_s)


def run_dask(fn: Callable[..., Any], calls: Sequence[tuple], on_result: Callable[[Any], None], workers: int,
             address: str | None = None) -> None:
    """On a Dask cluster: a local one of ``workers`` processes, or the scheduler at ``address``.

    Raises:
        ConfigError: Dask is not installed, or the scheduler cannot be reached (one line).
    """
    try:
        from distributed import Client, LocalCluster
        from distributed import as_completed as dask_completed
    except ImportError:
        raise ConfigError("--executor dask: Dask is not installed here (pip install 'dask[distributed]'), or "
                          "use --executor local") from None
    cluster = None
    try:
        if address:
            client = Client(address, timeout=f"{CONNECT_TIMEOUT_S}s")
        else:
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                                   dashboard_address=None, silence_logs=logging.ERROR)
            client = Client(cluster)
    except OSError as e:  # a scheduler that does not answer: TimeoutError, refused, unknown host
        if cluster is not None:
            cluster.close()
        raise ConfigError(f"--dask-scheduler {address}: cannot reach a Dask scheduler there: {e}"[:300]) from None
    futures: list = []
    try:
        futures = [client.submit(fn, *args, pure=False) for args in calls]
        for future in dask_completed(futures):
            on_result(future.result())
    except BaseException:
        client.cancel(futures)
        raise
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


EXECUTORS: dict[str, Executor] = {"local": run_local, "dask": run_dask}
"""Executor name -> the function that runs a batch of calls there."""


def executor(name: str) -> Executor:
    """The executor registered as ``name``.

    Raises:
        ConfigError: an unknown name (the valid ones listed).
    """
    if name not in EXECUTORS:
        raise ConfigError(f"--executor: {name!r} is not an executor (valid: {', '.join(EXECUTORS)})")
    return EXECUTORS[name]
