"""Narrowing a trace before analysis: by host, category, kernel name and time window.

Every analysis command takes these filters next to ``--device`` and ``--step``; the filtered
trace is a plain :class:`Trace`, so every number downstream is computed the same way. A time
window cuts activities like a step window does (an activity crossing the edge keeps the part
inside, and its FLOPs and bytes in proportion).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import polars as pl

from tracelens.core.model import CATEGORIES, Trace
from tracelens.results.filters import ActiveFilters
from tracelens.core.text import matches

_UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_TIME = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ns|us|µs|ms|s)?\s*$")


def parse_time(text: str) -> int:
    """``"1500"`` (ns), ``"2.5ms"``, ``"40us"``, ``"1s"`` -> integer ns (ValueError otherwise)."""
    m = _TIME.match(text)
    if not m:
        raise ValueError(f"not a time: {text!r} (a number of ns, or with ns/us/ms/s)")
    value, unit = m.group(1), m.group(2) or "ns"
    scaled = float(value) * _UNITS[unit] if "." in value else int(value) * _UNITS[unit]
    return int(round(scaled))


def parse_window(text: str) -> tuple[int | None, int | None]:
    """``"START:END"`` with either side optional -> (start, end) ns from the trace's zero."""
    if ":" not in text:
        raise ValueError(f"not a time window: {text!r} (START:END, e.g. 10ms:25ms)")
    a, b = text.split(":", 1)
    start = parse_time(a) if a.strip() else None
    end = parse_time(b) if b.strip() else None
    if start is not None and end is not None and end <= start:
        raise ValueError(f"empty time window {text!r}: END must be after START")
    return start, end


def trace_zero(trace: Trace) -> int:
    """The zero of ``--time``: the earliest activity or step start (as in the Perfetto export)."""
    starts = [f["start_ns"].min() for f in (trace.events, trace.steps) if f.height]
    return int(min(starts)) if starts else 0  # type: ignore[type-var]


@dataclass(frozen=True)
class Filters:
    """What to keep. Empty tuples and None keep everything."""

    hosts: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    kernel: str | None = None  # regex over the activity name
    time: tuple[int | None, int | None] | None = None  # ns from trace_zero

    def active(self) -> ActiveFilters:
        """The filters in force, for the output's ``filters`` record (False: none)."""
        return ActiveFilters(tuple(self.hosts), tuple(self.categories), self.kernel,
                             None if self.time is None else tuple(self.time))  # type: ignore


def apply(trace: Trace, f: Filters) -> Trace:
    """A new Trace holding only what ``f`` keeps (the input is not modified)."""
    unknown = sorted(set(f.categories) - set(CATEGORIES))
    if unknown:
        raise ValueError(f"unknown categories {unknown} (known: {', '.join(CATEGORIES)})")
    events, steps, devices = trace.events, trace.steps, trace.devices
    host_events = trace.host_events
    if f.hosts:
        known = set(devices["host"].to_list())
        missing = sorted(set(f.hosts) - known)
        if missing:
            raise ValueError(f"hosts {missing} are not in the trace (hosts: {sorted(known)})")
        keep = pl.col("host").is_in(list(f.hosts))
        events, devices, host_events = (events.filter(keep), devices.filter(keep),
                                        host_events.filter(keep))
        steps = steps.filter(pl.col("rank").is_in(devices["rank"].unique().to_list()))
    if f.categories:
        events = events.filter(pl.col("category").cast(pl.String).is_in(list(f.categories)))
    if f.kernel is not None:
        events = events.filter(matches(events, "name", f.kernel))
    if f.time is not None:
        events, steps = _window(trace, events, steps, f.time)
    return replace(trace, events=events, steps=steps, devices=devices, host_events=host_events)


def _window(trace: Trace, events: pl.DataFrame, steps: pl.DataFrame,
            time: tuple[int | None, int | None]) -> tuple[pl.DataFrame, pl.DataFrame]:
    from tracelens.analyze.compute.roofline import clip_costs_to_windows

    zero = trace_zero(trace)
    lo = zero + time[0] if time[0] is not None else -(2**62)
    hi = zero + time[1] if time[1] is not None else 2**62
    ranks = trace.devices.select("rank").unique().sort("rank")
    win = ranks.with_columns(step=pl.lit(0, pl.Int32), start_ns=pl.lit(lo, pl.Int64),
                             end_ns=pl.lit(hi, pl.Int64))
    step_col = events["step"]
    clipped = clip_costs_to_windows(events.with_row_index("_row"), win)
    clipped = clipped.with_columns(step_col.gather(clipped["_row"])).drop("_row")
    steps = steps.filter((pl.col("end_ns") > lo) & (pl.col("start_ns") < hi)).with_columns(
        start_ns=pl.max_horizontal("start_ns", pl.lit(lo, pl.Int64)),
        end_ns=pl.min_horizontal("end_ns", pl.lit(hi, pl.Int64)))
    return clipped.select(events.columns), steps
