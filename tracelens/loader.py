"""``tracelens.load``: paths in, one classified, validated :class:`Trace` out.

Finds the trace files behind each path, detects each file's format from its content, reads
them with the matching parser, joins hosts onto one clock, repairs same-stream overlaps, marks
steps and classifies every event. This module and the CLI are the only places in the core that
know the parsers.
"""

from __future__ import annotations

import gzip
import os
import re
from pathlib import Path
from typing import Callable, Iterable, Sequence

import polars as pl

from tracelens.align import align_on_collectives
from tracelens.classify import RuleSet, classify
from tracelens.cost import annotate as annotate_costs
from tracelens.cost import op_cost_table, with_hlo_kind
from tracelens.errors import TraceInputError
from tracelens.jobs import check_one_job
from tracelens.jobs import facts as job_facts
from tracelens.model import STEP_SCHEMA, Trace, TraceMeta, validate
from tracelens.prepare import assign_steps, clip_stream_overlaps
from tracelens.steps import mark_steps

XSPACE_SUFFIXES = (".xplane.pb", ".xplane.pb.gz")
_RUN_DIR = re.compile(r"plugins/profile/[^/]+$")


def sniff_format(path: Path) -> str:
    """The format of one file, from its first bytes (and, for gzip, its first inflated bytes)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
    except OSError as exc:
        raise TraceInputError(path, f"cannot read: {exc.strerror or exc}") from None
    if not head:
        raise TraceInputError(path, "empty file")
    if head[:2] == b"\x1f\x8b":
        try:
            with gzip.open(path, "rb") as fh:
                head = fh.read(4096)
        except (OSError, EOFError) as exc:
            raise TraceInputError(path, f"corrupt or truncated gzip data ({exc})") from None
        if not head:
            raise TraceInputError(path, "empty file (after gunzip)")
    if head.startswith(b"SQLite format 3\x00"):
        return "sqlite"
    text = head.lstrip()[:4096]
    if text[:1] in (b"{", b"["):
        if b"rocprofiler-sdk-tool" in text:
            return "rocprof-json"
        if re.search(rb'"(?:schemaVersion|deviceProperties|distributedInfo)"|"args": ?\{"device"',
                     text):
            return "kineto"
        if b"traceEvents" in text:
            return "chrome-json"
        return "json"
    if head[:1] == b"\x0a":
        return "xspace"
    if path.name.endswith(XSPACE_SUFFIXES):
        return "xspace"  # let the XSpace reader say precisely what is wrong
    if _is_rocprof_csv_header(head):
        return "rocprof-csv"
    return "csv" if path.name.lower().endswith(".csv") else "unknown"


# Column names of rocprofv3 CSV files (kernel, API, memory-copy and agent tables, every
# ROCm version and the rocpd-convert variant); a header naming three of them is rocprofv3's.
_ROCPROF_CSV_COLUMNS = frozenset({
    "guid", "kind", "agent_id", "queue_id", "stream_id", "thread_id", "dispatch_id",
    "kernel_id", "kernel_name", "correlation_id", "start_timestamp", "end_timestamp",
    "domain", "function", "process_id", "direction", "source_agent_id",
    "destination_agent_id", "node_id", "logical_node_id", "agent_type", "cu_count",
    "gfx_target_version", "max_engine_clk_fcompute"})


def _is_rocprof_csv_header(head: bytes) -> bool:
    line = head.split(b"\n", 1)[0].decode("utf-8", "replace")
    names = {c.strip().strip('"').strip().lower() for c in line.split(",")}
    return len(names & _ROCPROF_CSV_COLUMNS) >= 3


def find_inputs(path: Path) -> list[Path]:
    """Trace files behind one path: the file itself, the XSpace files of one profile run, or
    the rocprofv3 outputs of a directory (one file per process: ``<pid>_results.db``, else
    ``<pid>_results.json[.gz]``, else ``<pid>_kernel_trace.csv`` standing for its CSV set)."""
    return discover(path)[0]


def discover(path: Path) -> tuple[list[Path], list[str]]:
    """:func:`find_inputs`, and a note for each rocprofv3 process whose trace the folder
    also holds in another format (which one was read, which were not)."""
    if not path.exists():
        raise TraceInputError(path, "no such file or directory")
    if path.is_file():
        return [path], []
    if not path.is_dir():
        raise TraceInputError(path, "not a regular file or directory")
    files = sorted(p for p in path.rglob("*") if p.is_file())
    found = [p for p in files if p.name.endswith(XSPACE_SUFFIXES)]
    runs = sorted({p.parent for p in found})
    if len(runs) > 1 and all(_RUN_DIR.search(r.as_posix()) for r in runs):
        names = ", ".join(r.name for r in runs[:5])
        raise TraceInputError(path, f"holds {len(runs)} profile runs ({names}"
                              f"{', ...' if len(runs) > 5 else ''}); pass one run directory")
    rocprof, notes = _rocprof_outputs(files)
    found += rocprof
    found += [p for p in files if p.name.endswith((".json", ".json.gz")) and p not in found
              and sniff_format(p) == "kineto"]  # PyTorch profiler: one file per rank
    if not found:
        raise TraceInputError(path, "directory holds no trace files (*.xplane.pb[.gz], "
                              "rocprofv3 *_results.db, *_results.json, *_kernel_trace.csv, or "
                              "Kineto *.json[.gz])")
    return sorted(found), notes


# rocprofv3 output names (shared/reference/rocprof.md §1.3), by preference: one per process.
_ROCPROF_OUTPUTS = ("_results.db", "_results.json", "_results.json.gz",
                    "_kernel_trace.csv", "_counter_collection.csv")


def _rocprof_outputs(files: list[Path]) -> tuple[list[Path], list[str]]:
    """One output per process (the preferred format), and a note naming the ones left out.
    A ``counter_collection.csv`` stands for its process only without a kernel trace beside it
    (``--pmc`` alone); with one, the CSV reader takes it as part of that CSV set."""
    seen: dict[tuple[Path, str], list[tuple[int, Path]]] = {}
    for p in files:
        name = "_" + p.name if p.name in ("kernel_trace.csv", "counter_collection.csv") \
            else p.name
        for rank, suffix in enumerate(_ROCPROF_OUTPUTS):
            if name.endswith(suffix):
                seen.setdefault((p.parent, name[: -len(suffix)]), []).append((rank, p))
                break
    chosen, notes = [], []
    for (folder, _), outs in sorted(seen.items()):
        outs.sort()
        chosen.append(outs[0][1])
        if outs[0][1].name.endswith("kernel_trace.csv"):  # its CSV set holds the counters
            outs = [o for o in outs if not o[1].name.endswith("counter_collection.csv")]
        if len(outs) > 1:
            notes.append(f"{folder}: read {outs[0][1].name}; the same rocprofv3 run is also "
                         f"there as {', '.join(p.name for _, p in outs[1:])} (not read)")
    return chosen, notes


def _reader_for(fmt: str, path: Path, step_marker: str | None = None,
                threads: int | None = None) -> Callable[[Path], Trace]:
    """The reader of one file. ``threads``: the XSpace C decoder's threads for it (the
    caller's share of the CPUs when it reads several files at once)."""
    if fmt == "xspace":
        import functools

        from parsers import xprof
        # host annotations matching the marker are kept as host events of kind "marker"
        return functools.partial(xprof.read, marker=step_marker, threads=threads)
    if fmt == "kineto":
        from parsers import kineto
        return kineto.read
    if fmt in ("sqlite", "rocprof-json", "rocprof-csv"):
        from parsers import rocprof
        # ROCTx ranges are host events of kind "marker"; tracelens.steps makes the steps
        return {"sqlite": rocprof.read_rocpd, "rocprof-json": rocprof.read_json,
                "rocprof-csv": rocprof.read_csv}[fmt]
    what = {
        "chrome-json": "a Chrome trace JSON (not supported yet; pass the .xplane.pb or the "
                       "rocprofv3 output)",
        "json": "JSON of an unknown kind, not a trace format tracelens reads",
        "csv": "a CSV file that is not rocprofv3 output (no rocprofv3 column names in its "
               "header)",
    }.get(fmt, "not a trace format tracelens reads (expected an XSpace .xplane.pb or "
               "rocprofv3 .db/.json/.csv output)")
    raise TraceInputError(path, what)


