"""Where a map runs: in this process, on a local Dask cluster, or on an existing
one; split from :mod:`tracelens.engine.hosts`, which decides *what* is mapped.

:func:`run_map` decides where: ``workers`` 1 (or one item) in this process; more on a
``distributed.LocalCluster`` of that many single-threaded worker processes on 127.0.0.1;
``scheduler`` (or ``TRACELENS_SCHEDULER``) on an existing cluster whose workers can read the
paths. An input error on a worker comes back as the same :class:`TraceInputError`, first
failing item in input order; a worker that dies is retried by Dask, and a file that kills its
workers every time fails with its path.

Nothing waits forever: a cluster (local or at ``scheduler``) with no worker
after ``TRACELENS_WORKER_WAIT_S`` seconds (default 60: a worker process starts in a few) is
an error naming its address; a map whose cluster has had no worker for that long (every
worker lost) fails; and a map in which no item has finished for ``TRACELENS_STALL_S``
seconds (default 1800: one host file of several GB maps in minutes, so only a stuck task
waits that long) fails naming the items still running.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence, TypeVar

from tracelens.core.errors import TraceInputError
from tracelens.loading.reading import default_workers

T = TypeVar("T")
R = TypeVar("R")

ENV_SCHEDULER = "TRACELENS_SCHEDULER"
RETRIES = 2  # extra tries of an item whose worker died (input errors are not retried)
ENV_WORKER_WAIT = "TRACELENS_WORKER_WAIT_S"
ENV_STALL = "TRACELENS_STALL_S"
WORKER_WAIT_S = 60.0  # a worker process joins in seconds; a minute is a cluster without any
STALL_S = 1800.0  # no item done for 30 min: longer than any one host file's map takes
POLL_S = 1.0  # how often a waiting map looks at the cluster


def limit_s(name: str, default: float) -> float:
    """The positive number of seconds in environment variable ``name`` (``default`` when it
    is unset); any other value is an error naming the variable, not a silent default."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise TraceInputError(name, f"must be a positive number of seconds, not {raw!r}")
    return value


# ---------------------------------------------------------------------------------------------
# Where the map runs
# ---------------------------------------------------------------------------------------------

def scheduler_address(scheduler: str | None) -> str | None:
    """``--scheduler``, else ``TRACELENS_SCHEDULER``, else None (no existing cluster)."""
    return scheduler or os.environ.get(ENV_SCHEDULER, "").strip() or None


def run_map(fn: Callable[[T], R], items: Sequence[T], workers: int | None = None,
            scheduler: str | None = None, retries: int = RETRIES,
            client: Any = None) -> list[R]:
    """``[fn(x) for x in items]``, in input order, where the module doc says; ``client``:
    a client of :func:`engine_client` to map on (several maps, one cluster start).

    ``fn`` and the items must pickle (a module-level function, a ``functools.partial`` of
    one). The first item (in input order) that raises :class:`TraceInputError` raises it
    here, with its path; the items after it are cancelled.
    """
    items = list(items)
    if client is not None:
        return _map_on(client, fn, items, retries)
    n = min(len(items), workers if workers is not None else default_workers())
    with engine_client(n, scheduler) as own:
        return [fn(x) for x in items] if own is None else _map_on(own, fn, items, retries)


def engine_client(n: int, scheduler: str | None) -> Any:
    """A context giving the client that :func:`run_map` calls may share: on the cluster at
    ``scheduler`` (or ``TRACELENS_SCHEDULER``), else on a local cluster of ``n`` processes
    for ``n`` > 1, else None (map in this process)."""
    import contextlib

    address = scheduler_address(scheduler)
    if address is None and n <= 1:
        return contextlib.nullcontext(None)
    return _client(n, address)


def _map_on(client: Any, fn: Callable[[T], R], items: list[T], retries: int) -> list[R]:
    futures = client.map(_guarded, [fn] * len(items), items, pure=False, retries=retries)
    try:
        return _gather(client, futures, items)
    finally:
        client.cancel([f for f in futures if f is not None])


def _gather(client: Any, futures: list[Any], items: list[Any]) -> list[Any]:
    """Each result as soon as it is done, its future released at once (a worker keeps a
    result only until the client has it); the first failure in input order is raised, once
    the items before it are done, and the items after it are cancelled."""
    index = {f.key: i for i, f in enumerate(futures)}
    results: list[Any] = [None] * len(futures)
    first: tuple[int, TraceInputError] | None = None
    for fut in _completed(client, list(futures), items):
        i = index[fut.key]
        futures[i] = None
        if first is not None and i > first[0]:
            continue  # cancelled: an earlier item failed
        try:
            results[i] = _unwrap(fut, items[i])
        except TraceInputError as exc:
            first = (i, exc)
            client.cancel([f for f in futures[i + 1:] if f is not None])
        del fut
    if first is not None:
        raise first[1]
    return results


