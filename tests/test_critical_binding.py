"""The binding rule of the critical path (docs/critical-path.md#the-binding-rule) on constructed
traces whose answer is worked out by hand: when a launch binds, when the host's untraced time
is on the path, the order across streams, and what-ifs where the devices lag the step's
marker (issue 45)."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from .test_critical_path import (ADD, AR, GEMM, RED, analyze, as_rocpd, as_xspace, comp,
                                 on_path, scenario, what_if)


def _kernels(starts_ends: list[tuple[int, int]], stream: int = 1, name: str = GEMM,
             first_corr: int = 1) -> list[tuple]:
    return [(0, stream, name, s, e, first_corr + i) for i, (s, e) in enumerate(starts_ends)]


def _launches(ends: list[int], first_corr: int = 1, dur: int = 1_000) -> list[tuple]:
    return [(0, "hipLaunchKernel", e - dur, e, first_corr + i) for i, e in enumerate(ends)]


def test_a_host_that_keeps_pace_with_a_busy_device_is_not_the_path(tmp_path: Path) -> None:
    """Five 20 us GEMMs back to back from 10 us, each launched 4-6 us before it starts
    (launch end), except the fourth: the device runs dry at 70 us, the launch ends at 73 us and
    the GEMM starts at 75 us. The host kept pace with a busy device (most launches came before
    their stream was free, by a few us), so its untraced time was waiting for the device: the
    path is the device's work and only the idle the host caused (70 -> 73 us: host 2 us of gap
    plus the 1 us call) and its launch latency (2 us). The old walk followed the thread back to
    the window's start (host ~70 us of 100)."""
    ks = _kernels([(10_000, 30_000), (30_000, 50_000), (50_000, 70_000), (75_000, 95_000),
                   (95_000, 100_000)])
    api = _launches([5_000, 25_000, 45_000, 73_000, 91_000])
    r = analyze(as_xspace(scenario(ks, api, step=(0, 100_000)), tmp_path))
    # K5 5 us and K4, K3, K2, K1 20 us each (gemm 85); K4 waited for its launch: 2 us of
    # latency, the call's 1 us and 2 us from the device running dry to the call (host 3);
    # K1 waited for the first launch (5 us of latency) after the call (1 us of host), and
    # before that call the thread's own untraced time from the step's start (host 4)
    assert comp(r) == {"gemm": 85_000, "host": 3_000 + 1_000 + 4_000,
                       "launch_latency": 2_000 + 5_000}
    assert [ns for _, ns in on_path(r)] == [20_000, 20_000, 20_000, 20_000, 5_000]


def test_a_host_that_is_behind_at_every_launch_is_the_path(tmp_path: Path) -> None:
    """Tiny kernels (2 us) each launched 2 us before it starts, 20 us apart: every kernel
    waited for its launch and the host was behind at every call, so the thread is the path
    (its untraced time was its own work): only the last kernel is device work on it."""
    starts = [10_000 + 20_000 * i for i in range(5)]
    ks = _kernels([(s, s + 2_000) for s in starts], name=ADD)
    api = _launches([s - 2_000 for s in starts])
    r = analyze(as_xspace(scenario(ks, api, step=(7_000, 92_000)), tmp_path))
    c = comp(r)
    assert c["elementwise"] == 2_000 and c["launch_latency"] == 2_000
    assert c["host"] == 92_000 - 7_000 - 4_000


def test_a_host_that_falls_behind_after_running_ahead_is_the_path_throughout(
        tmp_path: Path) -> None:
    """A host far ahead (its launches end 196-594 us before their kernels: not held back),
    then a long untraced stretch: the fourth kernel's launch ends 30 us after the stream ran
    dry. The host was working all along (it is not held back, so its untraced time is its
    own), so the path to the fourth kernel is the thread, from the window's start: the
    device's work before had slack (faster GEMMs would not move the fourth one). This is the
    simulator's binding rule (a host call's only constraint is the call before it); an
    earlier draft put the device on the path until the stream ran dry, and the simulator's
    host-bound scenarios with collectives disagreed with it (docs/simulator.md)."""
    ks = _kernels([(200_000, 400_000), (400_000, 600_000), (600_000, 800_000),
                   (832_000, 852_000)])
    api = _launches([2_000, 4_000, 6_000, 830_000])
    r = analyze(as_xspace(scenario(ks, api, step=(200_000, 852_000)), tmp_path))
    # K4 20 us, its launch latency 2 us (the least lag on the device), the call 1 us and the
    # thread's untraced time back to the window's start (629 us)
    assert comp(r) == {"gemm": 20_000, "launch_latency": 2_000, "host": 630_000}


