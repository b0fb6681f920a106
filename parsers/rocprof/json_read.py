"""Reader for rocprofv3 JSON output (``<pid>_results.json``, optionally gzipped).

Layout (shared/reference/rocprof.md §2.4): ``{"rocprofiler-sdk-tool": [<one object per
process>]}``; each process has ``metadata`` (node, pid, init/fini time), ``agents``,
``strings`` (kind and operation names: ``buffer_records[kind].operations[operation]``, and
ROCTx messages by correlation id in ``marker_api``), ``kernel_symbols`` and
``buffer_records`` (``kernel_dispatch``, ``memory_copy``, ``*_api``). Kind ids differ between
SDK versions, so every kind and operation is resolved through ``strings``. Records are turned
into polars frames in bulk (nested objects become struct columns).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from parsers.rocprof.agents import agent_frame, agent_row
from parsers.rocprof.build import build_trace
from parsers.rocprof.records import (API_SCHEMA, COPY_SCHEMA, DISPATCH_SCHEMA, MARKER_SCHEMA,
                                     Process, empty, frame)
from parsers.rawfile import read_maybe_gzip
from tracelens.errors import TraceInputError
from tracelens.model import Trace

try:  # optional: about 3x faster than the standard library on large files
    import orjson as _fast_json
except ImportError:  # pragma: no cover - depends on the environment
    _fast_json = None

FORMAT = "rocprof-json"
TOP_KEY = "rocprofiler-sdk-tool"
I64 = pl.Int64
_HANDLE = pl.Struct({"handle": I64})
_CORR = pl.Struct({"internal": I64, "ancestor": I64})
_API = {"kind": I64, "operation": I64, "thread_id": I64, "correlation_id": _CORR,
        "start_timestamp": I64, "end_timestamp": I64}
_DISPATCH = {"thread_id": I64, "correlation_id": _CORR, "start_timestamp": I64,
             "end_timestamp": I64, "stream_id": _HANDLE,
             "dispatch_info": pl.Struct({"agent_id": _HANDLE, "queue_id": _HANDLE,
                                         "kernel_id": I64})}
_COPY = {**_API, "src_agent_id": _HANDLE, "dst_agent_id": _HANDLE, "bytes": I64,
         "stream_id": _HANDLE}
_MARKER_DOMAINS = ("MARKER_CORE_API", "MARKER_CORE_RANGE_API")


def load_document(path: Path) -> Any:
    """Read, un-gzip and parse, with one clear error for each way it fails."""
    raw = read_maybe_gzip(path)
    if not raw.strip():
        raise TraceInputError(path, "empty file")
    try:
        return _fast_json.loads(raw) if _fast_json else json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        msg = str(exc).splitlines()[0][:120]
        raise TraceInputError(path, f"corrupt or truncated JSON ({msg})") from None


def _not_rocprof(doc: Any) -> str:
    if isinstance(doc, dict) and "traceEvents" in doc:
        return "a Chrome trace JSON (traceEvents), not rocprofv3 JSON output"
    if isinstance(doc, dict):
        keys = ", ".join(list(doc)[:5]) or "none"
        return f"JSON of another tool (top-level keys: {keys}): no '{TOP_KEY}' key"
    return f"JSON of another tool (a top-level {type(doc).__name__}): no '{TOP_KEY}' key"


def read(path: Path, step_marker: str | None = None) -> Trace:
    doc = load_document(path)
    procs = doc.get(TOP_KEY) if isinstance(doc, dict) else None
    if not isinstance(procs, list):
        raise TraceInputError(path, _not_rocprof(doc))
    if not procs or not all(isinstance(p, dict) for p in procs):
        raise TraceInputError(path, f"rocprofv3 JSON whose '{TOP_KEY}' list holds no process")
    try:
        parsed = [_process(p) for p in procs]
    except (TypeError, ValueError, KeyError, AttributeError, pl.exceptions.PolarsError) as exc:
        raise TraceInputError(path, "malformed rocprofv3 JSON "
                              f"({type(exc).__name__}: {str(exc).splitlines()[0][:120]})"
                              ) from None
    return build_trace(parsed, path, FORMAT, step_marker)


def _records(recs: Any, schema: dict[str, pl.DataType]) -> pl.DataFrame:
    if not isinstance(recs, list) or not recs:
        return pl.DataFrame(schema=schema)
    return pl.DataFrame(recs, schema=schema)


def _names(strings: dict[str, Any]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(kind id -> kind name, (kind, operation) -> operation name), from ``strings``."""
    table = strings.get("buffer_records") or []
    kinds = pl.DataFrame({"kind": list(range(len(table))),
                          "domain": [t.get("kind") if isinstance(t, dict) else None
                                     for t in table]}, schema={"kind": I64, "domain": pl.String})
    ks, os_, names = [], [], []
    for k, t in enumerate(table):
        for o, name in enumerate((t.get("operations") or []) if isinstance(t, dict) else []):
            ks.append(k)
            os_.append(o)
            names.append(name)
    ops = pl.DataFrame({"kind": ks, "operation": os_, "name": names},
                       schema={"kind": I64, "operation": I64, "name": pl.String})
    return kinds, ops


