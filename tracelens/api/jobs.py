"""The job-level analyses of the facade (:class:`tracelens.api.analysis.TraceAnalysis`) run from
paths: per host on the engine (:func:`tracelens.engine.hosts.run_tasks`), or the job loaded whole
for the job-wide filters, with the checks of what the hosts reported (``--step``,
``--device``) before any merge. The CLI reaches them only through the facade."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Iterator

from tracelens.core.errors import TraceInputError, TraceUsageError
from tracelens.api.inputs import JobInputs, check_known, joined

if TYPE_CHECKING:
    from tracelens.analyze.communication.axes import AxesOptions
    from tracelens.engine.hosts import Job, LoadOptions
    from tracelens.core.model import Notice
    from tracelens.engine.protocol import Analysis
    from tracelens.analyze.timeline.window import TimelineWindow
    from tracelens.core.model import Trace
    from tracelens.results.collectives import Collectives
    from tracelens.results.critical_path import CriticalPathResult
    from tracelens.results.hlo import HloLensResult
    from tracelens.results.summary import Summary


def job_summary(job_in: JobInputs, device: int | None, step: int | None, top: int,
                gpu: str | None, extra_specs: Any, window: bool = False
                ) -> "Summary | tuple[Summary, TimelineWindow | None]":
    """``summarize``, the per-row filters applied on each host. With ``window``: (the
    summary, ``report``'s step-timeline window: from the same read of each host, but for
    the owners of shown devices whose own guess of the window missed the job's choice,
    read again: :mod:`tracelens.analyze.timeline.window_parts`)."""
    from tracelens.analyze.summary.build import SummaryAnalysis
    from tracelens.analyze.summary.types import SummaryOptions
    from tracelens.analyze.timeline.window_parts import WindowChoice, WindowOptions, job_window
    from tracelens.engine.hosts import run_tasks
    from tracelens.engine.protocol import Task

    rows = job_in.rows()
    paths = job_in.paths
    opts = SummaryOptions(device=device, step=step, top=top, gpu=gpu, gpu_specs=extra_specs,
                          filters=rows if rows.active() else None)
    load, engine = job_in.load(), job_in.engine()
    tasks: list[Task[Any]] = [Task(SummaryAnalysis(), opts)]
    shown = WindowOptions(device, step, rows if rows.active() else None) if window else None
    if shown is not None:
        tasks.append(Task(WindowChoice(), shown))
    results, job = run_tasks(tasks, paths, load, engine, check=lambda job: check_known(
        paths, device, step, [s for h in job.hosts for s in h.steps], job.meta.steps_source,
        [d for h in job.hosts for d in h.devices]))
    summary = results[0].with_filters(job_in.active())  # type: ignore[attr-defined]
    if step is None and not rows.active():
        summary = _on_headline_step(summary, job_in, job)
    if shown is None:
        return summary  # type: ignore[no-any-return]
    chosen = results[1]
    if chosen is None:
        return summary, None
    return summary, job_window(chosen, job, shown, load, engine)


def job_step(job: "Job") -> int | None:
    """The job's headline step (:func:`tracelens.loading.step_choice.headline_step`) from every
    host's step windows, when every host has it; else None."""
    import polars as pl

    from tracelens.loading.step_choice import headline_step

    rows = [h.step_rows for h in job.hosts if h.step_rows is not None and h.step_rows.height]
    want = headline_step(pl.concat(rows)) if rows else None
    return want if want is not None and all(want in h.steps for h in job.hosts) else None