def load(paths: str | Path | Sequence[str | Path], rules: RuleSet | None = None,
         progress: Callable[[Iterable[Path]], Iterable[Path]] | None = None,
         step_marker: str | None = None) -> Trace:
    """Read every trace behind ``paths`` into one classified Trace.

    ``step_marker`` is a regex: host markers (rocprofv3 ROCTx ranges, XSpace host
    annotations) whose name matches it become steps, else the executions of a program whose
    module name matches it (:mod:`tracelens.steps`; ``meta.steps_source`` says which).

    Raises :class:`TraceInputError` for any input that cannot be read; nothing partial is
    returned.
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    if step_marker is not None:
        re.compile(step_marker)  # a bad pattern is the caller's error, not the file's
    args = [Path(p) for p in paths]
    origin: dict[Path, int] = {}  # each file's first path argument
    notes: list[str] = []
    for i, arg in enumerate(args):
        found, skipped = discover(arg)
        notes += skipped
        for f in found:
            origin.setdefault(f, i)
    files = list(origin)
    formats = [sniff_format(f) for f in files]
    # one place decides the CPUs: files read at once share them, never oversubscribed
    n = _workers(files)
    threads = max(1, (os.cpu_count() or 1) // n) if n > 1 else None
    readers = [(f, _reader_for(fmt, f, step_marker, threads)) for f, fmt in zip(files, formats)]
    iterator = progress(files) if progress else files
    parts = _read_parallel(files, formats, readers, step_marker, iterator) \
        if n > 1 else _read_serial(readers, iterator)
    if len(parts) > 1:
        check_one_job([job_facts(part, f, origin[f], args[origin[f]].is_dir())
                       for f, part in zip(files, parts)], args)
    decoders = {k: v for part in parts for k, v in part.meta.extra.get("decoder", {}).items()}
    trace = combine(parts)
    for note in notes:
        trace.meta.warn(note)
    if decoders:
        trace.meta.extra["decoder"] = decoders
    # one chunk per column: parts and lines arrive as many chunks, which slows every
    # group-by and join below several times over (values unchanged)
    trace.events, trace.host_events = trace.events.rechunk(), trace.host_events.rechunk()
    trace.events, n_clipped, max_clip = clip_stream_overlaps(trace.events)
    if n_clipped:
        trace.meta.warn(f"clipped {n_clipped} same-stream overlaps (largest {max_clip} ns): "
                        "an in-order stream cannot run two activities at once")
    costs = op_cost_table(trace.events, trace.modules)  # what each HLO op computes (§6.2)
    trace.events = classify(with_hlo_kind(trace.events, costs[0]), rules).drop("hlo")
    annotate_costs(trace, table=costs)  # flops, bytes, dtype, cost_source, msg_bytes, ...
    unaligned = trace.meta.extra.pop("unaligned", None)
    if unaligned and not align_on_collectives(trace):
        trace.meta.warn(unaligned)
    mark_steps(trace, step_marker)
    trace.events = assign_steps(trace.events, trace.steps)
    problems = validate(trace)
    if problems:  # a parser bug, not a user error: fail loudly
        raise AssertionError("trace violates the model: " + "; ".join(problems))
    return trace


def _read_one(reader: Callable[[Path], Trace], f: Path) -> Trace:
    try:
        return reader(f)
    except TraceInputError:
        raise
    except Exception as exc:  # a file that breaks the reader is that file's problem
        raise TraceInputError(f, f"unreadable ({type(exc).__name__}: {exc})") from exc


def _read_serial(readers: list[tuple[Path, Callable[[Path], Trace]]],
                 iterator: Iterable[Path]) -> list[Trace]:
    return [_read_one(reader, f) for f, (_, reader) in zip(iterator, readers)]


def _workers(files: list[Path]) -> int:
    """How many files to read at once: one per file up to the CPUs (``TRACELENS_WORKERS``
    overrides; 1 reads them one after the other)."""
    import os

    want = os.environ.get("TRACELENS_WORKERS", "").strip()
    limit = int(want) if want.isdigit() and int(want) > 0 else (os.cpu_count() or 1)
    return max(1, min(len(files), limit))


def _spawn_safe() -> bool:
    """Worker processes start with ``spawn``, which imports the caller's main script again:
    a script calling ``load`` outside an ``if __name__ == "__main__":`` block would recurse.
    A REPL, notebook or ``python -c`` has no file to re-import."""
    import sys

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
    """Read several files at once; same parts, same order, same errors as one by one.

    XSpace files are read by threads: the C decoder and polars release the GIL, so two
    threads keep two cores busy without the ~0.5 s start and the copying of a process.
    Other formats parse in Python (SQLite rows, JSON), so they go to worker processes
    (``spawn``: polars' threads do not survive ``fork``) that send each frame back as Arrow
    IPC bytes."""
    from concurrent.futures import Executor, ThreadPoolExecutor

    n = _workers(files)
    threads = all(fmt == "xspace" for fmt in formats)
    if not threads and (not _spawn_safe() or sum(_size(f) for f in files) < _PROCESS_MIN_BYTES):
        return _read_serial(readers, iterator)  # starting processes would cost more
    pool: Executor
    if threads:
        pool = ThreadPoolExecutor(max_workers=n)
        futures = [pool.submit(_read_one, reader, f) for f, reader in readers]
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        pool = ProcessPoolExecutor(max_workers=n, mp_context=multiprocessing.get_context("spawn"))
        futures = [pool.submit(_read_in_worker, fmt, f, step_marker)
                   for f, fmt in zip(files, formats)]
    parts: list[Trace] = []
    try:
        for _, fut in zip(iterator, futures):
            parts.append(fut.result() if threads else _from_worker(fut.result()))
    finally:
        for fut in futures:
            fut.cancel()
        pool.shutdown(wait=True)
    return parts


_PROCESS_MIN_BYTES = 64 << 20  # below this, worker processes take longer to start than to help


def _size(f: Path) -> int:
    try:
        return f.stat().st_size
    except OSError:
        return 0


def _read_in_worker(fmt: str, f: Path, step_marker: str | None) -> tuple[str, object]:
    """One file read in a worker process: each frame as Arrow IPC bytes (cheap to send and
    to load back), an input error as its path and message."""
    import io
    import pickle

    try:
        part = _read_one(_reader_for(fmt, f, step_marker), f)
    except TraceInputError as exc:
        return "error", (exc.path, exc.problem)
    frames = {}
    for key in ("events", "host_events", "steps", "devices", "modules"):
        buf = io.BytesIO()
        getattr(part, key).write_ipc(buf, compression="uncompressed")
        frames[key] = buf.getvalue()
    return "ok", (frames, pickle.dumps(part.meta))


def _from_worker(result: tuple[str, object]) -> Trace:
    import pickle

    status, value = result
    if status == "error":
        raise TraceInputError(*value)  # type: ignore[misc]
    frames, meta = value  # type: ignore[misc]
    return Trace(**{k: pl.read_ipc(v) for k, v in frames.items()}, meta=pickle.loads(meta))


def combine(parts: list[Trace]) -> Trace:
    """Join per-host (XSpace) and per-process (rocprofv3) traces into one job.

    Ranks: each part's own ranks, after those of the parts before it (an XSpace file is one
    rank, a rocprofv3 file one rank per process). Host names are kept, so several processes
    of one host share it; two XSpace files naming the same host become ``host#i``.
    Clocks: XSpace hosts are aligned on wall-clock when every part knows its profile start
    time (``Task Environment``); rocprofv3 processes of one host share its CLOCK_BOOTTIME and
    need no shift, but rocprofv3 records no wall-clock time, so different hosts are left
    unaligned; ``alignment`` says what was done and a warning says what was not.
    """
    infos = [_part_info(i, part) for i, part in enumerate(parts)]
    alignment, aligned, warning = _alignment(infos)
    if len(parts) == 1:
        parts[0].meta.alignment = alignment
        if warning:  # load() tries collective ends before it warns
            parts[0].meta.extra["unaligned"] = warning
        return parts[0]
    meta = TraceMeta()
    for part in parts:
        meta.sources.extend(part.meta.sources)
        for w in part.meta.warnings:
            meta.warn(w)
    meta.alignment = alignment
    xspace_names = [info["hosts"][0] for info in infos if not info["per_process"]]
    dup = {n for n in xspace_names if xspace_names.count(n) > 1}
    starts = [info["start"] for info in infos]
    t0 = min(s for s in starts if s is not None) if aligned else 0
    out: dict[str, list[pl.DataFrame]] = {k: [] for k in ("events", "host_events", "steps",
                                                          "devices", "modules")}
    host_info: dict[str, dict] = {}
    ranks_info = []
    offset = 0
    for i, (part, info) in enumerate(zip(parts, infos)):
        rename = None
        if not info["per_process"]:
            rename = info["hosts"][0] if info["hosts"][0] not in dup else \
                f"{info['hosts'][0]}#{i}"
        shift = (starts[i] - t0) if aligned else 0
        for local in range(info["n_ranks"]):
            proc = info["processes"][local] if info["per_process"] else {}
            host = rename or proc.get("host") or f"host{i}"
            entry = host_info.setdefault(host, {"rank": offset + local, "ranks": [],
                                                "path": part.meta.sources[0]["path"],
                                                "paths": []})
            entry["ranks"].append(offset + local)
            entry["paths"].append(part.meta.sources[0]["path"])
            ranks_info.append({"rank": offset + local, "host": host, "pid": proc.get("pid"),
                               "path": part.meta.sources[0]["path"],
                               "format": part.meta.sources[0].get("format")})
        for key in out:
            df: pl.DataFrame = getattr(part, key)
            cols = {"rank": (pl.col("rank") + offset).cast(pl.Int32)}
            if "host" in df.columns and rename is not None:
                cols["host"] = pl.lit(rename)
            if "start_ns" in df.columns:
                cols["start_ns"] = pl.col("start_ns") + shift
                cols["end_ns"] = pl.col("end_ns") + shift
            out[key].append(df.with_columns(**cols))
        offset += info["n_ranks"]
    meta.extra = {"hosts": host_info, "ranks": ranks_info}
    if warning:  # load() tries collective ends before it warns
        meta.extra["unaligned"] = warning
    return Trace(events=pl.concat(out["events"]), host_events=pl.concat(out["host_events"]),
                 steps=pl.concat(out["steps"]) if out["steps"] else pl.DataFrame(
                     schema=STEP_SCHEMA),
                 devices=pl.concat(out["devices"]), meta=meta,
                 modules=pl.concat(out["modules"]))


def _part_info(i: int, part: Trace) -> dict:
    """What ``combine`` needs from one parser's output: its hosts, ranks and clock."""
    extra = part.meta.extra
    processes = extra.get("processes")
    if processes:  # rocprofv3: one rank per process, timestamps in the host's CLOCK_BOOTTIME
        return {"per_process": True, "processes": processes, "n_ranks": len(processes),
                "hosts": [p.get("host") or f"host{i}" for p in processes], "start": None,
                "clock": extra.get("clock")}
    hosts = extra.get("hosts", {})
    host, host_extra = next(iter(hosts.items())) if hosts else (f"host{i}", {})
    return {"per_process": False, "processes": [], "n_ranks": 1, "hosts": [host],
            "start": host_extra.get("profile_start_ns"), "clock": None}


