"""Normalized per-process records -> one :class:`tracelens.core.model.Trace` (one rank per process).

What is decided here, for every rocprofv3 format alike:

- device = the GPU ordinal of the dispatch's agent (:mod:`parsers.rocprof.agents`); only GPU
  agents with activity become devices (a process sees every GPU of its node);
- stream = the HSA queue id for kernels (the in-order unit the same-stream clipping needs);
  memory copies run on copy engines, so they get negative stream ids of their own:
  ``-(1 + stream_id)``, or ``-1000 - direction`` when the format has no stream id;
- memcpy subcategory from the direction (h2d on the destination GPU, d2h and d2d on the
  source GPU), ``bytes`` from the copy size when the format records it (CSV does not);
- RCCL kernels get the collective type of their RCCL API call (:mod:`.collectives`);
- API rows become host events of kind ``api``, ROCTx ranges/marks of kind ``marker``, and
  ranges matching ``step_marker`` become steps (:mod:`.markers`).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from parsers.rocprof import agents as agents_mod
from parsers.rocprof.collectives import collective_types, warnings_for
from parsers.rocprof.dedupe import drop_copies, drop_repeated_processes
from parsers.rocprof.facts import RocprofFacts
from parsers.rocprof.markers import steps_from_markers
from parsers.rocprof.records import Process, launch_expr
from tracelens.core.errors import TraceInputError
from tracelens.core.model import (DEVICE_FACTS_SCHEMA, EVENT_SCHEMA, HOST_EVENT_SCHEMA,
                             STEP_SCHEMA, CounterFacts, HostInfo, KernelCounters, Notice,
                             ProcessInfo, Text, Trace, TraceMeta, conform)

CLOCK = "CLOCK_BOOTTIME"
UNUSABLE = frozenset({
    "rocprof.dropped_rows", "rocprof.off_gpu_dispatches", "rocprof.repeated_agents",
    "rocprof.copies_off_gpu", "rocprof.not_objects", "rocprof.unknown_counter_ids",
    "rocprof.not_container", "rpd.unlinked_ops", "rocpd.table_sets_skipped"})
"""The notices of records dropped, skipped or not read: what an input none of whose
dispatches and copies is usable says about why."""
_DIRECTIONS = {"HOST_TO_DEVICE": ("h2d", "dst", 1), "DEVICE_TO_HOST": ("d2h", "src", 2),
               "DEVICE_TO_DEVICE": ("d2d", "src", 3), "HOST_TO_HOST": ("h2h", None, 4)}


def drop_unusable(df: pl.DataFrame, checks: list[tuple[str, pl.Expr]], what: str,
                  warn: list[Notice]) -> pl.DataFrame:
    """``df`` without the rows the model cannot hold, and one warning that counts them by
    reason. ``checks`` are (reason, expression true on a bad row); a row is counted under the
    first reason it fails, so the counts add up to the rows dropped."""
    if df.is_empty() or not checks:
        return df
    flags = df.select([e.fill_null(False).alias(f"_{i}") for i, (_, e) in enumerate(checks)])
    first = pl.coalesce([pl.when(pl.col(f"_{i}")).then(pl.lit(i)) for i in range(len(checks))])
    which = flags.select(first.alias("w"))["w"]
    if which.null_count() == df.height:
        return df
    counts = which.drop_nulls().value_counts(sort=False).sort("w")
    reasons = ", ".join(f"{n} {checks[i][0]}" for i, n in counts.iter_rows())
    dropped = df.height - which.null_count()
    warn.append(Notice.of("rocprof.dropped_rows", "dropped {n} {what} the model cannot hold: "
                          "{reasons}", n=dropped, what=what, reasons=reasons))
    return df.filter(which.is_null())


def _field(p: Process, name: str) -> str:
    """The name the input format gives a normalized field (for messages)."""
    return p.fields.get(name, name)


_DAY_NS = 86_400 * 10**9
_LATEST_NS = 1 << 62  # ~146 years of ns: past any boot or epoch clock reading of today
_LONGEST_NS = 1 << 53  # ~104 days: a recorded window longer than this is itself damaged


def profiling_window(p: Process) -> tuple[int, int, str]:
    """The times a record of this process can have: the process's own init..fini window
    when the file records a plausible one, else 0..2^62 ns (CSV has no window; a damaged
    one is not used). A timestamp outside it (INT64_MIN, INT64_MAX, a stray high bit)
    would stretch every span to centuries, so its record is dropped and counted."""
    init, fini = p.init_ns, p.fini_ns
    if init is not None and fini is not None and 0 <= init <= fini and (
            fini - init) <= _LONGEST_NS:
        return init, fini, f"outside the process's profiling window ({init}..{fini} ns)"
    return 0, _LATEST_NS, "with a negative timestamp or one past 2^62 ns"


def _time_checks(p: Process, window: tuple[int, int, str]) -> list[tuple[str, pl.Expr]]:
    """The checks every timed record passes: a start, an end, both inside the process's
    profiling window, and no end before the start (named as the file names the fields)."""
    lo, hi, why = window
    outside = ~pl.col("start").is_between(lo, hi) | ~pl.col("end").is_between(lo, hi)
    return [(f"without a valid {_field(p, 'start')}", pl.col("start").is_null()),
            (f"without a valid {_field(p, 'end')}", pl.col("end").is_null()),
            (why, outside),
            ("that end before they start", pl.col("end") < pl.col("start"))]


def _device_checks(p: Process, window: tuple[int, int, str]) -> list[tuple[str, pl.Expr]]:
    """:func:`_time_checks`, and for device work without a recorded window, no duration
    over a day (a kernel or copy that long is a damaged timestamp, not a measurement)."""
    checks = _time_checks(p, window)
    if window[1] == _LATEST_NS:
        checks.append(("that last more than a day", pl.col("end") - pl.col("start") > _DAY_NS))
    return checks


def _kernels(p: Process, ordinals: pl.DataFrame, warn: list[Notice],
             checks: list[tuple[str, pl.Expr]]) -> pl.DataFrame:
    f = lambda n: _field(p, n)  # noqa: E731
    k = drop_unusable(p.dispatches, [
        *checks,
        (f"without a valid {f('agent')}", pl.col("agent").is_null()),
        (f"without a valid {f('queue')}", pl.col("queue").is_null() & pl.col("stream").is_null()),
    ], "kernel dispatches", warn)
    k = k.join(ordinals, left_on="agent", right_on="node_id", how="left")
    lost = k["device"].null_count()
    if lost:
        warn.append(Notice.of("rocprof.off_gpu_dispatches", "dropped {n} kernel dispatches on "
                              "agents that are not GPUs of the agent table", n=lost))
        k = k.filter(pl.col("device").is_not_null())
    unknown = k["name"].null_count()
    if unknown:
        warn.append(Notice.of("rocprof.unknown_kernel_ids", "{n} dispatches name a kernel id "
                              "the symbol table lacks; kept as '<unknown kernel N>'",
                              n=unknown))
    kid = pl.col("kernel_id").cast(pl.String).fill_null("?")
    return k.select(
        "device", "dispatch_id",
        stream=pl.coalesce("queue", "stream"), kind=pl.lit("kernel"),
        name=pl.col("name").fill_null(pl.format("<unknown kernel {}>", kid)),
        start_ns="start", end_ns="end", correlation_id="corr", tid="tid",
        launch=launch_expr())


def counter_facts(k: pl.DataFrame, counters: pl.DataFrame, rank: int) -> KernelCounters:
    """The dispatches' PMC counters, one row per kernel of ``k`` (in its order) and one column
    per counter (values summed over hardware instances; null where an instance is missing or
    the counter was not collected), for the core's counter costs (tracelens.cost.counters)."""
    c = counters.drop_nulls(["dispatch_id", "counter"])
    if c.is_empty():
        return KernelCounters(rank=rank, values=pl.DataFrame(height=k.height))
    wide = (c.group_by("dispatch_id", "counter").agg(
                pl.when(pl.col("value").null_count() == 0).then(pl.col("value").sum()))
            .sort("dispatch_id", "counter")
            .pivot(on="counter", index="dispatch_id", values="value", sort_columns=True)
            .rename(lambda n: n if n == "dispatch_id" else f"pmc:{n}"))
    joined = k.select("dispatch_id").join(wide, on="dispatch_id", how="left",
                                          maintain_order="left")
    unmatched = c.join(k.select("dispatch_id"), on="dispatch_id", how="anti")[
        "dispatch_id"].n_unique()
    return KernelCounters(rank=rank, values=joined.drop("dispatch_id").rename(
        lambda n: n[4:]), unmatched=unmatched)


