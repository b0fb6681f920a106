"""``report``'s step-timeline window on the engine (:mod:`tracelens.engine`), chosen exactly
as :func:`tracelens.analyze.window.timeline_window` chooses it on the whole job, with the same
functions.

Round 1 (with the summary partial): each host sends its step windows, the summed clipped
activity time of each of its devices in each step, and (without steps) its first
``max_events`` activities' bounds. The reduce picks the step, the window and the shown
devices. Round 2 reads again only the files of the hosts owning a shown device; each sends
the activities of those devices in the window, in job time (its placement and clock shift
applied). Without steps the busy times need the window first, so round 2 reads every host
with activity and each sends its busy times and its own busiest devices' activities.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from tracelens.analyze.timeline import DEVICE_KEYS
from tracelens.analyze.window import (TimelineWindow, device_busy, finish_window, first_stretch,
                                      in_window, shown_devices, window_bounds)
from tracelens.analyze.window_parts import WindowOptions, WindowPart, window_activities
from tracelens.combine import Placement, place
from tracelens.engine import HostFile, Job, MapOptions, engine_workers, map_options, run_map


def _to_job(df: pl.DataFrame, where: Placement, shift_of: dict[str, int] | None
            ) -> pl.DataFrame:
    """A host's frame in the job: placed (ranks, host name, wall-clock shift), then moved by
    its host's collective-end shift (as the loader's align stage moves it)."""
    df = place(df, where)
    if shift_of and "start_ns" in df.columns:
        by = pl.col("host").cast(pl.String).replace_strict(shift_of, default=0,
                                                            return_dtype=pl.Int64)
        df = df.with_columns(start_ns=pl.col("start_ns") + by, end_ns=pl.col("end_ns") + by)
    return df


@dataclass(frozen=True)
class _Round2:
    """What a round-2 host needs: its file, where it goes in the job and the window chosen."""

    host: HostFile
    where: Placement
    shift_of: dict[str, int] | None
    step: int | None
    lo: int
    hi: int
    steps: pl.DataFrame  # the job's windows of ``step`` (job ranks and time)
    shown: pl.DataFrame | None  # the shown devices (None: this host's busiest, no steps)

    @property
    def path(self) -> Path:  # what a failed worker's error names
        return self.host.path


def window_events(r2: _Round2, options: MapOptions, opts: WindowOptions
                  ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Round 2 on one host: read its file again; (its devices' busy times in the window,
    the activities of the shown devices in it), in job time."""
    from tracelens.loader import load_host

    host = r2.host
    trace, _ = load_host(host.path, host.arg, host.in_dir, options.rules, options.step_marker,
                         options.threads, host.notes)
    ev = _to_job(window_activities(trace, opts), r2.where, r2.shift_of)
    ev = in_window(ev, r2.steps, r2.step, r2.lo, r2.hi)
    busy = device_busy(ev)
    shown = r2.shown if r2.shown is not None else shown_devices(busy, opts.max_devices)
    return busy, ev.join(shown, on=DEVICE_KEYS)


def window_of(job: Job, options: MapOptions, opts: WindowOptions, workers: int | None = None,
              scheduler: str | None = None) -> TimelineWindow | None:
    """The job's window from the hosts' round-1 parts and a second read of the hosts that
    own a shown device (see the module doc)."""
    from tracelens.engine_jobs import shifts

    parts: list[WindowPart] = [h.partials["window"] for h in job.hosts]
    if not any(p.busy.height or p.first.height for p in parts):
        return None  # no activity on any host (after the filters)
    found = shifts(job)
    shift_of = found[0] if found else None
    placed = list(zip(parts, job.placements))
    steps = pl.concat([_to_job(p.steps, w, shift_of) for p, w in placed]).drop("host")
    step, lo, hi = window_bounds(steps, opts.step, lambda: first_stretch(pl.concat(
        [_to_job(p.first, w, shift_of) for p, w in placed]), opts.max_events))
    steps = steps.filter(pl.col("step") == step) if step is not None else steps.head(0)
    busy = shown = None
    if step is not None:
        busy = pl.concat([place(p.busy, w) for p, w in placed]).filter(
            pl.col("step") == step).drop("step")
        shown = shown_devices(busy, opts.max_devices)
        owners = [i for i, (p, w) in enumerate(placed)
                  if place(p.busy, w).join(shown, on=DEVICE_KEYS, how="semi").height]
    else:
        owners = [i for i, p in enumerate(parts) if p.first.height]
    n = engine_workers([job.files[i] for i in owners], workers, scheduler)
    got = run_map(functools.partial(window_events, options=map_options(options, n, scheduler),
                                    opts=opts),
                  [_Round2(job.files[i], job.placements[i], shift_of, step, lo, hi, steps, shown)
                   for i in owners], n, scheduler)
    if busy is None:
        busy = pl.concat([b for b, _ in got])
        shown = shown_devices(busy, opts.max_devices)
    assert shown is not None
    ev = pl.concat([parts[0].empty.pipe(_to_job, job.placements[0], shift_of),
                    *(e for _, e in got)]).join(shown, on=DEVICE_KEYS)
    return finish_window(ev, step, lo, hi, shown, busy.height, opts.max_events)