def _alignment(infos: list[dict]) -> tuple[str, bool, str | None]:
    """(what ``meta.alignment`` says, whether XSpace wall-clock shifts apply, a warning)."""
    if all(not i["per_process"] for i in infos):
        if len(infos) == 1:
            return "single host", False, None
        if all(i["start"] is not None for i in infos):
            return "wall-clock (XSpace Task Environment profile_start_time)", True, None
        return "none", False, ("hosts could not be aligned on wall-clock (a file lacks "
                               "profile_start_time); cross-host timing is not comparable")
    hosts = {h for i in infos for h in i["hosts"]}
    if all(i["per_process"] for i in infos):
        clock = infos[0]["clock"] or "the host clock"
        if len(hosts) == 1:
            n = sum(i["n_ranks"] for i in infos)
            return ("single host" if n == 1 else
                    f"single host: its {n} processes share {clock} (no shift)"), False, None
        return (f"none across hosts: rocprofv3 timestamps are each host's {clock} and carry "
                "no wall-clock time; processes on one host share it"), False, (
            f"{len(hosts)} hosts could not be aligned (rocprofv3 records no wall-clock time);"
            " cross-host timing is not comparable")
    return "none", False, ("hosts could not be aligned on wall-clock (XSpace and rocprofv3 "
                           "inputs mixed); cross-host timing is not comparable")
