"""A :class:`tracelens.core.model.Trace` -> one normalized :class:`Process` per rank, for writers.

The inverse of :mod:`parsers.rocprof.build`, with what a real rocprofv3 run records:

- agents: two CPU agents (node ids 0 and 1), then one GPU agent per device ordinal (node id
  ``2 + device``, ``logical_node_type_id = device``) carrying the device's arch, product
  name, compute units, engine clock and memory;
- kernels and memsets become kernel dispatches, with the grid and workgroup sizes, VGPRs and
  LDS bytes of their ``launch`` text (numbers as the trace gives them); each (device,
  stream) gets its own HSA queue and HIP stream id; every device has its own launching host
  thread (``pid + 1 + device``);
- memcpy events become memory copies (direction from the subcategory; size from ``bytes``);
- a collective kernel whose subcategory is known gets the RCCL API call that launched it
  (``ncclAllGather``...; ``send-recv`` as a ``ncclGroupStart/Send/Recv/GroupEnd`` group) on
  its launching thread, and the kernel carries that call's correlation id - what
  ``rocprofv3 --kernel-trace --rccl-trace`` records;
- each step becomes a ROCTx range named ``step_name.format(step=N)`` on the main thread, and
  host events of kind ``marker`` are written back as ROCTx ranges/marks.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from tracelens_dev.writers import plain_text

from parsers.rocprof.agents import agent_frame, gfx_target_version
from parsers.rocprof.collectives import TYPE_APIS
from parsers.rocprof.records import (API_SCHEMA, COPY_SCHEMA, COUNTER_SCHEMA, DISPATCH_SCHEMA,
                                     MARKER_SCHEMA, Process, frame, launch_columns)
from tracelens.core.model import Trace

STEP_NAME = "step {step}"
_COPY_OPS = {"h2d": "MEMORY_COPY_HOST_TO_DEVICE", "d2h": "MEMORY_COPY_DEVICE_TO_HOST"}
_CPU = {"type": "CPU", "name": "AMD EPYC 9654 96-Core Processor", "vendor_name": "CPU",
        "product_name": "AMD EPYC 9654 96-Core Processor", "cu_count": 96}


def _agents(devices: pl.DataFrame) -> pl.DataFrame:
    rows: list[dict[str, Any]] = [
        {**_CPU, "node_id": i, "logical_index": i, "type_index": i} for i in range(2)]
    known = {d["device"]: d for d in devices.iter_rows(named=True)}
    first = next(iter(known.values()), {})
    for dev in range(max(known, default=-1) + 1):
        d = known.get(dev, first)
        arch = d.get("arch") or "gfx942"
        rows.append({"node_id": 2 + dev, "logical_index": 2 + dev, "type_index": dev,
                     "type": "GPU", "name": arch, "gfx_target_version": gfx_target_version(arch),
                     "product_name": d.get("product") or "", "vendor_name": "AMD",
                     "cu_count": d.get("compute_units"), "clock_mhz": d.get("clock_mhz"),
                     "memory_bytes": d.get("memory_bytes")})
    df = agent_frame(rows)
    return df.with_columns(handle=pl.col("node_id") + 37944)


def _rccl_rows(colls: pl.DataFrame, next_corr: int) -> tuple[list[dict[str, Any]], int]:
    rows = []
    for k in colls.iter_rows(named=True):
        s = max(0, k["start_ns"] - 4_000)
        if k["subcategory"] == "send-recv":
            for off, name in ((0, "ncclGroupStart"), (200, "ncclSend"), (400, "ncclRecv")):
                rows.append({"name": name, "tid": k["tid"], "corr": next_corr,
                             "start": s + off, "end": s + off + 100})
                next_corr += 1
            rows.append({"name": "ncclGroupEnd", "tid": k["tid"], "corr": k["corr"],
                         "start": s + 600, "end": s + 3_000})
        else:
            rows.append({"name": TYPE_APIS[k["subcategory"]], "tid": k["tid"],
                         "corr": k["corr"], "start": s, "end": s + 3_000})
    return rows, next_corr


def _typed(events: pl.DataFrame) -> pl.DataFrame:
    """Events with category and subcategory: an unclassified trace (the synthetic generator's)
    is classified with tracelens's rules, so a collective's HLO op names its RCCL call."""
    if events.height and events["category"].null_count() == events.height:
        from tracelens.classify import classify
        return classify(events)
    return events


def dispatch_counters(dispatches: pl.DataFrame, counters: pl.DataFrame | None
                      ) -> pl.DataFrame:
    """COUNTER_SCHEMA rows for ``dispatches`` (whose dispatch ids are 1, 2, ... in row order,
    as every writer numbers them): each dispatch gets the ``counter``/``value`` rows that
    ``counters`` gives for its kernel ``name``."""
    if counters is None or counters.is_empty():
        return frame({}, COUNTER_SCHEMA)
    d = dispatches.select("name").with_row_index("dispatch_id", offset=1)
    return frame(d.join(counters.select("name", "counter", "value"), on="name", how="inner",
                        maintain_order="left_right").drop("name"), COUNTER_SCHEMA)


def export(trace: Trace, step_name: str = STEP_NAME,
           counters: pl.DataFrame | None = None) -> list[Process]:
    """One Process per rank of ``trace`` (ranks in order). ``counters`` (``name``,
    ``counter``, ``value``): PMC counter values recorded for every dispatch of that kernel
    name, as ``rocprofv3 --pmc`` would (writers put them in each format's counter records)."""
    trace = plain_text(trace)
    ranks = sorted(set(trace.devices["rank"].to_list()) | set(trace.events["rank"].to_list()))
    events = _typed(trace.events)
    out = []
    for rank in ranks:
        ev = events.filter(pl.col("rank") == rank).sort("start_ns", "device", "stream")
        devs = trace.devices.filter(pl.col("rank") == rank)
        hosts = devs["host"].to_list() + ev["host"].to_list()
        he = trace.host_events.filter(pl.col("rank") == rank)
        pids = [p for p in he["pid"].to_list() if p is not None]
        pid = int(pids[0]) if pids else 1000 + int(rank)
        queues = ev.select("device", "stream").unique().sort("device", "stream").with_row_index(
            "queue", offset=1).with_columns(pl.col("queue").cast(pl.Int64))
        ev = ev.join(queues, on=["device", "stream"], how="left").with_row_index(
            "corr", offset=1).with_columns(corr=pl.col("corr").cast(pl.Int64),
                                           tid=pid + 1 + pl.col("device").cast(pl.Int64),
                                           agent=2 + pl.col("device").cast(pl.Int64))
        kern = ev.filter(pl.col("kind") != "memcpy")
        names = kern.select("name").unique(maintain_order=True).with_row_index(
            "kernel_id", offset=1).with_columns(pl.col("kernel_id").cast(pl.Int64))
        launch = pl.col("launch") if "launch" in kern.columns else pl.lit(None, pl.String)
        dispatches = kern.join(names, on="name", how="left").select(
            "agent", "queue", "tid", "corr", "kernel_id", "name", *launch_columns(launch),
            start="start_ns", end="end_ns", stream="queue",
            dispatch_id=pl.int_range(1, pl.len() + 1, dtype=pl.Int64))
        cp = ev.filter(pl.col("kind") == "memcpy")
        sub = pl.col("subcategory").fill_null("")
        copies = cp.select(
            src_agent=pl.when(sub == "h2d").then(0).otherwise(pl.col("agent")),
            dst_agent=pl.when(sub == "d2h").then(0).otherwise(pl.col("agent")),
            op=sub.replace_strict(_COPY_OPS, default="MEMORY_COPY_DEVICE_TO_DEVICE"),
            bytes=pl.col("bytes").fill_null(0).cast(pl.Int64), stream="queue", tid="tid",
            corr="corr", start="start_ns", end="end_ns")
        next_corr = ev.height + 1
        colls = kern.filter((pl.col("category") == "collective")
                            & pl.col("subcategory").is_in(list(TYPE_APIS) + ["send-recv"]))
        rows, next_corr = _rccl_rows(colls, next_corr)
        apis = frame(pl.DataFrame(rows, schema={"name": pl.String, "tid": pl.Int64,
                                                "corr": pl.Int64, "start": pl.Int64,
                                                "end": pl.Int64}).with_columns(
            domain=pl.lit("RCCL_API")), API_SCHEMA)
        steps = trace.steps.filter(pl.col("rank") == rank).sort("start_ns")
        marks = [{"name": step_name.format(step=s["step"]), "tid": pid, "start": s["start_ns"],
                  "end": s["end_ns"]} for s in steps.iter_rows(named=True)]
        marks += [{"name": m["name"], "tid": m["tid"] if m["tid"] is not None else pid,
                   "start": m["start_ns"], "end": m["end_ns"]}
                  for m in he.filter(pl.col("kind") == "marker").iter_rows(named=True)]
        markers = frame(pl.DataFrame(marks, schema={
            "name": pl.String, "tid": pl.Int64, "start": pl.Int64, "end": pl.Int64}
        ).with_columns(domain=pl.lit("MARKER_CORE_RANGE_API"),
                       corr=pl.int_range(next_corr, next_corr + pl.len(), dtype=pl.Int64)),
            MARKER_SCHEMA)
        times = [t for t in (ev["start_ns"].min(), ev["end_ns"].max(), steps["start_ns"].min(),
                             steps["end_ns"].max()) if t is not None]
        out.append(Process(
            host=hosts[0] if hosts else "localhost", pid=pid, agents=_agents(devs),
            dispatches=frame(dispatches, DISPATCH_SCHEMA), copies=frame(copies, COPY_SCHEMA),
            apis=apis, markers=markers,
            counters=dispatch_counters(dispatches, counters),
            init_ns=max(0, min(times) - 1_000_000) if times else 0,
            fini_ns=max(times) + 1_000_000 if times else 1,
            info={"queues": queues.select("queue", "device", "stream")}))
    return out
