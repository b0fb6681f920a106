"""tracelens.core.frames: the shared frame helpers against the polars operations they replace."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from tracelens.core.frames import distinct, key_changes
from tracelens.core.model import Text

row = st.tuples(st.sampled_from(["a", "b", None]), st.sampled_from([0, 1, None]),
                st.sampled_from([0, 2, None]))


@settings(max_examples=300, deadline=None)
@given(st.lists(row, max_size=40), st.booleans())
def test_distinct_is_unique_in_first_seen_order(rows: list[tuple], grouped: bool) -> None:
    """Rows grouped by key (as events arrive) or in any order, nulls included: the rows of
    ``unique(maintain_order=True)``, in the same order."""
    df = pl.DataFrame(sorted(rows, key=repr) if grouped else rows, orient="row",
                      schema={"host": Text, "rank": pl.Int32, "device": pl.Int32})
    for cols in (["host", "rank"], ["host", "rank", "device"], ["device"]):
        assert distinct(df, cols).equals(df.select(cols).unique(maintain_order=True))


@settings(max_examples=300, deadline=None)
@given(st.lists(row, min_size=1, max_size=40))
def test_runs_start_where_the_keys_change(rows: list[tuple]) -> None:
    """``key_changes`` (and the run index ``on_one_axis`` numbers rows by) against the runs
    counted in Python; a first run of nulls is a run like any other (it numbered -1)."""
    from tracelens.core.intervals import _run_id

    df = pl.DataFrame(rows, orient="row",
                      schema={"host": Text, "rank": pl.Int32, "device": pl.Int32})
    keys = [tuple(r) for r in df.rows()]
    want = [0]
    for a, b in zip(keys, keys[1:]):
        want.append(want[-1] + (a != b))
    got = df.select(_run_id(["host", "rank", "device"]).alias("r"))["r"].to_list()
    assert got == want
    assert df.select(key_changes(["host", "rank", "device"]).alias("c"))["c"].to_list() == \
        [True] + [a != b for a, b in zip(keys, keys[1:])]


timed = st.tuples(row, st.one_of(st.none(), st.integers(0, 50)), st.integers(0, 20),
                  st.integers(0, 9))


@settings(max_examples=300, deadline=None)
@given(st.lists(timed, max_size=40), st.booleans())
def test_one_axis_from_sorted_runs_equals_the_grouped_axis(rows: list[tuple],
                                                           key_order: bool) -> None:
    """``on_one_axis`` of rows that arrive grouped by their keys in key order (its run path:
    each run's bounds reduced over its slice) equals the group-by and join path, nulls in
    keys and start times included; rows in another order take the group-by path."""
    from unittest import mock

    import tracelens.core.intervals as intervals

    if key_order:  # grouped as events arrive: by key, nulls first as ``sort`` puts them
        rows = sorted(rows, key=lambda r: tuple((v is not None, v) for v in r[0]))
    df = pl.DataFrame([(*k, s, None if s is None else s + d, x) for k, s, d, x in rows],
                      orient="row", schema={"host": Text, "rank": pl.Int32,
                                            "device": pl.Int32, "start_ns": pl.Int64,
                                            "end_ns": pl.Int64, "x": pl.Int64})
    keys = ["host", "rank", "device"]
    got = intervals.on_one_axis(df, keys, "x")
    with mock.patch.object(intervals, "_sorted_runs", return_value=None):
        want = intervals.on_one_axis(df, keys, "x")
    assert (got is None) == (want is None)
    if got is not None and want is not None:
        assert got[0].equals(want[0]) and got[1].equals(want[1])