def _completed(client: Any, futures: list[Any], items: list[Any]) -> Any:
    """The futures as they finish, waiting in steps of :data:`POLL_S`: an error when the
    cluster has had no worker for ``TRACELENS_WORKER_WAIT_S`` or no future has finished for
    ``TRACELENS_STALL_S`` (see the module doc), never an unbounded wait."""
    import threading

    lost_s, stall_s = limit_s(ENV_WORKER_WAIT, WORKER_WAIT_S), limit_s(ENV_STALL, STALL_S)
    pending = set(futures)
    item = {f.key: x for f, x in zip(futures, items)}
    finished = threading.Event()  # set by each future as it finishes
    for f in futures:
        f.add_done_callback(lambda _: finished.set())
    last = time.monotonic()
    no_workers: float | None = None
    while pending:
        finished.clear()
        done = [f for f in futures if f in pending and f.done()]  # in input order
        if not done:
            finished.wait(POLL_S)
            done = [f for f in futures if f in pending and f.done()]
        now = time.monotonic()
        if done:
            last = now
            pending.difference_update(done)
            yield from done
            continue
        if _workers(client):
            no_workers = None
        else:
            no_workers = now if no_workers is None else no_workers
            if now - no_workers >= lost_s:
                raise TraceInputError(_where(client), f"every worker was lost and none joined "
                                      f"within {lost_s:g} s ({ENV_WORKER_WAIT} raises the limit)")
        if now - last >= stall_s:
            running = sorted(str(getattr(item[f.key], "path", item[f.key])) for f in pending)
            raise TraceInputError(running[0], f"no item finished within {stall_s:g} s, "
                                  f"{len(running)} still running: {', '.join(running)} "
                                  f"({ENV_STALL} raises the limit)")


def _workers(client: Any) -> int:
    """How many workers the client's scheduler has now (0 when it cannot say)."""
    try:
        return len(client.scheduler_info().get("workers", {}))
    except Exception:  # a scheduler that cannot answer has no worker we can use
        return 0


def _where(client: Any) -> str:
    return str(getattr(client.scheduler, "address", None) or "the Dask cluster")


def _wait_for_workers(client: Any, address: str) -> None:
    """At least one worker within ``TRACELENS_WORKER_WAIT_S``, else one error line."""
    wait_s = limit_s(ENV_WORKER_WAIT, WORKER_WAIT_S)
    try:
        client.wait_for_workers(1, timeout=wait_s)
    except TimeoutError:
        raise TraceInputError(address, f"no workers joined within {wait_s:g} s "
                              f"({ENV_WORKER_WAIT} raises the limit)") from None


@dataclass(frozen=True)
class _Failed:
    """An input error as a value: not retried (reading the file again fails again), and
    re-raised by the client in input order."""

    path: str
    problem: str


def _guarded(fn: Callable[[T], R], item: T) -> R | _Failed:
    try:
        return fn(item)
    except TraceInputError as exc:
        return _Failed(exc.path, exc.problem)


def _unwrap(fut: Any, item: Any) -> Any:
    from distributed import KilledWorker

    try:
        value = fut.result()
    except KilledWorker as exc:
        where = getattr(item, "path", item)
        raise TraceInputError(where, "its worker died on every try (out of memory?): "
                              f"{exc}") from None
    if isinstance(value, _Failed):
        raise TraceInputError(value.path, value.problem)
    return value


def this_worker() -> Any | None:
    """This process's Dask worker, or None when this is not one (or Dask is not installed)."""
    try:
        from distributed import get_worker

        return get_worker()
    except (ImportError, ValueError):
        return None


def connect(scheduler: str) -> Any:
    """A client of the running cluster at ``scheduler`` (the cluster a map ran on): how the
    finish reaches the parts the map left on its workers. The caller closes it."""
    from distributed import Client

    return Client(scheduler, set_as_default=False)