def _messages(raw: Any) -> pl.DataFrame:
    """ROCTx messages by correlation id: cereal writes a map as [{"key", "value"}, ...]."""
    pairs: list[tuple[Any, Any]] = []
    if isinstance(raw, dict):
        pairs = list(raw.items())
    elif isinstance(raw, list):
        for item in raw:
            if isinstance(item, dict) and "key" in item:
                pairs.append((item.get("key"), item.get("value")))
            elif isinstance(item, (list, tuple)) and len(item) == 2:
                pairs.append((item[0], item[1]))
    return pl.DataFrame({"corr": [int(k) for k, _ in pairs],
                         "message": [str(v) for _, v in pairs]},
                        schema={"corr": I64, "message": pl.String})


def _api_frame(recs: pl.DataFrame, kinds: pl.DataFrame, ops: pl.DataFrame) -> pl.DataFrame:
    return (recs.unnest("correlation_id")
            .join(kinds, on="kind", how="left")
            .join(ops, on=["kind", "operation"], how="left")
            .select("domain", "name", tid="thread_id", corr="internal", parent="ancestor",
                    start="start_timestamp", end="end_timestamp"))


def _process(p: dict[str, Any]) -> Process:
    md = p.get("metadata") or {}
    node = md.get("node") or {}
    agents = agent_frame([agent_row(a) for a in p.get("agents") or [] if isinstance(a, dict)])
    handles = agents.select(handle="handle", agent="node_id").drop_nulls("handle")
    strings = p.get("strings") or {}
    kinds, ops = _names(strings)
    syms = [s for s in p.get("kernel_symbols") or [] if isinstance(s, dict)]
    symbols = pl.DataFrame(
        {"kernel_id": [s.get("kernel_id") for s in syms],
         "name": [s.get("formatted_kernel_name") or s.get("kernel_name") for s in syms]},
        schema={"kernel_id": I64, "name": pl.String}).unique("kernel_id")
    buf = p.get("buffer_records") or {}
    kd = _records(buf.get("kernel_dispatch"), _DISPATCH).unnest("dispatch_info")
    dispatches = (kd.unnest("correlation_id").join(handles, left_on=pl.col("agent_id")
                                                   .struct.field("handle"),
                                                   right_on="handle", how="left")
                  .join(symbols, on="kernel_id", how="left")
                  .select("agent", "kernel_id", "name",
                          queue=pl.col("queue_id").struct.field("handle"),
                          stream=pl.col("stream_id").struct.field("handle"),
                          tid="thread_id", corr="internal", start="start_timestamp",
                          end="end_timestamp"))
    mc = _records(buf.get("memory_copy"), _COPY)
    copies = empty(COPY_SCHEMA)
    if mc.height:
        src = handles.rename({"agent": "src_agent"})
        dst = handles.rename({"agent": "dst_agent"})
        copies = (mc.unnest("correlation_id")
                  .join(src, left_on=pl.col("src_agent_id").struct.field("handle"),
                        right_on="handle", how="left")
                  .join(dst, left_on=pl.col("dst_agent_id").struct.field("handle"),
                        right_on="handle", how="left")
                  .join(ops.rename({"name": "op"}), on=["kind", "operation"], how="left")
                  .select("src_agent", "dst_agent", "op", "bytes",
                          stream=pl.col("stream_id").struct.field("handle"), tid="thread_id",
                          corr="internal", start="start_timestamp", end="end_timestamp"))
    api_frames = [_api_frame(_records(recs, _API), kinds, ops) for key, recs in buf.items()
                  if key.endswith("_api") and isinstance(recs, list) and recs]
    apis = pl.concat(api_frames) if api_frames else empty(API_SCHEMA)
    is_marker = pl.col("domain").is_in(_MARKER_DOMAINS)
    markers = (apis.filter(is_marker)
               .join(_messages(strings.get("marker_api")), on="corr", how="left")
               .with_columns(name=pl.coalesce("message", "name")))
    pid = md.get("pid")
    return Process(
        host=node.get("hostname") or None, pid=pid if isinstance(pid, int) else None,
        agents=agents, dispatches=frame(dispatches, DISPATCH_SCHEMA),
        copies=frame(copies, COPY_SCHEMA), apis=frame(apis.filter(~is_marker), API_SCHEMA),
        markers=frame(markers, MARKER_SCHEMA),
        init_ns=md.get("init_time"), fini_ns=md.get("fini_time"))