def _on_headline_step(summary: "Summary", job_in: JobInputs, job: "Job") -> "Summary":
    """``summary`` with its critical path and findings on the job's headline step: each
    host read alone picks the headline step of its own steps, which for hosts whose spans
    order differently is not the job's; then the path is solved again on the job's step
    (the hosts read once more)."""
    from tracelens.analyze.consistency import gate_findings
    from tracelens.analyze.critical.path import CriticalPathOptions, PathAndFacts
    from tracelens.analyze.summary.build import FINDINGS_TOP, with_critical

    want = job_step(job)
    have = summary.critical_path.step if summary.critical_path is not None else None
    if want is None or have == want or len(job.hosts) < 2:
        return summary
    (res, facts), _ = run_noticed(PathAndFacts(), CriticalPathOptions(
        step=want, top=FINDINGS_TOP, activities="longest", consistency=True), job_in)
    # the gate again, on the facts of the job's step (those taken were of each host's own)
    summary = replace(with_critical(summary, res), consistency=None)
    return gate_findings(summary, res, facts) if res.paths else summary


def job_window(job_in: JobInputs, opts: Any) -> "TimelineWindow | None":
    """The timeline window alone (:meth:`TraceAnalysis.window`), ``--step``/``--device``
    checked as ``report`` checks them."""
    from tracelens.analyze.timeline.window_parts import WindowChoice, job_window as window_of
    from tracelens.engine.hosts import run_tasks
    from tracelens.engine.protocol import Task

    paths = job_in.paths
    load, engine = job_in.load(), job_in.engine()
    (chosen,), job = run_tasks([Task(WindowChoice(), opts)], paths, load, engine,
                               check=lambda job: check_known(
        paths, opts.device, opts.step, [s for h in job.hosts for s in h.steps],
        job.meta.steps_source, [d for h in job.hosts for d in h.devices]))
    if chosen is None:
        return None
    return window_of(chosen, job, opts, load, engine)


def job_notices(job: "Job") -> "tuple[Notice, ...]":
    """What the readers and the loader said of the job's files, as ``summarize`` gathers
    them: each host file's notices once, the clipped overlaps summed, the hosts left
    unaligned (by the job's plan: hosts without a shared clock aligned on their collectives'
    ends are not)."""
    from tracelens.analyze.summary.merge import merged_notices

    unaligned = job.plan.unaligned if job.plan is not None else job.meta.unaligned
    return merged_notices([h.meta.notices for h in job.hosts], unaligned)


def run_noticed(analysis: "Analysis[Any, Any, Any]", options: Any, job_in: JobInputs,
                load: "LoadOptions | None" = None) -> "tuple[Any, tuple[Notice, ...]]":
    """(``analysis`` on the job's files on the engine, :func:`job_notices`): a command's
    result and what the readers said of the files it read (``load``: the loader's options,
    default ``job_in``'s)."""
    from tracelens.engine.hosts import run_tasks
    from tracelens.engine.protocol import Task

    results, job = run_tasks((Task(analysis, options),), job_in.paths, load or job_in.load(),
                             job_in.engine(), keep_trace=False)
    return results[0], job_notices(job)


def job_collectives(job_in: JobInputs, top: int, axes: "AxesOptions | None" = None
                    ) -> "Collectives":
    """``collectives``: the typed result with its mesh axes, the filters in force and the
    readers' warnings."""
    from tracelens.analyze.communication.axes import AxesOptions
    from tracelens.analyze.communication.collective_parts import (
        CollectivesAnalysis,
        CollectivesOptions,
    )
    from tracelens.core.notices import COSTS, run_warnings

    with mesh_errors():
        res, notices = run_noticed(CollectivesAnalysis(), CollectivesOptions(
            job_in.rows(), top, axes or AxesOptions()), job_in)
    return replace(res, filters=job_in.active() or None,
                   warnings=run_warnings(notices, skip=COSTS))


@contextmanager
def mesh_errors() -> Iterator[None]:
    """A ``mesh`` that does not hold the job's devices: a usage error about ``--mesh``."""
    from tracelens.analyze.communication.axes import MeshMismatch

    try:
        yield
    except MeshMismatch as exc:
        raise TraceUsageError(str(exc), "--mesh") from None