def local_cluster(n: int, scratch: str | None = None) -> Any:
    """A quiet ``distributed.LocalCluster`` of ``n`` single-threaded worker processes, on
    127.0.0.1 only (its HTTP endpoints on a free port, no dashboard), each worker's polars
    limited to its share of the cores; ``scratch``: the folder for the workers' spill and
    Dask's lock files (None: Dask's default, under the system's temporary folder)."""
    import contextlib

    import dask
    from distributed import LocalCluster

    quiet = logging.CRITICAL
    for name in ("distributed", "dask"):
        logging.getLogger(name).setLevel(quiet)
    threads = max(1, (os.cpu_count() or 1) // n)
    where = dask.config.set({"temporary-directory": scratch}) if scratch else \
        contextlib.nullcontext()
    with where:
        return LocalCluster(
            n_workers=n, threads_per_worker=1, processes=True, host="127.0.0.1",
            dashboard_address=None, scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
            silence_logs=quiet, local_directory=scratch,
            timeout=limit_s(ENV_WORKER_WAIT, WORKER_WAIT_S),
            env=worker_env(threads))


def worker_env(threads: int) -> dict[str, str]:
    """What a local cluster's workers run with beyond this process's environment: polars
    limited to ``threads`` (the worker's share of the cores), and polars' allocator
    (jemalloc) given as many arenas as those threads instead of four per core of the
    machine, so that one host's map reuses the memory the previous maps freed rather than
    each thread's arena keeping its own (64 hosts on 2 workers: each worker's peak
    289-296 -> 270-277 MB, CPU within the noise; benchmarks/RESULTS.md, round 12). The
    allocator's options already set here are kept (polars writes its defaults into
    ``_RJEM_MALLOC_CONF`` at import, followed by the caller's), and an arena count among
    them is left as it is."""
    conf = os.environ.get("_RJEM_MALLOC_CONF", "")
    if "narenas:" not in conf:
        conf = f"{conf},narenas:{threads}" if conf else f"narenas:{threads}"
    return {"POLARS_MAX_THREADS": str(threads), "_RJEM_MALLOC_CONF": conf}


class _client:
    """A ``distributed.Client`` on a fresh local cluster of ``n`` processes (torn down on
    exit, Ctrl-C included), or on the cluster at ``address``.

    SIGTERM unwinds like Ctrl-C, so the cluster and its scratch folder go with us; either
    arriving while the cluster starts waits until it has started (a half-started cluster
    cannot be closed, and its workers would write into a removed folder)."""

    def __init__(self, n: int, address: str | None) -> None:
        self.n, self.address = n, address
        self.stack: list[Any] = []
        self.on_term: Any = None
        self.starting, self.stopped = True, 0

    def _terminate(self, signum: int, frame: Any) -> None:
        self.stopped = signum
        if not self.starting:
            raise SystemExit(128 + signum)

    def __enter__(self) -> Any:
        import signal
        import tempfile
        import threading

        on_int = None
        if threading.current_thread() is threading.main_thread():  # an ignored signal stays so
            if signal.getsignal(signal.SIGTERM) is not signal.SIG_IGN:
                self.on_term = signal.signal(signal.SIGTERM, self._terminate)
            if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
                on_int = signal.signal(signal.SIGINT, self._terminate)
        try:
            client = self._start(tempfile)
            self.starting = False
            if on_int is not None:
                signal.signal(signal.SIGINT, on_int)
            if self.stopped == signal.SIGINT:
                raise KeyboardInterrupt
            if self.stopped:
                raise SystemExit(128 + self.stopped)
            return client
        except BaseException:
            if on_int is not None:
                signal.signal(signal.SIGINT, on_int)
            self.__exit__(None, None, None)
            raise

    def _start(self, tempfile: Any) -> Any:
        from distributed import Client

        if self.address is not None:
            try:
                client = Client(self.address, set_as_default=False)
            except (OSError, TimeoutError) as exc:
                raise TraceInputError(self.address, "cannot reach the Dask scheduler "
                                      f"({type(exc).__name__}: {exc})") from None
            self.stack.append(client)
            _wait_for_workers(client, self.address)
            return client
        scratch = tempfile.TemporaryDirectory(prefix="tracelens-dask-",
                                              ignore_cleanup_errors=True)
        self.stack.append(scratch)
        try:
            cluster = local_cluster(self.n, scratch.name)
        except (RuntimeError, OSError, TimeoutError) as exc:  # "Nanny failed to start": a
            raise TraceInputError(  # worker killed, or no room to start one; one line
                "local Dask cluster", f"could not start its {self.n} worker processes "
                f"({type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"
                "); run again, or in this process with --workers 1") from None
        self.stack.append(cluster)
        client = Client(cluster, set_as_default=False)
        self.stack.append(client)
        return client

    def __exit__(self, *exc: object) -> None:
        if self.on_term is not None:
            import signal

            signal.signal(signal.SIGTERM, self.on_term)
            self.on_term = None
        while self.stack:
            thing = self.stack.pop()
            try:
                thing.close() if hasattr(thing, "close") else thing.cleanup()
            except Exception:  # closing after a failure must not hide the failure
                pass
