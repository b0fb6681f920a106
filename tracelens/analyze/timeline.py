"""The timeline breakdown of DESIGN §6.1, per device, for the whole trace and per step.

For one device and one window: COMP = kernels not ``collective``/``memory``, COMM =
``collective``, MEM = ``memory``. ``compute = |COMP|``, ``exposed_comm = |COMP ∪ COMM| − |COMP|``,
``exposed_memory = |COMP ∪ COMM ∪ MEM| − |COMP ∪ COMM|``, ``busy = |all|``, ``idle = span − busy``;
so ``compute + exposed_comm + exposed_memory + idle == span`` exactly. Exclusive time of the
category at priority k is ``|∪ prio ≤ k| − |∪ prio < k|``, so exclusive times add up to busy.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from tracelens.analyze.intervals import union_length_expr
from tracelens.model import CATEGORIES, CategoryDtype

DEVICE_KEYS = ["host", "rank", "device"]
TIMELINE_COLUMNS = ["span_ns", "busy_ns", "compute_ns", "comm_ns", "exposed_comm_ns",
                    "overlapped_comm_ns", "memory_ns", "exposed_memory_ns", "idle_ns"]
_COLLECTIVE = CATEGORIES.index("collective")
_MEMORY = CATEGORIES.index("memory")


@dataclass
class Breakdown:
    """``timeline``: keys + TIMELINE_COLUMNS (+ window bounds); ``categories``: keys +
    category, count, sum_ns, exclusive_ns (every category, zeros included)."""

    timeline: pl.DataFrame
    categories: pl.DataFrame


def _prio_unions(ev: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """Per group: u0..u7 = |∪ events with priority ≤ k|, comm = |COMM|, mem = |MEM|."""
    ordered = ev.select(*keys, "start_ns", "end_ns", "_prio").sort([*keys, "start_ns"])
    parts = []
    for k in range(len(CATEGORIES)):
        sub = ordered.filter(pl.col("_prio") <= k)
        parts.append(sub.with_columns(_u=union_length_expr(keys))
                     .group_by(keys).agg(pl.col("_u").sum().alias(f"u{k}")))
    for name, prio in (("comm", _COLLECTIVE), ("mem", _MEMORY)):
        sub = ordered.filter(pl.col("_prio") == prio)
        parts.append(sub.with_columns(_u=union_length_expr(keys))
                     .group_by(keys).agg(pl.col("_u").sum().alias(name)))
    out = ev.select(keys).unique()
    for p in parts:
        out = out.join(p, on=keys, how="left", nulls_equal=True)
    return out.fill_null(0)


def _breakdown(ev: pl.DataFrame, keys: list[str], spans: pl.DataFrame) -> Breakdown:
    """Core computation; ``spans`` has keys + span_ns for every group to report."""
    ev = ev.with_columns(_prio=pl.col("category").to_physical().cast(pl.Int32))
    u = _prio_unions(ev, keys) if ev.height else None
    tl = spans
    if u is not None:
        tl = tl.join(u, on=keys, how="left", nulls_equal=True)
    else:
        tl = tl.with_columns(**{f"u{k}": pl.lit(0) for k in range(len(CATEGORIES))},
                             comm=pl.lit(0), mem=pl.lit(0))
    last = len(CATEGORIES) - 1
    tl = tl.with_columns(pl.col(f"u{k}").fill_null(0).cast(pl.Int64)
                         for k in range(len(CATEGORIES))).with_columns(
        pl.col("comm").fill_null(0).cast(pl.Int64), pl.col("mem").fill_null(0).cast(pl.Int64))
    tl = tl.with_columns(
        busy_ns=pl.col(f"u{last}"),
        compute_ns=pl.col(f"u{_COLLECTIVE - 1}"),
        comm_ns=pl.col("comm"),
        exposed_comm_ns=pl.col(f"u{_COLLECTIVE}") - pl.col(f"u{_COLLECTIVE - 1}"),
        memory_ns=pl.col("mem"),
        exposed_memory_ns=pl.col(f"u{_MEMORY}") - pl.col(f"u{_COLLECTIVE}"),
    ).with_columns(
        overlapped_comm_ns=pl.col("comm_ns") - pl.col("exposed_comm_ns"),
        idle_ns=pl.col("span_ns") - pl.col("busy_ns"),
    )
    excl = tl.select(*keys, *[
        (pl.col(f"u{k}") - (pl.col(f"u{k - 1}") if k else 0)).alias(cat)
        for k, cat in enumerate(CATEGORIES)
    ]).unpivot(index=keys, variable_name="category", value_name="exclusive_ns")
    sums = ev.group_by(*keys, "category").agg(
        count=pl.len().cast(pl.Int64), sum_ns=(pl.col("end_ns") - pl.col("start_ns")).sum())
    cats = (excl.with_columns(pl.col("category").cast(CategoryDtype))
            .join(sums, on=[*keys, "category"], how="left", nulls_equal=True)
            .with_columns(pl.col("count").fill_null(0), pl.col("sum_ns").fill_null(0))
            .select(*keys, "category", "count", "sum_ns", "exclusive_ns")
            .sort([*keys, "category"]))
    extra = [c for c in spans.columns if c not in keys and c != "span_ns"]
    timeline = tl.select(*keys, *extra, *TIMELINE_COLUMNS).sort(keys)
    return Breakdown(timeline=timeline, categories=cats)


def device_breakdown(events: pl.DataFrame) -> Breakdown:
    """Whole-trace breakdown per device with activity; span = first start → last end."""
    spans = events.group_by(DEVICE_KEYS).agg(
        first_ns=pl.col("start_ns").min(), last_ns=pl.col("end_ns").max()
    ).with_columns(span_ns=pl.col("last_ns") - pl.col("first_ns"))
    return _breakdown(events, DEVICE_KEYS, spans)


def clip_to_windows(events: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame:
    """Events cut to each step window of their rank (an event spanning two steps is split).

    ``windows``: rank, step, start_ns, end_ns, non-overlapping per rank. Output adds ``step``
    (replacing any existing one) and keeps only the parts with positive length.
    """
    w = windows.select("rank", "step", "start_ns", "end_ns").sort("rank", "start_ns") \
        .with_columns(_i=pl.int_range(pl.len()).over("rank"))
    lo_tab = w.select("rank", _ws="start_ns", _we="end_ns", _lo="_i")
    hi_tab = w.select("rank", _ws2="start_ns", _hi="_i")
    ev = events.drop("step", strict=False).with_row_index("_row")
    # Step holding the start, or the next one when the start falls after that step's end.
    ev = ev.sort("start_ns").join_asof(lo_tab.sort("_ws"), left_on="start_ns", right_on="_ws",
                                       by="rank", strategy="backward", check_sortedness=False)
    ev = ev.with_columns(_lo=pl.when(pl.col("_lo").is_null()).then(0)
                         .when(pl.col("start_ns") >= pl.col("_we")).then(pl.col("_lo") + 1)
                         .otherwise(pl.col("_lo")))
    # Last step starting before the event ends.
    ev = ev.with_columns(_end_m1=pl.col("end_ns") - 1).sort("_end_m1").join_asof(
        hi_tab.sort("_ws2"), left_on="_end_m1", right_on="_ws2", by="rank",
        strategy="backward", check_sortedness=False)
    ev = ev.filter(pl.col("_hi").is_not_null() & (pl.col("_hi") >= pl.col("_lo")))
    ev = ev.with_columns(_i=pl.int_ranges(pl.col("_lo"), pl.col("_hi") + 1)).explode("_i")
    ev = ev.join(w.select("rank", "_i", "step", _s="start_ns", _e="end_ns"),
                 on=["rank", "_i"], how="inner")
    ev = ev.with_columns(start_ns=pl.max_horizontal("start_ns", "_s"),
                         end_ns=pl.min_horizontal("end_ns", "_e"))
    ev = ev.filter(pl.col("end_ns") > pl.col("start_ns"))
    return ev.sort("_row", "step").drop("_row", "_ws", "_we", "_lo", "_ws2", "_hi", "_end_m1",
                                        "_i", "_s", "_e", strict=False)


def step_breakdown(events: pl.DataFrame, steps: pl.DataFrame,
                   devices: pl.DataFrame) -> Breakdown:
    """Per device and step: window = the step's bounds on the device's rank."""
    keys = [*DEVICE_KEYS, "step"]
    if steps.is_empty():
        empty = pl.DataFrame(schema={"host": pl.String, "rank": pl.Int32, "device": pl.Int32,
                                     "step": pl.Int32, "start_ns": pl.Int64,
                                     "end_ns": pl.Int64})
        return _breakdown(events.head(0).with_columns(step=pl.lit(None, dtype=pl.Int32)), keys,
                          empty.with_columns(span_ns=pl.lit(0, dtype=pl.Int64)))
    active = devices.select(DEVICE_KEYS).unique()
    spans = active.join(steps.select("rank", "step", "start_ns", "end_ns"), on="rank") \
        .with_columns(span_ns=pl.col("end_ns") - pl.col("start_ns"))
    clipped = clip_to_windows(events, steps)
    return _breakdown(clipped, keys, spans)
