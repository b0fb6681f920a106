"""The commands' reduces on the engine (:mod:`tracelens.engine`): ``summarize``,
``collectives`` and ``hlo`` of a job from its hosts' partials, as the one-process path
computes them from the combined trace.

What the loader does on the combined trace and a host cannot do alone is redone here from the
partials: hosts without a shared wall clock are aligned on collective ends (the ``ends``
every host sends, whatever the command's filters), then the partials are placed and merged.
"""

from __future__ import annotations

from dataclasses import replace

from pathlib import Path
from typing import Any, Sequence

import polars as pl

from tracelens.align import host_shifts
from tracelens.combine import place
from tracelens.engine import Job, MapOptions, run_hosts
from tracelens.notices import steps_disagree


def summary_options(opts: Any, rules: Any = None, step_marker: str | None = None,
                    window: Any = None) -> MapOptions:
    """The map of ``summarize`` under ``opts`` (a
    :class:`tracelens.analyze.summary_types.SummaryOptions`); with ``window`` (a
    :class:`tracelens.engine_window.WindowOptions`) also ``report``'s window part."""
    if window is None:
        return MapOptions(rules, step_marker, ("summary",), (("summary", opts),))
    return MapOptions(rules, step_marker, ("summary", "window"),
                      (("summary", opts), ("window", window)))


def summary_job(paths: Sequence[str | Path], opts: Any, rules: Any = None,
                step_marker: str | None = None, workers: int | None = None,
                scheduler: str | None = None, window: Any = None) -> Job:
    """Map every host of ``paths`` to its summary partial (see :func:`summary_options`)."""
    return run_hosts(paths, summary_options(opts, rules, step_marker, window), workers,
                     scheduler)


def collectives_job(paths: Sequence[str | Path], filters: Any = None, rules: Any = None,
                    step_marker: str | None = None, workers: int | None = None,
                    scheduler: str | None = None) -> Job:
    """Map every host of ``paths`` to its collectives partial, after ``filters``
    (:class:`tracelens.filters.Filters` of categories and kernel names only: a host filter
    and a time window are job-wide)."""
    return run_hosts(paths, MapOptions(rules, step_marker, ("collectives",),
                                       (("filters", filters),)), workers, scheduler)


def shifts(job: Job) -> tuple[dict[str, int], str] | None:
    """(ns to add per host, the alignment text) when the hosts share no wall clock but
    their collective ends align them (as the loader's ``align`` stage does), else None."""
    if not job.meta.unaligned or len(job.hosts) < 2:
        return None
    ends = pl.concat([place(h.ends, w) for h, w in zip(job.hosts, job.placements)])
    active = pl.concat([place(h.active, w) for h, w in zip(job.hosts, job.placements)])
    return host_shifts(ends, sorted(set(active["host"].to_list())))


def summary_of(job: Job, opts: Any) -> Any:
    """The job's :class:`~tracelens.results.summary.Summary`."""
    from tracelens.analyze.summary import reduce_summary
    from tracelens.analyze.summary_merge import merge_partials

    parts = [h.partials["summary"] for h in job.hosts]
    found = shifts(job)
    merged = merge_partials(parts, found[0], found[1]) if found else merge_partials(parts)
    mixed = mixed_steps_warning(job)
    if mixed:
        merged = replace(merged, steps_source=job.meta.steps_source,
                         warnings=(*merged.warnings, mixed))
    return reduce_summary([merged], opts)


def mixed_steps_warning(job: Job) -> str | None:
    """:func:`tracelens.notices.steps_disagree` of the job's host files."""
    return steps_disagree([h.meta.steps_source for h in job.hosts])


def merged_of(job: Job) -> Any:
    """The job's :class:`~tracelens.analyze.collective_partials.MergedCollectives`: every
    host's collective activities (its ``collectives`` partial) placed, and aligned on
    collective ends as the loader aligns them (from the ends of all its events, whatever
    the command's filters)."""
    from tracelens.analyze.collective_partials import MergedCollectives, merge_activities

    parts = [h.partials["collectives"] for h in job.hosts]
    acts = merge_activities([p.acts for p in parts], job.placements)
    devices = pl.concat([place(p.devices, w) for p, w in zip(parts, job.placements)])
    found = shifts(job)
    if found is None:
        return MergedCollectives(acts, devices, job.meta.alignment, job.meta.unaligned,
                                 tuple(job.placements))
    shift_of, alignment = found
    by = pl.col("host").replace_strict(shift_of, default=0, return_dtype=pl.Int64)
    acts = acts.with_columns(start_ns=pl.col("start_ns") + by, end_ns=pl.col("end_ns") + by)
    return MergedCollectives(acts, devices, alignment, None, tuple(job.placements), shift_of)


def collectives_of(job: Job, top: int, axes: Any = None) -> Any:
    """The job's typed collectives result (:func:`collectives_from_activities` of every
    host's activities, placed and aligned), with its mesh axes (``axes``: the
    ``AxesOptions``; the default infers them)."""
    from tracelens.analyze.axes import AxesOptions, hosts_of, with_axes
    from tracelens.analyze.collectives import collectives_from_activities, link_of

    merged = merged_of(job)
    res = collectives_from_activities(merged.acts, merged.alignment, top,
                                      link_of(merged.devices))
    return with_axes(res, merged.acts, merged.devices, hosts_of(job.meta),
                     axes if axes is not None else AxesOptions())


def lens_job(paths: Sequence[str | Path], rules: Any = None, workers: int | None = None,
             scheduler: str | None = None) -> Job:
    """Map every host of ``paths`` to what the HLO lens reads of its timeline."""
    return run_hosts(paths, MapOptions(rules, None, ("lens",)), workers, scheduler)


def lens_of(job: Job, program: str | None = None, hosts: Any = None) -> Any:
    """The job's :class:`~tracelens.results.hlo.HloLensResult` (``hlo`` on a trace): each
    host's lens inputs placed (ranks, host names) and joined. Step numbers and exposed times
    do not depend on the clock, so no shift applies."""
    from dataclasses import replace

    from tracelens.analyze.hlo_findings import lens_of_timeline
    from tracelens.analyze.summary_merge import concat_lens

    placed = [replace(t, programs=place(t.programs, w), gpus=place(t.gpus, w),
                      compute=place(t.compute, w), acts=place(t.acts, w),
                      ran=None if t.ran is None else place(t.ran, w),
                      hosts=(w.host,) if w.host is not None else t.hosts)
              for t, w in zip((h.partials["lens"] for h in job.hosts), job.placements)]
    return lens_of_timeline(concat_lens(placed), program, hosts)
