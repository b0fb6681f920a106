"""What one host contributes to the choice of ``report``'s step-timeline window on the
engine (:class:`WindowChoice`, :class:`WindowEvents`): small frames, the same choice as
:func:`tracelens.analyze.window.timeline_window` makes on the whole job."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import polars as pl

from tracelens.analyze.timeline import DEVICE_KEYS, clip_to_windows
from tracelens.analyze.window import (COLUMNS, TimelineWindow, device_busy, finish_window,
                                      first_stretch, in_window, shown_devices, window_bounds)
from tracelens.combine import place
from tracelens.filters import Filters
from tracelens.model import Trace
from tracelens.protocol import JobPlan


@dataclass(frozen=True)
class WindowOptions:
    """What picks the window: ``report``'s ``--device``/``--step``, its per-row filters
    (a :class:`tracelens.filters.Filters` of categories and kernel names, or None) and the
    caps."""

    device: int | None = None
    step: int | None = None
    filters: Filters | None = None
    max_devices: int = 4
    max_events: int = 1500


@dataclass(frozen=True)
class WindowPart:
    """One host's round-1 part, in its own time and ranks: ``steps`` (host, rank, step,
    start_ns, end_ns), ``busy`` (DEVICE_KEYS, step, ``_t``), ``first`` (host, rank, start_ns,
    end_ns; only from a host without steps) and ``empty`` (its activities' schema)."""

    steps: pl.DataFrame
    busy: pl.DataFrame
    first: pl.DataFrame
    empty: pl.DataFrame


def window_activities(trace: Trace, opts: WindowOptions) -> pl.DataFrame:
    """The activities the window is drawn from: after the per-row filters and ``--device``,
    as ``report`` narrows the whole trace."""
    from tracelens.filters import apply

    if opts.filters is not None and opts.filters.active():
        trace = apply(trace, opts.filters)
    ev = trace.events
    if opts.device is not None:
        ev = ev.filter(pl.col("device") == opts.device)
    return ev.select(COLUMNS)


def window_part(trace: Trace, opts: WindowOptions) -> WindowPart:
    """The host's round-1 part (see :class:`WindowChoice`)."""
    ev = window_activities(trace, opts)
    hosts = trace.devices.select("rank", "host").unique()
    steps = trace.steps.select("rank", "step", "start_ns", "end_ns").join(
        hosts, on="rank", how="left").select("host", "rank", "step", "start_ns", "end_ns")
    clipped = clip_to_windows(ev, steps)
    busy = clipped.group_by(*DEVICE_KEYS, "step").agg(
        _t=(pl.col("end_ns") - pl.col("start_ns")).sum())
    first = first_stretch(ev.select("host", "rank", "start_ns", "end_ns"),
                          0 if steps.height else opts.max_events)
    return WindowPart(steps, busy, first, ev.head(0))


class WindowChoice:
    """Round 1 of ``report``'s step-timeline window on the Analysis protocol: each host's
    :class:`WindowPart`; the merge picks the step, the window and the shown devices exactly
    as :func:`tracelens.analyze.window.timeline_window` does on the whole job, and which
    hosts own them (read again in round 2, :class:`WindowEvents`)."""

    def partial(self, trace: Trace, options: WindowOptions) -> WindowPart:
        return window_part(trace, options)

    def merge(self, parts: Sequence[WindowPart], plan: JobPlan) -> Chosen | None:
        if not any(p.busy.height or p.first.height for p in parts):
            return None  # no activity on any host (after the filters)
        steps = plan.concat([p.steps for p in parts]).drop("host")
        return Chosen(plan, steps, plan.place(parts[0].empty, 0), list(parts))

    def finish(self, part: Chosen | None, options: WindowOptions) -> Chosen | None:
        if part is None:
            return None
        step, lo, hi = window_bounds(part.steps, options.step, lambda: first_stretch(
            part.plan.concat([p.first for p in part.parts]), options.max_events))
        steps = part.steps.filter(pl.col("step") == step) if step is not None else \
            part.steps.head(0)
        busy = shown = None
        if step is not None:
            busy = pl.concat([place(p.busy, w) for p, w in zip(part.parts, part.plan.placements)]
                             ).filter(pl.col("step") == step).drop("step")
            shown = shown_devices(busy, options.max_devices)
            owners = [i for i, (p, w) in enumerate(zip(part.parts, part.plan.placements))
                      if place(p.busy, w).join(shown, on=DEVICE_KEYS, how="semi").height]
        else:
            owners = [i for i, p in enumerate(part.parts) if p.first.height]
        return replace(part, step=step, lo=lo, hi=hi, steps=steps, busy=busy, shown=shown,
                       owners=tuple(owners), parts=[])


@dataclass(frozen=True)
class Chosen:
    """Round 1's choice: the job's plan, the step windows (all, then the chosen step's), the
    empty activity frame in job time; after ``finish`` the step (None: no steps), the window
    ``lo``..``hi``, the devices' busy times and the shown devices (None without steps: each
    round-2 host picks its busiest) and the hosts read again (``owners``)."""

    plan: JobPlan
    steps: pl.DataFrame
    empty: pl.DataFrame
    parts: list[WindowPart]
    step: int | None = None
    lo: int = 0
    hi: int = 0
    busy: pl.DataFrame | None = None
    shown: pl.DataFrame | None = None
    owners: tuple[int, ...] = ()


@dataclass(frozen=True)
class Round2:
    """What a round-2 host needs: its index in the job, the choice and the options."""

    index: int
    chosen: Chosen
    options: WindowOptions


class WindowEvents:
    """Round 2: the owners of shown devices read again; each sends its devices' busy times
    in the window and the shown devices' activities in it, in job time; the finish draws the
    window (:func:`tracelens.analyze.window.finish_window`)."""

    def partial(self, trace: Trace, options: Round2) -> tuple[pl.DataFrame, pl.DataFrame]:
        c = options.chosen
        ev = c.plan.place(window_activities(trace, options.options), options.index)
        ev = in_window(ev, c.steps, c.step, c.lo, c.hi)
        busy = device_busy(ev)
        shown = c.shown if c.shown is not None else shown_devices(busy,
                                                                 options.options.max_devices)
        return busy, ev.join(shown, on=DEVICE_KEYS)

    def merge(self, parts: Sequence[tuple[pl.DataFrame, pl.DataFrame]], plan: JobPlan
              ) -> list[tuple[pl.DataFrame, pl.DataFrame]]:
        return list(parts)

    def finish(self, part: list[tuple[pl.DataFrame, pl.DataFrame]], options: Round2
               ) -> TimelineWindow:
        c, busy, shown = options.chosen, options.chosen.busy, options.chosen.shown
        if busy is None:
            busy = pl.concat([b for b, _ in part])
            shown = shown_devices(busy, options.options.max_devices)
        assert shown is not None
        ev = pl.concat([c.empty, *(e for _, e in part)]).join(shown, on=DEVICE_KEYS)
        return finish_window(ev, c.step, c.lo, c.hi, shown, busy.height,
                             options.options.max_events)


def window_of_trace(trace: Trace, options: WindowOptions) -> TimelineWindow | None:
    """Both rounds on a trace already loaded (every host here): the window
    :func:`tracelens.analyze.window.timeline_window` draws for it."""
    plan = JobPlan.of_trace(trace)
    choice = WindowChoice()
    chosen = choice.finish(choice.merge([choice.partial(trace, options)], plan), options)
    if chosen is None:
        return None
    events, again = WindowEvents(), Round2(0, chosen, options)
    return events.finish(events.merge([events.partial(trace, again)
                                       for _ in chosen.owners], plan), again)
