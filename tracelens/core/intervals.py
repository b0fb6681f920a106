"""Exact interval arithmetic on frames, vectorized with polars.

The one primitive is the length of a union of intervals per group. Everything in
docs/definitions.md#timeline reduces to it: |A − B| = |A ∪ B| − |B|, so exposed times and
exclusive times are differences of unions of growing sets, which keeps every identity exact
in integer nanoseconds.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import polars as pl

from tracelens.core.frames import is_sorted, key_changes


def union_length_expr(keys: Sequence[str]) -> pl.Expr:
    """Per-row share of the union, for rows sorted by start within each group of ``keys``.

    A row adds ``max(0, end − max(start, latest end seen before it))``; summed over a group
    that is exactly the length of the union of its intervals.
    """
    prev_end = pl.col("end_ns").cum_max().shift(1)
    if keys:
        prev_end = prev_end.over(list(keys))
    covered_from = pl.max_horizontal(pl.col("start_ns"), prev_end.fill_null(pl.col("start_ns")))
    return (pl.col("end_ns") - covered_from).clip(lower_bound=0)


def on_one_axis(df: pl.DataFrame, keys: Sequence[str], *extra: str
                ) -> tuple[pl.DataFrame, pl.DataFrame] | None:
    """The intervals of every group laid end to end on one time axis, for one-pass sweeps.

    Returns ``(rows, groups)``: ``groups`` has the keys sorted (nulls first, as ``sort``
    does), ``_g`` (its row index), ``_shift`` and the group's first start and last end
    (``_lo``, ``_hi``); ``rows`` has ``_g``, ``_s``, ``_e`` (start
    and end plus the group's shift) and the ``extra`` columns, sorted by ``_s``. Each group
    occupies ``[_shift + first start, _shift + last end]`` and the next one starts after it,
    so sorting by ``_s`` alone orders rows by (keys, start), and a plain cumulative max of
    ``_e`` never carries over from one group to the next. Shifts cancel in every difference,
    so lengths stay exact. None when the shifted times would not fit in int64 (the caller
    then works per group).
    """
    keys = list(keys)
    # string keys are grouped and joined as categoricals (each string hashed once)
    strings = [k for k in keys if df.schema[k] == pl.String]
    narrow = df.select(*[pl.col(k).cast(pl.Categorical) if k in strings else k for k in keys],
                       "start_ns", "end_ns", *extra)
    found = _sorted_runs(narrow, keys, strings)
    if found is not None:  # rows already grouped by keys in key order: no join needed
        groups, g = found
    else:
        groups = narrow.group_by(keys).agg(_lo=pl.col("start_ns").min(),
                                           _hi=pl.col("end_ns").max())
        groups = groups.with_columns(**{f"_str_{k}": pl.col(k).cast(pl.String)
                                        for k in strings}) \
            .sort([f"_str_{k}" if k in strings else k for k in keys])
    width = (pl.col("_hi") - pl.col("_lo")).clip(lower_bound=0) + 1
    fits = groups.select(ok=(width.cast(pl.Float64).sum() < 2.0**62)
                         & (pl.col("_lo").min() > -(2**61)) & (pl.col("_hi").max() < 2**61))
    if not fits["ok"].fill_null(True).item():
        return None
    groups = groups.with_row_index("_g").with_columns(
        _shift=width.cum_sum() - width - pl.col("_lo"))
    if found is not None:
        rows = narrow.select("start_ns", "end_ns", *extra).with_columns(
            g.alias("_g"), groups["_shift"].gather(g).alias("_shift"))
    else:
        rows = narrow.join(groups.select(*keys, "_g", "_shift"), on=keys, how="left",
                           nulls_equal=True)
    rows = rows.select("_g", *extra, _s=pl.col("start_ns") + pl.col("_shift"),
                       _e=pl.col("end_ns") + pl.col("_shift"))
    # a stable sort (ties keep row order): numpy's merges the rows' sorted runs (each
    # stream's activities arrive in time order), 2x faster than polars' sort on them
    rows = rows[np.argsort(rows["_s"].to_numpy(), kind="stable")] \
        if not rows["_s"].null_count() else rows.sort("_s", maintain_order=True)
    groups = groups.select(*[pl.col(f"_str_{k}").alias(k) if k in strings else k
                             for k in keys], "_g", "_shift", "_lo", "_hi")
    return rows, groups


def _run_id(keys: list[str]) -> pl.Expr:
    """0, 1, 2...: the index of each row's run of equal keys."""
    return (key_changes(keys).cum_sum() - 1).cast(pl.UInt32)


def _sorted_runs(narrow: pl.DataFrame, keys: list[str], strings: list[str]
                 ) -> tuple[pl.DataFrame, pl.Series] | None:
    """When rows come grouped by ``keys`` with the groups in key order (as ``load`` leaves
    events: sorted by stream), one row per run with ``_str_<key>`` copies of string keys and
    the run's ``_lo``/``_hi``, and each row's run (UInt32); else None. Runs are contiguous:
    their bounds are reduced over slices of the row arrays, not grouped by a hashed id."""

    run = narrow.select(_run_id(keys).alias("_g"))["_g"]
    if narrow.is_empty() or narrow["start_ns"].null_count() or narrow["end_ns"].null_count():
        runs = narrow.with_columns(run).group_by("_g", maintain_order=True).agg(
            *[pl.col(k).first() for k in keys], _lo=pl.col("start_ns").min(),
            _hi=pl.col("end_ns").max()).drop("_g")
    else:
        r = run.to_numpy()
        at = np.flatnonzero(np.r_[True, r[1:] != r[:-1]])  # each run's first row
        runs = narrow.select(keys)[at].with_columns(
            _lo=pl.Series(np.minimum.reduceat(narrow["start_ns"].to_numpy(), at)),
            _hi=pl.Series(np.maximum.reduceat(narrow["end_ns"].to_numpy(), at)))
    runs = runs.with_columns(**{f"_str_{k}": pl.col(k).cast(pl.String) for k in strings})
    if not is_sorted(runs, [f"_str_{k}" if k in strings else k for k in keys]):
        return None
    return runs, run


def union_lengths(df: pl.DataFrame, keys: Sequence[str]) -> pl.DataFrame:
    """|∪ intervals| per group of ``keys`` (column ``union_ns``); groups with no rows absent."""
    keys = list(keys)
    if df.is_empty():
        return pl.DataFrame(schema={**{k: df.schema[k] for k in keys}, "union_ns": pl.Int64})
    ordered = df.select(*keys, "start_ns", "end_ns").sort([*keys, "start_ns"])
    return (ordered.with_columns(_u=union_length_expr(keys))
            .group_by(keys, maintain_order=True).agg(union_ns=pl.col("_u").sum()))


def exclusive_times(df: pl.DataFrame, keys: Sequence[str], level_col: str,
                    levels: Sequence[str]) -> pl.DataFrame:
    """Per group and level: time during which ``level`` is the highest-priority active level.

    ``levels`` lists the values of ``level_col`` from highest priority to lowest; the exclusive
    time of level k is |∪ levels ≤ k| − |∪ levels < k|, so the levels add up to the union of
    everything. Rows whose level is not listed are ignored. Output: keys, ``level``,
    ``exclusive_ns`` for every (group, level) pair, zeros included.
    """
    keys = list(keys)
    prio = {v: i for i, v in enumerate(levels)}
    ev = df.filter(pl.col(level_col).is_in(list(levels))).with_columns(
        _prio=pl.col(level_col).cast(pl.String).replace_strict(prio, return_dtype=pl.Int32))
    groups = df.select(keys).unique()
    prev = groups.with_columns(_u=pl.lit(0, dtype=pl.Int64))
    parts = []
    for k, level in enumerate(levels):
        u = union_lengths(ev.filter(pl.col("_prio") <= k), keys)
        cur = groups.join(u, on=keys, how="left", nulls_equal=True).select(
            *keys, _u=pl.col("union_ns").fill_null(0))
        parts.append(cur.join(prev, on=keys, how="left", nulls_equal=True, suffix="_prev")
                     .select(*keys, level=pl.lit(level),
                             exclusive_ns=pl.col("_u") - pl.col("_u_prev")))
        prev = cur
    return pl.concat(parts)


def subtract(a: pl.DataFrame, b: pl.DataFrame, keys: Sequence[str]) -> pl.DataFrame:
    """The intervals of ``∪a − ∪b`` per group of ``keys``, as disjoint maximal intervals
    (columns: keys, start_ns, end_ns; sorted). ``b`` may overlap itself and ``a``.

    One sweep: every start adds 1 to its set's depth and every end takes 1 off; the stretch
    from one boundary to the next is in the result when ``a``'s depth is positive and ``b``'s
    is zero after all boundaries at its start are counted. Exact in integer ns.
    """
    keys = list(keys)
    cols = [*keys, "t", "da", "db"]
    one, zero = pl.lit(1, pl.Int64), pl.lit(0, pl.Int64)
    pts = pl.concat([
        a.select(*keys, t=pl.col("start_ns"), da=one, db=zero),
        a.select(*keys, t=pl.col("end_ns"), da=-one, db=zero),
        b.select(*keys, t=pl.col("start_ns"), da=zero, db=one),
        b.select(*keys, t=pl.col("end_ns"), da=zero, db=-one),
    ]).select(cols)
    state = pts.group_by(*keys, "t").agg(pl.col("da").sum(), pl.col("db").sum()) \
        .sort(*keys, "t").with_columns(ca=pl.col("da").cum_sum().over(keys),
                                       cb=pl.col("db").cum_sum().over(keys),
                                       nxt=pl.col("t").shift(-1).over(keys))
    seg = state.filter((pl.col("ca") > 0) & (pl.col("cb") == 0) & pl.col("nxt").is_not_null())
    seg = seg.select(*keys, start_ns=pl.col("t"), end_ns=pl.col("nxt"))
    # stretches that touch (a boundary of the other set in between) become one interval
    new = (pl.col("start_ns") != pl.col("end_ns").shift(1).over(keys)).fill_null(True)
    return seg.with_columns(_run=new.cum_sum()).group_by(*keys, "_run", maintain_order=True) \
        .agg(pl.col("start_ns").first(), pl.col("end_ns").last()).drop("_run")
