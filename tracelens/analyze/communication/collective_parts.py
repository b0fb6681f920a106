"""The collectives analysis split into a per-host map and a global reduce.

A host file's partial is its collective activities (:func:`collective_activities`: exposure
to compute is per device, so it is complete within one host), its devices (for the link
bandwidth) and the facts :func:`tracelens.loading.combine.plan` needs (its meta). The reduce places
each partial where :func:`tracelens.loading.combine.combine` would put its host (ranks after the
previous parts', duplicate host names ``host#i``, wall-clock shifts), aligns hosts on
collective ends when combine could not (as the loader does), and matches instances across
hosts: the only cross-host step, on the activity rows alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

import polars as pl

from tracelens.loading.align import host_shifts
from tracelens.analyze.communication.collectives import (
    collectives_from_activities,
    partial_activities,
    link_of,
)
from tracelens.analyze.timeline.breakdown import DEVICE_KEYS
from tracelens.loading.combine import Placement, plan, place
from tracelens.loading.filters import Filters
from tracelens.core.frames import distinct
from tracelens.core.model import Notice, Trace, TraceMeta, world_sizes
from tracelens.engine.protocol import JobPlan

if TYPE_CHECKING:
    from tracelens.analyze.communication.axes import AxesOptions
from tracelens.results.collectives import Collectives


@dataclass(frozen=True)
class CollectivePartial:
    """What one host file (one loaded part) contributes to the collectives analysis."""

    meta: TraceMeta  # hosts, processes, profile start: what combine.plan reads
    acts: pl.DataFrame  # partial_activities(events)
    devices: pl.DataFrame
    hosts: pl.DataFrame  # the (host, rank) pairs with device activity


@dataclass(frozen=True)
class MergedCollectives:
    """The reduce of partials: activities of the whole job on its clock, its devices, what
    ``meta.alignment`` says and the warning when hosts stayed unaligned; where each part went
    (``placements``) and the ns each (placed) host was then shifted by to align it on
    collective ends (``host_shift``, empty when combine's clock sufficed)."""

    acts: pl.DataFrame
    devices: pl.DataFrame
    alignment: str
    unaligned: Notice | None
    placements: tuple[Placement, ...] = ()
    host_shift: dict[str, int] = field(default_factory=dict)
    # each host's (host, rank) pairs with device activity after the filters, placed
    host_ranks: tuple[pl.DataFrame, ...] = ()
    steps_source: str = "none"  # the job's (JobPlan.steps_source)
    job_hosts: tuple[tuple[str, bool], ...] = ()  # JobPlan.hosts
    world_sizes: tuple[int, ...] = ()  # the world sizes the files record (distributedInfo)


def collective_partial(trace: Trace) -> CollectivePartial:
    """The partial of one host file loaded alone (``tracelens.loading.loader.load([path])``)."""
    return CollectivePartial(meta=trace.meta, acts=partial_activities(trace.events),
                             devices=trace.devices,
                             hosts=distinct(trace.events, ["host", "rank"]))


def merge_activities(parts: list[pl.DataFrame], placements: tuple[Placement, ...] | list[
        Placement]) -> pl.DataFrame:
    """Per-host activity frames joined as :func:`tracelens.loading.combine.combine` joins events:
    ranks offset, host renamed, times shifted; rows in device and start order."""
    placed = [place(df, where) for df, where in zip(parts, placements)]
    return pl.concat(placed).sort([*DEVICE_KEYS, "start_ns"], maintain_order=True)


def merge_collective_partials(parts: list[CollectivePartial]) -> MergedCollectives:
    """The job's collective activities from its hosts' partials, in the order the files
    would be given to ``load``; aligned on collective ends when wall-clock is missing."""
    how = plan([p.meta for p in parts])
    acts = merge_activities([p.acts for p in parts], how.placements)
    devices = pl.concat([place(p.devices, w) for p, w in zip(parts, how.placements)])
    alignment, unaligned = how.alignment, how.unaligned
    shift_of: dict[str, int] = {}
    if unaligned:
        hosts = pl.concat([place(p.hosts, w) for p, w in zip(parts, how.placements)])
        found = host_shifts(acts, sorted(set(hosts["host"].to_list())))
        if found is not None:
            shift_of, alignment = found
            shift = pl.col("host").replace_strict(shift_of, default=0, return_dtype=pl.Int64)
            acts = acts.with_columns(start_ns=pl.col("start_ns") + shift,
                                     end_ns=pl.col("end_ns") + shift)
            unaligned = None
    return MergedCollectives(acts=acts, devices=devices, alignment=alignment,
                             unaligned=unaligned, placements=how.placements,
                             host_shift=shift_of)


def collectives_of_partials(parts: list[CollectivePartial], top: int = 10) -> Collectives:
    """The ``tracelens collectives`` result of the job, from its hosts' partials."""
    merged = merge_collective_partials(parts)
    return collectives_from_activities(merged.acts, merged.alignment, top,
                                       link_of(merged.devices))


@dataclass(frozen=True)
class CollectivesOptions:
    """``collectives``' options: the per-row filters applied on each host (a
    :class:`tracelens.loading.filters.Filters` of categories and kernel names, or None; a host
    filter
    and a time window are job-wide) and how many worst instances to list."""

    filters: Filters | None = None
    top: int = 10
    axes: "AxesOptions | None" = None  # the mesh; None: inferred


class MergeCollectives:
    """The job's collective activities placed and aligned (:class:`MergedCollectives`): the
    first round of ``collectives``, ``compare`` and ``scaling``; its ``finish`` returns the
    merged activities for the analyses built on them."""

    def partial(self, trace: Trace, options: CollectivesOptions) -> CollectivePartial:
        from tracelens.loading.filters import apply

        if options.filters is not None and options.filters.active():
            trace = apply(trace, options.filters)
        return collective_partial(trace)

    def merge(self, parts: Sequence[CollectivePartial], plan: JobPlan) -> MergedCollectives:
        acts = merge_activities([plan.place(p.acts, i) for i, p in enumerate(parts)],
                                [Placement(0, None, 0)] * len(parts))
        devices = pl.concat([place(p.devices, w) for p, w in zip(parts, plan.placements)])
        return MergedCollectives(acts, devices, plan.alignment, plan.unaligned,
                                 plan.placements, plan.shift_of or {},
                                 tuple(place(p.hosts, w) for p, w in zip(parts,
                                                                         plan.placements)),
                                 plan.steps_source, plan.hosts,
                                 world_sizes([p.meta for p in parts]))

    def finish(self, part: MergedCollectives, options: CollectivesOptions
               ) -> MergedCollectives:
        return part


class CollectivesAnalysis(MergeCollectives):
    """``tracelens collectives``: per-type time, exposure and busbw, worst instances and
    stragglers of the job (:func:`collectives_from_activities` of the merged activities)."""

    def finish(self, part: MergedCollectives,  # type: ignore[override]
               options: CollectivesOptions) -> Collectives:
        from dataclasses import replace

        from tracelens.analyze.communication.axes import AxesOptions, hosts_frame, with_axes, \
            with_inferred_groups, with_world

        axes = with_world(options.axes or AxesOptions(), part.world_sizes)
        hosts = hosts_frame(part.job_hosts)
        # a job that records no process groups: each instance's from the ranks that matched
        acts = with_inferred_groups(part.acts, part.devices, hosts, axes)
        res = with_axes(collectives_from_activities(acts, part.alignment, options.top,
                                                    link_of(part.devices)),
                        acts, part.devices, hosts, axes)
        rows = options.filters.active() if options.filters is not None else None
        return replace(res, steps_source=part.steps_source, filters=rows or None)
