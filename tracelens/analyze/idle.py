"""Why a device is idle: every idle nanosecond split into parts that add up to ``idle_ns``.

An idle gap ends where the device's next activity starts. That activity's launch call (the host
event with the same host, rank and correlation id) says whose turn it was:

- ``host_launch``: the gap before the launch call *ended* (the host had not issued the work
  yet), less the part the host spent blocked in a synchronizing call;
- ``sync_wait``: the part of that pre-launch time during which a thread of the same process
  was inside a synchronizing API call (``*Synchronize``, blocking ``*Memcpy``, event/stream
  waits): the host was waiting for the device, so the device ran dry;
- ``launch_latency``: from the end of the launch call to the activity's start: the work was
  issued and the device still started late (the runtime's launch latency, queueing behind a
  dependency, ...);
- ``no_host_data``: gaps whose next activity has no launch call in the trace (no host events,
  no correlation id, or no next activity at all).

The parts are disjoint pieces of the gap, so ``host_launch + sync_wait + launch_latency +
no_host_data == idle_ns`` exactly, per device and per step window (pieces are cut at step
boundaries like kernels are).
"""

from __future__ import annotations

import polars as pl

from tracelens.analyze.intervals import subtract
from tracelens.analyze.timeline import DEVICE_KEYS, clip_to_windows

IDLE_PARTS: tuple[str, ...] = ("host_launch", "sync_wait", "launch_latency", "no_host_data")

SYNC_CALL = (r"(?i)^(hip|cuda|cu)(Device|Stream|Event|Ctx)Synchronize|"
             r"^(hip|cuda|cu)(Stream|Event)Query$|"
             r"^(hip|cuda|cu)Memcpy(DtoH|HtoD|DtoD|HtoA|AtoH|2D|3D)?(_v2)?$|"
             r"^(hip|cuda)Memset(D8|D16|D32)?$")
"""Host API calls that block the calling thread until the device catches up."""

_INF = 2**62  # stands for ±infinity (year 2116 in ns since the epoch)


def idle_intervals(events: pl.DataFrame, host_events: pl.DataFrame) -> pl.DataFrame:
    """Every idle interval of every device, labelled with its part (see the module doc).

    Columns: host, rank, device, part, start_ns, end_ns. Includes the stretch before a
    device's first activity and after its last (bounded by ±2^61 ns) so that any window,
    a step's included, finds its idle time here.
    """
    schema = {"host": pl.String, "rank": pl.Int32, "device": pl.Int32, "part": pl.String,
              "start_ns": pl.Int64, "end_ns": pl.Int64}
    if events.is_empty():
        return pl.DataFrame(schema=schema)
    gaps = _gaps(events)
    launch = _launch_calls(host_events)
    g = gaps.join(launch, on=["host", "rank", "correlation_id"], how="left",
                  maintain_order="left")
    has = pl.col("l_end").is_not_null()
    cut = pl.min_horizontal(pl.max_horizontal(pl.col("l_end"), pl.col("start_ns")),
                            pl.col("end_ns"))
    host_side = g.filter(has).select(*DEVICE_KEYS, "start_ns", end_ns=cut)
    latency = g.filter(has).select(*DEVICE_KEYS, start_ns=cut, end_ns=pl.col("end_ns"))
    unknown = g.filter(~has).select(*DEVICE_KEYS, "start_ns", "end_ns")
    sync, pre_launch = _split_by_sync(host_side, _sync_calls(host_events))
    parts = [pre_launch.with_columns(part=pl.lit("host_launch")),
             sync.with_columns(part=pl.lit("sync_wait")),
             latency.with_columns(part=pl.lit("launch_latency")),
             unknown.with_columns(part=pl.lit("no_host_data"))]
    out = pl.concat([p.select(*DEVICE_KEYS, "part", "start_ns", "end_ns") for p in parts])
    return out.filter(pl.col("end_ns") > pl.col("start_ns")).cast(schema) \
        .sort(*DEVICE_KEYS, "start_ns", "part")


