"""Put ranks without a shared wall-clock onto one clock by their matched collective ends.

A collective completes on every participant at nearly the same moment (the data arrives
everywhere), so when hosts cannot be aligned by their profile start times (DESIGN §3), the
median over matched instances of (reference end − rank end) is a robust clock offset.
"""

from __future__ import annotations

import polars as pl

from tracelens.analyze.collectives import collective_activities
from tracelens.model import Trace


def collective_end_offsets(events: pl.DataFrame) -> dict[int, tuple[int, int]]:
    """rank -> (offset to add, number of matched instances), relative to the lowest rank."""
    acts = collective_activities(events)
    if acts.is_empty():
        return {}
    ends = acts.group_by("rank", "instance_key", "occurrence").agg(end=pl.col("end_ns").max())
    ref_rank = int(ends["rank"].min())
    ref = ends.filter(pl.col("rank") == ref_rank).select("instance_key", "occurrence",
                                                         ref_end="end")
    both = ends.join(ref, on=["instance_key", "occurrence"])
    stats = both.group_by("rank").agg(
        offset=(pl.col("ref_end") - pl.col("end")).median().round().cast(pl.Int64),
        matched=pl.len())
    return {int(r["rank"]): (int(r["offset"]), int(r["matched"]))
            for r in stats.iter_rows(named=True)}


def align_on_collectives(trace: Trace) -> Trace:
    """Shift every rank's times by its collective-end offset; record how in ``meta``."""
    ranks = sorted(set(trace.events["rank"].to_list()))
    if len(ranks) < 2:
        return trace
    offsets = collective_end_offsets(trace.events)
    missing = [r for r in ranks if r not in offsets]
    if missing:
        trace.meta.warn(f"ranks {missing} share no collective with rank {ranks[0]}: they could "
                        "not be aligned, and cross-rank timing involving them is not comparable")
    shift = pl.col("rank").replace_strict({r: o for r, (o, _) in offsets.items()}, default=0,
                                          return_dtype=pl.Int64)
    for name in ("events", "host_events", "steps"):
        df: pl.DataFrame = getattr(trace, name)
        if df.height:
            setattr(trace, name, df.with_columns(start_ns=pl.col("start_ns") + shift,
                                                 end_ns=pl.col("end_ns") + shift))
    n = min((m for _, m in offsets.values()), default=0)
    trace.meta.alignment = (f"collective ends (median offset over at least {n} matched "
                            f"instances per rank)")
    return trace
