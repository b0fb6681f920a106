"""Exact interval arithmetic on frames, vectorized with polars.

The one primitive is the length of a union of intervals per group. Everything in DESIGN §6.1
reduces to it: |A − B| = |A ∪ B| − |B|, so exposed times and exclusive times are differences of
unions of growing sets, which keeps every identity exact in integer nanoseconds.
"""

from __future__ import annotations

from typing import Sequence

import polars as pl


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
