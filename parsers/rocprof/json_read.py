"""Reader for rocprofv3 JSON output (``<pid>_results.json``, optionally gzipped).

Layout (shared/reference/rocprof.md §2.4): ``{"rocprofiler-sdk-tool": [<one object per
process>]}``; each process has ``metadata`` (node, pid, init/fini time), ``agents``,
``strings`` (kind and operation names: ``buffer_records[kind].operations[operation]``, and
ROCTx messages by correlation id in ``marker_api``), ``kernel_symbols`` and
``buffer_records`` (``kernel_dispatch``, ``memory_copy``, ``*_api``). Kind ids differ between
SDK versions, so every kind and operation is resolved through ``strings``.

Speed: the document is parsed once with orjson; each field of a record list then becomes a
column with one list comprehension (no per-record dicts or frames are built), and joins and
lookups run in polars. A value of the wrong type is unknown (null) and counted by field;
:mod:`parsers.rocprof.build` drops the rows the model cannot hold, naming the field.
"""

from __future__ import annotations

from itertools import repeat
from operator import attrgetter
from pathlib import Path
from typing import Any

import msgspec
import orjson
import polars as pl

from parsers.rocprof.agents import agent_frame, agent_row, as_int, as_str, unique_agents
from parsers.rocprof import json_typed
from parsers.rocprof.build import build_trace
from parsers.rocprof.records import (API_SCHEMA, COPY_SCHEMA, COUNTER_SCHEMA, DISPATCH_SCHEMA,
                                     LAUNCH_COLUMNS, MARKER_SCHEMA, Process, empty, frame)
from parsers.rawfile import lone_note, lone_surrogates, read_maybe_gzip
from tracelens.core.errors import TraceInputError
from tracelens.core.model import Notice, Trace

FORMAT = "rocprof-json"
TOP_KEY = "rocprofiler-sdk-tool"
NOT_CONTAINER = "rocprof.not_container"  # a section of another JSON type: its records are not read
I64 = pl.Int64
_MARKER_DOMAINS = ("MARKER_CORE_API", "MARKER_CORE_RANGE_API")
_FIELDS = {"start": "start_timestamp", "end": "end_timestamp",
           "agent": "dispatch_info.agent_id", "queue": "dispatch_info.queue_id",
           "op": "operation"}


def load_document(path: Path) -> Any:
    """Read, un-gzip and parse, with one clear error for each way it fails."""
    return _parse(path, read_maybe_gzip(path, text=True))


def _parse(path: Path, raw: bytes) -> Any:
    return _parse_counted(path, raw)[0]


def _parse_counted(path: Path, raw: bytes) -> tuple[Any, int]:
    """The document, and how many lone surrogate escapes were replaced to parse it."""
    if not raw.strip():
        raise TraceInputError(path, "empty file")
    try:
        return orjson.loads(raw), 0
    except (ValueError, UnicodeDecodeError) as exc:
        fixed, lone = lone_surrogates(raw)
        if lone:
            try:
                return orjson.loads(fixed), lone
            except (ValueError, UnicodeDecodeError):
                pass
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
    raw = read_maybe_gzip(path, text=True)
    procs = json_typed.decode(raw) if raw.strip() else None
    if procs is None:  # not of the typed schema: the tolerant path says or counts why
        doc, lone = _parse_counted(path, raw)
        trace = _read_document(path, doc, step_marker)
        if lone:
            trace.meta.warn(lone_note(path.name, lone))
        return trace
    return _read_document(path, {TOP_KEY: procs}, step_marker)


def _read_document(path: Path, doc: Any, step_marker: str | None) -> Trace:
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
    damaged = [w for proc in parsed for w in proc.warnings if w.code == NOT_CONTAINER]
    if damaged and not any(proc.dispatches.height or proc.copies.height for proc in parsed):
        raise TraceInputError(path, f"rocprofv3 JSON with no readable kernel dispatch or "
                              f"memory copy ({damaged[0].text})")
    return build_trace(parsed, path, FORMAT, step_marker)


