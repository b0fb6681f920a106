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
from typing import Any, Sequence

import polars as pl

from tracelens.analyze.profile_partials import (ProfilePartial, host_profile_partial,
                                                match_job, profile_of_partials)
from tracelens.analyze.axes import hosts_of, with_comm
from tracelens.analyze.scaling import RunProfile, collective_types
from tracelens.combine import Placement, place
from tracelens.engine import (HostFile, MapOptions, engine_client, engine_workers, host_files,
                              map_plan, run_files, run_map)
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
    return host_profile_partial(_read(task.host, options), task.where, task.host_shift,
                                task.acts, list(task.types))


def map_run(host: HostFile, options: MapOptions) -> tuple[RunProfile, str]:
    """A run that is one host file in one round: it holds every participant of its
    collectives, so the file is read once and profiled whole, as in one process."""
    from tracelens.analyze.scaling import profile

    trace = _read(host, options)
    return profile(trace, str(options.param("path"))), trace.meta.steps_source


def _read(host: HostFile, options: MapOptions) -> Any:
    """The host file read and staged on its own, then narrowed by the per-row filters."""
    from tracelens.filters import apply
    from tracelens.loader import load_host

    trace, _ = load_host(host.path, host.arg, host.in_dir, options.rules, options.step_marker,
                         options.threads, host.notes)
    filters = options.param("filters")
    return apply(trace, filters) if filters is not None and filters.active() else trace


def run_profiles(paths: Sequence[Path], filters: Any = None, rules: Any = None,
                 step_marker: str | None = None, workers: int | None = None,
                 scheduler: str | None = None) -> list[tuple[RunProfile, str]]:
    """Per run: (its :class:`RunProfile`, its steps source), equal to ``profile(apply(load(
    [path]), filters), str(path))``; ``filters``: a :class:`tracelens.filters.Filters` of
    categories and kernel names only (a host filter and a time window are job-wide). Every
    run's host files are found first; the rounds of all runs share one cluster, sized by
    :func:`engine_workers` for all of them."""
    found = [host_files([p], step_marker) for p in paths]
    n = engine_workers([f for _, files in found for f in files], workers, scheduler)
    with engine_client(n, scheduler) as client:
        return [_run_profile(p, args, files, filters, rules, step_marker, n, scheduler, client)
                for p, (args, files) in zip(paths, found)]


def _run_profile(path: Path, args: list[Path], files: list[HostFile], filters: Any,
                 rules: Any, step_marker: str | None, n: int, scheduler: str | None,
                 client: Any) -> tuple[RunProfile, str]:
    """The two rounds of one run (the module doc) on ``client`` (None: in this process);
    one round for a run of one file (:func:`map_run`)."""
    options = MapOptions(rules, step_marker, ("collectives",), (("filters", filters),))
    if len(files) == 1:
        m, whole = map_plan(files, MapOptions(rules, step_marker, params=(
            ("filters", filters), ("path", path))), n, scheduler)
        return run_map(functools.partial(map_run, options=whole), files, m, scheduler,
                       client=client)[0]
    job = run_files(args, files, options, n, scheduler, client)
    merged = merged_of(job)
    analysis = match_job(merged)
    analysis.activities = with_comm(analysis.activities, merged.devices, hosts_of(job.meta))
    types = tuple(collective_types(analysis.activities))
    tasks = []
    for f, h, where in zip(files, job.hosts, job.placements):
        mine = place(h.partials["collectives"].hosts, where)
        own = set(mine["host"].to_list())
        tasks.append(ProfileTask(
            f, where, {k: v for k, v in merged.host_shift.items() if k in own},
            analysis.activities.join(mine, on=["host", "rank"], how="semi"), types))
    m, again = map_plan(files, MapOptions(rules, step_marker, params=options.params), n,
                        scheduler)
    parts = run_map(functools.partial(map_profile, options=again), tasks, m, scheduler,
                    client=client)
    return profile_of_partials(parts, merged, analysis, str(path)), job.meta.steps_source
