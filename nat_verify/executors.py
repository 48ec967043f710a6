"""Where independent pieces of work run: this process, a pool of processes, or Dask.

Used for the nodes of a fleet (``nat_verify.fleet``) and for the Service ports of one node
(``check.sharing``). An executor runs ``fn(shared, item)`` for every item and returns the results in the items'
order, whatever order they finish in; ``done(index, result)`` is called as each one finishes
(progress). ``shared`` (the cluster) is sent to each worker once, not once per item. Results
do not depend on the executor or on the number of workers: every item is a pure function of
``shared`` and itself.

Dask (``pip install 'dask[distributed]'``) runs on a local cluster of worker processes bound
to the loopback address by default, or on a running scheduler (``scheduler="tcp://host:8786"``),
whose workers must have the same nat-verify installed.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any, Protocol, TypeVar

S = TypeVar("S")
I = TypeVar("I")  # noqa: E741
R = TypeVar("R")
Done = Callable[[int, Any], None]


class Executor(Protocol):
    name: str

    def run(self, fn: Callable[[Any, Any], Any], shared: Any, items: Sequence[Any], done: Done | None = None) -> list[Any]: ...


class ExecutorUnavailable(Exception):
    """The executor asked for cannot run here (Dask not installed, scheduler unreachable)."""


_SHARED: dict[str, Any] = {}


def _init_worker(fn: Callable[[Any, Any], Any], shared: Any) -> None:
    _SHARED["fn"], _SHARED["shared"] = fn, shared


def _run_item(item: Any) -> Any:
    return _SHARED["fn"](_SHARED["shared"], item)


class LocalExecutor:
    """In this process (``workers=1``), or in a pool of ``workers`` forked processes."""

    name = "local"

    def __init__(self, workers: int = 1) -> None:
        self.workers = max(1, workers)

    def run(self, fn: Callable[[S, I], R], shared: S, items: Sequence[I], done: Done | None = None) -> list[R]:
        out: list[Any] = [None] * len(items)
        if self.workers == 1 or len(items) <= 1:
            for i, item in enumerate(items):
                out[i] = fn(shared, item)
                if done:
                    done(i, out[i])
            return out
        ctx = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(min(self.workers, len(items)), mp_context=ctx, initializer=_init_worker, initargs=(fn, shared)) as pool:
            futures = {pool.submit(_run_item, item): i for i, item in enumerate(items)}
            for fut in as_completed(futures):
                i = futures[fut]
                out[i] = fut.result()
                if done:
                    done(i, out[i])
        return out


class DaskExecutor:
    """On Dask: a local cluster of ``workers`` processes, or the scheduler at ``scheduler``."""

    name = "dask"

    def __init__(self, scheduler: str | None = None, workers: int = 2) -> None:
        self.scheduler = scheduler
        self.workers = max(1, workers)

    def run(self, fn: Callable[[S, I], R], shared: S, items: Sequence[I], done: Done | None = None) -> list[R]:
        try:
            from distributed import Client, LocalCluster
            from distributed import as_completed as dask_completed
        except ImportError:
            raise ExecutorUnavailable("--executor dask needs Dask: pip install 'dask[distributed]'") from None
        cluster = None
        try:
            if self.scheduler:
                client = Client(self.scheduler, timeout="10s")
            else:
                cluster = LocalCluster(
                    n_workers=self.workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                    dashboard_address=None, silence_logs=50,
                )  # fmt: skip
                client = Client(cluster)
        except OSError as e:
            if cluster is not None:
                cluster.close()
            raise ExecutorUnavailable(f"cannot reach the Dask scheduler {self.scheduler or '(local)'}: {e}") from None
        try:
            handle = client.scatter(shared, broadcast=True)
            futures = [client.submit(fn, handle, item, pure=False) for item in items]
            index = {f.key: i for i, f in enumerate(futures)}
            out: list[Any] = [None] * len(items)
            for fut in dask_completed(futures):
                i = index[fut.key]
                out[i] = fut.result()
                if done:
                    done(i, out[i])
            return out
        finally:
            client.close()
            if cluster is not None:
                cluster.close()


def make_executor(name: str, scheduler: str | None = None, workers: int = 1) -> Executor:
    if name == "dask":
        return DaskExecutor(scheduler, workers=workers)
    if scheduler:
        raise ExecutorUnavailable("--scheduler needs --executor dask")
    return LocalExecutor(workers)
