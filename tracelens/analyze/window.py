"""A bounded, representative slice of the timeline for the report to draw bar by bar.

A 2M-event trace cannot be drawn whole in a page; one step can. The window is the median step
(the step whose span, averaged over the devices that ran it, is the median; ties to the
earlier step) or a chosen one, on at most ``max_devices`` devices (the ones with the longest
busy time in it, then by rank and ordinal), and at most ``max_events`` activities (the longest
ones; what is left out is counted and said). Without steps the window is the first
``max_events`` activities' stretch.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from tracelens.analyze.intervals import subtract
from tracelens.analyze.timeline import DEVICE_KEYS, clip_to_windows
from tracelens.model import COMPUTE_CATEGORIES, Trace


@dataclass(frozen=True)
class TimelineWindow:
    """What the report's step timeline shows. ``events``: device keys, stream, name,
    category, start_ns, end_ns (clipped to the window); ``exposed``: device keys, start_ns,
    end_ns of exposed communication in the window."""

    step: int | None
    start_ns: int
    end_ns: int
    events: pl.DataFrame
    exposed: pl.DataFrame
    devices_shown: int
    devices_total: int
    events_total: int  # activities in the window on the shown devices, before the cap


def median_step(steps: pl.DataFrame) -> int | None:
    """The step whose span, averaged over ranks, is the median (the lower one of two)."""
    if steps.is_empty():
        return None
    per = steps.group_by("step").agg(span=(pl.col("end_ns") - pl.col("start_ns")).mean()) \
        .sort("span", "step")
    return int(per["step"][(per.height - 1) // 2])


def timeline_window(trace: Trace, step: int | None = None, max_devices: int = 8,
                    max_events: int = 20_000) -> TimelineWindow | None:
    """The window to draw (None when the trace has no device activity)."""
    ev = trace.events.select(*DEVICE_KEYS, "stream", "name", "category", "start_ns", "end_ns")
    if ev.is_empty():
        return None
    step = step if step is not None else median_step(trace.steps)
    if step is not None:
        win = trace.steps.filter(pl.col("step") == step)
        ev = clip_to_windows(ev, win)
        lo, hi = int(win["start_ns"].min()), int(win["end_ns"].max())  # type: ignore[arg-type]
    else:
        first = ev.sort("start_ns").head(max_events)
        lo, hi = int(first["start_ns"].min()), int(first["end_ns"].max())  # type: ignore[arg-type]
        ev = ev.filter((pl.col("start_ns") < hi) & (pl.col("end_ns") > lo))
    dur = pl.col("end_ns") - pl.col("start_ns")
    busy = ev.group_by(DEVICE_KEYS).agg(_t=dur.sum()).sort(
        ["_t", "rank", "device", "host"], descending=[True, False, False, False])
    shown = busy.head(max_devices).select(DEVICE_KEYS)
    ev = ev.join(shown, on=DEVICE_KEYS)
    total = ev.height
    # exposure from every activity in the window, before the cap drops short ones
    comp = ev.filter(pl.col("category").is_in(COMPUTE_CATEGORIES))
    comm = ev.filter(pl.col("category") == "collective")
    exposed = subtract(comm, comp, DEVICE_KEYS)
    if total > max_events:  # keep the longest activities (ties by start, name)
        ev = ev.with_columns(_d=dur).sort(["_d", "start_ns", "name"],
                                          descending=[True, False, False]).head(max_events) \
            .drop("_d")
    ev = ev.sort(*DEVICE_KEYS, "stream", "start_ns", "name")
    return TimelineWindow(step=step, start_ns=lo, end_ns=hi, events=ev.drop("step", strict=False),
                          exposed=exposed, devices_shown=shown.height,
                          devices_total=busy.height, events_total=total)
