"""Where the per-host work of a job runs: in this process, on a local Dask cluster, or on an
existing one.

A job of many hosts is a map and a reduce. The map (:func:`map_host`) reads ONE host file,
runs the loader's stages on it and returns a :class:`HostPartial`: the host's metadata, its
job-check facts and small, mergeable partials of the analyses the command asked for (never
its event frames). The reduce (:func:`reduce_hosts`) places the hosts in the job from their
metadata alone (:func:`tracelens.loading.combine.plan`: ranks, duplicate host names, wall-clock
shifts) and refuses files that are not one job, exactly as the one-process loader does; the
command then merges the partials. The in-process path runs the same map and reduce, so the
engines cannot disagree.

:func:`tracelens.engine.cluster.run_map` runs the map where :func:`engine_workers` says: in this
process, on a local Dask cluster or on the one at ``--scheduler`` (its retries, waits and
limits are that module's). :func:`run_tasks` is the one place that decides.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence, TypeVar

import polars as pl

from tracelens.loading.combine import Placement, host_clock, job_meta, plan
from tracelens.engine.cluster import run_map, scheduler_address
from tracelens.core.errors import TraceInputError
from tracelens.core.frames import distinct
from tracelens.loading.jobs import Facts, check_one_job
from tracelens.core.model import Notice, Trace, TraceMeta
from tracelens.engine.protocol import (
    Analysis,
    JobPlan,
    KeepsOnWorkers,
    Packs,
    Task,
    needs_whole_job,
)
from tracelens.loading.reading import default_workers, file_size, spawn_safe

if TYPE_CHECKING:
    from tracelens.classify import RuleSet

R = TypeVar("R")
Opt = TypeVar("Opt")
P = TypeVar("P")

LOCAL_MIN_BYTES = 64 << 20  # below this a local cluster takes longer to start than it saves

# ---------------------------------------------------------------------------------------------
# The per-host map
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class HostFile:
    """One trace file of the job and what the job check needs about where it was found."""

    path: Path
    arg: int = 0         # the index of the path argument it was found under
    in_dir: bool = False  # that argument is a directory
    # discovery notes (skipped files), given to the job's last file: warned after every
    # reader's warnings and before the stages', where the one-process loader warns them
    notes: tuple[Notice, ...] = ()


@dataclass(frozen=True)
class MapOptions:
    """What every host's map needs: the loader's options and the tasks (analyses and their
    options, :class:`tracelens.engine.protocol.Task`) whose partials it computes."""

    rules: RuleSet | None = None  # None: the built-in rules
    step_marker: str | None = None
    threads: int | None = None  # decoder threads (None: the decoder's default)
    ends: bool = False  # send the collective ends even from a host on the wall clock
    tasks: tuple[Task[Any], ...] = ()  # the analyses whose partials every host computes
    # pack each partial to travel and wait small (an analysis's optional ``pack``): False
    # only for one file mapped in this process, whose partial is merged at once
    pack: bool = True
    # the cluster outlives the job's finish (run_tasks holds it): an analysis with an
    # optional ``keep(part)`` leaves its partial on its Dask worker and sends a handle
    keep: bool = False


@dataclass
class HostPartial:
    """What one host sends back: small and typed. ``meta``: the host's metadata as its
    loader left it (sources, notices, hosts, format facts, steps source);
    ``facts``: its job-check facts; ``parts``: each task's partial, in task order;
    ``steps``/``devices``: its step numbers and device ordinals (what ``--step`` and
    ``--device`` may name); ``ends``: its collectives' instance keys and ends (aligning
    hosts without a shared wall clock, whatever the command's filters; None from a host on
    the wall clock unless asked), ``active``: its (host, rank) pairs with device activity;
    ``map_s``: seconds the map took on its worker."""

    path: str
    meta: TraceMeta
    facts: Facts | None  # None: the job was loaded whole in this process
    steps: tuple[int, ...] = ()
    devices: tuple[int, ...] = ()
    ends: pl.DataFrame | None = None
    active: pl.DataFrame = field(default_factory=pl.DataFrame)
    map_s: float = 0.0
    parts: tuple[object, ...] = ()  # one partial per task of MapOptions.tasks, in order
    # its step windows (rank, step, start_ns, end_ns): the job's headline step from them
    step_rows: pl.DataFrame | None = None


def map_host(host: HostFile, options: MapOptions) -> HostPartial:
    """Read ONE host file and return its :class:`HostPartial` (see the module doc)."""
    from tracelens.loading.loader import load_host

    t0 = time.perf_counter()
    trace, facts = load_host(host.path, host.arg, host.in_dir, options.rules,
                             options.step_marker, options.threads, host.notes)
    parts = tuple(_packed(t.analysis, t.analysis.partial(trace, t.options), options.pack,
                          options.keep) for t in options.tasks)
    from tracelens.core.instances import with_instance_keys

    ends = None
    if options.ends or not _on_wall_clock(trace.meta):
        ends = with_instance_keys(trace.events).select("host", "rank", "instance_key",
                                                       "occurrence", "end_ns")
    trace.meta.op_costs = None  # per-op cost table: the partials carry what they need of it
    return HostPartial(str(host.path), trace.meta, facts,
                       tuple(trace.steps["step"].unique().sort().to_list()),
                       tuple(trace.devices["device"].unique().sort().to_list()), ends,
                       distinct(trace.events, ["host", "rank"]).sort("rank", "host"),
                       round(time.perf_counter() - t0, 6), parts,
                       trace.steps.select("rank", "step", "start_ns", "end_ns"))


def _packed(analysis: object, part: object, pack: bool, keep: bool = False) -> object:
    """``part`` packed by its analysis's optional ``pack(part)`` (a transport form its
    ``merge`` reads back: :mod:`tracelens.analyze.summary.packed`), when ``pack``; with ``keep``,
    left on this Dask worker by the analysis's optional ``keep(part)`` (what it returns
    travels instead: a handle; off a worker it packs as ``pack`` would)."""
    if keep and isinstance(analysis, KeepsOnWorkers):
        return analysis.keep(part)
    return analysis.pack(part) if pack and isinstance(analysis, Packs) else part


def _on_wall_clock(meta: TraceMeta) -> bool:
    """A single-host file with its profile start: combine can place it on the wall clock
    (rocprofv3 processes and XSpace files without ``profile_start_time`` cannot)."""
    first = next(iter(meta.hosts.values()), None)
    return host_clock(meta) is None and first is not None and first.profile_start_ns is not None


# ---------------------------------------------------------------------------------------------
# The host-facts reduce
# ---------------------------------------------------------------------------------------------

@dataclass
class Job:
    """The hosts placed in one job: its metadata (as the one-process loader builds it, but
    for the collective-end alignment, which needs the collectives partials) and where each
    host's partials go."""

    meta: TraceMeta
    placements: list[Placement]
    hosts: list[HostPartial]
    files: list[HostFile] = field(default_factory=list)  # what each host was read from
    plan: JobPlan | None = None  # set by run_tasks (job_plan: computed once per job)
    trace: Trace | None = None  # the whole job, when it was loaded in this process


