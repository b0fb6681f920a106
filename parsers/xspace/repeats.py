"""Event lines an XSpace holds twice: read once, and counted.

A line copied under a new line id (a tool that merged two captures, a plane written twice)
used to be another stream with the same kernels: on the MI300X GEMM trace steps 3 -> 6 and
kernels 54 -> 96, on a TPU 3,432 -> 6,108 ops. A line id written twice made each event
twice on one stream: the same-stream clip warned of overlaps, but the count stayed inflated
(2,664 -> 2,958). An in-order stream cannot run the same activity twice at the same
nanoseconds, and two streams whose every activity starts and ends at the same nanoseconds
are one stream recorded twice; so both are dropped and counted.

Cheap first: one group-by over integer columns per file (each stream's size, sums of its
starts and ends, distinct starts) finds the streams that may repeat; only those are compared
event by event, so a file without repeats pays that one pass.
"""

from __future__ import annotations

import polars as pl

_EVENT = ("name", "start_ns", "end_ns")


def _name_code() -> pl.Expr:
    """The name as its category code (equal codes are equal names within one frame):
    hashing and comparing codes is several times cheaper than the strings."""
    return pl.col("name").to_physical().alias("_name")


def drop_repeats(events: pl.DataFrame) -> tuple[pl.DataFrame, int, int, int]:
    """``events`` (one file's device events) without repeats: (events, events that were
    twice on one stream, streams that repeat another stream of their device, the events of
    those streams). Nothing is copied when there is nothing to drop."""
    if events.height < 2:
        return events, 0, 0, 0
    prints = events.group_by("device", "stream").agg(
        n=pl.len(), a=pl.col("start_ns").sum(), b=pl.col("end_ns").sum(),
        distinct=pl.col("start_ns").n_unique())
    twice = 0
    crowded = prints.filter(pl.col("distinct") < pl.col("n")).select("device", "stream")
    if not crowded.is_empty():  # starts shared within a stream: exact copies among them?
        events, twice = _once_per_stream(events, crowded)
        if twice:
            prints = events.group_by("device", "stream").agg(
                n=pl.len(), a=pl.col("start_ns").sum(), b=pl.col("end_ns").sum())
    repeated = prints.filter(pl.struct("device", "n", "a", "b").is_duplicated())
    if repeated.is_empty():
        return events, twice, 0, 0
    lines, line_events = 0, 0
    keep = repeated.group_by("device", "n", "a", "b").agg(keep=pl.col("stream").min())
    pairs = repeated.join(keep, on=["device", "n", "a", "b"]).filter(
        pl.col("stream") != pl.col("keep"))
    # the fingerprint proposes, the events decide: every event of the stream is on the kept
    # one (within-stream copies are gone, so n matches mean the same events)
    candidates = events.join(pairs.select("device", "stream", "keep", "n"),
                             on=["device", "stream"]).with_columns(_name_code())
    kept = events.select("device", pl.col("stream").alias("keep"), _name_code(), "start_ns",
                         "end_ns")
    drop = candidates.join(kept, on=["device", "keep", "_name", "start_ns", "end_ns"],
                           how="semi").group_by("device", "stream").agg(
        matched=pl.len(), n=pl.col("n").first()).filter(
        pl.col("matched") == pl.col("n")).select("device", "stream")
    if drop.is_empty():
        return events, twice, 0, 0
    before = events.height
    events = events.join(drop, on=["device", "stream"], how="anti", maintain_order="left")
    lines, line_events = drop.height, before - events.height
    return events, twice, lines, line_events


def _once_per_stream(events: pl.DataFrame, crowded: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """Each event of the ``crowded`` streams once (same device, stream, name, start, end:
    the first kept; instants all kept), and how many were dropped."""
    marked = events.with_row_index("_row").join(crowded.with_columns(_crowded=pl.lit(True)),
                                                on=["device", "stream"], how="left",
                                                maintain_order="left")
    # instants (zero duration) are left alone: two records of one instant at one ns can be
    # two real events (a coarse clock), and they add no time
    inside = marked.filter(pl.col("_crowded").fill_null(False)
                           & (pl.col("end_ns") > pl.col("start_ns"))).with_columns(_name_code())
    first = inside.filter(pl.struct("device", "stream", "_name", "start_ns", "end_ns")
                          .is_first_distinct())
    dropped = inside.height - first.height
    if not dropped:
        return events, 0
    gone = inside.join(first.select("_row"), on="_row", how="anti").select("_row")
    out = marked.join(gone, on="_row", how="anti", maintain_order="left")
    return out.drop("_row", "_crowded"), dropped