def hlo_lens(job_in: JobInputs, program: str | None, devices_per_host: int | None
             ) -> "HloLensResult":
    """``hlo`` of one path: an XLA dump (a file, or a ``--xla_dump_to`` folder of optimized
    modules) read statically, else a trace per host on the engine."""
    from tracelens.analyze.compute.hlo_findings import lens_dump, require_programs
    from tracelens.loading.formats import (XSPACE_SUFFIXES, find_hlo_dumps, is_hlo_dump_file,
                                   read_hlo_dump)
    from tracelens.hlo.lens import HostMap

    if len(job_in.paths) != 1:
        raise TraceUsageError("hlo reads one path (a trace, a folder or an XLA dump)")
    path = job_in.paths[0]
    hosts = HostMap(host_of=lambda d: f"host{d // devices_per_host}") \
        if devices_per_host else HostMap()
    dumps = find_hlo_dumps(path) if path.is_dir() and not any(
        p.name.endswith(XSPACE_SUFFIXES) for p in path.rglob("*")) else []
    if path.is_file() and is_hlo_dump_file(path):
        result = lens_dump([read_hlo_dump(path)], program, hosts)
    elif dumps:  # an XLA dump directory
        result = lens_dump([read_hlo_dump(p) for p in dumps], program, hosts)
    else:  # per host on the engine (README, "Many hosts")
        from tracelens.analyze.compute.hlo_findings import LensAnalysis, LensOptions
        from tracelens.engine.hosts import EngineOptions, LoadOptions, run

        result = run(LensAnalysis(), [path],
                     LensOptions(program, hosts if devices_per_host else None),
                     LoadOptions(job_in.rules), EngineOptions(job_in.workers,
                                                              job_in.scheduler))
    require_programs(result, path, program)
    return result


def critical_path(job_in: JobInputs, step: int | None, window: str | None,
                  time: tuple[int | None, int | None] | None, rank: int | None, top: int,
                  activities: str, trace: "Trace | None" = None) -> "CriticalPathResult":
    """``critical-path``: the window (a step, the k-th match of a host annotation, or a
    stretch of time), the paths per device and the what-ifs; a rank with no device activity
    is a usage error, a job without a path an input error. ``trace``: the job already
    loaded (else it is read per host on the engine)."""
    from tracelens.analyze.critical.graph import window_pattern
    from tracelens.analyze.critical.path import CriticalPath, CriticalPathOptions
    from tracelens.engine.hosts import LoadOptions
    from tracelens.core.notices import run_warnings

    if window is not None:
        window_pattern(window)  # a bad regex fails before any file is read
    opts = CriticalPathOptions(step=step, window=window, rank=rank, top=top, time=time,
                               activities=activities,  # type: ignore[arg-type]
                               consistency=True)
    if trace is not None:
        from tracelens.engine.protocol import run_trace
        res, notices = run_trace(CriticalPath(), trace, opts), tuple(trace.meta.notices)
    else:
        from tracelens.engine.hosts import run_tasks
        from tracelens.engine.protocol import Task

        load = LoadOptions(job_in.rules, job_in.step_marker)
        (res,), job = run_tasks((Task(CriticalPath(), opts),), job_in.paths, load,
                                job_in.engine(), keep_trace=False)
        notices = job_notices(job)
        want = job_step(job) if step is None and window is None and time is None else None
        have = {p.step for p in res.paths}
        if want is not None and have != {want} and len(job.hosts) > 1:
            # each host picked its own median step: solved again on the job's (module doc)
            res = run_noticed(CriticalPath(), replace(opts, step=want), job_in, load)[0]
    if rank is not None and not res.paths and not res.notes:
        raise TraceUsageError(f"--rank {rank}: no such rank with device activity")
    if not res.paths:
        why = res.notes[0] if res.notes else "no device activity"
        names = job_in.paths or [str(s["path"]) for s in trace.meta.sources]  # type: ignore
        raise TraceInputError(joined(names), f"no critical path: {why}")
    return replace(res, warnings=run_warnings(notices))
