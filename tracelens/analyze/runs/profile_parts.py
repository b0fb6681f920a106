"""A run's profile (``compare``, ``scaling``) from per-host partials: two rounds.

Round 1 is the collectives partial of every host (:mod:`collective_partials`); its reduce
matches collective instances across hosts, which gives every activity its wait for the last
arrival. Round 2 runs per host again with those matched activities: the host's component
rows per (device, step) (exclusive times are per device), its kernel sums (exact integers)
and the few facts the counts and the HLO findings need. The final reduce is
:func:`tracelens.analyze.runs.scaling.profile_of`, as for a whole trace.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import polars as pl

from tracelens.loading.align import shift_ranks
from tracelens.analyze.communication.collective_parts import (CollectivesOptions, MergeCollectives,
                                                   MergedCollectives)
from tracelens.analyze.communication.collectives import CollectiveAnalysis, analyze_collectives
from tracelens.analyze.runs.scaling import (
    RunProfile,
    collective_types,
    component_frame,
    hlo_finding_texts,
    profile_of,
    with_arrivals,
)
from tracelens.analyze.runs.kernels import kernel_partial
from tracelens.analyze.summary.merge import merged_notices
from tracelens.analyze.summary.reduce import hardware_counts
from tracelens.analyze.timeline.breakdown import DEVICE_KEYS
from tracelens.loading.combine import Placement, place
from tracelens.core.frames import distinct
from tracelens.core.model import COMPUTE_CATEGORIES, HOST_EVENT_SCHEMA, STEP_SCHEMA, Notice, Trace
from tracelens.loading.filters import Filters
from tracelens.core.notices import run_warnings, steps_disagree

if TYPE_CHECKING:
    from tracelens.engine.hosts import EngineOptions, HostFile, LoadOptions
    from tracelens.engine.protocol import JobPlan, Task


@dataclass(frozen=True)
class ProfilePartial:
    """One host's round-2 part of the profile, in the job's ranks, host names and clock."""

    comp: pl.DataFrame  # component_frame rows of its devices
    kernels: pl.DataFrame  # kernel_partial rows
    active: pl.DataFrame  # its devices with activity (host, rank, device)
    steps: pl.DataFrame  # its step numbers
    compute_steps: pl.DataFrame  # (host, rank, device, step, category) of its compute
    devices: pl.DataFrame
    modules: pl.DataFrame
    # its file's reader and loader notices and steps source (the run's warnings)
    notices: tuple[Notice, ...] = ()
    steps_source: str = "none"


def match_job(merged: MergedCollectives) -> CollectiveAnalysis:
    """Round 1's reduce: the job's instances, waits and stragglers, each activity with its
    instance's arrivals (:func:`~tracelens.analyze.runs.scaling.with_arrivals`: instance-wide,
    so before the activities are split per host)."""
    job = analyze_collectives(merged.acts, merged.acts)
    job.activities = with_arrivals(job.activities)
    return job


def placed(trace: Trace, where: Placement, host_shift: dict[str, int]) -> Trace:
    """The host file's trace (loaded alone) moved to its place in the job: as
    :func:`tracelens.loading.combine.combine` (``where``), then as
    :func:`tracelens.loading.align.align_on_collectives` (per rank, by its host's shift)."""
    events, steps = place(trace.events, where), place(trace.steps, where)
    if host_shift:
        events, steps = (shift_ranks(df, events, host_shift) for df in (events, steps))
    return Trace(events=events, host_events=pl.DataFrame(schema=HOST_EVENT_SCHEMA),
                 steps=steps, devices=place(trace.devices, where), meta=trace.meta,
                 modules=place(trace.modules, where))


def profile_partial(trace: Trace, index: int, merged: MergedCollectives,
                    job: CollectiveAnalysis) -> ProfilePartial:
    """Round 2 for the ``index``-th host file (``trace``: it loaded alone), given round 1's
    merge and :func:`match_job` of it."""
    return host_profile_partial(trace, merged.placements[index], merged.host_shift,
                                job.activities, collective_types(job.activities))


def host_profile_partial(trace: Trace, where: Placement, host_shift: dict[str, int],
                         acts: pl.DataFrame, types: list[str]) -> ProfilePartial:
    """Round 2 of one host file from only what it needs of round 1 (what the engine sends a
    worker): its placement, the hosts' shifts, matched activities that include its own rows
    (others' are ignored) and the job's collective types (every host gets their columns)."""
    t = placed(trace, where, host_shift)
    mine = distinct(t.events, ["host", "rank"])
    acts = acts.join(mine, on=["host", "rank"], how="semi")
    compute = t.events.filter(pl.col("category").is_in(list(COMPUTE_CATEGORIES))
                              & pl.col("step").is_not_null())
    return ProfilePartial(
        comp=component_frame(t, acts, types),
        kernels=kernel_partial(t), active=distinct(t.events, DEVICE_KEYS),
        steps=t.steps.select("step").unique(),
        compute_steps=compute.select(*DEVICE_KEYS, "step", "category").unique(),
        devices=t.devices, modules=t.modules, notices=tuple(trace.meta.notices),
        steps_source=trace.meta.steps_source)


def profile_of_partials(parts: list[ProfilePartial], merged: MergedCollectives,
                        job: CollectiveAnalysis, path: str = "") -> RunProfile:
    """The run's :class:`RunProfile`, equal to ``profile(load(files))``."""
    active = pl.concat([p.active for p in parts]).unique()
    modules = pl.concat([p.modules for p in parts])
    devices = pl.concat([p.devices for p in parts])
    findings: dict[str, str] = {}
    if modules.height:  # the HLO lens reads modules, devices and compute (device, step)s
        lens = Trace(events=pl.concat([p.compute_steps for p in parts]),
                     host_events=pl.DataFrame(schema=HOST_EVENT_SCHEMA),
                     steps=pl.DataFrame(schema=STEP_SCHEMA),
                     devices=devices, modules=modules)
        findings = hlo_finding_texts(lens, merged.acts)
    return profile_of(
        path, pl.concat([p.comp for p in parts]).sort([*DEVICE_KEYS, "step"]),
        pl.concat([p.kernels for p in parts]), job, devices=active.height,
        steps=max(1, pl.concat([p.steps for p in parts]).unique().height),
        hosts=active["host"].n_unique(), hlo_findings=findings,
        hardware=hardware_counts(devices), warnings=_warnings(parts, merged), modules=modules)


def _warnings(parts: list[ProfilePartial], merged: MergedCollectives) -> tuple[str, ...]:
    """The run's warnings as loading its files at once gives them (as ``summarize`` on the
    engine rebuilds them), then the host files' disagreeing step sources."""
    found = merged_notices([p.notices for p in parts], unaligned=merged.unaligned)
    mixed = steps_disagree([p.steps_source for p in parts])
    return run_warnings([*found, *([mixed] if mixed else [])])


@dataclass(frozen=True)
class ProfileOptions:
    """A run's profile: its per-row filters (categories, kernel names) and the name it
    carries (its path as given)."""

    filters: Filters | None = None
    path: str = ""


def _narrowed(trace: Trace, filters: Filters | None) -> Trace:
    from tracelens.loading.filters import apply

    return apply(trace, filters) if filters is not None and filters.active() else trace


class WholeProfile:
    """A run that is one host file: it holds every participant of its collectives, so it is
    profiled whole in one round, as in one process."""

    def partial(self, trace: Trace, options: ProfileOptions) -> tuple[RunProfile, str]:
        from tracelens.analyze.runs.scaling import profile

        return profile(_narrowed(trace, options.filters), options.path), \
            trace.meta.steps_source

    def merge(self, parts: Sequence[tuple[RunProfile, str]], plan: "JobPlan"
              ) -> tuple[RunProfile, str]:
        return parts[0]

    def finish(self, part: tuple[RunProfile, str], options: ProfileOptions
               ) -> tuple[RunProfile, str]:
        return part


@dataclass(frozen=True)
class HostRound:
    """Round 2's options for one host: what it needs of round 1, and no other host's rows
    (its placement, its hosts' clock shifts, its matched collective activities, the job's
    collective types)."""

    filters: Filters | None
    where: Placement
    host_shift: dict[str, int]
    acts: pl.DataFrame
    types: tuple[str, ...]


@dataclass(frozen=True)
class RunRound:
    """Round 2's finish options: round 1's merge and match, and the run's name."""

    merged: MergedCollectives
    job: CollectiveAnalysis
    path: str


class HostProfile:
    """Round 2 of a run of several host files: each host's :class:`ProfilePartial`, then
    :func:`profile_of_partials`."""

    def partial(self, trace: Trace, options: HostRound) -> ProfilePartial:
        return host_profile_partial(_narrowed(trace, options.filters), options.where,
                                    options.host_shift, options.acts, list(options.types))

    def merge(self, parts: Sequence[ProfilePartial], plan: "JobPlan") -> list[ProfilePartial]:
        return list(parts)

    def finish(self, part: list[ProfilePartial], options: RunRound) -> RunProfile:
        return profile_of_partials(part, options.merged, options.job, options.path)


def run_profiles(paths: Sequence[Path], filters: Filters | None = None,
                 load: "LoadOptions | None" = None, engine: "EngineOptions | None" = None,
                 extra: "Sequence[Task[object]]" = ()) -> list[tuple[RunProfile, str]]:
    """Per run: (its :class:`RunProfile`, its steps source), equal to ``profile(apply(load(
    [path]), filters), str(path))``; ``filters``: categories and kernel names (the job-wide
    ones are in ``load``: each run is then loaded whole). Every run's host files are found
    first; the rounds of all runs share one cluster, sized by
    :func:`~tracelens.engine.hosts.engine_workers` for all of them. ``extra``: analyses run in each
    run's first round, from the same read of its files; their results follow the steps
    source in each tuple (``compare``'s summaries, for the findings)."""
    from tracelens.engine.cluster import engine_client
    from tracelens.engine.hosts import EngineOptions, LoadOptions, engine_workers, host_files

    load = load or LoadOptions()
    engine = engine or EngineOptions()
    if load.job_wide:
        return [run_profile(p, ([p], []), filters, load, engine, None, extra) for p in paths]
    found = [host_files([p], load.step_marker) for p in paths]
    n = engine_workers([f for _, files in found for f in files], engine.workers,
                       engine.scheduler)
    with engine_client(n, engine.scheduler) as client:
        return [run_profile(p, found_p, filters, load, EngineOptions(n, engine.scheduler),
                            client, extra) for p, found_p in zip(paths, found)]


def run_profile(path: Path, found: "tuple[list[Path], list[HostFile]]",
                filters: Filters | None, load: "LoadOptions", engine: "EngineOptions",
                client: object, extra: "Sequence[Task[object]]" = ()) -> tuple[RunProfile, str]:
    """The rounds of one run (the module doc) on ``client`` (None: in this process);
    ``extra``'s results (run in the first round) follow the steps source."""
    from tracelens.engine.hosts import run_again, run_tasks
    from tracelens.engine.protocol import Task

    if len(found[1]) == 1 or load.job_wide:  # loaded whole: one round
        results, _ = run_tasks([Task(WholeProfile(), ProfileOptions(filters, str(path))),
                                *extra], [path], load, engine, client, found=found)
        return (*results[0], *results[1:])  # type: ignore[return-value]
    results, job = run_tasks([Task(MergeCollectives(), CollectivesOptions(filters)), *extra],
                             [path], load, engine, client, found=found)
    merged: MergedCollectives = results[0]  # type: ignore[assignment]
    analysis = match_job(merged)
    from tracelens.analyze.communication.axes import hosts_frame, with_comm

    analysis.activities = with_comm(analysis.activities, merged.devices,
                                    hosts_frame(merged.job_hosts))
    types = tuple(collective_types(analysis.activities))
    per_host = []
    for i, (mine, where) in enumerate(zip(merged.host_ranks, job.placements)):
        own = set(mine["host"].to_list())
        per_host.append((i, HostRound(
            filters, where, {k: v for k, v in merged.host_shift.items() if k in own},
            analysis.activities.join(mine, on=["host", "rank"], how="semi"), types)))
    profile = run_again(HostProfile(), job, per_host, RunRound(merged, analysis, str(path)),
                        load, engine, client)
    return (profile, job.meta.steps_source, *results[1:])  # type: ignore[return-value]