class _Columns:
    """Columns pulled out of a list of JSON records: each field is one C-level pass
    (``map(dict.get, ...)``), its types are checked with one more (``set(map(type, ...))``),
    and polars builds the column; no per-record Python code runs unless a field holds a value
    of the wrong type (a string timestamp, a float or bool id, an object where a number
    belongs), which then becomes unknown (null) and is counted per field."""

    def __init__(self, section: str, recs: Any) -> None:
        self.section = section
        recs = recs if isinstance(recs, list) else []
        types = _types(recs)
        self.recs = recs if types <= {dict} or (len(types) == 1 and issubclass(
            types.pop(), msgspec.Struct)) else [r for r in recs if type(r) is dict]
        self.bad: dict[str, int] = {}
        self._count("(record)", len(recs) - len(self.recs))

    def get(self, key: str, within: list[Any] | None = None) -> list[Any]:
        src = self.recs if within is None else within
        if src and type(src[0]) is not dict:  # msgspec Structs (json_typed)
            return list(map(attrgetter(key), src))
        return list(map(dict.get, src, repeat(key)))

    def obj(self, values: list[Any], name: str) -> list[Any]:
        """Nested objects: a non-object becomes {} (counted when it was not null)."""
        types = _types(values)
        if types <= {dict}:
            return values
        if types - {_NONE} and all(issubclass(t, msgspec.Struct) for t in types - {_NONE}):
            return [_NOTHING if v is None else v for v in values]  # typed: only nulls
        self._count(name, sum(1 for v in values if v is not None and type(v) is not dict))
        return [v if type(v) is dict else _EMPTY for v in values]

    def ints(self, values: list[Any], name: str) -> pl.Series:
        if _types(values) <= {int, _NONE}:
            try:  # polars refuses what does not fit in an int64
                return pl.Series(name, values, dtype=I64)
            except (TypeError, OverflowError, pl.exceptions.PolarsError):
                pass
        out = [v if type(v) is int and _MIN <= v <= _MAX else None for v in values]
        self._count(name, out.count(None) - values.count(None))
        return pl.Series(name, out, dtype=I64)

    def strs(self, values: list[Any], name: str) -> pl.Series:
        if not _types(values) <= {str, _NONE}:
            out = [v if type(v) is str else None for v in values]
            self._count(name, out.count(None) - values.count(None))
            values = out
        return pl.Series(name, values, dtype=pl.String)

    def handle(self, key: str, within: list[Any] | None = None) -> pl.Series:
        return self.ints(self.get("handle", self.obj(self.get(key, within), key)),
                         f"{key}.handle")

    def _count(self, name: str, n: int) -> None:
        if n:
            self.bad[name] = self.bad.get(name, 0) + n

    def warnings(self) -> list[Notice]:
        return [Notice.of("rocprof.wrong_type", "{n} {section} records with a {name} of the "
                          "wrong type; read as unknown", n=n, section=self.section, name=name)
                if name != "(record)" else
                Notice.of("rocprof.not_objects", "{n} {section} records that are not objects; "
                          "skipped", n=n, section=self.section)
                for name, n in self.bad.items()]


def _types(values: list[Any]) -> set[type]:
    return set(map(type, values))


class _Nothing:
    """A missing nested Struct: every field is null."""

    def __getattr__(self, name: str) -> None:
        return None


_NOTHING = _Nothing()
_EMPTY: dict[str, Any] = {}
_NONE = type(None)
_MIN, _MAX = -(1 << 63), (1 << 63) - 1


def _api_columns(c: _Columns, names: bool = True) -> dict[str, pl.Series]:
    """The fields every API-like record has: thread, correlation, times, and (``names``)
    kind, operation and ancestor."""
    corr = c.obj(c.get("correlation_id"), "correlation_id")
    out = {"tid": c.ints(c.get("thread_id"), "thread_id"),
           "corr": c.ints(c.get("internal", corr), "correlation_id.internal"),
           "start": c.ints(c.get("start_timestamp"), "start_timestamp"),
           "end": c.ints(c.get("end_timestamp"), "end_timestamp")}
    if names:
        out.update(kind=c.ints(c.get("kind"), "kind"),
                   operation=c.ints(c.get("operation"), "operation"),
                   parent=c.ints(c.get("ancestor", corr), "correlation_id.ancestor"))
    return out