def test_the_order_across_streams_without_host_events(tmp_path: Path) -> None:
    """A device-only trace: a GEMM on stream 1 (10-60 us), then an all-reduce on stream 2
    from 60 us (it reduces the GEMM's output) to 90 us. The path is the GEMM then the
    all-reduce (it used to be idle until the all-reduce), and hiding the all-reduce saves it."""
    ks = [(0, 1, GEMM, 10_000, 60_000, None), (0, 2, AR, 60_000, 90_000, None)]
    t = scenario(ks, [], step=(0, 90_000))
    for fmt, write in (("xspace", as_xspace), ("rocpd", as_rocpd)):
        r = analyze(write(t, tmp_path / fmt))
        assert comp(r) == {"idle": 10_000, "gemm": 50_000, "communication": 30_000}, fmt
        assert what_if(r, "hide", "all-reduce") == 30_000


def test_a_what_if_on_work_past_the_step_marker_saves_what_moves_into_it(
        tmp_path: Path) -> None:
    """The step is the host's marker (0-50 us) and the devices lag it: an all-reduce from 30
    to 80 us runs past its end. Hidden, the step's work ends at 30 us: 20 us sooner in the
    window (all the all-reduce had in it), not the 50 us it ran."""
    ks = [(0, 1, ADD, 10_000, 30_000, None), (0, 2, AR, 30_000, 80_000, None)]
    r = analyze(as_xspace(scenario(ks, [], step=(0, 50_000)), tmp_path))
    assert what_if(r, "hide", "all-reduce") == 20_000


def test_a_kernel_waits_for_the_latest_activity_of_each_other_stream(tmp_path: Path) -> None:
    """A device-only trace: a GEMM on stream 1 (0-50 us) and, after it, a GEMM (100-150 us)
    that waits for both a reduction on stream 3 (0-80 us, its input) and an all-reduce on
    stream 2 (10-95 us). Hidden, the all-reduce takes no time, and the second GEMM still
    waits for the reduction: it starts at 80 us, 20 us sooner (not at 50 us: 50 us sooner,
    as when only the latest other stream's activity, the all-reduce, was its order)."""
    ks = [(0, 1, GEMM, 0, 50_000, None), (0, 3, RED, 0, 80_000, None),
          (0, 2, AR, 10_000, 95_000, None), (0, 1, GEMM, 100_000, 150_000, None)]
    r = analyze(as_xspace(scenario(ks, [], step=(0, 150_000)), tmp_path))
    assert what_if(r, "hide", "all-reduce") == 20_000


def test_a_collective_queued_behind_another_waits_for_its_stream(tmp_path: Path) -> None:
    """A device-only trace: two all-reduces back to back on stream 2 (10-60 and 62-90 us)
    while a GEMM runs on stream 1 (0-58 us). The second all-reduce waited for its stream (the
    GEMM had ended before the stream was free): it has no order edge from the GEMM, so hiding
    the first cannot leave it waiting for the GEMM. The first waits for nothing of the
    device (it started before the GEMM ended)."""
    from tracelens.analyze.critical.path import CriticalPath, CriticalPathOptions

    ks = [(0, 1, GEMM, 0, 58_000, None), (0, 2, AR, 10_000, 60_000, None),
          (0, 2, AR, 62_000, 90_000, None)]
    part = CriticalPath().partial(scenario(ks, [], step=(0, 90_000)), CriticalPathOptions())
    nodes = part.nodes
    assert isinstance(nodes, pl.DataFrame)
    order = part.edges.filter(pl.col("kind") == "order")
    start = dict(zip(nodes["id"].to_list(), nodes["start_ns"].to_list()))
    assert [(start[s], start[d]) for s, d in order.select("src", "dst").iter_rows()] == []


_KIND = {"all-gather": ("ncclDevKernel_AllGather_RING_LL(x)", "all-gather-start.1"),
         "reduce-scatter": ("ncclDevKernel_ReduceScatter_RING_LL(x)", "reduce-scatter.1")}


def _typed(trace, types: dict[int, str]):  # type: ignore[no-untyped-def]
    """The trace with the collectives at rows ``types`` of the given type (name, HLO op)."""
    import dataclasses

    ev = trace.events.with_row_index("_r")
    for col, k in (("name", 0), ("op", 1)):
        ev = ev.with_columns(pl.col("_r").replace_strict(
            {r: _KIND[t][k] for r, t in types.items()},
            default=pl.col(col).cast(pl.String)).cast(ev[col].dtype).alias(col))
    ev = ev.with_columns(subcategory=pl.col("_r").replace_strict(
        types, default=pl.col("subcategory").cast(pl.String)).cast(ev["subcategory"].dtype))
    return dataclasses.replace(trace, events=ev.drop("_r"))


