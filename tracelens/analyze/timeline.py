"""The timeline breakdown of DESIGN §6.1, per device, for the whole trace and per step.

For one device and one window: COMP = kernels not ``collective``/``memory``, COMM =
``collective``, MEM = ``memory``. ``compute = |COMP|``, ``exposed_comm = |COMP ∪ COMM| − |COMP|``,
``exposed_memory = |COMP ∪ COMM ∪ MEM| − |COMP ∪ COMM|``, ``busy = |all|``, ``idle = span − busy``;
so ``compute + exposed_comm + exposed_memory + idle == span`` exactly. Exclusive time of the
category at priority k is ``|∪ prio ≤ k| − |∪ prio < k|``, so exclusive times add up to busy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from tracelens.analyze.intervals import on_one_axis, union_length_expr
from tracelens.model import CATEGORIES, CategoryDtype

DEVICE_KEYS = ["host", "rank", "device"]
TIMELINE_COLUMNS = ["span_ns", "busy_ns", "compute_ns", "comm_ns", "exposed_comm_ns",
                    "overlapped_comm_ns", "memory_ns", "exposed_memory_ns", "idle_ns"]
_COLLECTIVE = CATEGORIES.index("collective")
_PRIO = pl.col("category").to_physical().cast(pl.Int32)  # a category's priority: its index
Axis = tuple[pl.DataFrame, pl.DataFrame]  # ``intervals.on_one_axis``'s (rows, groups)
_MEMORY = CATEGORIES.index("memory")


@dataclass
class Breakdown:
    """``timeline``: keys + TIMELINE_COLUMNS (+ window bounds); ``categories``: keys +
    category, count, sum_ns, exclusive_ns (every category, zeros included)."""

    timeline: pl.DataFrame
    categories: pl.DataFrame


def _prio_unions(ev: pl.DataFrame, keys: list[str], by: tuple[str, ...] = (),
                 axis: Axis | None = None) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """Per group of ``keys`` (+ ``by``): u0..u7 = |∪ events with priority ≤ k|, comm = |COMM|,
    mem = |MEM|; and per group and category the count and summed duration (None on the
    fallback path).

    One sort and one pass (``intervals.on_one_axis``): the ten unions are ten column
    expressions evaluated together and summed by one group-by, each a cumulative max over
    the rows of its set. ``by`` splits a group further without its own axis: only valid when
    the rows of one group and different ``by`` values never overlap in time (step windows of
    one device), so a running max never carries from one to the other. Falls back to one
    union per level and group when times are too large to lay the groups end to end in int64.
    ``axis``: ``on_one_axis(ev, keys, "_prio", ...)`` when the caller has it already.
    """
    by = list(by)
    axis = axis if axis is not None else on_one_axis(ev, keys, "_prio", *by)
    if axis is None:
        every = [*keys, *by]
        return _prio_unions_by_level(
            ev.select(*every, "start_ns", "end_ns", "_prio").sort([*every, "start_ns"]),
            every), None
    ordered, groups = axis
    fast = _prio_sums_on_axis(ordered, groups, keys, by)
    if fast is not None:
        return fast
    s, e = pl.col("_s"), pl.col("_e")
    sets = [(f"u{k}", pl.col("_prio") <= k) for k in range(len(CATEGORIES))]
    sets += [("comm", pl.col("_prio") == _COLLECTIVE), ("mem", pl.col("_prio") == _MEMORY)]
    exprs = []
    for name, member in sets:
        prev = pl.when(member).then(e).otherwise(-1).cum_max().shift(1).fill_null(-1)
        exprs.append(pl.when(member).then((e - pl.max_horizontal(s, prev)).clip(lower_bound=0))
                     .otherwise(0).alias(name))
    sums = ordered.select("_g", *by, *exprs).group_by("_g", *by).agg(pl.all().sum())
    names = [n for n, _ in sets]
    unions = sums.join(groups.select(*keys, "_g"), on="_g").select(
        *keys, *by, *[pl.col(n).cast(pl.Int64) for n in names])
    # per group and category: count and summed duration, from the same rows
    per_cat = ordered.group_by("_g", *by, "_prio").agg(
        count=pl.len().cast(pl.Int64), sum_ns=(pl.col("_e") - pl.col("_s")).sum())
    per_cat = per_cat.join(groups.select(*keys, "_g"), on="_g")
    category = pl.Series("category", CATEGORIES, dtype=CategoryDtype).gather(per_cat["_prio"])
    return unions, per_cat.select(*keys, *by, category, "count", "sum_ns")


def _prio_sums_on_axis(ordered: pl.DataFrame, groups: pl.DataFrame, keys: list[str],
                       by: list[str]) -> tuple[pl.DataFrame, pl.DataFrame] | None:
    """``_prio_unions``'s sums with numpy: rows sorted on the shared axis come in runs of one
    group (and ``by`` value), so every sum is an exact int64 ``add.reduceat`` over the runs
    and each union one ``maximum.accumulate``. None (use polars) when a ``by`` value repeats
    in two runs of a group, or a priority or ``by`` value is null."""
    if ordered.is_empty() or ordered["_prio"].null_count() or any(
            ordered[b].null_count() for b in by):
        return None
    g = ordered["_g"].to_numpy()
    s, e, prio = ordered["_s"].to_numpy(), ordered["_e"].to_numpy(), ordered["_prio"].to_numpy()
    change = np.r_[True, g[1:] != g[:-1]]
    by_values = [ordered[b].to_numpy() for b in by]
    for v in by_values:
        change |= np.r_[True, v[1:] != v[:-1]]
    starts = np.flatnonzero(change)
    run_g = g[starts]
    runs = groups.select(keys)[run_g.astype(np.int64)].with_columns(
        ordered[b].gather(starts) for b in by)
    if by and runs.select(pl.struct(*keys, *by).is_duplicated().any()).item():
        return None
    sets = [(f"u{k}", prio <= k) for k in range(len(CATEGORIES))]
    sets += [("comm", prio == _COLLECTIVE), ("mem", prio == _MEMORY)]
    cols: dict[str, pl.Series] = {}
    seen = np.empty_like(e)  # the latest end among the set's earlier rows (-1: none)
    part = np.empty_like(e)
    present = np.bincount(prio, minlength=len(CATEGORIES)) > 0
    for k, (name, member) in enumerate(sets):  # in place: two arrays per pass, not six
        if 0 < k < len(CATEGORIES) and not present[k]:  # the same set as the level below
            cols[name] = cols[f"u{k - 1}"].alias(name)
            continue
        np.copyto(seen, e)
        seen[~member] = -1
        np.maximum.accumulate(seen, out=seen)
        part[0] = max(s[0], -1)
        np.maximum(s[1:], seen[:-1], out=part[1:])  # where the row's new coverage starts
        np.subtract(e, part, out=part)
        np.maximum(part, 0, out=part)
        part *= member
        cols[name] = pl.Series(name, np.add.reduceat(part, starts), dtype=pl.Int64)
    unions = runs.with_columns(**cols)
    dur = e - s
    counts = np.bincount((np.cumsum(change) - 1) * len(CATEGORIES) + prio,
                         minlength=len(starts) * len(CATEGORIES)).reshape(-1, len(CATEGORIES))
    per_cat = []
    for k in range(len(CATEGORIES)):
        count = counts[:, k]
        has = count > 0
        if not has.any():
            continue
        total = np.add.reduceat(np.where(prio == k, dur, 0), starts)
        per_cat.append(runs.filter(pl.Series(has)).with_columns(
            category=pl.lit(CATEGORIES[k], dtype=CategoryDtype),
            count=pl.Series(count[has], dtype=pl.Int64),
            sum_ns=pl.Series(total[has], dtype=pl.Int64)))
    cats = pl.concat(per_cat) if per_cat else runs.head(0).with_columns(
        category=pl.lit(None, dtype=CategoryDtype), count=pl.lit(0, dtype=pl.Int64),
        sum_ns=pl.lit(0, dtype=pl.Int64))
    return unions, cats


def _prio_unions_by_level(ordered: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """The same, one union per level (every group's own cumulative max)."""
    parts = []
    for k in range(len(CATEGORIES)):
        sub = ordered.filter(pl.col("_prio") <= k)
        parts.append(sub.with_columns(_u=union_length_expr(keys))
                     .group_by(keys).agg(pl.col("_u").sum().alias(f"u{k}")))
    for name, prio in (("comm", _COLLECTIVE), ("mem", _MEMORY)):
        sub = ordered.filter(pl.col("_prio") == prio)
        parts.append(sub.with_columns(_u=union_length_expr(keys))
                     .group_by(keys).agg(pl.col("_u").sum().alias(name)))
    out = ordered.select(keys).unique()
    for p in parts:
        out = out.join(p, on=keys, how="left", nulls_equal=True)
    return out.fill_null(0)


def _breakdown(ev: pl.DataFrame, keys: list[str], spans: pl.DataFrame,
               by: tuple[str, ...] = (), axis: Axis | None = None) -> Breakdown:
    """Core computation; ``spans`` has keys + span_ns for every group to report. The last
    ``len(by)`` keys may be left to ``_prio_unions``'s ``by`` (see there when that holds)."""
    ev = ev.with_columns(_prio=_PRIO)
    axis_keys = keys[:len(keys) - len(by)]
    u, sums = _prio_unions(ev, axis_keys, by, axis) if ev.height else (None, None)
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
    if sums is None:
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


def device_axis(events: pl.DataFrame) -> Axis | None:
    """``on_one_axis`` of ``events`` per device with the priority and correlation id: the
    one sort that :func:`device_breakdown` and ``idle.idle_intervals`` can share (None when
    the times do not fit one int64 axis: each then works per device)."""
    return on_one_axis(events.with_columns(_prio=_PRIO), DEVICE_KEYS, "_prio",
                       "correlation_id")


def device_breakdown(events: pl.DataFrame, axis: Axis | None = None) -> Breakdown:
    """Whole-trace breakdown per device with activity; span = first start → last end.
    ``axis``: :func:`device_axis` of ``events``, when the caller has it already."""
    if axis is not None and events.height:  # the axis's groups hold each device's span
        spans = axis[1].select(*DEVICE_KEYS, first_ns="_lo", last_ns="_hi",
                               span_ns=pl.col("_hi") - pl.col("_lo"))
        return _breakdown(events, DEVICE_KEYS, spans, axis=axis)
    # lazy: integer min/max are exact in any order, and the lazy group-by is several times
    # faster than the eager one on the string host key (rows are sorted by keys later)
    spans = events.lazy().group_by(DEVICE_KEYS).agg(
        first_ns=pl.col("start_ns").min(), last_ns=pl.col("end_ns").max()
    ).with_columns(span_ns=pl.col("last_ns") - pl.col("first_ns")).collect()
    return _breakdown(events, DEVICE_KEYS, spans)


def clip_to_windows(events: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame:
    """Events cut to each step window of their rank (an event spanning two steps is split).

    ``windows``: rank, step, start_ns, end_ns, non-overlapping per rank. Output adds ``step``
    (replacing any existing one) and keeps only the parts with positive length.
    """
    w = windows.select("rank", "step", "start_ns", "end_ns").sort("rank", "start_ns")
    rows, win = _window_pieces(events.select("rank", "start_ns", "end_ns"), w)
    w_start, w_end = w["start_ns"].to_numpy(), w["end_ns"].to_numpy()
    start = np.maximum(events["start_ns"].to_numpy()[rows], w_start[win])
    end = np.minimum(events["end_ns"].to_numpy()[rows], w_end[win])
    keep = end > start
    rows, win, start, end = rows[keep], win[keep], start[keep], end[keep]
    step = w["step"].gather(win)
    increasing = len(rows) < 2 or bool((np.diff(rows) > 0).all())
    if not increasing:  # in (row, step) order
        order = np.lexsort((step.to_numpy(), rows))
        rows, win, start, end, step = rows[order], win[order], start[order], end[order], \
            step.gather(order)
    rest = events.drop("step", strict=False)
    if not (increasing and len(rows) == events.height):  # else every row, once, in order
        rest = rest[rows]
    return rest.with_columns(pl.Series("start_ns", start, dtype=pl.Int64),
                             pl.Series("end_ns", end, dtype=pl.Int64), step.alias("step"))


def _window_pieces(ev: pl.DataFrame, w: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(event row, window row) of every piece: windows ``w`` (sorted by rank, start) from
    the one holding the event's start (or the next, when the start falls after that window's
    end) to the last one starting before the event ends. Rows in increasing order per rank."""
    rank = ev["rank"].to_numpy()
    s, e = ev["start_ns"].to_numpy(), ev["end_ns"].to_numpy()
    w_rank = w["rank"].to_numpy()
    w_start, w_end = w["start_ns"].to_numpy(), w["end_ns"].to_numpy()
    rows_out, win_out = [], []
    bounds = np.flatnonzero(np.r_[True, w_rank[1:] != w_rank[:-1], True]) if len(w) else []
    for a, b in zip(bounds[:-1], bounds[1:]):
        sel = np.flatnonzero(rank == w_rank[a]) if len(bounds) > 2 else \
            np.flatnonzero(rank == w_rank[a])
        if not len(sel):
            continue
        ws, we = w_start[a:b], w_end[a:b]
        lo = np.searchsorted(ws, s[sel], side="right") - 1
        after = (lo >= 0) & (s[sel] >= we[np.maximum(lo, 0)])
        lo = np.where(lo < 0, 0, lo + after)
        hi = np.searchsorted(ws, e[sel] - 1, side="right") - 1
        ok = (hi >= 0) & (hi >= lo)
        sel, lo, hi = sel[ok], lo[ok], hi[ok]
        n = hi - lo + 1
        if len(n) and n.max() == 1:
            rows_out.append(sel)
            win_out.append(lo + a)
            continue
        rows = np.repeat(sel, n)
        first = np.repeat(np.cumsum(n) - n, n)
        rows_out.append(rows)
        win_out.append(np.repeat(lo, n) + (np.arange(len(rows)) - first) + a)
    if not rows_out:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return (np.concatenate(rows_out).astype(np.int64),
            np.concatenate(win_out).astype(np.int64))


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
    clipped = clip_to_windows(events.select(*DEVICE_KEYS, "start_ns", "end_ns", "category"),
                              steps)  # the columns _breakdown reads
    # Pieces of one device in different steps never overlap when the steps of a rank do not:
    # then the device's time axis serves every step at once.
    w = steps.select("rank", "start_ns", "end_ns").sort("rank", "start_ns")
    disjoint = w.select(((pl.col("rank") != pl.col("rank").shift(-1))
                         | (pl.col("end_ns") <= pl.col("start_ns").shift(-1))).fill_null(True)
                        .all()).item()
    return _breakdown(clipped, keys, spans, by=("step",) if disjoint else ())