def idle_breakdown(parts: pl.DataFrame, events: pl.DataFrame,
                   steps: pl.DataFrame | None = None) -> pl.DataFrame:
    """Idle ns per part (``parts`` from :func:`idle_intervals`) within each device's span
    (first start to last end of its ``events``, as the timeline's ``span_ns``), or with
    ``steps`` (rank, step, start_ns, end_ns) within each step window of the device's rank.

    Output: device keys (+ ``step``) and one ``<part>_ns`` column per part (zeros included),
    one row per device (and step) that has idle time.
    """
    keys = DEVICE_KEYS if steps is None else [*DEVICE_KEYS, "step"]
    if steps is None:
        spans = events.group_by(DEVICE_KEYS).agg(_lo=pl.col("start_ns").min(),
                                                 _hi=pl.col("end_ns").max())
        clipped = parts.join(spans, on=DEVICE_KEYS).with_columns(
            start_ns=pl.max_horizontal("start_ns", "_lo"),
            end_ns=pl.min_horizontal("end_ns", "_hi")).filter(
            pl.col("end_ns") > pl.col("start_ns"))
    elif steps.is_empty() or parts.is_empty():
        clipped = parts.head(0).with_columns(step=pl.lit(None, dtype=pl.Int32))
    else:
        clipped = clip_to_windows(parts, steps)
    sums = clipped.group_by(*keys, "part").agg(ns=(pl.col("end_ns") - pl.col("start_ns")).sum())
    wide = sums.pivot(on="part", index=keys, values="ns") if sums.height else \
        sums.select(keys)
    return wide.select(*keys, *[(pl.col(p) if p in wide.columns else pl.lit(0))
                                .fill_null(0).cast(pl.Int64).alias(f"{p}_ns")
                                for p in IDLE_PARTS]).sort(keys)


def _gaps(events: pl.DataFrame) -> pl.DataFrame:
    """Complement of each device's busy time, with the correlation id (and host, rank) of the
    activity that ends each gap (null after the last activity)."""
    ev = events.select(*DEVICE_KEYS, "start_ns", "end_ns", "correlation_id") \
        .sort(*DEVICE_KEYS, "start_ns", "end_ns", "correlation_id", nulls_last=True)
    covered = pl.col("end_ns").cum_max().shift(1).over(DEVICE_KEYS)
    # a gap ends at a row that starts after everything before it on the device has ended
    ev = ev.with_columns(_prev=covered)
    inner = ev.filter(pl.col("_prev").is_null() | (pl.col("start_ns") > pl.col("_prev")))
    gaps = inner.select(*DEVICE_KEYS, start_ns=pl.col("_prev").fill_null(-_INF),
                        end_ns=pl.col("start_ns"), correlation_id="correlation_id")
    # of activities starting together the first in (start, end, correlation id) order ends
    # the gap: the others start at or before what came before them has ended
    tail = ev.group_by(DEVICE_KEYS).agg(start_ns=pl.col("end_ns").max()).with_columns(
        end_ns=pl.lit(_INF, dtype=pl.Int64), correlation_id=pl.lit(None, dtype=pl.Int64))
    return pl.concat([gaps, tail.select(gaps.columns)])


def _launch_calls(host_events: pl.DataFrame) -> pl.DataFrame:
    """(host, rank, correlation_id) -> the launch call's end (the outermost call when several
    host events share the id)."""
    he = host_events.filter(pl.col("correlation_id").is_not_null())
    return he.group_by("host", "rank", "correlation_id").agg(l_end=pl.col("end_ns").max())


def _sync_calls(host_events: pl.DataFrame) -> pl.DataFrame:
    """(rank, start, end) of every synchronizing call (they may overlap: threads)."""
    return host_events.filter(pl.col("name").str.contains(SYNC_CALL)) \
        .select("rank", "start_ns", "end_ns")


def _split_by_sync(host_side: pl.DataFrame, sync: pl.DataFrame
                   ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(pieces of ``host_side`` inside the union of their rank's sync calls, the rest)."""
    if sync.is_empty() or host_side.is_empty():
        return host_side.head(0), host_side
    per_device = host_side.select(DEVICE_KEYS).unique().join(sync, on="rank")
    rest = subtract(host_side, per_device, DEVICE_KEYS)
    return subtract(host_side, rest, DEVICE_KEYS), rest