def _names(strings: dict[str, Any]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(kind id -> kind name, (kind, operation) -> operation name), from ``strings``."""
    table = strings.get("buffer_records")
    table = table if isinstance(table, list) else []
    kinds = pl.DataFrame({"kind": list(range(len(table))),
                          "domain": [as_str(t.get("kind")) if isinstance(t, dict) else None
                                     for t in table]}, schema={"kind": I64, "domain": pl.String})
    ks, os_, names = [], [], []
    for k, t in enumerate(table):
        ops = t.get("operations") if isinstance(t, dict) else None
        for o, name in enumerate(ops if isinstance(ops, list) else []):
            ks.append(k)
            os_.append(o)
            names.append(as_str(name))
    ops_df = pl.DataFrame({"kind": ks, "operation": os_, "name": names},
                          schema={"kind": I64, "operation": I64, "name": pl.String})
    return kinds, ops_df


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
    keys = [as_int(k) if not isinstance(k, str) else (int(k) if k.isdecimal() else None)
            for k, _ in pairs]
    return pl.DataFrame({"corr": keys, "message": [as_str(v) for _, v in pairs]},
                        schema={"corr": I64, "message": pl.String}).drop_nulls("corr")


def _api_frame(c: _Columns, kinds: pl.DataFrame, ops: pl.DataFrame) -> pl.DataFrame:
    return (pl.DataFrame(_api_columns(c))
            .join(kinds, on="kind", how="left")
            .join(ops, on=["kind", "operation"], how="left")
            .select("domain", "name", "tid", "corr", "parent", "start", "end"))


def _dispatches(buf: dict[str, Any], handles: pl.DataFrame, symbols: pl.DataFrame,
                warn: list[Notice]) -> pl.DataFrame:
    c = _Columns("kernel_dispatch", buf.get("kernel_dispatch"))
    info = c.obj(c.get("dispatch_info"), "dispatch_info")
    api = _api_columns(c, names=False)
    kd = pl.DataFrame({
        "agent_handle": c.handle("agent_id", info), "queue": c.handle("queue_id", info),
        "kernel_id": c.ints(c.get("kernel_id", info), "dispatch_info.kernel_id"),
        "dispatch_id": c.ints(c.get("dispatch_id", info), "dispatch_info.dispatch_id"),
        "stream": c.handle("stream_id"), "tid": api["tid"], "corr": api["corr"],
        "start": api["start"], "end": api["end"],
        "lds": c.ints(c.get("group_segment_size", info), "dispatch_info.group_segment_size"),
        **_sizes(c, info)})
    warn += c.warnings()
    return (kd.join(handles, left_on="agent_handle", right_on="handle", how="left")
            .join(symbols, on="kernel_id", how="left")
            .select("agent", "queue", "stream", "tid", "corr", "kernel_id", "name", "start",
                    "end", "dispatch_id", *LAUNCH_COLUMNS))


def _sizes(c: _Columns, info: list[Any]) -> dict[str, pl.Series]:
    """``dispatch_info.grid_size``/``workgroup_size`` ``{x, y, z}`` as the ``grid_*``/``wg_*``
    columns (grid in work-items, as recorded)."""
    out = {}
    for key, prefix in (("grid_size", "grid_"), ("workgroup_size", "wg_")):
        dim = c.obj(c.get(key, info), f"dispatch_info.{key}")
        out.update({prefix + a: c.ints(c.get(a, dim), f"dispatch_info.{key}.{a}")
                    for a in "xyz"})
    return out


def _counters(p: dict[str, Any], warn: list[Notice]) -> pl.DataFrame:
    """Counter values per dispatch from ``callback_records.counter_collection`` (one record
    per dispatch: ``dispatch_data.dispatch_info.dispatch_id`` and ``records[{counter_id,
    value}]``), named through the top-level ``counters`` definitions."""
    cb = p.get("callback_records")
    recs = cb.get("counter_collection") if isinstance(cb, dict) else None
    c = _Columns("counter_collection", recs)
    if not c.recs:
        warn += c.warnings()
        return empty(COUNTER_SCHEMA)
    defs = _Columns("counters", p.get("counters"))
    ids = defs.get("id")
    names = pl.DataFrame({
        "counter_id": defs.ints([i.get("handle") if type(i) is dict else i for i in ids],
                                "id.handle"),
        "counter": defs.strs(defs.get("name"), "name")}).unique("counter_id", keep="first")
    data = c.obj(c.get("dispatch_data"), "dispatch_data")
    dispatch = c.ints(c.get("dispatch_id", c.obj(c.get("dispatch_info", data),
                                                 "dispatch_data.dispatch_info")),
                      "dispatch_data.dispatch_info.dispatch_id")
    per = [r if type(r) is list else [] for r in c.get("records")]
    flat = [v for r in per for v in r]
    values = _Columns("counter_collection.records", flat)
    raw = values.get("value")
    vals = [float(v) if type(v) in (int, float) else None for v in raw]
    values._count("value", vals.count(None) - raw.count(None))
    owner = [d for d, r in zip(dispatch.to_list(), per) for v in r if type(v) is dict]
    out = pl.DataFrame({"dispatch_id": pl.Series(owner, dtype=I64),
                        "counter_id": values.handle("counter_id"),
                        "value": pl.Series(vals, dtype=pl.Float64)})
    warn += c.warnings() + defs.warnings() + values.warnings()
    out = out.join(names, on="counter_id", how="left", maintain_order="left")
    lost = out["counter"].null_count()
    if lost:
        warn.append(Notice.of("rocprof.unknown_counter_ids", "{n} counter values name a counter "
                              "id the counter definitions lack; skipped", n=lost))
    return out.select("dispatch_id", "counter", "value").drop_nulls("counter")


def _copies(buf: dict[str, Any], handles: pl.DataFrame, ops: pl.DataFrame,
            warn: list[Notice]) -> pl.DataFrame:
    c = _Columns("memory_copy", buf.get("memory_copy"))
    if not c.recs:
        warn += c.warnings()
        return empty(COPY_SCHEMA)
    api = _api_columns(c)
    mc = pl.DataFrame({
        "src_handle": c.handle("src_agent_id"), "dst_handle": c.handle("dst_agent_id"),
        "bytes": c.ints(c.get("bytes"), "bytes"), "stream": c.handle("stream_id"),
        **{k: api[k] for k in ("kind", "operation", "tid", "corr", "start", "end")}})
    warn += c.warnings()
    return (mc.join(handles.rename({"agent": "src_agent"}), left_on="src_handle",
                    right_on="handle", how="left")
            .join(handles.rename({"agent": "dst_agent"}), left_on="dst_handle",
                  right_on="handle", how="left")
            .join(ops.rename({"name": "op"}), on=["kind", "operation"], how="left")
            .select("src_agent", "dst_agent", "op", "bytes", "stream", "tid", "corr", "start",
                    "end"))


def _symbols(raw: Any, warn: list[Notice]) -> pl.DataFrame:
    c = _Columns("kernel_symbols", raw)
    ids = c.ints(c.get("kernel_id"), "kernel_id")
    formatted = c.strs(c.get("formatted_kernel_name"), "formatted_kernel_name")
    plain = c.strs(c.get("kernel_name"), "kernel_name")
    vgpr = c.ints(c.get("arch_vgpr_count"), "arch_vgpr_count")
    warn += c.warnings()
    return pl.DataFrame({"kernel_id": ids,
                         "name": pl.Series([f or p for f, p in zip(formatted, plain)],
                                           dtype=pl.String), "vgpr": vgpr}).unique(
        "kernel_id", keep="first", maintain_order=True)


def _container(obj: dict[str, Any], key: str, kind: type, warn: list[Notice],
               where: str = "") -> Any:
    """``obj[key]`` when it is of the container type the format gives it, else an empty one
    and a warning: a list where an object belongs (or a string where a list does) holds no
    record that can be read, and an empty trace must not look like a whole one."""
    value = obj.get(key)
    if value is None or type(value) is kind:
        return kind() if value is None else value
    warn.append(Notice.of(NOT_CONTAINER, "{where}{key} is a JSON {got}, not {want}: its records "
                          "are not read", where=where, key=key,
                          got=_JSON_TYPES.get(type(value), type(value).__name__),
                          want="an object" if kind is dict else "a list"))
    return kind()


_JSON_TYPES = {dict: "object", list: "list", str: "string", int: "number", float: "number",
               bool: "boolean"}


def _process(p: dict[str, Any]) -> Process:
    md = p.get("metadata")
    md = md if isinstance(md, dict) else {}
    node = md.get("node") if isinstance(md.get("node"), dict) else {}
    warn: list[Notice] = []
    agents_raw = _container(p, "agents", list, warn)
    agents = unique_agents(agent_frame([agent_row(a) for a in agents_raw
                                        if isinstance(a, dict)]), warn)
    handles = agents.select("handle", agent="node_id").drop_nulls("handle")
    strings = _container(p, "strings", dict, warn)
    kinds, ops = _names(strings)
    buf = _container(p, "buffer_records", dict, warn)
    for key in ("kernel_dispatch", "memory_copy", *[k for k in buf if k.endswith("_api")]):
        _container(buf, key, list, warn, "buffer_records.")
    dispatches = _dispatches(buf, handles, _symbols(p.get("kernel_symbols"), warn), warn)
    copies = _copies(buf, handles, ops, warn)
    api_frames = []
    for key in [k for k in buf if k.endswith("_api")]:
        c = _Columns(key, buf[key])
        if c.recs:
            api_frames.append(_api_frame(c, kinds, ops))
        warn += c.warnings()
    apis = pl.concat(api_frames) if api_frames else empty(API_SCHEMA)
    is_marker = pl.col("domain").is_in(_MARKER_DOMAINS)
    markers = (apis.filter(is_marker)
               .join(_messages(strings.get("marker_api")), on="corr", how="left")
               .with_columns(name=pl.coalesce("message", "name")))
    return Process(
        host=as_str(node.get("hostname")) or None, pid=as_int(md.get("pid")),
        agents=agents, dispatches=frame(dispatches, DISPATCH_SCHEMA),
        copies=frame(copies, COPY_SCHEMA), apis=frame(apis.filter(~is_marker), API_SCHEMA),
        markers=frame(markers, MARKER_SCHEMA), init_ns=as_int(md.get("init_time")),
        fini_ns=as_int(md.get("fini_time")), warnings=warn, fields=_FIELDS,
        counters=_counters(p, warn))
