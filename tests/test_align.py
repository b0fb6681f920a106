"""Aligning hosts that have no shared clock on their matched collective ends."""

from __future__ import annotations

from pathlib import Path

import polars as pl

import tracelens
from tests.synth_helpers import write_skewed_hosts
from tracelens.loading.align import align_on_collectives, collective_end_offsets
from tracelens.core.model import (
    DEVICE_SCHEMA, EVENT_SCHEMA, HOST_EVENT_SCHEMA, STEP_SCHEMA, Trace,
                             conform)


def _trace(skews: dict[int, int]) -> Trace:
    rows = []
    for rank, skew in skews.items():
        for k, t in enumerate((1_000, 5_000, 9_000)):
            jitter = (k * 7 + rank * 3) % 5  # ends differ by a few ns, as real ones do
            rows.append(dict(host=f"h{rank}", rank=rank, device=0, stream=2, kind="kernel",
                             name="ncclDevKernel_Generic_4", category="collective",
                             subcategory="all-reduce", op="all-reduce-start.1", module="m",
                             start_ns=t - 300 + skew, end_ns=t + skew + jitter))
    ev = conform(pl.DataFrame(rows), EVENT_SCHEMA)
    steps = conform(pl.DataFrame([dict(rank=r, step=0, start_ns=0 + s, end_ns=10_000 + s,
                                       source="step_num") for r, s in skews.items()]),
                    STEP_SCHEMA)
    return Trace(events=ev, host_events=pl.DataFrame(schema=HOST_EVENT_SCHEMA), steps=steps,
                 devices=pl.DataFrame(schema=DEVICE_SCHEMA))


def test_offsets_recover_planted_clock_skew() -> None:
    offsets = collective_end_offsets(_trace({0: 0, 1: 123_456, 2: -50_000}).events)
    assert offsets["h0"] == (0, 3)
    assert abs(offsets["h1"][0] + 123_456) <= 4 and abs(offsets["h2"][0] - 50_000) <= 4


def test_alignment_shifts_events_and_steps_and_says_so() -> None:
    t = _trace({0: 0, 1: 1_000_000})
    assert align_on_collectives(t)
    assert t.meta.alignment.startswith("collective ends")
    ends = t.events.group_by("rank").agg(pl.col("end_ns").max()).sort("rank")["end_ns"]
    assert abs(ends[0] - ends[1]) <= 4
    assert abs(t.steps.sort("rank")["start_ns"][1]) <= 4


def test_loader_aligns_hosts_without_profile_start(tmp_path: Path) -> None:
    """Two XSpace hosts without Task Environment, clocks 5 ms apart: load aligns them on their
    all-reduce ends instead of leaving them apart."""
    write_skewed_hosts(tmp_path, (None, None))
    trace = tracelens.load(tmp_path)
    assert trace.meta.alignment.startswith("collective ends")
    assert not any("could not be aligned" in w for w in trace.meta.warnings)
    starts = trace.events.group_by("host").agg(pl.col("start_ns").min()).sort("host")
    assert starts["start_ns"].to_list() == [500, 500]
    assert trace.steps.sort("rank")["start_ns"].to_list() == [0, 0]
