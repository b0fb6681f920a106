"""Put hosts without a shared wall-clock onto one clock by their matched collective ends.

A collective completes on every participant at nearly the same moment (the data arrives
#paths-and-directories), the
everywhere), so when hosts cannot be aligned by their profile start times (docs/inputs.md
median over matched instances of (reference end − host end) is a robust clock offset.
Processes on one host share its clock, so the shift is per host, not per rank.
"""

from __future__ import annotations

import polars as pl

from tracelens.core.instances import with_instance_keys
from tracelens.core.model import Trace


def offsets_from_activities(acts: pl.DataFrame) -> dict[str, tuple[int, int]]:
    """host -> (ns to add, matched instances), relative to the host of the lowest rank, from
    collective rows with ``host``, ``rank``, ``instance_key``, ``occurrence``, ``end_ns``
    (:func:`tracelens.core.instances.with_instance_keys` or ``collective_activities`` rows, of
    one trace or merged from per-host partials)."""
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


def collective_end_offsets(events: pl.DataFrame) -> dict[str, tuple[int, int]]:
    """:func:`offsets_from_activities` of the trace's collective events."""
    return offsets_from_activities(with_instance_keys(events))


def host_shifts(acts: pl.DataFrame, hosts: list[str]) -> tuple[dict[str, int], str] | None:
    """(host -> ns to add, the ``meta.alignment`` text) when every one of ``hosts`` (those
    with device activity, at least two) has matched collective instances, else None."""
    if len(hosts) < 2:
        return None
    offsets = offsets_from_activities(acts)
    if any(h not in offsets for h in hosts):
        return None
    n = min(m for _, m in offsets.values())
    return ({h: o for h, (o, _) in offsets.items()},
            f"collective ends (per-host median offset over at least {n} matched collective "
            "instances)")


def align_on_collectives(trace: Trace) -> bool:
    """Shift every host's times by its collective-end offset; True when every host with
    device activity could be aligned (``meta.alignment`` then says how)."""
    hosts = sorted(set(trace.events["host"].to_list()))
    found = host_shifts(with_instance_keys(trace.events), hosts)
    if found is None:
        return False
    shift_of, trace.meta.alignment = found
    for name in ("events", "host_events", "steps"):
        setattr(trace, name, shift_ranks(getattr(trace, name), trace.events, shift_of))
    return True


def shift_ranks(df: pl.DataFrame, events: pl.DataFrame,
                host_shift: dict[str, int]) -> pl.DataFrame:
    """``df``'s start/end moved by the shift of each rank's host (ranks and hosts as in
    ``events``): frames without a host column (steps) are shifted by rank."""
    if df.is_empty():
        return df
    by_rank = {r: host_shift.get(h, 0) for r, h in events.select("rank", "host").unique()
               .iter_rows()}
    shift = pl.col("rank").replace_strict(by_rank, default=0, return_dtype=pl.Int64)
    return df.with_columns(start_ns=pl.col("start_ns") + shift,
                           end_ns=pl.col("end_ns") + shift)
