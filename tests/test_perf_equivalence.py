"""The speed-ups of issue 14 change no value: each fast path of ``summarize`` against the
frame-based path it falls back to (kept as that fallback), on random frames with ties, nulls,
repeated correlation ids and host events of other ranks, and on the bundled traces."""

from __future__ import annotations

import unittest.mock
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

import tracelens
from tests.conftest import SAMPLES
from tracelens.analyze.timeline import idle
from tracelens.analyze.compute import roofline
from tracelens.core.intervals import on_one_axis
from tracelens.core.model import CATEGORIES, CategoryDtype, Text

event = st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 2), st.integers(0, 2),
                  st.integers(-40, 160), st.integers(0, 40), st.sampled_from(CATEGORIES),
                  st.one_of(st.none(), st.integers(0, 12)))
launch = st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 3),
                   st.integers(-60, 160), st.integers(0, 30),
                   st.one_of(st.none(), st.integers(0, 12)),
                   st.sampled_from(["hipLaunchKernel", "cudaLaunchKernel", "step"]))


def events_frame(rs: list[tuple]) -> pl.DataFrame:
    return pl.DataFrame(
        [(h, r, d, s, s + du, c, corr) for h, r, d, s, du, c, corr in rs],
        schema={"host": pl.String, "rank": pl.Int32, "device": pl.Int32, "start_ns": pl.Int64,
                "end_ns": pl.Int64, "category": CategoryDtype, "correlation_id": pl.Int64},
        orient="row")


def host_frame(rs: list[tuple]) -> pl.DataFrame:
    return pl.DataFrame(
        [(h, r, s, s + du, corr, name) for h, r, s, du, corr, name in rs],
        schema={"host": pl.String, "rank": pl.Int32, "start_ns": pl.Int64, "end_ns": pl.Int64,
                "correlation_id": pl.Int64, "name": pl.String}, orient="row")


def frames_path(events: pl.DataFrame, host: pl.DataFrame) -> pl.DataFrame:
    return idle._idle_by_frames(events, host, idle._sync_calls(host))


@settings(max_examples=200, deadline=None)
@given(st.lists(event, min_size=1, max_size=40), st.lists(launch, max_size=40))
def test_idle_intervals_on_one_axis_equal_the_frame_path(evs: list, launches: list) -> None:
    ev, he = events_frame(evs), host_frame(launches)
    assert_frame_equal(idle.idle_intervals(ev, he), frames_path(ev, he))


@settings(max_examples=150, deadline=None)
@given(st.lists(event, min_size=1, max_size=40), st.lists(launch, max_size=40),
       st.lists(st.integers(1, 40), min_size=2, max_size=12))
def test_idle_breakdowns_from_pieces_equal_clipping_the_frame_path(
        evs: list, launches: list, cuts: list) -> None:
    """The summary's idle breakdowns (the one-axis pieces, a running sum per part serving
    every window) equal clipping each piece of the frame path to each window: per device
    span and per step, steps of several ranks, touching and past the activities."""
    ev = events_frame(evs).with_columns(pl.col("host").cast(Text))  # as the loader's
    he = host_frame(launches).with_columns(pl.col("host").cast(Text))
    bounds = np.cumsum(cuts) - 60
    steps = pl.DataFrame({"rank": np.arange(len(bounds) - 1) % 3, "step": np.arange(
        len(bounds) - 1), "start_ns": bounds[:-1], "end_ns": bounds[1:]}).cast(
        {"rank": pl.Int32, "step": pl.Int32})
    axis = on_one_axis(ev, ["host", "rank", "device"], "correlation_id")
    assert axis is not None and idle.idle_pieces(ev, he, axis) is not None
    got = idle.idle_breakdowns(ev, he, [(steps, None), (None, axis[1])], axis)
    with unittest.mock.patch.object(idle, "_breakdown_by_prefix", lambda *a: None):
        parts = frames_path(ev, he)
        want = [idle.idle_breakdown(parts, ev, steps), idle.idle_breakdown(parts, ev)]
    for g, w in zip(got, want):
        assert_frame_equal(g, w)