def test_a_collective_queued_behind_another_does_not_wait_for_compute_ended_meanwhile(
        tmp_path: Path) -> None:
    """A device-only trace: an all-gather (10-60 us) and a reduce-scatter queued behind it
    (63-90 us) on stream 2, a GEMM on stream 1 (0-61 us) that ended in the 3 us between them.
    The reduce-scatter started within a queue's latency of its stream's previous activity:
    the stream explains its start, no order edge from the GEMM is guessed. Hidden, the
    all-gather takes no time: the reduce-scatter runs 13-40 us (its 3 us queue lag kept),
    and the step's work ends with the GEMM at 61 us: 29 us sooner (0 while the GEMM's edge
    bound it)."""
    ks = [(0, 1, GEMM, 0, 61_000, None), (0, 2, AR, 10_000, 60_000, None),
          (0, 2, AR, 63_000, 90_000, None)]
    t = _typed(scenario(ks, [], step=(0, 90_000)), {1: "all-gather", 2: "reduce-scatter"})
    r = analyze(as_xspace(t, tmp_path))
    assert what_if(r, "hide", "all-gather") == 29_000


def test_a_stream_edge_that_comes_to_bind_keeps_the_devices_queue_latency(
        tmp_path: Path) -> None:
    """A device-only trace: GEMM 0-40 us on stream 1, an all-gather 0-60 us on stream 2, a
    second GEMM 65-100 us that waited for the all-gather (its order edge binds), then an add
    and a reduction each 3 us after the previous (103-110, 113-120 us): the device's queue
    latency is 3 us. Hidden, the all-gather takes no time and the second GEMM waits for its
    stream's previous GEMM, starting its queue latency after it (43 us, not 40): the work
    ends at 98 us, 22 us sooner."""
    ks = [(0, 1, GEMM, 0, 40_000, None), (0, 2, AR, 0, 60_000, None),
          (0, 1, GEMM, 65_000, 100_000, None), (0, 1, ADD, 103_000, 110_000, None),
          (0, 1, RED, 113_000, 120_000, None)]
    t = _typed(scenario(ks, [], step=(0, 120_000)), {1: "all-gather"})
    r = analyze(as_xspace(t, tmp_path))
    assert what_if(r, "hide", "all-gather") == 22_000


def test_a_window_ends_with_its_last_device() -> None:
    """Two devices share a window 0-100 us: one ended at 60 us, the other at 100 us. After a
    change that moves the first's end to 50 us and the second's to 70 us, the step is 70 us:
    the first had no idle tail of its own (its window's end was the second's), and the tail
    after the latest device (here none; 10 us in the second case) stays."""
    from tracelens.analyze.critical.walk import window_lengths

    assert window_lengths([(0, 100, 60, 50), (0, 100, 100, 70)]) == [50, 70]
    assert window_lengths([(0, 100, 60, 50), (0, 100, 90, 70)]) == [60, 80]
    # windows of other hosts' markers keep their own tails
    assert window_lengths([(0, 100, 60, 50), (5, 120, 100, 70)]) == [90, 85]


def test_the_queue_latency_keeps_the_lags_whole_ns(tmp_path: Path) -> None:
    """The one-pass solve in C is exact on integers only (critical_solve's module doc): the
    queue latency, a median that may fall between two gaps (here 3,001 and 4,000 ns: 3,500.5),
    is floored, so every lag stays whole ns and the what-ifs keep the fast pass."""
    import numpy as np

    from tracelens.analyze.critical.path import CriticalPath, CriticalPathOptions
    from tracelens.analyze.critical.solve import build_graph

    ks = [(0, 1, GEMM, 0, 40_000, None), (0, 2, AR, 0, 60_000, None),
          (0, 1, GEMM, 65_000, 100_000, None), (0, 1, ADD, 103_001, 110_000, None),
          (0, 1, RED, 114_000, 120_000, None)]
    part = CriticalPath().partial(scenario(ks, [], step=(0, 120_000)), CriticalPathOptions())
    g = build_graph(part.nodes.sort("id"), part.edges)
    assert np.array_equal(g.prev_lag, np.floor(g.prev_lag))
    assert 3_500 in g.prev_lag.tolist()  # the second GEMM's, its stream's GEMM not binding