def _copies(p: Process, ordinals: pl.DataFrame, warn: list[Notice],
            checks: list[tuple[str, pl.Expr]]) -> pl.DataFrame:
    f = lambda n: _field(p, n)  # noqa: E731
    c = drop_unusable(p.copies, [
        *checks,
        (f"without a valid {f('op')}", pl.col("op").is_null()),
    ], "memory copies", warn)
    if c.is_empty():
        return pl.DataFrame()
    direction = pl.col("op").str.extract(r"(HOST_TO_DEVICE|DEVICE_TO_HOST|DEVICE_TO_DEVICE|"
                                         r"HOST_TO_HOST)", 1)
    c = c.with_columns(sub=direction.replace_strict({k: v[0] for k, v in _DIRECTIONS.items()},
                                                    default=None, return_dtype=pl.String),
                       side=direction.replace_strict({k: v[1] for k, v in _DIRECTIONS.items()},
                                                     default=None, return_dtype=pl.String),
                       code=direction.replace_strict({k: v[2] for k, v in _DIRECTIONS.items()},
                                                     default=5, return_dtype=pl.Int64))
    c = (c.join(ordinals.rename({"node_id": "src_agent", "device": "src_dev"}),
                on="src_agent", how="left")
         .join(ordinals.rename({"node_id": "dst_agent", "device": "dst_dev"}),
               on="dst_agent", how="left"))
    dev = (pl.when(pl.col("side") == "dst").then(pl.col("dst_dev"))
           .when(pl.col("side") == "src").then(pl.col("src_dev"))
           .when(pl.col("side").is_null()).then(pl.coalesce("dst_dev", "src_dev")))
    c = c.with_columns(device=dev)
    lost = c["device"].null_count()
    if lost:
        warn.append(Notice.of("rocprof.copies_off_gpu", "skipped {n} memory copies with no GPU "
                              "side (host-to-host, or agents missing from the agent table)",
                              n=lost))
    c = c.filter(pl.col("device").is_not_null())
    return c.select(
        "device",
        stream=pl.when(pl.col("stream").is_not_null()).then(-1 - pl.col("stream"))
        .otherwise(-1000 - pl.col("code")),
        kind=pl.lit("memcpy"), name="op", subcategory="sub", start_ns="start",
        end_ns="end", correlation_id="corr", tid="tid",
        bytes=pl.col("bytes").cast(pl.Float64))