def host_files(paths: Sequence[str | Path], step_marker: str | None = None
               ) -> tuple[list[Path], list[HostFile]]:
    """(the path arguments, one HostFile per trace file behind them); the discovery notes
    travel with the last file (see :class:`HostFile`)."""
    from tracelens.loading.loader import discover_files

    args, files, origin, notes = discover_files(paths, step_marker)
    hosts = [HostFile(f, origin[f], args[origin[f]].is_dir()) for f in files]
    if hosts and notes:
        hosts[-1] = replace(hosts[-1], notes=tuple(notes))
    return args, hosts


def reduce_hosts(hosts: list[HostPartial], args: list[Path]) -> Job:
    """Check the hosts are one job, place them (ranks, host names, clock shifts) and build
    the job's metadata, in the order the loader builds it."""
    if len(hosts) > 1:
        check_one_job([h.facts for h in hosts if h.facts is not None], args)
    how = plan([h.meta for h in hosts])
    if len(hosts) == 1:  # one part keeps its own metadata, as combine() keeps it
        meta = hosts[0].meta
        meta.alignment, meta.unaligned = how.alignment, how.unaligned
    else:
        meta = job_meta([h.meta for h in hosts], how)
    placements = list(how.placements)
    format_facts = [f for h in hosts for f in h.meta.format_facts]
    if format_facts:
        meta.format_facts = format_facts
    if len(hosts) > 1:  # one host keeps the steps source its loader found
        sources = sorted({h.meta.steps_source for h in hosts})
        meta.steps_source = sources[0] if len(sources) == 1 else "+".join(sources)
    return Job(meta, placements, hosts)


