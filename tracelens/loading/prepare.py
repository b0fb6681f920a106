"""Format-independent repairs and annotations applied to every trace after parsing."""

from __future__ import annotations

import numpy as np
import polars as pl

from tracelens.core.frames import is_sorted

STREAM_KEYS = ["host", "rank", "device", "stream"]


def _sort_by_stream(events: pl.DataFrame) -> pl.DataFrame:
    """``events.sort([*STREAM_KEYS, "start_ns", "end_ns"])``, several times faster: the
    streams are numbered in key order on their (few) distinct rows, then one stable
    integer sort orders (stream number, start, end)."""
    if events["start_ns"].null_count() or events["end_ns"].null_count():
        return events.sort([*STREAM_KEYS, "start_ns", "end_ns"])
    streams = events.select(STREAM_KEYS).unique().sort(STREAM_KEYS).with_row_index("_sid")
    sid = events.select(STREAM_KEYS).join(streams, on=STREAM_KEYS, how="left",
                                          nulls_equal=True, maintain_order="left")["_sid"]
    order = np.lexsort((events["end_ns"].to_numpy(), events["start_ns"].to_numpy(),
                        sid.to_numpy()))
    return events[order]


def clip_stream_overlaps(events: pl.DataFrame) -> tuple[pl.DataFrame, int, int]:
    """Clip each activity's end to the next start on the same in-order stream
    (docs/definitions.md#same-stream-overlaps).

    Returns the events sorted by (host, rank, device, stream, start), the number of clipped
    events and the largest clip in ns. ROCm timestamps overlap by ~100 ns on a few percent of
    dispatches; counting them is what makes the repair visible.
    """
    if events.is_empty():
        return events, 0, 0
    ev = _with_clip(events)
    stats = ev.select(n=(pl.col("_clip") > 0).sum(), mx=pl.col("_clip").max()).row(0)
    return ev.drop("_clip", "_nest"), int(stats[0] or 0), int(stats[1] or 0)


CLIP_SCHEMA: dict[str, pl.DataType] = {"kind": pl.String, "name": pl.String,
                                       "nested": pl.Boolean, "clipped": pl.UInt32,
                                       "clip_ns": pl.Int64, "largest_ns": pl.Int64}
"""What the same-stream clip took, per (kind, name, nested): how many activities it shortened,
by how many ns in all and at most (``trace.meta.clips``). ``nested``: those activities held
the next one of their stream whole (an XLA:CPU ``while``, ``conditional`` or ``call`` around
its body's ops: nesting, which the clip resolves to the innermost op at each instant), not an
overlap of two activities of an in-order stream."""


NESTING_KEYS = ["host", "rank", "device"]


