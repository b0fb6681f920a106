"""Frame helpers the core shares."""

from __future__ import annotations

from typing import Sequence

import polars as pl


def key_changes(cols: Sequence[str]) -> pl.Expr:
    """True on the first row and on each row whose ``cols`` differ from the row before's
    (nulls equal to nulls): where each run of equal keys starts."""
    first = pl.int_range(pl.len()) == 0  # (a first row of nulls equals the shifted nulls)
    return pl.any_horizontal(first, *(pl.col(c).ne_missing(pl.col(c).shift(1)) for c in cols))


def distinct(df: pl.DataFrame, cols: Sequence[str]) -> pl.DataFrame:
    """The distinct rows of ``df[cols]`` in first-seen order: ``unique`` (in a fixed
    order), taken on the rows where a value changes from the row before. Events arrive
    grouped by stream, so a trace's millions of rows have a few thousand such rows: a
    (host, rank) pair of 2M events 0.031 -> 0.002 s. Correct in any row order."""
    cols = list(cols)
    return df.lazy().select(cols).filter(key_changes(cols)).unique(maintain_order=True) \
        .collect()


def is_sorted(df: pl.DataFrame, cols: list[str]) -> bool:
    """Whether ``df`` is already in ascending order of ``cols`` (nulls first, as ``sort``)."""
    if df.height < 2:
        return True
    later: pl.Expr = pl.lit(False)
    # row i-1 <= row i, lexicographically, built from the last column to the first
    for c in reversed(cols):
        prev, cur = pl.col(c).shift(1), pl.col(c)
        lt = (prev.is_null() & cur.is_not_null()) | (prev < cur).fill_null(False)
        eq = (prev.is_null() & cur.is_null()) | (prev == cur).fill_null(False)
        later = lt | (eq & later) if c != cols[-1] else lt | eq
    return bool(df.select(later.slice(1).all()).item())
