"""Reading the files of one job: the one place that decides threads or processes, and how
many of each, so that files read at once share the CPUs and never oversubscribe them.

Native readers (the XSpace C decoder) are read by threads: it and polars release the GIL, so
two threads keep two cores busy without the ~0.5 s start and the copying of a process; each
file's decoder gets its share of the CPUs. Readers that parse in Python (SQLite rows, JSON) go
to worker processes (``spawn``: polars' threads do not survive ``fork``) that send each frame
back as Arrow IPC bytes, but only when the files are big enough to pay for starting them.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Callable, Iterable

import polars as pl

from tracelens.cost.counters import cost_counters
from tracelens.loading.devices import device_notes, insert_notes
from tracelens.core.errors import TraceInputError
from tracelens.loading.formats import reader_for
from tracelens.loading.long_names import cap_long_names
from tracelens.core.model import Notice, Trace
from tracelens.cost.shapes import cost_shapes

_PROCESS_MIN_BYTES = 64 << 20  # below this, worker processes take longer to start than to help
_FRAMES = ("events", "host_events", "steps", "devices", "modules")


def read_all(files: list[Path], formats: list[str], step_marker: str | None,
             progress: Callable[[Iterable[Path]], Iterable[Path]] | None = None,
             threads: int | None = None) -> list[Trace]:
    """One Trace per file, in order; the first file that cannot be read raises its
    :class:`TraceInputError` (a format without a reader raises before any file is read).
    ``threads``: each native decoder's threads (default: the CPUs shared among the files
    read at once)."""
    n = workers(files)
    if threads is None:
        threads = max(1, (os.cpu_count() or 1) // n) if n > 1 else None
    readers = [(f, _bound(fmt, f, step_marker, threads)) for f, fmt in zip(files, formats)]
    iterator = progress(files) if progress else files
    if n > 1:
        return _read_parallel(files, formats, readers, step_marker, iterator)
    return _read_serial(readers, iterator)


def workers(files: list[Path]) -> int:
    """How many files to read at once: one per file up to :func:`default_workers`."""
    return max(1, min(len(files), default_workers()))


def default_workers() -> int:
    """How many trace files are read at once, here by threads or processes and by the
    engine's workers alike (``tracelens --workers``): ``TRACELENS_WORKERS`` when it is a
    positive integer, else the core count; 1 reads them one after the other."""
    want = os.environ.get("TRACELENS_WORKERS", "").strip()
    return int(want) if want.isdigit() and int(want) > 0 else (os.cpu_count() or 1)


def _bound(fmt: str, f: Path, step_marker: str | None,
           threads: int | None) -> Callable[[Path], Trace]:
    reader = reader_for(fmt, f)
    return lambda path: reader.read(path, step_marker, threads)


def read_one(reader: Callable[[Path], Trace], f: Path) -> Trace:
    """One file through :func:`file_stages`; an exception other than an input error is that
    file's problem too."""
    try:
        trace = file_stages(reader(f))
        cap_long_names(trace, f.name)
        say_if_empty(trace, f)
        return trace
    except TraceInputError:
        raise
    except RecursionError:  # msgspec, orjson and protobuf stop at ~1,000 levels of nesting
        raise TraceInputError(f, "nested too deeply to be a trace (a JSON or protobuf value "
                              "nested past the decoder's depth limit)") from None
    except Exception as exc:  # a file that breaks the reader is that file's problem
        raise TraceInputError(f, f"unreadable ({type(exc).__name__}: {exc})") from exc


NO_DEVICE_ACTIVITY = "no_device_activity"  # the code's last part, whichever reader says it


def say_if_empty(trace: Trace, f: Path) -> None:
    """A file that gave no device activity says so, whatever its format: zeros in every
    table must not read as an idle job (an empty dispatch table, a CSV of its header only,
    a list of records written as ``[]``). Kept a warning, not an error: one empty file
    of a job (a rank that ran nothing) is worth reading with the others."""
    if trace.events.height or any(n.code.endswith(NO_DEVICE_ACTIVITY)
                                  for n in trace.meta.notices):
        return
    trace.meta.warn(Notice.of("load." + NO_DEVICE_ACTIVITY, "{file}: no device activity (no "
                              "kernel, memory copy or memset was read from it)", file=f.name))


