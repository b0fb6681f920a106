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
from typing import Callable, Sequence

import polars as pl

from tracelens.core.intervals import subtract
from tracelens.analyze.timeline.breakdown import DEVICE_KEYS, clip_to_windows
from tracelens.core.model import COMPUTE_CATEGORIES, Trace
from tracelens.loading.step_choice import headline_step


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
    """The step whose span, averaged over ranks, is the median (the lower one of two): the
    headline's step (:func:`tracelens.loading.step_choice.headline_step`)."""
    return headline_step(steps)


def steps_by_span(steps: pl.DataFrame) -> list[int]:
    """The step numbers by their span averaged over ranks (ties by number): the order
    :func:`median_step` takes the middle of."""
    per = steps.group_by("step").agg(span=(pl.col("end_ns") - pl.col("start_ns")).mean()) \
        .sort("span", "step")
    return [int(s) for s in per["step"]]


COLUMNS = [*DEVICE_KEYS, "stream", "name", "category", "start_ns", "end_ns"]
_DUR = pl.col("end_ns") - pl.col("start_ns")


def first_stretch(ev: pl.DataFrame, max_events: int) -> pl.DataFrame:
    """The first ``max_events`` activities by start (ties by end): the window without steps
    spans them. Taking each host's first ``max_events`` and then the first of those gives
    the same bounds."""
    return ev.sort("start_ns", "end_ns").head(max_events)


def window_bounds(steps: pl.DataFrame, step: int | None,
                  first: Callable[[], pl.DataFrame]) -> tuple[int | None, int, int]:
    """(the step drawn, the window's start and end): ``step``, else the median one, spans
    its windows on every rank; without steps the stretch of the activities ``first()``
    gives (:func:`first_stretch`)."""
    step = step if step is not None else median_step(steps)
    src = steps.filter(pl.col("step") == step) if step is not None else first()
    return step, int(src["start_ns"].min()), int(src["end_ns"].max())  # type: ignore[arg-type]


def in_window(ev: pl.DataFrame, steps: pl.DataFrame, step: int | None, lo: int, hi: int
              ) -> pl.DataFrame:
    """The activities of the window: clipped to each rank's window of ``step``, or (no
    steps) every one overlapping [lo, hi), whole."""
    if step is not None:
        return clip_to_windows(ev, steps.filter(pl.col("step") == step)).drop("step")
    return ev.filter((pl.col("start_ns") < hi) & (pl.col("end_ns") > lo))


def device_busy(ev: pl.DataFrame) -> pl.DataFrame:
    """Summed activity time per device (DEVICE_KEYS, ``_t``)."""
    return ev.group_by(DEVICE_KEYS).agg(_t=_DUR.sum())


def shown_devices(busy: pl.DataFrame, max_devices: int) -> pl.DataFrame:
    """The ``max_devices`` busiest devices (then by rank, ordinal, host)."""
    return busy.sort(["_t", "rank", "device", "host"], descending=[True, False, False, False]) \
        .head(max_devices).select(DEVICE_KEYS)


def exposed_comm(ev: pl.DataFrame, keys: Sequence[str] = DEVICE_KEYS) -> pl.DataFrame:
    """Exposed communication per device (``keys``, start_ns, end_ns; sorted): each device's
    collectives minus its compute. Per device, so the engine's hosts compute it for their
    own devices (:mod:`tracelens.analyze.timeline.window_parts`, with the step among the keys)."""
    comp = ev.filter(pl.col("category").is_in(COMPUTE_CATEGORIES))
    comm = ev.filter(pl.col("category") == "collective")
    return subtract(comm, comp, keys)


def longest(ev: pl.DataFrame, max_events: int) -> pl.DataFrame:
    """At most ``max_events`` activities: the longest (ties by start, name, the rest; a
    total order, so the longest of a union are among the longest of its parts)."""
    if ev.height <= max_events:
        return ev
    return ev.with_columns(_d=_DUR).sort(
        ["_d", "start_ns", "name", *DEVICE_KEYS, "stream", "end_ns", "category"],
        descending=[True, *[False] * 8]).head(max_events).drop("_d")


def finish_window(ev: pl.DataFrame, step: int | None, lo: int, hi: int, shown: pl.DataFrame,
                  devices_total: int, max_events: int) -> TimelineWindow:
    """The window from the activities of the shown devices in it (``ev``, any row order):
    their exposed communication, then the cap to the ``max_events`` longest."""
    total = ev.height
    # exposure from every activity in the window, before the cap drops short ones
    exposed = exposed_comm(ev)
    ev = longest(ev, max_events)
    ev = ev.sort(*DEVICE_KEYS, "stream", "start_ns", "name", "end_ns", "category")
    return TimelineWindow(step=step, start_ns=lo, end_ns=hi, events=ev, exposed=exposed,
                          devices_shown=shown.height, devices_total=devices_total,
                          events_total=total)


def timeline_window(trace: Trace, step: int | None = None, max_devices: int = 8,
                    max_events: int = 20_000) -> TimelineWindow | None:
    """The window to draw (None when the trace has no device activity). The engine
    (:class:`tracelens.analyze.timeline.window_parts.WindowChoice`) makes the same choice from
    per-host parts with the same functions."""
    ev = trace.events.select(COLUMNS)
    if ev.is_empty():
        return None
    step, lo, hi = window_bounds(trace.steps, step, lambda: first_stretch(
        ev.select("start_ns", "end_ns"), max_events))
    ev = in_window(ev, trace.steps, step, lo, hi)
    busy = device_busy(ev)
    shown = shown_devices(busy, max_devices)
    return finish_window(ev.join(shown, on=DEVICE_KEYS), step, lo, hi, shown, busy.height,
                         max_events)
