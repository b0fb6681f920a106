"""Idle time explained: the parts add up to ``idle_ns`` exactly and equal the construction."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import tracelens
from tracelens_dev.writers.xspace import write
from tracelens.analyze.timeline.idle import IDLE_PARTS, idle_breakdown, idle_intervals
from tracelens.analyze.timeline.breakdown import DEVICE_KEYS, device_breakdown, step_breakdown
from tracelens.core.model import (
    DEVICE_SCHEMA, EVENT_SCHEMA, HOST_EVENT_SCHEMA, STEP_SCHEMA, Trace,
                             conform)

from .conftest import GPU_TRACES, SAMPLES, real_trace

GEMM = "Cijk_Ailk_Bljk_BBS_BH_MT256x224x64_MI16x16x16x1_SN_1LDSB0.kd"


def planted() -> Trace:
    """One device. Kernels (ns): K1 [1000, 2000) launched [500, 600); K2 [5000, 6000) launched
    [4000, 4100) while a hipDeviceSynchronize ran [1500, 3000); K3 [6500, 7000) launched
    [5500, 5600) (in time: the device started it late); K4 [8000, 9000) without a launch call.
    Steps [0, 4500) and [4500, 10000)."""
    kernels = [(1000, 2000, 1), (5000, 6000, 2), (6500, 7000, 3), (8000, 9000, None)]
    events = conform(pl.DataFrame({
        "host": ["n0"] * 4, "rank": [0] * 4, "device": [0] * 4, "stream": [1] * 4,
        "kind": ["kernel"] * 4, "name": [GEMM] * 4,
        "start_ns": [k[0] for k in kernels], "end_ns": [k[1] for k in kernels],
        "correlation_id": [k[2] for k in kernels]}), EVENT_SCHEMA)
    api = [("hipModuleLaunchKernel", 500, 600, 1), ("hipModuleLaunchKernel", 4000, 4100, 2),
           ("hipModuleLaunchKernel", 5500, 5600, 3), ("hipDeviceSynchronize", 1500, 3000, 99)]
    host = conform(pl.DataFrame({
        "host": ["n0"] * 4, "rank": [0] * 4, "tid": [7] * 4, "name": [a[0] for a in api],
        "start_ns": [a[1] for a in api], "end_ns": [a[2] for a in api],
        "correlation_id": [a[3] for a in api], "kind": ["api"] * 4}), HOST_EVENT_SCHEMA)
    steps = conform(pl.DataFrame({"rank": [0, 0], "step": [0, 1], "start_ns": [0, 4500],
                                  "end_ns": [4500, 10000], "source": ["annotation"] * 2}),
                    STEP_SCHEMA)
    devices = conform(pl.DataFrame({"host": ["n0"], "rank": [0], "device": [0],
                                    "vendor": ["AMD"], "arch": ["gfx942"]}), DEVICE_SCHEMA)
    return Trace(events=events, host_events=host, steps=steps, devices=devices)


def _parts(df: pl.DataFrame) -> dict:
    return {p: df[f"{p}_ns"].to_list() for p in IDLE_PARTS}


def test_planted_gaps_equal_the_construction() -> None:
    t = planted()
    parts = idle_intervals(t.events, t.host_events)
    whole = idle_breakdown(parts, t.events)
    # gap [2000, 5000): before the launch ended (4100) 2100 ns, of which the sync covers
    # [2000, 3000); then 900 ns of launch latency. [6000, 6500): launched at 5600, so all
    # latency. [7000, 8000): K4 has no launch call.
    assert _parts(whole) == {"host_launch": [1100], "sync_wait": [1000],
                             "launch_latency": [1400], "no_host_data": [1000]}
    per_step = idle_breakdown(parts, t.events, t.steps)
    assert per_step["step"].to_list() == [0, 1]
    # step 0 also holds [0, 1000) before K1: host until 600, then latency
    assert _parts(per_step) == {"host_launch": [1700, 0], "sync_wait": [1000, 0],
                                "launch_latency": [800, 1000], "no_host_data": [0, 2000]}


@pytest.mark.parametrize("call", ["hipDeviceSynchronize", "hipMemcpyWithStream",
                                  "cudaMemcpy", "hipStreamSynchronize"])
def test_every_blocking_call_is_a_sync_wait(call: str) -> None:
    """The planted trace with its sync call renamed: each blocking call (PyTorch's ``.cpu()``
    on ROCm calls ``hipMemcpyWithStream``) gives the same 1000 ns of sync wait."""
    from dataclasses import replace

    t = planted()
    t = replace(t, host_events=t.host_events.with_columns(name=pl.when(
        pl.col("name") == "hipDeviceSynchronize").then(pl.lit(call)).otherwise("name")))
    whole = idle_breakdown(idle_intervals(t.events, t.host_events), t.events)
    assert _parts(whole)["sync_wait"] == [1000], call


def test_planted_trace_through_the_xspace_reader(tmp_path: Path) -> None:
    """The same construction written as XSpace and read back gives the same parts."""
    path = tmp_path / "planted.xplane.pb"
    write(planted(), path)
    t = tracelens.load(path)
    assert t.host_events.filter(pl.col("correlation_id").is_not_null()).height == 4
    whole = idle_breakdown(idle_intervals(t.events, t.host_events), t.events)
    assert _parts(whole) == {"host_launch": [1100], "sync_wait": [1000],
                             "launch_latency": [1400], "no_host_data": [1000]}


def _check_sums(t: Trace) -> None:
    parts = idle_intervals(t.events, t.host_events)
    total = pl.sum_horizontal([f"{p}_ns" for p in IDLE_PARTS])
    tl = device_breakdown(t.events).timeline.select(*DEVICE_KEYS, "idle_ns")
    got = tl.join(idle_breakdown(parts, t.events), on=DEVICE_KEYS, how="left").fill_null(0)
    assert got.filter(pl.col("idle_ns") != total).is_empty()
    if t.steps.height:
        active = t.events.select(DEVICE_KEYS).unique()
        st = step_breakdown(t.events, t.steps, active).timeline.select(*DEVICE_KEYS, "step",
                                                                       "idle_ns")
        got = st.join(idle_breakdown(parts, t.events, t.steps), on=[*DEVICE_KEYS, "step"],
                      how="left").fill_null(0)
        assert got.filter(pl.col("idle_ns") != total).is_empty()


@pytest.mark.parametrize("name", sorted(GPU_TRACES.values()))
def test_parts_add_up_on_real_traces(name: str) -> None:
    t = tracelens.load(real_trace(name))
    _check_sums(t)
    # these traces carry every launch call: nothing is left unattributed inside the span
    whole = idle_breakdown(idle_intervals(t.events, t.host_events), t.events)
    assert whole["no_host_data_ns"].sum() == 0
    assert whole["host_launch_ns"].sum() > 0


@pytest.mark.parametrize("sample", ["mi300x_8gpu_llama_step.xplane.pb",
                                    "mi355x_8gpu_llama_fsdp.xplane.pb",
                                    "h100_8gpu_moe_ddp.xplane.pb", "mi355x_2x8gpu_straggler"])
def test_parts_add_up_on_samples(sample: str) -> None:
    _check_sums(tracelens.load(SAMPLES / sample))


def test_parts_add_up_on_random_windows() -> None:
    """Property: over arbitrary windows (as steps), the parts add up to each window's idle."""
    import random

    t = tracelens.load(SAMPLES / "mi300x_8gpu_llama_step.xplane.pb")
    lo, hi = t.events["start_ns"].min(), t.events["end_ns"].max()
    rng = random.Random(5)
    for _ in range(5):
        cuts = sorted(rng.sample(range(lo - 1000, hi + 1000), 6))
        steps = pl.DataFrame({"rank": [0] * 3, "step": [0, 1, 2],
                              "start_ns": cuts[0::2], "end_ns": cuts[1::2]},
                             schema={"rank": pl.Int32, "step": pl.Int32, "start_ns": pl.Int64,
                                     "end_ns": pl.Int64})
        _check_sums(Trace(events=t.events, host_events=t.host_events,
                          steps=steps.with_columns(source=pl.lit("test")),
                          devices=t.devices))


