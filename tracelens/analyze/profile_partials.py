"""A run's profile (``compare``, ``scaling``) from per-host partials (issue 17): two rounds.

Round 1 is the collectives partial of every host (:mod:`collective_partials`); its reduce
matches collective instances across hosts, which gives every activity its wait for the last
arrival. Round 2 runs per host again with those matched activities: the host's component
rows per (device, step) (exclusive times are per device), its kernel sums (exact integers)
and the few facts the counts and the HLO findings need. The final reduce is
:func:`tracelens.analyze.scaling.profile_of`, as for a whole trace.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from tracelens.align import shift_ranks
from tracelens.analyze.collective_partials import MergedCollectives
from tracelens.analyze.collectives import CollectiveAnalysis, analyze_collectives
from tracelens.analyze.scaling import (RunProfile, hlo_finding_texts, collective_types,
                                       component_frame, kernel_partial, profile_of,
                                       run_warnings)
from tracelens.analyze.summary_merge import merged_warnings
from tracelens.analyze.summary_reduce import hardware_counts
from tracelens.analyze.timeline import DEVICE_KEYS
from tracelens.combine import Placement, place
from tracelens.model import COMPUTE_CATEGORIES, HOST_EVENT_SCHEMA, STEP_SCHEMA, Trace
from tracelens.notices import steps_disagree


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
    # its file's reader and loader warnings, paths and steps source (the run's warnings)
    warnings: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    steps_source: str = "none"


def match_job(merged: MergedCollectives) -> CollectiveAnalysis:
    """Round 1's reduce: the job's instances, waits and stragglers."""
    return analyze_collectives(merged.acts, merged.acts)


def placed(trace: Trace, where: Placement, host_shift: dict[str, int]) -> Trace:
    """The host file's trace (loaded alone) moved to its place in the job: as
    :func:`tracelens.combine.combine` (``where``), then as
    :func:`tracelens.align.align_on_collectives` (per rank, by its host's shift)."""
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
    mine = t.events.select("host", "rank").unique()
    acts = acts.join(mine, on=["host", "rank"], how="semi")
    compute = t.events.filter(pl.col("category").is_in(list(COMPUTE_CATEGORIES))
                              & pl.col("step").is_not_null())
    return ProfilePartial(
        comp=component_frame(t, acts, types),
        kernels=kernel_partial(t), active=t.events.select(DEVICE_KEYS).unique(),
        steps=t.steps.select("step").unique(),
        compute_steps=compute.select(*DEVICE_KEYS, "step", "category").unique(),
        devices=t.devices, modules=t.modules, warnings=tuple(trace.meta.warnings),
        paths=tuple(src["path"] for src in trace.meta.sources),
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
        hardware=hardware_counts(devices), warnings=_warnings(parts, devices, merged))


def _warnings(parts: list[ProfilePartial], devices: pl.DataFrame,
              merged: MergedCollectives) -> tuple[str, ...]:
    """The run's warnings as loading its files at once gives them (as ``summarize`` on the
    engine rebuilds them), then the host files' disagreeing step sources."""
    found = merged_warnings([p.warnings for p in parts], unaligned=merged.unaligned)
    mixed = steps_disagree([p.steps_source for p in parts])
    return run_warnings([*found, *([mixed] if mixed else [])], devices,
                        [x for p in parts for x in p.paths])
