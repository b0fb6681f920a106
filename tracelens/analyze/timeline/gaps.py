"""A device whose records are hours apart: said, not read as an idle job.

The rocprofv3 documentation's CSV snippets (two memory copies pasted beside seven kernels of
another run) read as one device over a 2.4 h span, 100% idle, with no word: every share, the
critical path and the step times were computed over a gap no profile holds. A device whose
activity leaves one gap of at least :data:`MIN_GAP_NS` that is most of its span
(:data:`MOST`) is warned of, naming the gap: records of different runs pasted together, or a
clock that jumped. The numbers are left as they are (the gap may be real: a job that stalled).

Cheap: one group-by per stream (its first start and last end); a gap between the streams'
spans is a gap of the device (no stream ran in it), found on those few rows. A gap inside
one stream's span is not looked for.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from tracelens.core.model import Notice

MIN_GAP_NS = 600 * 10**9  # ten minutes: longer than any profiling window holds idle
MOST = 0.5

KEYS = ["host", "rank", "device"]


def long_gaps(events: pl.DataFrame) -> list[Notice]:
    """One notice per device whose streams' spans leave a gap of at least
    :data:`MIN_GAP_NS` that is at least :data:`MOST` of the device's span."""
    if events.height < 2:
        return []
    spans = events.group_by(*KEYS, "stream").agg(
        first=pl.col("start_ns").min(), last=pl.col("end_ns").max()).sort(*KEYS, "first")
    gaps = spans.with_columns(
        reach=pl.col("last").cum_max().over(KEYS)).with_columns(
        gap=pl.col("first") - pl.col("reach").shift(1).over(KEYS),
        span=pl.col("last").max().over(KEYS) - pl.col("first").min().over(KEYS))
    found = gaps.filter((pl.col("gap") >= MIN_GAP_NS)
                        & (pl.col("gap") >= MOST * pl.col("span")))
    if found.is_empty():
        return []
    worst = found.sort("gap", descending=True).unique(KEYS, keep="first", maintain_order=True)
    return [_notice(r) for r in worst.sort(*KEYS).iter_rows(named=True)]


def _notice(r: dict[str, Any]) -> Notice:
    return Notice.of("load.long_gap", "{host} device {device}: its records leave a gap of "
                     "{hours:.2f} h ({share:.1f}% of its span) in which no stream ran: "
                     "records of different runs together, or a clock that jumped; idle "
                     "share, critical path and step times include it", host=str(r["host"]),
                     device=int(r["device"]), hours=r["gap"] / 3.6e12,
                     share=100.0 * r["gap"] / max(r["span"], 1))


def say_long_gaps(trace: Any, ctx: Any) -> None:
    """The loader stage: :func:`long_gaps` warned on the trace."""
    for n in long_gaps(trace.events):
        trace.meta.warn(n)