def run_hosts(paths: Sequence[str | Path], options: MapOptions, workers: int | None = None,
              scheduler: str | None = None) -> Job:
    """Discover, map every host where :func:`engine_workers` says, and reduce."""
    args, files = host_files(paths, options.step_marker)
    return run_files(args, files, options, workers, scheduler)


def map_plan(files: Sequence[HostFile], options: MapOptions, workers: int | None,
             scheduler: str | None) -> tuple[int, MapOptions]:
    """(how many workers map ``files``, the options they map with): a local cluster's
    workers share this machine's cores, so each decodes with its share of them."""
    n = engine_workers(files, workers, scheduler)
    return n, map_options(options, n, scheduler)


def run_files(args: list[Path], files: list[HostFile], options: MapOptions,
              workers: int | None = None, scheduler: str | None = None,
              client: Any = None) -> Job:
    """:func:`run_hosts` of files already discovered (:func:`host_files`), on ``client``
    when given (:func:`tracelens.engine.cluster.engine_client`)."""
    import functools

    n, options = map_plan(files, options, workers, scheduler)
    if n == 1 and len(files) == 1 and client is None and not scheduler_address(scheduler):
        options = replace(options, pack=False)  # merged here at once: nothing travels
    partials = run_map(functools.partial(map_host, options=options), files, n, scheduler,
                       client=client)
    job = reduce_hosts(partials, args)
    job.files = files
    missing = [i for i, h in enumerate(job.hosts) if h.ends is None]
    if job.meta.unaligned and missing:
        # hosts on the wall clock among hosts without one (rare): the job is aligned on
        # collective ends, which those hosts did not send; they are read again for them
        again = replace(options, tasks=(), ends=True)
        found = run_map(functools.partial(map_host, options=again),
                        [files[i] for i in missing], n, scheduler, client=client)
        for i, h in zip(missing, found):
            job.hosts[i].ends = h.ends
    return job