def test_subtract_equals_brute_force() -> None:
    """``intervals.subtract`` against a point-by-point construction on random small sets."""
    import random

    from tracelens.core.intervals import subtract

    rng = random.Random(11)
    for _ in range(40):
        def rand(n: int) -> list[tuple[int, int]]:
            out = []
            for _ in range(n):
                s = rng.randrange(0, 60)
                out.append((s, s + rng.randrange(0, 15)))
            return out
        a, b = rand(rng.randrange(0, 6)), rand(rng.randrange(0, 6))
        want = {t for s, e in a for t in range(s, e)} - {t for s, e in b for t in range(s, e)}
        frame = lambda iv: pl.DataFrame({"k": [0] * len(iv), "start_ns": [s for s, _ in iv],  # noqa: E731
                                         "end_ns": [e for _, e in iv]},
                                        schema={"k": pl.Int64, "start_ns": pl.Int64,
                                                "end_ns": pl.Int64})
        got = subtract(frame(a), frame(b), ["k"])
        pts = {t for s, e in got.select("start_ns", "end_ns").rows() for t in range(s, e)}
        assert pts == want
        starts, ends = got["start_ns"].to_list(), got["end_ns"].to_list()
        assert all(e > s for s, e in zip(starts, ends))
        assert all(ends[i] < starts[i + 1] for i in range(len(starts) - 1))  # maximal


