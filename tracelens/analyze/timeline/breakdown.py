"""The timeline breakdown of docs/definitions.md#timeline, per device, for the whole trace and per
step.

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

from tracelens.core.intervals import on_one_axis, union_length_expr
from tracelens.core.model import CATEGORIES, CategoryDtype, Text
from tracelens.core.sweep import extension, references_forced

_SWEEP = extension("ABI")  # the one-pass sweep; optional: numpy gives the same sums

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
    change = np.r_[True, g[1:] != g[:-1]]
    for b in by:
        v = ordered[b].to_numpy()
        change |= np.r_[True, v[1:] != v[:-1]]
    starts = np.flatnonzero(change)
    runs = groups.select(keys)[g[starts].astype(np.int64)].with_columns(
        ordered[b].gather(starts) for b in by)
    if by and runs.select(pl.struct(*keys, *by).is_duplicated().any()).item():
        return None
    (sums, counts, totals), = _run_sums(
        ordered["_s"].to_numpy(), ordered["_e"].to_numpy(), ordered["_prio"].to_numpy(),
        [(None, starts, np.cumsum(change) - 1)])
    return _sum_frames(runs, sums, counts, totals)


_Layout = tuple["np.ndarray | None", np.ndarray, np.ndarray]  # (rows, run starts, run of row)


def _run_sums(s: np.ndarray, e: np.ndarray, prio: np.ndarray, layouts: list[_Layout]
              ) -> list[tuple[dict[str, np.ndarray], np.ndarray, list[np.ndarray | None]]]:
    """:func:`_run_sums_numpy`'s sums, from the C sweep (``_tracelens_sweep``: one pass
    instead of ten) when it is built."""
    if _SWEEP is None or references_forced():
        return _run_sums_numpy(s, e, prio, layouts)
    n_cat = len(CATEGORIES)
    runs, counts_of = [], []
    for rows, starts, run_of_row in layouts:
        if rows is None:
            runs.append(np.ascontiguousarray(run_of_row, np.int64))
        else:
            full = np.full(len(s), -1, np.int64)
            full[rows] = run_of_row
            runs.append(full)
        counts_of.append(len(starts))
    found = _SWEEP.prio_sums(np.ascontiguousarray(s, np.int64),
                             np.ascontiguousarray(e, np.int64),
                             np.ascontiguousarray(prio, np.int64), runs, counts_of, n_cat,
                             _COLLECTIVE, _MEMORY)
    names = [f"u{k}" for k in range(n_cat)] + ["comm", "mem"]
    out: list[tuple[dict[str, np.ndarray], np.ndarray, list[np.ndarray | None]]] = []
    for (sums_b, counts_b, totals_b), n_runs in zip(found, counts_of):
        sums = np.frombuffer(sums_b, np.int64).reshape(n_runs, len(names))
        counts = np.frombuffer(counts_b, np.int64).reshape(n_runs, n_cat)
        totals = np.frombuffer(totals_b, np.int64).reshape(n_runs, n_cat)
        out.append(({n: sums[:, k] for k, n in enumerate(names)}, counts,
                    [totals[:, k] if counts[:, k].any() else None for k in range(n_cat)]))
    return out


def _run_sums_numpy(s: np.ndarray, e: np.ndarray, prio: np.ndarray, layouts: list[_Layout]
                    ) -> list[tuple[dict[str, np.ndarray], np.ndarray,
                                    list[np.ndarray | None]]]:
    """Per layout (the rows it reads, None for all, in runs: each run's first position among
    them and each row's run): the ten union sums per run, the count per run and category, and
    the summed duration per run and category (None where the category has no row).

    Rows are sorted on the axis (by group, then start), so a row's new coverage of a set is
    its end minus the later of its start and the latest end among the set's earlier rows. A
    layout whose runs are windows that no row crosses (rows outside them left out) gets the
    same parts as if only its rows were swept: an earlier row outside the windows ends before
    the window of a later row begins, so it never raises that row's covered start."""
    sets = [(f"u{k}", prio <= k) for k in range(len(CATEGORIES))]
    sets += [("comm", prio == _COLLECTIVE), ("mem", prio == _MEMORY)]
    out: list[tuple[dict[str, np.ndarray], np.ndarray, list[np.ndarray | None]]] = [
        ({}, np.zeros(0, np.int64), []) for _ in layouts]
    seen = np.empty_like(e)  # the latest end among the set's earlier rows (-1: none)
    part = np.empty_like(e)
    present = np.bincount(prio, minlength=len(CATEGORIES)) > 0
    for k, (name, member) in enumerate(sets):  # in place: two arrays per pass, not six
        if 0 < k < len(CATEGORIES) and not present[k]:  # the same set as the level below
            for sums, _, _ in out:
                sums[name] = sums[f"u{k - 1}"]
            continue
        np.copyto(seen, e)
        seen[~member] = -1
        np.maximum.accumulate(seen, out=seen)
        part[0] = max(s[0], -1)
        np.maximum(s[1:], seen[:-1], out=part[1:])  # where the row's new coverage starts
        np.subtract(e, part, out=part)
        np.maximum(part, 0, out=part)
        part *= member
        for (rows, starts, _), (sums, _, _) in zip(layouts, out):
            sums[name] = np.add.reduceat(part if rows is None else part[rows], starts) \
                if len(starts) else np.zeros(0, np.int64)
    dur = e - s
    n_cat = len(CATEGORIES)
    for i, (rows, starts, run_of_row) in enumerate(layouts):
        p = prio if rows is None else prio[rows]
        d = dur if rows is None else dur[rows]
        counts = np.bincount(run_of_row * n_cat + p, minlength=len(starts) * n_cat) \
            .reshape(-1, n_cat)
        totals: list[np.ndarray | None] = [
            np.add.reduceat(np.where(p == k, d, 0), starts) if counts[:, k].any() else None
            for k in range(n_cat)]
        out[i] = (out[i][0], counts, totals)
    return out


def _sum_frames(runs: pl.DataFrame, sums: dict[str, np.ndarray], counts: np.ndarray,
                totals: list[np.ndarray | None]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """:func:`_run_sums`' arrays of one layout as ``_prio_unions``' two frames, ``runs``
    holding each run's keys."""
    unions = runs.with_columns(pl.Series(n, v, dtype=pl.Int64) for n, v in sums.items())
    per_cat = []
    for k, total in enumerate(totals):
        if total is None:
            continue
        has = counts[:, k] > 0
        per_cat.append(runs.filter(pl.Series(has)).with_columns(
            category=pl.lit(CATEGORIES[k], dtype=CategoryDtype),
            count=pl.Series(counts[has, k], dtype=pl.Int64),
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
               by: tuple[str, ...] = (), axis: Axis | None = None,
               sums_of: tuple[pl.DataFrame, pl.DataFrame] | None = None) -> Breakdown:
    """Core computation; ``spans`` has keys + span_ns for every group to report. The last
    ``len(by)`` keys may be left to ``_prio_unions``'s ``by`` (see there when that holds).
    ``sums_of``: ``_prio_unions``' two frames when the caller has them (``ev`` is not read)."""
    if sums_of is not None:
        u, sums = sums_of
    else:
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
        empty = pl.DataFrame(schema={"host": Text, "rank": pl.Int32, "device": pl.Int32,
                                     "step": pl.Int32, "start_ns": pl.Int64,
                                     "end_ns": pl.Int64})
        return _breakdown(events.head(0).with_columns(step=pl.lit(None, dtype=pl.Int32)), keys,
                          empty.with_columns(span_ns=pl.lit(0, dtype=pl.Int64)))
    clipped = clip_to_windows(events.select(*DEVICE_KEYS, "start_ns", "end_ns", "category"),
                              steps)  # the columns _breakdown reads
    # Pieces of one device in different steps never overlap when the steps of a rank do not:
    # then the device's time axis serves every step at once.
    return _breakdown(clipped, keys, _step_spans(steps, devices),
                      by=("step",) if _disjoint(steps) else ())


def _step_spans(steps: pl.DataFrame, devices: pl.DataFrame) -> pl.DataFrame:
    active = devices.select(DEVICE_KEYS).unique()
    return active.join(steps.select("rank", "step", "start_ns", "end_ns"), on="rank") \
        .with_columns(span_ns=pl.col("end_ns") - pl.col("start_ns"))


def _disjoint(steps: pl.DataFrame) -> bool:
    """Whether no two step windows of a rank overlap."""
    w = steps.select("rank", "start_ns", "end_ns").sort("rank", "start_ns")
    return w.select(((pl.col("rank") != pl.col("rank").shift(-1))
                     | (pl.col("end_ns") <= pl.col("start_ns").shift(-1))).fill_null(True)
                    .all()).item()


StepRows = tuple[np.ndarray, np.ndarray]  # :func:`step_rows`: (rows inside, their window)


def step_rows(events: pl.DataFrame, steps: pl.DataFrame, axis: Axis | None
              ) -> StepRows | None:
    """The axis rows inside a step window and each one's window, when the steps of a rank do
    not overlap and no activity crosses a window's start or end (:func:`_step_rows`), else
    None. Not None: every activity lies whole in the window holding its start or in none,
    so cutting the activities into steps needs no clipping."""
    return _step_rows(axis, steps) if axis is not None and events.height \
        and steps.height and _disjoint(steps) else None


_FIND = object()  # device_and_step_breakdowns: find the step rows itself


def device_and_step_breakdowns(events: pl.DataFrame, steps: pl.DataFrame,
                               devices: pl.DataFrame, axis: Axis | None,
                               found: "StepRows | None | object" = _FIND
                               ) -> tuple[Breakdown, Breakdown]:
    """``device_breakdown(events, axis)`` and ``step_breakdown(events, steps, devices)``.

    From one sweep of the device axis when the steps of a rank do not overlap and every
    activity lies inside one step window of its rank or outside all of them (the usual
    trace: no kernel straddles a step boundary): the per-step sums are then the whole sweep's
    parts summed over each window's rows (see :func:`_run_sums`), and no activity needs
    clipping. Otherwise each breakdown is computed on its own. ``found``: the
    :func:`step_rows` of the events, when the caller has them."""
    if found is _FIND:
        found = step_rows(events, steps, axis)
    if not isinstance(found, tuple):
        return device_breakdown(events, axis), step_breakdown(events, steps, devices)
    (rows, groups), (inside, win) = axis, found
    g = rows["_g"].to_numpy()
    whole_change = np.r_[True, g[1:] != g[:-1]]
    whole_starts = np.flatnonzero(whole_change)
    g_in, win_in = g[inside], win[inside]
    change = np.r_[True, (g_in[1:] != g_in[:-1]) | (win_in[1:] != win_in[:-1])] \
        if len(inside) else np.zeros(0, bool)
    starts = np.flatnonzero(change)
    w_step = steps.select("rank", "step", "start_ns").sort("rank", "start_ns")["step"]
    step_runs = groups.select(DEVICE_KEYS)[g_in[starts].astype(np.int64)].with_columns(
        w_step.gather(win_in[starts]).alias("step"))
    if step_runs.select(pl.struct(*DEVICE_KEYS, "step").is_duplicated().any()).item():
        return device_breakdown(events, axis), step_breakdown(events, steps, devices)
    whole_sums, step_sums = _run_sums(
        rows["_s"].to_numpy(), rows["_e"].to_numpy(), rows["_prio"].to_numpy(),
        [(None, whole_starts, np.cumsum(whole_change) - 1),
         (inside, starts, np.cumsum(change) - 1)])
    spans = groups.select(*DEVICE_KEYS, first_ns="_lo", last_ns="_hi",
                          span_ns=pl.col("_hi") - pl.col("_lo"))
    whole = _breakdown(events, DEVICE_KEYS, spans, sums_of=_sum_frames(
        groups.select(DEVICE_KEYS)[g[whole_starts].astype(np.int64)], *whole_sums))
    per_step = _breakdown(events, [*DEVICE_KEYS, "step"], _step_spans(steps, devices),
                          sums_of=_sum_frames(step_runs, *step_sums))
    return whole, per_step


def _step_rows(axis: Axis, steps: pl.DataFrame) -> tuple[np.ndarray, np.ndarray] | None:
    """For :func:`device_and_step_breakdowns`: the axis rows inside a step window (with a
    positive length, as :func:`clip_to_windows` keeps them), in axis order, and per axis row
    its window (a row of ``steps`` sorted by rank and start; -1 outside). None when an
    activity crosses a window's start or end, or a priority is null."""
    rows, groups = axis
    w = steps.select("rank", "start_ns", "end_ns").sort("rank", "start_ns")
    if rows.is_empty() or rows["_prio"].null_count() or w.null_count().sum_horizontal().item():
        return None
    w_rank = w["rank"].to_numpy()
    ws, we = w["start_ns"].to_numpy(), w["end_ns"].to_numpy()
    cut = np.flatnonzero(np.r_[True, w_rank[1:] != w_rank[:-1], True])
    by_rank = {int(w_rank[a]): (int(a), int(b)) for a, b in zip(cut[:-1], cut[1:])}
    g = rows["_g"].to_numpy()
    s, e = rows["_s"].to_numpy(), rows["_e"].to_numpy()
    g_rank = groups["rank"].to_list()
    g_shift = groups["_shift"].to_numpy()
    win = np.full(len(g), -1, np.int64)
    bounds = np.flatnonzero(np.r_[True, g[1:] != g[:-1], True])
    for a, b in zip(bounds[:-1], bounds[1:]):  # one group (device) per run of rows
        gi = int(g[a])
        span = by_rank.get(g_rank[gi]) if g_rank[gi] is not None else None
        if span is None:
            continue  # no step on this device's rank: every row outside
        lo, hi = span
        w_s, w_e = ws[lo:hi], we[lo:hi]
        s0, e0 = s[a:b] - g_shift[gi], e[a:b] - g_shift[gi]
        idx = np.searchsorted(w_s, s0, side="right") - 1  # the last window starting ≤ s0
        at = np.maximum(idx, 0)
        starts_in = (idx >= 0) & (s0 < w_e[at])
        if (starts_in & (e0 > w_e[at])).any():
            return None  # runs past the end of its window
        nxt = np.minimum(idx + 1, len(w_s) - 1)
        if (~starts_in & (idx + 1 < len(w_s)) & (e0 > w_s[nxt])).any():
            return None  # starts outside, ends inside the next window
        keep = starts_in & (e0 > s0)
        win[a:b][keep] = idx[keep] + lo
    return np.flatnonzero(win >= 0), win
