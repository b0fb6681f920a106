"""Reader for PyTorch profiler (Kineto) JSON: one rank's ``*.pt.trace.json[.gz]``.

The document is parsed once with orjson; only the complete (``ph: X``) events of the
categories used here are kept, and each field becomes a column with one list comprehension
(no per-event Python beyond that). What each category gives (docs/kineto.md):

- ``kernel``, ``gpu_memcpy``, ``gpu_memset``: device activity; device ``args.device``, stream
  ``args.stream``, ``args.correlation`` (the launching runtime call's id), copy ``bytes``;
- ``cuda_runtime``/``cuda_driver`` (HIP names on ROCm): launches, linked to activity by
  correlation id (the ``ac2g`` flows carry the same id, so they are not needed);
- ``cpu_op``: ATen ops (shapes with ``record_shapes``), ``record_param_comms`` (collective
  name, sizes, group); ``user_annotation``/``gpu_user_annotation``: ``ProfilerStep#N``.

Timestamps are microseconds. Kineto writes them with three decimals (ns resolution) when it
writes ``baseTimeNanoseconds``; they are converted exactly (integer part and fraction apart,
so no float product rounds), else rounded to the nearest ns; ``meta.kineto`` says
which.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np
import orjson
import polars as pl

from parsers.kineto.devices import device_frame
from parsers.kineto.link import link_activity, steps_frame
from parsers.rawfile import read_maybe_gzip
from tracelens.errors import TraceInputError
from tracelens.model import (EVENT_SCHEMA, HOST_EVENT_SCHEMA, STEP_SCHEMA, HostInfo,
                             KinetoInfo, Trace, TraceMeta, conform)

FORMAT = "kineto"
DEVICE_CATS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset",
               "Kernel": "kernel", "Memcpy": "memcpy", "Memset": "memset"}
HOST_CATS = {"cpu_op": "cpu_op", "Operator": "cpu_op", "cuda_runtime": "api",
             "cuda_driver": "api", "Runtime": "api", "user_annotation": "annotation",
             "gpu_user_annotation": "gpu_annotation"}
_WANTED = frozenset(DEVICE_CATS) | frozenset(HOST_CATS)
_BASE = ("cat", "name", "pid", "tid", "ts", "dur", "args")
_ARGS_INT = ("device", "stream", "correlation", "External id", "bytes")
_COMM_INT = ("In msg nelems", "Out msg nelems", "Group size")
_COMM_STR = ("Collective name", "dtype")



def load_document(path: Path) -> dict[str, Any]:
    raw = read_maybe_gzip(path)
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        msg = str(exc).splitlines()[0][:120]
        raise TraceInputError(path, f"corrupt or truncated JSON ({msg})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise TraceInputError(path, "not a Kineto trace: no 'traceEvents' list")
    return doc


def to_ns(us: pl.Series) -> pl.Series:
    """Microseconds (int or float, no nulls) to integer ns: integer part × 1000 plus the
    rounded fraction × 1000, exact for 3-decimal values below 2^43 µs (~100 days)."""
    if us.dtype.is_integer():
        return us.cast(pl.Int64) * 1000
    v = us.cast(pl.Float64).to_numpy()
    ip = np.floor(v)
    return pl.Series(us.name, ip.astype(np.int64) * 1000 + np.rint((v - ip) * 1000)
                     .astype(np.int64))


def _number(values: Sequence[Any]) -> pl.Series:
    """Numbers as Float64 (integers below 2^53 stay exact); anything else null."""
    return pl.Series(values, dtype=pl.Float64, strict=False)


def columns(evs: list[Any]) -> tuple[pl.DataFrame, list[dict], list[dict]]:
    """One row per complete event of a wanted category (``_row`` indexes ``sel``/``args``,
    the kept events and their args); the args used, as columns.

    One list comprehension per field; the collective arguments only for the
    ``record_param_comms`` rows (few)."""
    sel = [e for e in evs if type(e) is dict and e.get("cat") in _WANTED and e.get("ph") == "X"]
    n = len(sel)
    base = [[e.get(k) for e in sel] for k in _BASE]  # per key: the fastest pure-Python form
    args = [a if type(a) is dict else {} for a in base[-1]]
    data: dict[str, pl.Series] = {
        "cat": pl.Series(base[0], dtype=pl.String),
        "name": pl.Series(base[1], dtype=pl.String, strict=False),
        "pid": pl.Series(base[2], dtype=pl.Int64, strict=False),
        "tid": pl.Series(base[3], dtype=pl.Int64, strict=False),
        "ts": _number(base[4]).alias("ts"),
        "dur": _number(base[5]).alias("dur"),
    }
    for key in _ARGS_INT:
        data[key] = pl.Series([a.get(key) for a in args], dtype=pl.Int64, strict=False)
    comm = [i for i, name in enumerate(base[1]) if name == "record_param_comms"]
    for key in _COMM_INT + _COMM_STR:
        dtype = pl.Int64 if key in _COMM_INT else pl.String
        col = pl.Series([None] * n, dtype=dtype)
        if comm:
            col = col.scatter(comm, pl.Series([args[i].get(key) for i in comm], dtype=dtype,
                                              strict=False))
        data[key] = col
    data["_row"] = pl.Series(np.arange(n, dtype=np.int64))
    return pl.DataFrame(data), sel, args


def read(path: Path) -> Trace:
    doc = load_document(path)
    try:
        return _build(path, doc)
    except (TypeError, ValueError, KeyError, AttributeError, OverflowError,
            pl.exceptions.PolarsError) as exc:
        raise TraceInputError(path, "malformed Kineto JSON "
                              f"({type(exc).__name__}: {str(exc).splitlines()[0][:120]})"
                              ) from None


def _build(path: Path, doc: dict[str, Any]) -> Trace:
    meta = TraceMeta(sources=[{"path": str(path), "format": FORMAT}])
    df, sel, args = columns(doc["traceEvents"])
    # finite, non-negative durations, and times below 2^53 µs (beyond, a float has no µs)
    limit = float(1 << 53)
    timed = ((df["ts"].abs() < limit) & (df["dur"] >= 0) & (df["dur"] < limit)).fill_null(False)
    untimed = df.filter(~timed)
    if untimed.height:
        meta.warn(f"{path.name}: skipped {untimed.height} events without a valid ts/dur "
                  f"({untimed.filter(pl.col('cat').is_in(list(DEVICE_CATS))).height} of them "
                  "device activity)")
    df = df.filter(timed).with_columns(start_ns=to_ns(df.filter(timed)["ts"]))
    df = df.with_columns(end_ns=pl.col("start_ns") + to_ns(df["dur"]))
    exact = "baseTimeNanoseconds" in doc
    dist = doc.get("distributedInfo") if isinstance(doc.get("distributedInfo"), dict) else {}
    rank_id = dist.get("rank") if isinstance(dist.get("rank"), int) else None
    host = f"rank{rank_id}" if rank_id is not None else path.name.split(".")[0]

    dev = df.filter(pl.col("cat").is_in(list(DEVICE_CATS)))
    hst = df.filter(pl.col("cat").is_in(list(HOST_CATS)))
    no_device = dev["device"].null_count()
    if no_device:
        meta.warn(f"{path.name}: {no_device} device activities without args.device use the "
                  "Kineto GPU process id (pid) as their device")
    dev = dev.with_columns(device=pl.coalesce("device", "pid").cast(pl.Int32),
                           stream=pl.coalesce("stream", "tid"),
                           kind=pl.col("cat").replace_strict(DEVICE_CATS, return_dtype=pl.String))
    dev = dev.filter(pl.col("device").is_not_null())
    events, launches, link_warn, extra = link_activity(dev, hst, sel, args)
    for w in link_warn:
        meta.warn(f"{path.name}: {w}")
    events = conform(events.with_columns(host=pl.lit(host), rank=pl.lit(0)), EVENT_SCHEMA)
    devices, dev_warn = device_frame(doc, sorted(set(events["device"].to_list())), host)
    for w in dev_warn:
        meta.warn(f"{path.name}: {w}")
    host_events = conform(hst.filter(pl.col("cat") != "gpu_user_annotation").select(
        "name", "pid", "tid", "start_ns", "end_ns", correlation_id="correlation",
        kind=pl.col("cat").replace_strict(HOST_CATS, return_dtype=pl.String)).with_columns(
        host=pl.lit(host), rank=pl.lit(0)), HOST_EVENT_SCHEMA)
    steps, step_source = steps_frame(hst, events, launches)
    meta.hosts = {host: HostInfo(path=str(path))}
    meta.kineto = KinetoInfo(rank=rank_id, world_size=dist.get("world_size"),
                             backend=dist.get("backend"),
                             timestamps=("exact: microseconds with 3 decimals "
                                         "(baseTimeNanoseconds present), converted to integer "
                                         "ns" if exact else
                                         "rounded to the nearest ns (no baseTimeNanoseconds)"),
                             steps_source=step_source, **extra)
    if not events.height:
        meta.warn(f"{path.name}: no device activity (no kernel, gpu_memcpy or gpu_memset "
                  "events)")
    return Trace(events=events, host_events=host_events,
                 steps=steps if steps.height else pl.DataFrame(schema=STEP_SCHEMA),
                 devices=devices, meta=meta)