def test_big_jobs_show_representative_devices() -> None:
    """Past 16 devices the tables show the median, slowest and fastest device and outliers;
    --all every row."""
    from tracelens.analyze.summary.reduce import MAX_DEVICE_ROWS, device_roles
    from tracelens.results.summary import Timeline

    def dev(compute: int, idle: int) -> Timeline:
        return Timeline(span_ns=100, busy_ns=100 - idle, compute_ns=compute, comm_ns=0,
                        exposed_comm_ns=100 - compute - idle, overlapped_comm_ns=0,
                        memory_ns=0, exposed_memory_ns=0, idle_ns=idle)
    devs = [dev(60 + (i % 3), 10) for i in range(40)]
    devs[17] = dev(61, 30)  # idle 20 points above the others: an outlier
    devs[5] = dev(88, 10)  # waits least in exposed communication (2%): the others wait for it
    rows = device_roles(devs)
    roles = {role: i for role, i in rows}
    assert [r for r, _ in rows] == ["median", "slowest", "fastest", "outlier"]
    # the fastest waits most (30%: every third device from 0, the first by position)
    assert roles["slowest"] == 5 and roles["fastest"] == 0 and roles["outlier"] == 17
    assert len(device_roles(devs[:MAX_DEVICE_ROWS])) == MAX_DEVICE_ROWS


