"""The tables ``tracelens export`` writes: the event frame, the host event frame and
per-kernel, per-step, per-device and per-collective tables, each one polars frame with a
stable column order.

They are the analyses' own frames (no re-computation): the timeline breakdown of
``analyze.timeline`` with the idle parts of ``analyze.idle``, and the collective activities of
``analyze.collectives``.
"""

from __future__ import annotations

import polars as pl

from tracelens.analyze.communication.collectives import collective_activities, match_instances
from tracelens.analyze.timeline.idle import idle_breakdowns
from tracelens.analyze.timeline.breakdown import DEVICE_KEYS, device_breakdown, step_breakdown
from tracelens.core.frames import distinct
from tracelens.core.model import Trace

TABLES: tuple[str, ...] = ("events", "host_events", "kernels", "steps", "devices",
                           "collectives")


def kernel_stats(events: pl.DataFrame) -> pl.DataFrame:
    """Per kernel name (and its category, kind and rule): count, total, mean, min, p50, p90,
    max of the durations in ns, the number of devices it ran on, and its launch shape (the most
    common one, ties to the smallest; ``launches`` counts the distinct ones); by total time,
    then name. Taken from the one kernel aggregation
    (:func:`~tracelens.analyze.compute.kernel_table.kernel_table` with its durations and launch
    shapes), not a pass of its own.

    Percentiles are the nearest-rank values of the durations (a real kernel's duration, not an
    interpolation)."""
    from tracelens.analyze.compute.kernel_table import kernel_table

    keys = ["name", "kind", "category", "subcategory", "rule"]
    if events.is_empty():
        return events.select(*keys).with_columns(
            *[pl.lit(None, pl.Int64).alias(c) for c in
              ("count", "total_ns", "min_ns", "p50_ns", "p90_ns", "max_ns", "devices",
               "launches")],
            mean_ns=pl.lit(None, pl.Float64), launch=pl.lit(None, pl.String))
    table = kernel_table(events, detail=True).with_columns(
        category=pl.col("category").cast(events.schema["category"]))
    shapes = table.filter(pl.col("launch").is_not_null()).group_by(*keys, "launch").agg(
        n=pl.col("count").sum()).sort(["n", "launch"], descending=[True, False]).group_by(
        keys, maintain_order=True).agg(launch=pl.col("launch").first(),
                                       launches=pl.len().cast(pl.Int64))
    d = pl.col("_d")
    per = table.group_by(keys).agg(
        count=pl.col("count").sum().cast(pl.Int64), total_ns=pl.col("sum_ns").sum(),
        devices=pl.struct(DEVICE_KEYS).n_unique().cast(pl.Int64),
        _d=pl.col("_durs").list.explode(keep_nulls=False, empty_as_null=False))
    out = per.with_columns(
        mean_ns=pl.col("total_ns") / pl.col("count"), min_ns=d.list.min(),
        p50_ns=d.list.eval(pl.element().quantile(0.5, "nearest")).list.first().cast(pl.Int64),
        p90_ns=d.list.eval(pl.element().quantile(0.9, "nearest")).list.first().cast(pl.Int64),
        max_ns=d.list.max()).join(shapes, on=keys, how="left", nulls_equal=True).with_columns(
        launches=pl.col("launches").fill_null(0))
    # the last keys break ties the old pass left to the group-by's order (not reproducible)
    return out.sort(["total_ns", "name", "kind", "rule", "category", "subcategory"],
                    descending=[True, False, False, False, False, False], nulls_last=True
                    ).select(*keys, "count", "total_ns", "mean_ns", "min_ns", "p50_ns",
                             "p90_ns", "max_ns", "devices", "launch", "launches")


def device_table(trace: Trace) -> pl.DataFrame:
    """Per active device: its identity, the timeline numbers and the idle parts."""
    ev = trace.events
    tl = device_breakdown(ev).timeline.drop("first_ns", "last_ns", strict=False)
    (idle,) = idle_breakdowns(ev, trace.host_events, [(None, None)])
    info = trace.devices.select(*DEVICE_KEYS, "vendor", "arch", "product", "spec_id")
    return info.join(tl, on=DEVICE_KEYS, how="inner").join(
        idle, on=DEVICE_KEYS, how="left").with_columns(
        pl.col(c).fill_null(0) for c in idle.columns if c.endswith("_ns")).sort(DEVICE_KEYS)


def step_table(trace: Trace) -> pl.DataFrame:
    """Per active device and step: the step window, the timeline numbers and idle parts."""
    ev = trace.events
    active = distinct(ev, DEVICE_KEYS)
    tl = step_breakdown(ev, trace.steps, active).timeline
    (idle,) = idle_breakdowns(ev, trace.host_events, [(trace.steps, None)])
    keys = [*DEVICE_KEYS, "step"]
    return tl.join(idle, on=keys, how="left").with_columns(
        pl.col(c).fill_null(0) for c in idle.columns if c.endswith("_ns")).sort(
        [*keys, "start_ns"])


def collective_table(trace: Trace) -> pl.DataFrame:
    """Per collective activity: its event columns, type, exposure, bandwidth, instance
    (the k-th execution of its op), arrival skew and wait."""
    acts = match_instances(collective_activities(trace.events))
    return acts.sort([*DEVICE_KEYS, "start_ns", "stream", "name"])


def build_table(trace: Trace, name: str) -> pl.DataFrame:
    """One of :data:`TABLES` for ``trace``."""
    if name == "events":
        return trace.events
    if name == "host_events":  # the model's frame: host API calls, CPU ops, annotations
        return trace.host_events
    if name == "kernels":
        return kernel_stats(trace.events)
    if name == "steps":
        return step_table(trace)
    if name == "devices":
        return device_table(trace)
    if name == "collectives":
        return collective_table(trace)
    raise ValueError(f"unknown table {name!r} (known: {', '.join(TABLES)})")


def counter_intervals(trace: Trace) -> pl.DataFrame:
    """Per device, the intervals of exposed communication (COMM − COMP) and of idle time
    (the span − every activity), as ``track`` ``exposed_comm`` / ``idle``."""
    from tracelens.core.intervals import subtract
    from tracelens.core.model import COMPUTE_CATEGORIES

    ev = trace.events.select(*DEVICE_KEYS, "category", "start_ns", "end_ns")
    comp = ev.filter(pl.col("category").is_in(COMPUTE_CATEGORIES))
    comm = ev.filter(pl.col("category") == "collective")
    spans = ev.group_by(DEVICE_KEYS).agg(pl.col("start_ns").min(), pl.col("end_ns").max())
    return pl.concat([
        subtract(comm, comp, DEVICE_KEYS).with_columns(track=pl.lit("exposed_comm")),
        subtract(spans, ev, DEVICE_KEYS).with_columns(track=pl.lit("idle")),
    ]).select(*DEVICE_KEYS, "track", "start_ns", "end_ns")
