"""A run's profile (``compare``, ``scaling``) on the engine (:mod:`tracelens.engine`): two
rounds of per-host maps, as :mod:`tracelens.analyze.profile_partials` describes.

Round 1 maps every host file to its collectives partial (the ``collectives`` command's map);
its reduce places the hosts, aligns them and matches collective instances across hosts (a
device's wait for the last arrival needs the other hosts). Round 2 reads every host file a
second time and maps it to its profile partial, given only what that host needs of round 1:
its placement, its hosts' clock shifts, its own matched collective rows and the job's
collective types. The final reduce is :func:`profile_of_partials`. The per-row filters
(category, kernel) are applied on each host in both rounds, after the host's reading, as the
one-process path applies them after loading the job.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from tracelens.analyze.profile_partials import (ProfilePartial, host_profile_partial,
                                                match_job, profile_of_partials)
from tracelens.analyze.scaling import RunProfile, collective_types
from tracelens.combine import Placement, place
from tracelens.engine import HostFile, MapOptions, host_files, map_plan, run_files, run_map
from tracelens.engine_jobs import merged_of


@dataclass(frozen=True)
class ProfileTask:
    """Round 2's item for one host file: what it needs of round 1, and no other host's rows."""

    host: HostFile
    where: Placement
    host_shift: dict[str, int]  # ns per (placed) host name, its own hosts only
    acts: pl.DataFrame  # its matched collective activities (with their waits)
    types: tuple[str, ...]  # the job's collective types, in component order

    @property
    def path(self) -> Path:  # what a failure names (engine._unwrap)
        return self.host.path


def map_profile(task: ProfileTask, options: MapOptions) -> ProfilePartial:
    """Round 2 on one host: read its file again, filter its rows, its profile partial."""
    from tracelens.filters import apply
    from tracelens.loader import load_host

    h = task.host
    trace, _ = load_host(h.path, h.arg, h.in_dir, options.rules, options.step_marker,
                         options.threads, h.notes)
    filters = options.param("filters")
    if filters is not None and filters.active():
        trace = apply(trace, filters)
    return host_profile_partial(trace, task.where, task.host_shift, task.acts,
                                list(task.types))


def run_profile(path: Path, filters: Any = None, rules: Any = None,
                step_marker: str | None = None, workers: int | None = None,
                scheduler: str | None = None) -> tuple[RunProfile, str]:
    """(the run's :class:`RunProfile`, its steps source), equal to ``profile(apply(load(
    [path]), filters), str(path))``; ``filters``: a :class:`tracelens.filters.Filters` of
    categories and kernel names only (a host filter and a time window are job-wide)."""
    args, files = host_files([path], step_marker)
    options = MapOptions(rules, step_marker, ("collectives",), (("filters", filters),))
    job = run_files(args, files, options, workers, scheduler)
    merged = merged_of(job)
    analysis = match_job(merged)
    types = tuple(collective_types(analysis.activities))
    tasks = []
    for f, h, where in zip(files, job.hosts, job.placements):
        mine = place(h.partials["collectives"].hosts, where)
        own = set(mine["host"].to_list())
        tasks.append(ProfileTask(
            f, where, {k: v for k, v in merged.host_shift.items() if k in own},
            analysis.activities.join(mine, on=["host", "rank"], how="semi"), types))
    n, again = map_plan(files, MapOptions(rules, step_marker, params=options.params), workers,
                        scheduler)
    parts = run_map(functools.partial(map_profile, options=again), tasks, n, scheduler)
    return profile_of_partials(parts, merged, analysis, str(path)), job.meta.steps_source
