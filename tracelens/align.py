"""Put hosts without a shared wall-clock onto one clock by their matched collective ends.

A collective completes on every participant at nearly the same moment (the data arrives
everywhere), so when hosts cannot be aligned by their profile start times (DESIGN §3), the
median over matched instances of (reference end − host end) is a robust clock offset.
Processes on one host share its clock, so the shift is per host, not per rank.
"""

from __future__ import annotations

import polars as pl

from tracelens.analyze.collectives import collective_activities
from tracelens.model import Trace


def collective_end_offsets(events: pl.DataFrame) -> dict[str, tuple[int, int]]:
    """host -> (ns to add, matched instances), relative to the host of the lowest rank."""
    acts = collective_activities(events)
    if acts.is_empty():
        return {}
    ends = acts.group_by("host", "instance_key", "occurrence").agg(
        end=pl.col("end_ns").max(), rank=pl.col("rank").min())
    ref_host = ends.sort("rank").row(0, named=True)["host"]
    ref = ends.filter(pl.col("host") == ref_host).select("instance_key", "occurrence",
                                                         ref_end="end")
    both = ends.join(ref, on=["instance_key", "occurrence"])
    stats = both.group_by("host").agg(
        offset=(pl.col("ref_end") - pl.col("end")).median().round().cast(pl.Int64),
        matched=pl.len())
    return {r["host"]: (int(r["offset"]), int(r["matched"])) for r in stats.iter_rows(named=True)}


def align_on_collectives(trace: Trace) -> bool:
    """Shift every host's times by its collective-end offset; True when every host with
    device activity could be aligned (``meta.alignment`` then says how)."""
    hosts = sorted(set(trace.events["host"].to_list()))
    if len(hosts) < 2:
        return False
    offsets = collective_end_offsets(trace.events)
    if any(h not in offsets for h in hosts):
        return False
    shift_of = {h: o for h, (o, _) in offsets.items()}
    rank_host = dict(trace.events.select("rank", "host").unique().iter_rows())
    by_rank = {r: shift_of.get(h, 0) for r, h in rank_host.items()}
    for name in ("events", "host_events", "steps"):
        df: pl.DataFrame = getattr(trace, name)
        if df.is_empty():
            continue
        shift = pl.col("rank").replace_strict(by_rank, default=0, return_dtype=pl.Int64)
        setattr(trace, name, df.with_columns(start_ns=pl.col("start_ns") + shift,
                                             end_ns=pl.col("end_ns") + shift))
    n = min(m for _, m in offsets.values())
    trace.meta.alignment = (f"collective ends (per-host median offset over at least {n} "
                            "matched collective instances)")
    return True
