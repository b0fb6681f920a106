"""What one host contributes to the choice of ``report``'s step-timeline window on the
engine (:mod:`tracelens.engine_window`): small frames, the same choice as
:func:`tracelens.analyze.window.timeline_window` makes on the whole job."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from tracelens.analyze.timeline import DEVICE_KEYS, clip_to_windows
from tracelens.analyze.window import COLUMNS, first_stretch
from tracelens.model import Trace


@dataclass(frozen=True)
class WindowOptions:
    """What picks the window: ``report``'s ``--device``/``--step``, its per-row filters
    (a :class:`tracelens.filters.Filters` of categories and kernel names, or None) and the
    caps."""

    device: int | None = None
    step: int | None = None
    filters: Any = None
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
    """The host's round-1 part (see :mod:`tracelens.engine_window`)."""
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