@pytest.mark.parametrize("seed", range(12))
def test_breakdown_from_running_sums_equals_clipping_every_piece(seed: int) -> None:
    """The breakdown from running sums (binary search per window bound) equals the one from
    clipping every piece to its windows, per device span and per step; touching windows
    and pieces past the windows included. Overlapping windows are left to clipping."""
    import numpy as np

    from tracelens.analyze.timeline import idle

    rng = np.random.default_rng(seed)
    rows = []
    for rank, device in [(0, 0), (0, 1), (1, 0)]:
        t = int(rng.integers(-50, 50))
        for _ in range(int(rng.integers(1, 40))):
            t += int(rng.integers(0, 30))
            length = int(rng.integers(1, 40))
            rows.append((f"h{rank}", rank, device, IDLE_PARTS[int(rng.integers(0, 4))], t,
                         t + length))
            t += length
    parts = pl.DataFrame(rows, schema=list(idle._SCHEMA), orient="row").cast(idle._SCHEMA)
    events = parts.select(*DEVICE_KEYS, start_ns=pl.col("start_ns").min().over(DEVICE_KEYS) + 5,
                          end_ns=pl.col("end_ns").max().over(DEVICE_KEYS) - 5)
    bounds = np.sort(rng.choice(np.arange(-40, 900), 12, replace=False))
    steps = pl.DataFrame({"rank": [0] * 6 + [1] * 6, "step": list(range(6)) * 2,
                          "start_ns": np.r_[bounds[0:12:2], bounds[0:12:2]],
                          "end_ns": np.r_[bounds[1:12:2], bounds[1:12:2]]}).cast(
        {"rank": pl.Int32, "step": pl.Int32})
    for windows in (None, steps):
        fast = idle._breakdown_by_prefix(parts, events, windows)
        assert fast is not None
        real = idle._breakdown_by_prefix
        try:
            idle._breakdown_by_prefix = lambda *a: None  # type: ignore[assignment]
            clipped = idle_breakdown(parts, events, windows)
        finally:
            idle._breakdown_by_prefix = real  # type: ignore[assignment]
        assert fast.equals(clipped)
    nested = steps.with_columns(end_ns=pl.col("end_ns") + 1000)
    assert idle._breakdown_by_prefix(parts, events, nested) is None


def test_a_gap_ends_at_the_first_of_activities_that_start_together() -> None:
    """Activities starting at the same ns after a gap (two streams): the one that ends first,
    then the lower correlation id, ends the gap, so its launch call splits it, on the shared
    axis as on the per-device frames, whatever their row order."""
    from tracelens.analyze.timeline import idle

    # after K0: [1000, 5000) ended by KB (ends first; launched until 2000, not KA's 4000);
    # [5000... the rest: [7000, 9000) ended by corr 4 (same start and end: the lower id),
    # launched until 8500, not corr 5's 7500
    kernels = [(0, 1000, 1, 1), (5000, 7000, 2, 1), (5000, 6000, 3, 2), (9000, 9500, 5, 1),
               (9000, 9500, 4, 2)]
    launches = [(0, 10, 1), (0, 4000, 2), (0, 2000, 3), (6500, 7500, 5), (6500, 8500, 4)]
    for order in (kernels, kernels[::-1]):
        events = conform(pl.DataFrame({
            "host": ["n0"] * 5, "rank": [0] * 5, "device": [0] * 5,
            "stream": [k[3] for k in order], "kind": ["kernel"] * 5, "name": [GEMM] * 5,
            "start_ns": [k[0] for k in order], "end_ns": [k[1] for k in order],
            "correlation_id": [k[2] for k in order]}), EVENT_SCHEMA)
        host = conform(pl.DataFrame({
            "host": ["n0"] * 5, "rank": [0] * 5, "tid": [7] * 5,
            "name": ["hipModuleLaunchKernel"] * 5, "start_ns": [a[0] for a in launches],
            "end_ns": [a[1] for a in launches], "correlation_id": [a[2] for a in launches],
            "kind": ["api"] * 5}), HOST_EVENT_SCHEMA)
        frames = idle._idle_by_frames(events, host, idle._sync_calls(host))
        for got in (idle_intervals(events, host), frames):
            inside = got.filter(pl.col("start_ns").is_between(0, 10_000)
                                & pl.col("end_ns").is_between(0, 10_000))
            assert inside.select("part", "start_ns", "end_ns").rows() == [
                ("host_launch", 1000, 2000), ("launch_latency", 2000, 5000),
                ("host_launch", 7000, 8500), ("launch_latency", 8500, 9000)]