def test_idle_fast_path_handles_huge_ids_and_falls_back_when_keys_do_not_fit() -> None:
    ev = events_frame([("a", 0, 0, 0, 10, "gemm", 2**62), ("a", 0, 0, 20, 5, "gemm", 3),
                       ("b", 1, 0, 0, 10, "gemm", 3)])
    he = host_frame([("a", 0, -5, 3, 2**62, "hipLaunchKernel"),
                     ("a", 0, 10, 5, 3, "hipLaunchKernel"), ("a", 0, 12, 1, 3, "x"),
                     ("b", 1, -3, 1, -2**62, "hipLaunchKernel")])
    # the ids span 2^63: no key fits, the frame path answers (and agrees with itself)
    assert idle._launch_ends(*_axis(ev), pl.Series([3], dtype=pl.Int64), he) is None
    assert_frame_equal(idle.idle_intervals(ev, he), frames_path(ev, he))
    near = he.filter(pl.col("correlation_id") > 0)
    assert_frame_equal(idle.idle_intervals(ev, near), frames_path(ev, near))
    # a launch call without an end (as the frame path's max of nulls: no launch call)
    open_end = host_frame([("a", 0, 10, 5, 3, "hipLaunchKernel"),
                           ("a", 0, 11, 1, 3, "hipLaunchKernel")]).with_columns(
        end_ns=pl.when(pl.col("start_ns") == 10).then(None).otherwise(pl.col("end_ns")))
    for calls in (open_end, open_end.head(1)):
        assert_frame_equal(idle.idle_intervals(ev, calls), frames_path(ev, calls))


def _axis(ev: pl.DataFrame) -> tuple[pl.DataFrame, np.ndarray]:
    """The devices of ``ev`` on one axis, and one gap on the first of them."""
    axis = on_one_axis(ev, ["host", "rank", "device"], "correlation_id")
    assert axis is not None
    return axis[1], np.zeros(1, np.int64)


def test_idle_with_sync_calls_and_far_times_takes_the_frame_path() -> None:
    ev = events_frame([("a", 0, 0, 0, 10, "gemm", 1), ("a", 0, 0, 50, 5, "gemm", 2)])
    he = host_frame([("a", 0, 20, 20, 2, "hipLaunchKernel"),
                     ("a", 0, 15, 10, None, "hipDeviceSynchronize")])
    with unittest.mock.patch.object(idle, "_idle_on_axis", side_effect=AssertionError):
        out = idle.idle_intervals(ev, he)  # sync calls: never the axis path
    assert "sync_wait" in out["part"].to_list()
    far = ev.with_columns(pl.col("start_ns") + 2**62 - 100, pl.col("end_ns") + 2**62 - 100)
    plain = he.filter(pl.col("correlation_id").is_not_null())
    assert_frame_equal(idle.idle_intervals(far, plain), frames_path(far, plain))


TRACES = sorted(SAMPLES.glob("*.xplane.pb")) + [SAMPLES / "mi355x_2x8gpu_straggler"]


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name)
def test_idle_intervals_unchanged_on_samples(path: Path) -> None:
    t = tracelens.load(path)
    assert_frame_equal(idle.idle_intervals(t.events, t.host_events),
                       frames_path(t.events, t.host_events))


group_row = st.tuples(st.integers(0, 3), st.one_of(st.none(), st.sampled_from(["k1", "k2"])),
                      st.one_of(st.none(), st.sampled_from(CATEGORIES)),
                      st.one_of(st.none(), st.sampled_from(["bf16", "fp8", "fp32"])))


@settings(max_examples=150, deadline=None)
@given(st.lists(group_row, min_size=1, max_size=30))
def test_varies_is_more_than_one_distinct_value(rs: list) -> None:
    df = pl.DataFrame(rs, schema={"g": pl.Int64, "name": pl.String, "category": CategoryDtype,
                                  "dtype": pl.String}, orient="row")
    coded = df.with_columns(pl.col("name").cast(pl.Categorical),
                            _dtype_code=pl.col("dtype").cast(pl.Categorical))
    fast = coded.group_by("g").agg(
        a=roofline._varies("name"), b=roofline._varies("category"),
        c=roofline._varies("_dtype_code", nulls=False)).sort("g")
    slow = df.group_by("g").agg(
        a=pl.col("name").n_unique() > 1, b=pl.col("category").n_unique() > 1,
        c=pl.col("dtype").drop_nulls().n_unique() > 1).sort("g")
    assert_frame_equal(fast, slow)


device = st.tuples(st.sampled_from(["a", "b", None]), st.integers(0, 2), st.integers(0, 2))


@settings(max_examples=150, deadline=None)
@given(st.lists(device, min_size=1, max_size=12), st.lists(device, max_size=12),
       st.sampled_from([["mi300x"], [None], ["mi300x", "h100"]]))