def clip_and_record(events: pl.DataFrame, nesting: pl.DataFrame | None = None
                    ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """:func:`clip_stream_overlaps`, with what it took per (kind, name, nested)
    (:data:`CLIP_SCHEMA`, sorted by those): a comparison with another tool's unclipped times
    (``tracelens xcheck``) can add exactly that back instead of calling the repair a
    disagreement, and the loader tells nesting from overlap. ``nesting``: the devices
    (:data:`NESTING_KEYS`) whose ops nest (XLA:CPU's); elsewhere (a GPU's in-order stream,
    where a kernel cannot hold the next) an activity holding the next one is an overlap."""
    if events.is_empty():
        return events, pl.DataFrame(schema=CLIP_SCHEMA)
    ev = _with_clip(events)
    cut = ev.filter(pl.col("_clip") > 0)
    if nesting is None or nesting.is_empty():
        cut = cut.with_columns(_nest=pl.lit(False))
    else:  # the few clipped rows only; text keys compared as text
        keys = nesting.select(pl.col("host").cast(pl.String), "rank", "device").with_columns(
            _on=pl.lit(True))
        cut = cut.with_columns(_host=pl.col("host").cast(pl.String)).join(
            keys.rename({"host": "_host"}), on=["_host", "rank", "device"], how="left",
            maintain_order="left").with_columns(
            _nest=pl.col("_nest") & pl.col("_on").fill_null(False)).drop("_host", "_on")
    clips = cut.group_by("kind", "name", nested="_nest").agg(
        clipped=pl.len(), clip_ns=pl.col("_clip").sum(), largest_ns=pl.col("_clip").max())
    clips = clips.cast(CLIP_SCHEMA).select(list(CLIP_SCHEMA))  # type: ignore[arg-type]
    return ev.drop("_clip", "_nest"), clips.sort("kind", "name", "nested")


def _with_clip(events: pl.DataFrame) -> pl.DataFrame:
    """The events sorted by stream and start, each end clipped to the next start of its
    stream, ``_clip``: the ns taken (0 for most), and ``_nest``: the activity held the next
    one whole (it ended at or after that one's end), so on a device whose ops nest the clip
    undid nesting, not overlap.

    Nesting (XLA:CPU records a ``while``, ``conditional`` or ``call`` op on the same line as
    the ops of its body, from before the first to after the last) comes out of the same clip
    as overlap: the container keeps its time before its first inner op, the inner ops keep
    theirs; the container's gaps between its inner ops and after the last are idle, as the
    dispatch gaps between top-level ops are (planted.xplane.pb: 0.25 ms of its 24 while ops'
    96.7 ms; 15.6 µs before their bodies is theirs, 96.46 ms is their bodies' ops)."""
    order = [*STREAM_KEYS, "start_ns", "end_ns"]
    ev = events if is_sorted(events, order) else _sort_by_stream(events)
    # sorted by stream, so the next row is the next activity of the stream when the keys match
    same_stream = pl.all_horizontal(pl.col(k).shift(-1).eq_missing(pl.col(k))
                                    for k in STREAM_KEYS)
    next_start = pl.when(same_stream).then(pl.col("start_ns").shift(-1))
    next_end = pl.when(same_stream).then(pl.col("end_ns").shift(-1))
    cut = next_start.is_not_null() & (next_start < pl.col("end_ns"))
    clipped_end = pl.when(cut).then(next_start).otherwise(pl.col("end_ns"))
    return ev.with_columns(_clip=pl.col("end_ns") - clipped_end, end_ns=clipped_end,
                           _nest=(cut & (next_end <= pl.col("end_ns"))).fill_null(False))


def assign_steps(events: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    """Fill ``step`` with the step whose window holds the event's start (null outside steps).

    The step is the last one of the event's rank starting at or before the event, kept when
    the event starts before that step ends (binary search per rank, no sort of the events).
    """
    if steps.is_empty() or events.is_empty():
        return events.with_columns(step=pl.lit(None, dtype=pl.Int32))
    win = steps.select("rank", "start_ns", "end_ns", "step").sort("rank", "start_ns")
    w_rank = win["rank"].to_numpy()
    w_start, w_end = win["start_ns"].to_numpy(), win["end_ns"].to_numpy()
    w_step = win["step"].cast(pl.Int32)
    rank = events["rank"].to_numpy()
    start = events["start_ns"].to_numpy()
    idx = np.full(events.height, -1, np.int64)
    cuts = np.flatnonzero(np.r_[True, w_rank[1:] != w_rank[:-1], True])
    one_rank = events["rank"].n_unique() == 1  # then no per-rank selection (a copy) is needed
    for a, b in zip(cuts[:-1], cuts[1:]):
        if one_rank:
            if not rank[0] == w_rank[a]:
                continue
            sel, times = slice(None), start
        else:
            sel = np.flatnonzero(rank == w_rank[a])
            if not len(sel):
                continue
            times = start[sel]
        i = np.searchsorted(w_start[a:b], times, side="right") - 1
        inside = (i >= 0) & (times < w_end[a:b][np.maximum(i, 0)])
        idx[sel] = np.where(inside, i + a, idx[sel])
    found = idx >= 0
    step = w_step.gather(np.maximum(idx, 0))
    if not found.all():
        step = pl.select(pl.when(pl.lit(pl.Series(found))).then(pl.lit(step))).to_series()
    return events.with_columns(step.alias("step"))
