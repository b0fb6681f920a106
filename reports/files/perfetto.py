"""The trace as a Chrome / Perfetto trace-event JSON file (opens in ui.perfetto.dev and
chrome://tracing).

One process per (host, device) and one thread per stream; every activity a complete event
(``ph: "X"``) named as in the trace, with our category as its ``cat`` and colour, and its
category, rule, op, module, FLOPs and bytes in ``args``. Step windows are complete events on a
``steps`` thread of each device. Counter tracks (``ph: "C"``) show per device when
communication is exposed and when the device is idle (1 inside the interval, 0 after).

Times are microseconds (fractional, exact to the ns) from the earliest activity or step,
whose absolute ns value is in ``otherData.t0_ns``: absolute ns since the epoch would lose
precision in a JSON double.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl

from tracelens.analyze.timeline.breakdown import DEVICE_KEYS
from tracelens.core.model import CATEGORIES

# Chrome trace-viewer reserved colour names, one per category (cname)
CNAME = {"gemm": "thread_state_running", "attention": "rail_animation",
         "convolution": "rail_load", "elementwise": "good", "reduction": "olive",
         "other": "grey", "collective": "terrible", "memory": "yellow"}
STEP_TID = -1


def _us(col: str, t0: int) -> pl.Expr:
    return ((pl.col(col) - t0).cast(pl.Float64) / 1000.0)


def trace_events(events: pl.DataFrame, steps: pl.DataFrame, devices: pl.DataFrame,
                 counters: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """(one row per trace event as JSON-ready columns, t0_ns). ``counters``: device keys,
    ``track``, ``start_ns``, ``end_ns`` intervals to show as 0/1 counter tracks."""
    starts = [f["start_ns"].min() for f in (events, steps) if f.height]
    t0 = int(min(starts)) if starts else 0  # type: ignore[type-var]
    procs = devices.select(DEVICE_KEYS).unique().sort(DEVICE_KEYS).with_row_index(
        "pid", offset=1).with_columns(pl.col("pid").cast(pl.Int64))
    ev = events.join(procs, on=DEVICE_KEYS, how="left")
    cat = pl.col("category").cast(pl.String)
    args = pl.struct(category=cat, subcategory="subcategory", rule="rule", op="op",
                     module="module", flops="flops", bytes="bytes", dtype="dtype",
                     correlation_id="correlation_id", step="step", launch="launch")
    x = ev.select(name="name", cat=cat, ph=pl.lit("X"), ts=_us("start_ns", t0),
                  dur=(pl.col("end_ns") - pl.col("start_ns")).cast(pl.Float64) / 1000.0,
                  pid="pid", tid="stream",
                  cname=cat.replace_strict(CNAME, default="grey"), args=args,
                  _o=pl.lit(2), _k="start_ns")
    parts = [x]
    if steps.height:
        st = procs.join(steps.select("rank", "step", "start_ns", "end_ns"), on="rank")
        parts.append(st.select(
            name=pl.format("step {}", "step"), cat=pl.lit("step"), ph=pl.lit("X"),
            ts=_us("start_ns", t0),
            dur=(pl.col("end_ns") - pl.col("start_ns")).cast(pl.Float64) / 1000.0,
            pid="pid", tid=pl.lit(STEP_TID, pl.Int64), cname=pl.lit("generic_work"),
            args=pl.struct(category=pl.lit(None, pl.String), subcategory=pl.lit(None, pl.String),
                           rule=pl.lit(None, pl.String), op=pl.lit(None, pl.String),
                           module=pl.lit(None, pl.String), flops=pl.lit(None, pl.Float64),
                           bytes=pl.lit(None, pl.Float64), dtype=pl.lit(None, pl.String),
                           correlation_id=pl.lit(None, pl.Int64), step="step",
                           launch=pl.lit(None, pl.String)),
            _o=pl.lit(1), _k="start_ns"))
    body = pl.concat(parts, how="vertical_relaxed").sort("pid", "_o", "tid", "_k", "name")
    return body.drop("_o", "_k"), t0


def _metadata(devices: pl.DataFrame, events: pl.DataFrame, has_steps: bool) -> list[str]:
    """Process and thread names (``ph: "M"``) as JSON lines, in a fixed order."""
    procs = devices.select(*DEVICE_KEYS, "product").unique(DEVICE_KEYS, keep="first") \
        .sort(DEVICE_KEYS).with_row_index("pid", offset=1)
    out = []
    streams = events.select(*DEVICE_KEYS, "stream").unique().sort(*DEVICE_KEYS, "stream")
    for r in procs.iter_rows(named=True):  # one line per device and stream: small
        label = f"{r['host']} GPU {r['device']}" + (f" ({r['product']})" if r["product"] else "")
        out.append(json.dumps({"ph": "M", "name": "process_name", "pid": r["pid"], "tid": 0,
                               "args": {"name": label}}))
        out.append(json.dumps({"ph": "M", "name": "process_sort_index", "pid": r["pid"],
                               "tid": 0, "args": {"sort_index": r["pid"]}}))
        if has_steps:
            out.append(json.dumps({"ph": "M", "name": "thread_name", "pid": r["pid"],
                                   "tid": STEP_TID, "args": {"name": "steps"}}))
        mine = streams.filter((pl.col("host") == r["host"]) & (pl.col("rank") == r["rank"])
                              & (pl.col("device") == r["device"]))
        for s in mine["stream"].to_list():
            out.append(json.dumps({"ph": "M", "name": "thread_name", "pid": r["pid"],
                                   "tid": s, "args": {"name": f"stream {s}"}}))
    return out


def counter_events(intervals: pl.DataFrame, devices: pl.DataFrame, t0: int) -> pl.DataFrame:
    """0/1 counter samples for each (device, track) from its disjoint ``intervals``."""
    procs = devices.select(DEVICE_KEYS).unique().sort(DEVICE_KEYS).with_row_index(
        "pid", offset=1).with_columns(pl.col("pid").cast(pl.Int64))
    iv = intervals.join(procs, on=DEVICE_KEYS)
    up = iv.select("pid", "track", t="start_ns", v=pl.lit(1))
    down = iv.select("pid", "track", t="end_ns", v=pl.lit(0))
    # an interval ending where the next begins: keep the rise (the later sample wins in UIs)
    pts = pl.concat([down, up]).unique(["pid", "track", "t"], keep="last", maintain_order=True)
    return pts.sort("pid", "track", "t").select(
        name="track", ph=pl.lit("C"), ts=_us("t", t0), pid="pid",
        args=pl.struct(pl.col("v").alias("value")))


def write_perfetto(events: pl.DataFrame, steps: pl.DataFrame, devices: pl.DataFrame,
                   counters: pl.DataFrame, path: Path, meta: dict[str, object]) -> int:
    """Write the trace-event file (gzip when ``path`` ends in ``.gz``); returns the number of
    trace events written."""
    body, t0 = trace_events(events, steps, devices, counters)
    cnt = counter_events(counters, devices, t0)
    lines = _metadata(devices, events, bool(steps.height))
    # polars writes each row as one JSON object (nulls as null), no Python loop per event
    chunks = [body.write_ndjson(), cnt.write_ndjson() if cnt.height else ""]
    other = json.dumps({**meta, "t0_ns": t0, "categories": list(CATEGORIES)})
    opener = gzip.open if path.name.endswith(".gz") else open
    n = 0
    tmp = path.with_name(path.name + ".part")  # a failed write leaves no partial file
    with opener(tmp, "wt", encoding="utf-8") as fh:  # type: ignore[operator]
        fh.write('{"displayTimeUnit":"ns","otherData":' + other + ',"traceEvents":[\n')
        first = True
        for block in ["\n".join(lines), *chunks]:
            block = block.strip()
            if not block:
                continue
            if not first:
                fh.write(",\n")
            fh.write(block.replace("}\n{", "},\n{"))
            n += block.count("\n") + 1
            first = False
        fh.write("\n]}\n")
    tmp.replace(path)
    return n