def test_spec_lookup_equals_the_join(evs: list, known: list, ids: list) -> None:
    keys = {"host": pl.String, "rank": pl.Int32, "device": pl.Int32}
    ev = pl.DataFrame(evs, schema=keys, orient="row")
    specs = pl.DataFrame([(*d, ids[i % len(ids)]) for i, d in enumerate(known)],
                         schema={**keys, "spec": pl.String}, orient="row") \
        .unique(list(keys), keep="first", maintain_order=True)
    joined = ev.join(specs, on=list(keys), how="left")["spec"]
    one = roofline._single_spec(ev, specs)
    if one is not None:  # the one value is what the join gives every event
        assert joined.to_list() == [one[0]] * ev.height
    covered = ev.join(specs, on=list(keys), how="anti").is_empty()
    if covered and specs["spec"].n_unique() == 1 and ev.null_count().sum_horizontal()[0] == 0 \
            and ev["host"].n_unique() == 1 and ev["rank"].n_unique() == 1 \
            and ev["device"].n_unique() == ev.height:
        assert one is not None  # one host and rank, every device listed: no join


def test_roofline_with_one_spec_equals_the_join_path() -> None:
    t = tracelens.load(SAMPLES / "mi300x_8gpu_llama_step.xplane.pb")
    specs = roofline.spec_frame(roofline.device_specs(t.devices))
    assert roofline._single_spec(t.events, specs) == ("mi300x",)
    with unittest.mock.patch.object(roofline, "_single_spec", return_value=None):
        joined = roofline.roofline(t.events, specs)
    assert_frame_equal(roofline.roofline(t.events, specs), joined)


@settings(max_examples=200, deadline=None)
@given(st.lists(event, min_size=1, max_size=40))
def test_the_axis_is_a_stable_sort_of_the_rows(evs: list) -> None:
    """``on_one_axis``'s rows are the input's sorted by (keys, start) with ties in row order
    (numpy's stable sort of the shifted starts): the same as polars' stable sort."""
    ev = events_frame(evs).with_row_index("i")
    found = on_one_axis(ev, ["host", "rank", "device"], "i")
    assert found is not None
    rows, groups = found
    want = ev.sort("host", "rank", "device", "start_ns", maintain_order=True)["i"]
    assert rows["i"].to_list() == want.to_list()
    assert rows["_g"].is_sorted() and rows["_s"].is_sorted()


@settings(max_examples=200, deadline=None)
@given(st.lists(event, min_size=1, max_size=40), st.lists(launch, min_size=1, max_size=60))
@example([("a", 0, 0, 0, 10, "gemm", 1)],  # three calls with one id: the latest end wins
         [("a", 0, 0, 5, 5, "x"), ("a", 0, 0, 9, 5, "y"), ("a", 0, 0, 3, 7, "z")])
@example([("a", 0, 0, 0, 10, "gemm", 1)],  # the latest end first: not the last call's
         [("a", 0, 0, 9, 5, "y"), ("a", 0, 0, 5, 5, "x"), ("a", 0, 0, 3, 5, "z")])
def test_launch_ends_by_table_equal_the_binary_search(evs: list, launches: list) -> None:
    """Launch ends looked up in a table indexed by key (dense correlation ids) equal those
    found by binary search in the sorted keys (the same ids spread 10^6 apart), several
    host events per id included (the latest end wins)."""
    ev = events_frame(evs)
    axis = on_one_axis(ev, ["host", "rank", "device"], "correlation_id")
    assert axis is not None
    groups = axis[1]
    gap_g = np.repeat(np.arange(groups.height), 3)
    corr = pl.Series(np.resize([0, 5, 12, 3, 7], len(gap_g)), dtype=pl.Int64)
    he = host_frame(launches)
    dense = idle._launch_ends(groups, gap_g, corr, he)
    spread = idle._launch_ends(groups, gap_g, corr * 10**6,
                               he.with_columns(pl.col("correlation_id") * 10**6))
    assert dense is not None and spread is not None
    assert np.array_equal(dense[0], spread[0]) and np.array_equal(dense[1], spread[1])
    for g, c, end, has in zip(gap_g, corr, *dense):  # against the definition, by hand
        key = groups.row(int(g), named=True)
        ends = [s + d for h, r, s, d, i, _ in launches
                if (h, r, i) == (key["host"], key["rank"], c)]
        assert has == bool(ends) and (not ends or end == max(ends))