def file_stages(trace: Trace) -> Trace:
    """The load stages that belong to each file as its reader left it: costs from hardware
    counters (:func:`tracelens.cost.counters.cost_counters`) and from recorded shapes
    (:func:`tracelens.cost.shapes.cost_shapes`), and device identification
    (:mod:`tracelens.loading.devices`); their notes go where the reader's notices put them."""
    notes = cost_counters(trace)
    notes += cost_shapes(trace)
    notes += device_notes(trace)
    insert_notes(trace.meta.notices, notes)
    return trace


def _read_serial(readers: list[tuple[Path, Callable[[Path], Trace]]],
                 iterator: Iterable[Path]) -> list[Trace]:
    return [read_one(reader, f) for f, (_, reader) in zip(iterator, readers)]


def spawn_safe() -> bool:
    """Worker processes start with ``spawn``, which imports the caller's main script again:
    a script calling ``load`` outside an ``if __name__ == "__main__":`` block would recurse.
    A REPL, notebook or ``python -c`` has no file to re-import."""
    main_file = getattr(sys.modules.get("__main__"), "__file__", None)
    if not main_file:
        return True
    try:
        return "__main__" in Path(main_file).read_text(errors="replace")
    except OSError:
        return False


def _read_parallel(files: list[Path], formats: list[str],
                   readers: list[tuple[Path, Callable[[Path], Trace]]],
                   step_marker: str | None, iterator: Iterable[Path]) -> list[Trace]:
    """Read several files at once; same parts, same order, same errors as one by one."""
    from concurrent.futures import Executor, ThreadPoolExecutor

    n = workers(files)
    threads = all(reader_for(fmt, f).native for f, fmt in zip(files, formats))
    if not threads and (not spawn_safe() or sum(file_size(f) for f in files) < _PROCESS_MIN_BYTES):
        return _read_serial(readers, iterator)  # starting processes would cost more
    pool: Executor
    if threads:
        pool = ThreadPoolExecutor(max_workers=n)
        futures = [pool.submit(read_one, reader, f) for f, reader in readers]
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        pool = ProcessPoolExecutor(max_workers=n, mp_context=multiprocessing.get_context("spawn"))
        futures = [pool.submit(read_in_worker, fmt, f, step_marker)
                   for f, fmt in zip(files, formats)]
    parts: list[Trace] = []
    try:
        for _, fut in zip(iterator, futures):
            parts.append(fut.result() if threads else from_worker(fut.result()))
    finally:
        for fut in futures:
            fut.cancel()
        pool.shutdown(wait=True)
    return parts


def file_size(f: Path) -> int:
    """Its size in bytes; 0 when it cannot be read (its reader says why later)."""
    try:
        return f.stat().st_size
    except OSError:
        return 0


def read_in_worker(fmt: str, f: Path, step_marker: str | None) -> tuple[str, object]:
    """One file read in a worker process: each frame as Arrow IPC bytes (cheap to send and
    to load back), an input error as its path and message."""
    import io
    import pickle

    try:
        part = read_one(_bound(fmt, f, step_marker, None), f)
    except TraceInputError as exc:
        return "error", (exc.path, exc.problem)
    frames = {}
    for key in _FRAMES:
        buf = io.BytesIO()
        getattr(part, key).write_ipc(buf, compression="uncompressed")
        frames[key] = buf.getvalue()
    return "ok", (frames, pickle.dumps(part.meta))


def from_worker(result: tuple[str, object]) -> Trace:
    """The Trace (or the input error) a worker sent back."""
    import pickle

    status, value = result
    if status == "error":
        raise TraceInputError(*value)  # type: ignore[misc]
    frames, meta = value  # type: ignore[misc]
    return Trace(**{k: pl.read_ipc(v) for k, v in frames.items()}, meta=pickle.loads(meta))