def _host_events(p: Process, host: str, rank: int) -> pl.DataFrame:
    parts = []
    for df, kind in ((p.apis, "api"), (p.markers, "marker")):
        if df.height:
            parts.append(df.select("name", "tid", start_ns="start", end_ns="end",
                                   correlation_id="corr", kind=pl.lit(kind)))
    if not parts:
        return pl.DataFrame(schema=HOST_EVENT_SCHEMA)
    return conform(pl.concat(parts, how="diagonal_relaxed").with_columns(
        host=pl.lit(host, dtype=Text), rank=pl.lit(rank), pid=pl.lit(p.pid, dtype=pl.Int64)),
        HOST_EVENT_SCHEMA)


def build_trace(procs: list[Process], path: Path, fmt: str,
                step_marker: str | None = None, clock: str = CLOCK) -> Trace:
    """One Trace from the processes one input holds, on the host clock ``clock``; ranks in
    the order given."""
    meta = TraceMeta(sources=[{"path": str(path), "format": fmt}])
    procs, repeated = drop_repeated_processes(procs)
    for w in repeated:
        meta.warn(w.about(path.name))
    events, devices, hosts, markers = [], [], [], []
    unusable: list[Notice] = []  # why records were not read, for the error when none is
    counters: list[KernelCounters] = []  # for the core's counter costs
    processes: list[ProcessInfo] = []
    host_info: dict[str, HostInfo] = {}
    for rank, p in enumerate(procs):
        warn = list(p.warnings)
        p.dispatches = drop_copies(p.dispatches, "kernel dispatches", warn)
        p.copies = drop_copies(p.copies, "memory copies", warn)
        host = p.host or "unknown"
        window = profiling_window(p)
        checks = _device_checks(p, window)
        p.agents = agents_mod.unique_agents(p.agents, warn)
        for attr, what in (("apis", "API records"), ("markers", "ROCTx records")):
            setattr(p, attr, drop_unusable(getattr(p, attr), _time_checks(p, window)[:3],
                                                 what, warn))
        ordinals = agents_mod.with_ordinals(p.agents).select("node_id", "device")
        kern = _kernels(p, ordinals, warn, checks)
        counted = counter_facts(kern, p.counters, rank)  # the core costs them, noted here
        counted_at = len(warn)
        kern = kern.drop("dispatch_id")
        sub, stats = collective_types(
            kern.select("tid", "correlation_id", "name", "start_ns").rename(
                {"correlation_id": "corr", "start_ns": "start"}).with_columns(rank=pl.lit(0)),
            p.apis.with_columns(rank=pl.lit(0)))
        warn += warnings_for(stats, f"process {p.pid}" if p.pid is not None else "process")
        kern = kern.with_columns(subcategory=sub)
        frames = [f for f in (kern, _copies(p, ordinals, warn, checks)) if f.height]
        if frames:
            ev = pl.concat(frames, how="diagonal_relaxed").with_columns(
                host=pl.lit(host, dtype=Text), rank=pl.lit(rank))
            events.append(conform(ev, EVENT_SCHEMA))
            active = set(ev["device"].unique().to_list())
        else:
            active = set()
        active_nodes = set(ordinals.filter(pl.col("device").is_in(sorted(active)))[
            "node_id"].to_list())
        hosts.append(_host_events(p, host, rank))
        markers.append(p.markers.select("name", "start", "end").with_columns(
            rank=pl.lit(rank, dtype=pl.Int32)))
        for i, w in enumerate(warn):
            if i == counted_at:
                counted.notes_at = len(meta.notices)
            meta.warn(w.about(path.name))
        if counted_at == len(warn):
            counted.notes_at = len(meta.notices)
        unusable += [w for w in warn if w.code in UNUSABLE]
        counters.append(counted)
        # the process's identification notes follow its other warnings (tracelens.loading.devices)
        devices.append(agents_mod.devices(p.agents, active_nodes, host, rank,
                                          len(meta.notices)))
        processes.append(ProcessInfo(rank=rank, host=host, pid=p.pid, init_ns=p.init_ns,
                                     fini_ns=p.fini_ns))
        host_info.setdefault(host, HostInfo(path=str(path)))
    raw = sum(p.dispatches.height + p.copies.height for p in procs)
    if raw and not events:
        why = "; ".join(w.text for w in dict.fromkeys(unusable))
        raise TraceInputError(path, f"none of its {raw} kernel dispatches and memory copies "
                              f"is usable ({why})")
    steps, step_warn = steps_from_markers(pl.concat(markers) if markers else pl.DataFrame(
        schema={"name": pl.String, "start": pl.Int64, "end": pl.Int64, "rank": pl.Int32}),
        step_marker)
    for w in step_warn:
        meta.warn(w.about(path.name))
    meta.hosts = host_info
    meta.format_facts = [_facts(procs, path, processes, clock),
                         CounterFacts(str(path), tuple(counters))]
    return Trace(
        events=pl.concat(events) if events else pl.DataFrame(schema=EVENT_SCHEMA),
        host_events=pl.concat(hosts) if hosts else pl.DataFrame(schema=HOST_EVENT_SCHEMA),
        steps=steps if steps.height else pl.DataFrame(schema=STEP_SCHEMA),
        devices=pl.concat(devices) if devices else pl.DataFrame(schema=DEVICE_FACTS_SCHEMA),
        meta=meta)


def _facts(procs: list[Process], path: Path, ranks: list[ProcessInfo], clock: str
           ) -> RocprofFacts:
    """The file's processes (``ranks``) on the host ``clock`` and its schema, as its
    processes recorded it (one schema per file)."""
    def first(key: str) -> str | None:
        return next((str(p.info[key]) for p in procs if p.info.get(key) is not None), None)
    return RocprofFacts(str(path), tuple(ranks), clock, schema_version=first("schema_version"),
                        layout=first("layout"))
