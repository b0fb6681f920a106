"""Property tests: the timeline arithmetic against a per-nanosecond brute force
(docs/definitions.md#timeline)."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from tracelens.core.intervals import union_lengths
from tracelens.analyze.timeline.breakdown import clip_to_windows, device_breakdown, step_breakdown
from tracelens.core.model import CATEGORIES, CategoryDtype

interval = st.tuples(st.integers(0, 80), st.integers(0, 30), st.sampled_from(CATEGORIES),
                     st.integers(0, 1))
intervals = st.lists(interval, min_size=1, max_size=25)


def _frame(rows: list[tuple[int, int, str, int]]) -> pl.DataFrame:
    return pl.DataFrame({
        "host": ["h"] * len(rows), "rank": [0] * len(rows),
        "device": [r[3] for r in rows],
        "start_ns": [r[0] for r in rows], "end_ns": [r[0] + r[1] for r in rows],
        "category": [r[2] for r in rows],
    }, schema_overrides={"rank": pl.Int32, "device": pl.Int32, "category": CategoryDtype,
                         "start_ns": pl.Int64, "end_ns": pl.Int64})


def _brute(rows: list[tuple[int, int, str, int]], device: int, lo: int | None = None,
           hi: int | None = None) -> dict[str, int]:
    """Walk every nanosecond and apply the definitions literally."""
    mine = [(s, s + d, c) for s, d, c, dev in rows if dev == device]
    if lo is None:
        lo, hi = min(s for s, _, _ in mine), max(e for _, e, _ in mine)
    out = dict.fromkeys(["busy", "compute", "comm", "exposed_comm", "memory",
                         "exposed_memory"], 0)
    excl = dict.fromkeys(CATEGORIES, 0)
    for t in range(lo, hi):
        active = {c for s, e, c in mine if s <= t < e}
        comp = bool(active - {"collective", "memory"})
        comm, mem = "collective" in active, "memory" in active
        out["busy"] += bool(active)
        out["compute"] += comp
        out["comm"] += comm
        out["memory"] += mem
        out["exposed_comm"] += comm and not comp
        out["exposed_memory"] += mem and not comp and not comm
        if active:
            excl[min(active, key=CATEGORIES.index)] += 1
    out["span"] = hi - lo
    out["idle"] = out["span"] - out["busy"]
    out["excl"] = excl
    return out


def _check(row: dict, cats: pl.DataFrame, want: dict) -> None:
    assert row["span_ns"] == want["span"]
    assert row["busy_ns"] == want["busy"]
    assert row["compute_ns"] == want["compute"]
    assert row["comm_ns"] == want["comm"]
    assert row["exposed_comm_ns"] == want["exposed_comm"]
    assert row["memory_ns"] == want["memory"]
    assert row["exposed_memory_ns"] == want["exposed_memory"]
    assert row["idle_ns"] == want["idle"]
    # The identity, exposed <= total, and exclusive times that add up to busy.
    assert (row["compute_ns"] + row["exposed_comm_ns"] + row["exposed_memory_ns"]
            + row["idle_ns"]) == row["span_ns"]
    assert 0 <= row["exposed_comm_ns"] <= row["comm_ns"]
    assert 0 <= row["exposed_memory_ns"] <= row["memory_ns"]
    assert row["overlapped_comm_ns"] == row["comm_ns"] - row["exposed_comm_ns"]
    got_excl = dict(zip(cats["category"], cats["exclusive_ns"]))
    assert got_excl == want["excl"]
    assert sum(got_excl.values()) == row["busy_ns"]


@settings(max_examples=150, deadline=None)
@given(intervals)
def test_device_breakdown_matches_brute_force(rows: list) -> None:
    bd = device_breakdown(_frame(rows))
    for row in bd.timeline.iter_rows(named=True):
        cats = bd.categories.filter(pl.col("device") == row["device"])
        _check(row, cats, _brute(rows, row["device"]))
        mine = [r for r in rows if r[3] == row["device"]]
        sums = dict(zip(cats["category"], cats["sum_ns"]))
        assert sums == {c: sum(r[1] for r in mine if r[2] == c) for c in CATEGORIES}


@settings(max_examples=100, deadline=None)
@given(intervals, st.lists(st.integers(1, 40), min_size=1, max_size=4), st.integers(0, 30))
def test_step_breakdown_matches_brute_force(rows: list, lengths: list, first: int) -> None:
    bounds, t = [], first
    for i, n in enumerate(lengths):
        bounds.append((i, t, t + n))
        t += n + (i % 2) * 3  # some steps abut, others leave a gap
    steps = pl.DataFrame({"rank": [0] * len(bounds), "step": [b[0] for b in bounds],
                          "start_ns": [b[1] for b in bounds], "end_ns": [b[2] for b in bounds]},
                         schema_overrides={"rank": pl.Int32, "step": pl.Int32})
    ev = _frame(rows)
    devices = ev.select("host", "rank", "device").unique()
    bd = step_breakdown(ev, steps, devices)
    assert bd.timeline.height == devices.height * len(bounds)
    for row in bd.timeline.iter_rows(named=True):
        cats = bd.categories.filter((pl.col("device") == row["device"])
                                    & (pl.col("step") == row["step"]))
        _, lo, hi = bounds[row["step"]]
        _check(row, cats, _brute(rows, row["device"], lo, hi))


@settings(max_examples=100, deadline=None)
@given(intervals)
def test_clip_to_windows_conserves_time_inside_windows(rows: list) -> None:
    ev = _frame(rows)
    steps = pl.DataFrame({"rank": [0, 0, 0], "step": [5, 6, 7], "start_ns": [0, 20, 60],
                          "end_ns": [20, 50, 200]},
                         schema_overrides={"rank": pl.Int32, "step": pl.Int32})
    clipped = clip_to_windows(ev, steps)
    inside = sum(max(0, min(e, b) - max(s, a)) for s, d, _, _ in rows
                 for a, b in ((0, 20), (20, 50), (60, 200)) for e in [s + d])
    assert int(clipped.select((pl.col("end_ns") - pl.col("start_ns")).sum()).item()) == inside


def test_union_lengths_nested_and_disjoint() -> None:
    df = pl.DataFrame({"g": [1, 1, 1, 1], "start_ns": [0, 2, 3, 20], "end_ns": [10, 4, 12, 21]})
    assert union_lengths(df, ["g"])["union_ns"].to_list() == [13]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 12), st.integers(0, 12),
                          st.sampled_from(CATEGORIES), st.integers(0, 1), st.integers(0, 1)),
                min_size=1, max_size=30),
       st.lists(st.integers(2, 25), min_size=1, max_size=5), st.booleans(), st.booleans())
def test_device_and_step_breakdowns_equal_the_two_breakdowns(
        placed: list, lengths: list, straddle: bool, second_rank: bool) -> None:
    """The one-sweep path (no activity straddles a step window) gives exactly the frames of
    ``device_breakdown`` and ``step_breakdown``; with a straddling activity, or an activity
    in a gap, start or end at a window's edge, or of length 0, the answer stays theirs."""
    from polars.testing import assert_frame_equal

    from tracelens.analyze.timeline.breakdown import (_step_rows, device_and_step_breakdowns,
                                            device_axis)

    windows, t = [], 7
    for i, n in enumerate(lengths):
        windows.append((t, t + n))
        t += n + (i % 2) * 4  # some steps abut, others leave a gap
    rows = []  # (start, end, category, device, rank): inside window w, or in the gap before it
    for w, a, b, cat, dev, rank in placed:
        lo, hi = windows[w % len(windows)]
        start = lo + min(a, hi - lo)
        end = min(hi, start + b)
        if a >= 11:  # just after the window: in the gap, in the next window, or after all
            start, end = hi + a - 11, hi + a - 10
        if rank and not second_rank:
            rank = 0
        rows.append((start, end, cat, dev, rank))
    rows.append((0, 3, "gemm", 0, 0))  # before the first window
    if straddle:
        lo, hi = windows[0]
        rows.append((hi - 1, hi + 2, "collective", 1, 0))
    ev = pl.DataFrame({
        "host": ["h"] * len(rows), "rank": [r[4] for r in rows], "device": [r[3] for r in rows],
        "start_ns": [r[0] for r in rows], "end_ns": [r[1] for r in rows],
        "category": [r[2] for r in rows], "correlation_id": list(range(len(rows)))},
        schema_overrides={"rank": pl.Int32, "device": pl.Int32, "category": CategoryDtype,
                          "start_ns": pl.Int64, "end_ns": pl.Int64})
    ranks = [0, 1] if second_rank else [0]
    steps = pl.DataFrame({"rank": [r for r in ranks for _ in windows],
                          "step": [i for _ in ranks for i in range(len(windows))],
                          "start_ns": [w[0] for _ in ranks for w in windows],
                          "end_ns": [w[1] for _ in ranks for w in windows]},
                         schema_overrides={"rank": pl.Int32, "step": pl.Int32})
    active = ev.select("host", "rank", "device").unique()
    axis = device_axis(ev)
    whole, per_step = device_and_step_breakdowns(ev, steps, active, axis)
    want_whole, want_step = device_breakdown(ev, axis), step_breakdown(ev, steps, active)
    assert_frame_equal(whole.timeline, want_whole.timeline)
    assert_frame_equal(whole.categories, want_whole.categories)
    assert_frame_equal(per_step.timeline, want_step.timeline)
    assert_frame_equal(per_step.categories, want_step.categories)
    # the one-sweep path is taken exactly when nothing straddles a window
    assert (_step_rows(axis, steps) is None) == straddle


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 400), st.integers(0, 2**32 - 1))
def test_the_c_sweep_equals_the_numpy_sweep(n: int, seed: int) -> None:
    """``_run_sums`` (the C sweep, one pass) equals ``_run_sums_numpy`` (ten passes): every
    union sum, count and duration per run, for a whole layout and a subset layout, with
    overlapping, nested, touching and zero-length rows."""
    import numpy as np
    import pytest

    from tracelens.analyze.timeline import breakdown as timeline

    if timeline._SWEEP is None:
        pytest.skip("the C sweep _tracelens_sweep is not built (no compiler at install)")
    rng = np.random.default_rng(seed)
    s = np.sort(rng.integers(0, 3 * n, n)).astype(np.int64)
    e = s + rng.integers(0, 20, n)
    prio = rng.integers(0, len(CATEGORIES), n).astype(np.int64)
    change = np.r_[True, rng.random(n - 1) < 0.1]
    inside = np.flatnonzero(rng.random(n) < 0.6)
    sub = np.r_[True, rng.random(len(inside) - 1) < 0.2] if len(inside) else np.zeros(0, bool)
    layouts = [(None, np.flatnonzero(change), np.cumsum(change) - 1),
               (inside, np.flatnonzero(sub), np.cumsum(sub) - 1)]
    got = timeline._run_sums(s, e, prio, layouts)
    want = timeline._run_sums_numpy(s, e, prio, layouts)
    for (gs, gc, gt), (ws, wc, wt) in zip(got, want):
        assert gs.keys() == ws.keys() and all(np.array_equal(gs[k], ws[k]) for k in ws)
        assert np.array_equal(gc, wc)
        assert [t is None for t in gt] == [t is None for t in wt]
        assert all(np.array_equal(a, b) for a, b in zip(gt, wt) if b is not None)


def test_the_c_sweep_refuses_what_it_cannot_index() -> None:
    """A priority or run id out of range is a ValueError, never a write out of bounds."""
    import numpy as np
    import pytest

    from tracelens.analyze.timeline import breakdown as timeline

    if timeline._SWEEP is None:
        pytest.skip("the C sweep _tracelens_sweep is not built (no compiler at install)")
    s = np.array([0, 5], np.int64)
    e = np.array([3, 9], np.int64)
    for prio, runs, n_runs in [([0, 8], [0, 0], 1), ([0, -1], [0, 0], 1),
                               ([0, 1], [0, 1], 1), ([0, 1], [0, -2], 1)]:
        with pytest.raises(ValueError):
            timeline._SWEEP.prio_sums(s, e, np.array(prio, np.int64),
                                      [np.array(runs, np.int64)], [n_runs], len(CATEGORIES),
                                      6, 7)
    with pytest.raises(TypeError):
        timeline._SWEEP.prio_sums(s.astype(np.int32), e, s, [s], [2], len(CATEGORIES), 6, 7)