def map_options(options: MapOptions, n: int, scheduler: str | None) -> MapOptions:
    """``options`` for a map on ``n`` workers: on a local cluster they share this machine's
    cores (the decoder's threads and polars' likewise)."""
    if n > 1 and not scheduler_address(scheduler) and options.threads is None:
        return replace(options, threads=max(1, (os.cpu_count() or 1) // n))
    return options


def engine_workers(files: Sequence[HostFile], workers: int | None,
                   scheduler: str | None) -> int:
    """How many worker processes map ``files``: ``workers`` when given (1: this process);
    else the default (:func:`default_workers`) for files together at least
    :data:`LOCAL_MIN_BYTES`, and this process for less, where starting a cluster costs more
    than it saves (the result is the same either way)."""
    if workers is not None or scheduler_address(scheduler):
        return min(len(files), workers or default_workers())
    size = sum(file_size(f.path) for f in files)
    if len(files) < 2 or size < LOCAL_MIN_BYTES or not spawn_safe():
        return 1
    return min(len(files), default_workers())



# ---------------------------------------------------------------------------------------------
# One way to run an analysis on files (tracelens.engine.protocol)
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class LoadOptions:
    """How the job is read: the classification rules (None: built-in), the step marker
    (None: the reader's own steps) and the job-wide filters, which need every host at once
    (``hosts`` kept, a ``time`` window from the job's zero: ``--host``, ``--time``); with them
    the job is loaded whole in this process (``progress``: the loader's progress callback)."""

    rules: RuleSet | None = None
    step_marker: str | None = None
    hosts: tuple[str, ...] = ()
    time: tuple[int | None, int | None] | None = None
    progress: Callable[..., object] | None = field(default=None, compare=False)

    @property
    def job_wide(self) -> bool:
        return bool(self.hosts) or self.time is not None


@dataclass(frozen=True)
class EngineOptions:
    """Where the hosts' partials are computed: ``workers`` processes (None: decided from the
    files' size, 1: this process) or the cluster at ``scheduler`` (README, "Many hosts")."""

    workers: int | None = None
    scheduler: str | None = None


def job_plan(job: Job) -> JobPlan:
    """The :class:`~tracelens.engine.protocol.JobPlan` of a reduced job: placements and, for hosts
    without a shared wall clock, their alignment on collective ends."""
    from tracelens.loading.align import host_shifts
    from tracelens.loading.combine import place

    shifts: tuple[tuple[str, int], ...] | None = None
    alignment, unaligned = job.meta.alignment, job.meta.unaligned
    if unaligned and len(job.hosts) > 1:
        ends = pl.concat([place(h.ends, w) for h, w in zip(job.hosts, job.placements)])
        active = pl.concat([place(h.active, w) for h, w in zip(job.hosts, job.placements)])
        found = host_shifts(ends, sorted(set(active["host"].to_list())))
        if found is not None:
            shifts, alignment, unaligned = tuple(sorted(found[0].items())), found[1], None
    return JobPlan(tuple(job.placements), alignment, unaligned, shifts,
                   tuple(h.meta.steps_source for h in job.hosts),
                   tuple((h, i.named) for h, i in job.meta.hosts.items()))


def run_tasks(tasks: Sequence[Task[Any]], paths: Sequence[str | Path],
              load: LoadOptions = LoadOptions(), engine: EngineOptions = EngineOptions(),
              client: Any = None, check: Callable[[Job], None] | None = None,
              found: tuple[list[Path], list[HostFile]] | None = None,
              keep_trace: bool = True) -> tuple[tuple[object, ...], Job]:
    """(each task's result, the job): every host read once, where :func:`engine_workers`
    says (on ``client`` when given: :func:`tracelens.engine.cluster.engine_client`), each task's
    partial computed on it, merged on the job's plan and finished. ``check`` sees the job
    after the map, before any merge (a command's own checks of what the hosts reported:
    ``--step``, ``--device``);
    ``found``: the files of ``paths`` already discovered (:func:`host_files`);
    ``keep_trace``: a job loaded whole keeps its trace for later rounds
    (:func:`run_again`); without, it is let go after the last partial, before that finish."""
    if load.job_wide or any(needs_whole_job(t.analysis, t.options) for t in tasks):
        job = _job_here(paths, load)
        if check is not None:
            check(job)
        assert job.trace is not None and job.plan is not None
        results = []
        for i, t in enumerate(tasks):
            part = t.analysis.partial(job.trace, t.options)
            if not keep_trace and i == len(tasks) - 1:
                job.trace = None  # (a whole trace's events, while its critical path solves)
            results.append(t.analysis.finish(t.analysis.merge([part], job.plan), t.options))
            del part
        return tuple(results), job
    args, files = found if found is not None else host_files(paths, load.step_marker)
    keep = keeps_on_workers() and any(hasattr(t.analysis, "keep") for t in tasks)
    if keep and client is None:
        n = engine_workers(files, engine.workers, engine.scheduler)
        if n > 1 or scheduler_address(engine.scheduler):
            # a cluster (local, or a client of the one at --scheduler) held open until the
            # tasks finish, so the partials they keep on its workers are there to finish
            from tracelens.engine.cluster import engine_client

            with engine_client(n, engine.scheduler) as own:
                return _map_and_finish(tasks, args, files, load, engine, own, check, True)
    return _map_and_finish(tasks, args, files, load, engine, client, check,
                           keep and client is not None)


def _map_and_finish(tasks: Sequence[Task[Any]], args: list[Path], files: list[HostFile],
                    load: LoadOptions, engine: EngineOptions, client: Any,
                    check: Callable[[Job], None] | None, keep: bool
                    ) -> tuple[tuple[object, ...], Job]:
    """:func:`run_tasks` of files on the engine: the map (``keep``: on ``client``'s cluster,
    which outlives the finish), the command's checks, the merges and finishes."""
    job = run_files(args, files, MapOptions(load.rules, load.step_marker, tasks=tuple(tasks),
                                            keep=keep),
                    engine.workers, engine.scheduler, client)
    try:
        if check is not None:
            check(job)
        where = job.plan = job_plan(job)
        results = tuple(t.analysis.finish(t.analysis.merge([h.parts[i] for h in job.hosts],
                                                           where), t.options)
                        for i, t in enumerate(tasks))
    except BaseException:
        if keep:  # what the map left on the workers goes with the failed job
            for i, t in enumerate(tasks):
                if isinstance(t.analysis, KeepsOnWorkers):
                    try:
                        t.analysis.drop([h.parts[i] for h in job.hosts])
                    except Exception:  # a cluster gone too: the failure is what to tell
                        pass
        raise
    return results, job


ENV_KEEP = "TRACELENS_CRITICAL_ROUNDS"
"""``0`` opts out of keeping partials on the workers (:attr:`MapOptions.keep`): every host's
parts come back to this process and are merged here, the critical path as one job graph."""


def keeps_on_workers() -> bool:
    """Whether a map on a Dask cluster keeps the partials that can stay on their workers
    there (the default), or sends them back (``TRACELENS_CRITICAL_ROUNDS=0``)."""
    return os.environ.get(ENV_KEEP, "").strip() != "0"


@dataclass(frozen=True)
class _Again:
    """A later round's item: one host file of a job and the task to compute on it."""

    host: HostFile
    task: Task[Any]

    @property
    def path(self) -> Path:  # what a failed worker's error names (_unwrap)
        return self.host.path


def _map_again(item: _Again, options: MapOptions) -> object:
    from tracelens.loading.loader import load_host

    host = item.host
    trace, _ = load_host(host.path, host.arg, host.in_dir, options.rules, options.step_marker,
                         options.threads, host.notes)
    return item.task.analysis.partial(trace, item.task.options)


def run_again(analysis: Analysis[Opt, P, R], job: Job, per_host: Sequence[tuple[int, Opt]],
              options: Opt, load: LoadOptions = LoadOptions(),
              engine: EngineOptions = EngineOptions(), client: Any = None) -> R:
    """A later round of a multi-round analysis: host ``i``'s file read again for each
    ``(i, its options)`` of ``per_host`` (what it needs of the earlier rounds), ``analysis``'s
    partial computed on it, then merged (on the plan of those hosts) and finished under
    ``options``. An empty ``per_host`` reads nothing (the earlier rounds sent enough: the
    report's window, :mod:`tracelens.analyze.timeline.window_parts`)."""
    import functools

    if job.trace is not None:  # the job loaded whole here: nothing to read again
        parts = [analysis.partial(job.trace, o) for _, o in per_host]
        return analysis.finish(analysis.merge(parts, job.plan or JobPlan.of_trace(job.trace)),
                               options)
    parts: list[object] = []
    if per_host:
        items = [_Again(job.files[i], Task(analysis, o)) for i, o in per_host]
        n = engine_workers([it.host for it in items], engine.workers, engine.scheduler)
        mapped = map_options(MapOptions(load.rules, load.step_marker), n, engine.scheduler)
        parts = run_map(functools.partial(_map_again, options=mapped), items, n,
                        engine.scheduler, client=client)
    where = job.plan or job_plan(job)
    sub = replace(where, placements=tuple(where.placements[i] for i, _ in per_host),
                  steps_sources=tuple(where.steps_sources[i] for i, _ in per_host))
    return analysis.finish(analysis.merge(parts, sub), options)  # type: ignore[arg-type]


def _job_here(paths: Sequence[str | Path], load: LoadOptions) -> Job:
    """The job loaded whole in this process and narrowed by the job-wide filters: one
    part, already combined and aligned by the loader."""
    from tracelens.loading.filters import Filters, apply
    from tracelens.loading.loader import load as load_job

    trace = load_job(list(paths), rules=load.rules, progress=load.progress,
                     step_marker=load.step_marker)
    try:
        trace = apply(trace, Filters(hosts=load.hosts, time=load.time))
    except ValueError as exc:
        raise TraceInputError(Path(", ".join(str(p) for p in paths)), str(exc)) from None
    host = HostPartial(", ".join(str(p) for p in paths), trace.meta, None,
                       tuple(trace.steps["step"].to_list()),
                       tuple(trace.devices["device"].to_list()),
                       step_rows=trace.steps.select("rank", "step", "start_ns", "end_ns"))
    return Job(trace.meta, [Placement(0, None, 0)], [host], plan=JobPlan.of_trace(trace),
               trace=trace)


def run(analysis: Analysis[Opt, P, R], paths: Sequence[str | Path], options: Opt,
        load: LoadOptions = LoadOptions(), engine: EngineOptions = EngineOptions()) -> R:
    """``analysis`` on the trace files behind ``paths``: the only place that decides
    whether the hosts are read in this process or on Dask (:func:`engine_workers`)."""
    results, _ = run_tasks((Task(analysis, options),), paths, load, engine, keep_trace=False)
    return results[0]  # type: ignore[return-value]
