"""The Python facade: one :class:`TraceAnalysis` per loaded trace, in the style of HTA's
``TraceAnalysis``, whose answers are each computed once (cached) and typed: polars frames
for tables, frozen dataclasses for the summary, collectives, comparison and scaling.

The CLI runs the same functions; this is the short way to them from a notebook. (The
functions live in :mod:`tracelens.analyze`, whose submodules are named ``timeline``,
``roofline``, ``collectives``, ... so the facade is a class rather than functions of that
package with the same names.)
"""

from __future__ import annotations

from dataclasses import replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence, TypeVar

import polars as pl

from tracelens.core.errors import TraceInputError, TraceUsageError
from tracelens.api.inputs import (JobInputs, check_device_and_step, check_output_path, joined,
                              load_gpu_specs, mesh_axes, time_window)
from tracelens.api.frames import FrameAnswers
from tracelens.core.model import Trace

if TYPE_CHECKING:
    from tracelens.analyze.summary.build import SummaryAnalysis
    from tracelens.analyze.summary.types import SummaryOptions
    from tracelens.analyze.runs.scaling import RunProfile
    from tracelens.analyze.timeline.window import TimelineWindow
    from tracelens.classify import RuleSet
    from tracelens.engine.protocol import Analysis
    from tracelens.results.axes import Axes
    from tracelens.results.collectives import Collectives
    from tracelens.results.critical_path import CriticalPathResult
    from tracelens.results.hlo import HloLensResult
    from tracelens.results.memory import MemoryChange, MemoryResult
    from tracelens.results.runs import Comparison, Scaling
    from tracelens.results.summary import Summary
    from tracelens.results.xcheck import XCheck

Opt = TypeVar("Opt")
P = TypeVar("P")
R = TypeVar("R")
Window = tuple[int | None, int | None]


class TraceAnalysis(FrameAnswers):
    """Answers about one job, each computed on first use and kept.

    ``source``: trace file(s) or folder(s) (what ``tracelens summarize`` takes), or a
    :class:`~tracelens.core.model.Trace` already loaded. From paths, the job-level answers
    (:attr:`summary`, :attr:`collectives`, :attr:`hlo`, :attr:`profile`, :meth:`window`,
    :meth:`critical_path`, ...) run per host on the engine, in this process or on Dask
    (``workers``, ``scheduler``, as ``--workers``/``--scheduler``: a 128-host job from a
    notebook never holds every host's events at once); the frame answers (:attr:`timeline`,
    :attr:`kernels`, ...) need the events and load the whole job here on first use
    (:attr:`trace`). Each method is one ``tracelens`` command (the CLI calls it and renders
    what it returns) and checks its arguments as the command does: a bad one raises
    :class:`~tracelens.core.errors.TraceInputError` or
    :class:`~tracelens.core.errors.TraceUsageError` with the command's message.

    >>> import tracelens
    >>> a = TraceAnalysis("sample_traces/mi300x_8gpu_llama_step.xplane.pb")
    >>> a.timeline.select("device", "busy_ns", "exposed_comm_ns").head(2).rows()
    [(0, 16674187, 6320112), (1, 16659881, 6309093)]
    >>> a.timeline is a.timeline   # computed once
    True
    >>> a.summary.headline.active_devices == TraceAnalysis(a.trace).summary.headline.active_devices
    True
    """

    def __init__(self, source: "Trace | str | Path | Sequence[str | Path]",
                 gpu: str | None = None, gpu_specs: str | Path | None = None, *,
                 rules: "RuleSet | str | Path | Sequence[str | Path] | None" = None,
                 step_marker: str | None = None, workers: int | None = None,
                 scheduler: str | None = None, categories: Sequence[str] = (),
                 kernel: str | None = None, hosts: Sequence[str] = (),
                 time: "str | Window | None" = None,
                 progress: Callable[..., object] | None = None) -> None:
        """``gpu`` forces one GPU spec for every device, ``gpu_specs`` adds specs from a
        TOML/JSON file (as ``--gpu`` and ``--gpu-specs``); ``rules``: classification rules
        (a :class:`~tracelens.classify.RuleSet` or TOML files, as ``--rules``);
        ``step_marker``: as ``--step-marker``; ``categories``, ``kernel``, ``hosts``,
        ``time`` (``"START:END"`` or ns): the filters of ``--category``, ``--kernel``,
        ``--host``, ``--time``; ``progress``: the loader's progress callback. Every argument
        is checked here, before any file is read."""
        self._loaded: Trace | None = source if isinstance(source, Trace) else None
        paths: tuple[str | Path, ...] = () if self._loaded is not None else (
            (source,) if isinstance(source, (str, Path)) else tuple(source))
        self._paths = paths
        self._in = JobInputs(tuple(Path(p) for p in paths), rules, step_marker,
                             tuple(categories), kernel, tuple(hosts), time, workers,
                             scheduler, progress).checked()
        self._gpu = gpu
        self._gpu_specs = gpu_specs
        self._extra_specs = load_gpu_specs(gpu, gpu_specs)
        self._rules = self._in.rules
        self._step_marker = step_marker

    def __repr__(self) -> str:
        """What the analysis reads and with which filters, on one line."""
        what = ", ".join(map(str, self._paths)) if self._paths else "a loaded trace"
        active = self._in.active()
        return f"TraceAnalysis({what}" + (f", filters={active}" if active else "") + ")"

    @property
    def _filtered(self) -> bool:
        return bool(self._in.active())

    @property
    def _here(self) -> bool:
        """Whether the answers come from the trace loaded here (given loaded, or already
        loaded without filters) rather than per host on the engine."""
        return not self._paths or ("trace" in self.__dict__ and not self._filtered)

    @property
    def _names(self) -> tuple[str | Path, ...]:
        """The inputs as errors name them."""
        if self._paths:
            return self._paths
        return tuple(str(s["path"]) for s in self.trace.meta.sources)

    @cached_property
    def trace(self) -> Trace:
        """The whole job loaded in this process, narrowed by the filters (the frame
        answers read its events)."""
        trace = self._loaded
        if trace is None:
            from tracelens.loading.loader import load
            trace = load(list(self._paths), rules=self._rules, step_marker=self._step_marker,
                         progress=self._in.progress)
        if not self._filtered:
            return trace
        from tracelens.loading.filters import apply
        try:
            return apply(trace, self._in.filters())
        except ValueError as exc:
            raise TraceInputError(joined(self._names), str(exc)) from None

    def _run(self, analysis: "Analysis[Opt, P, R]", options: Opt) -> R:
        """``analysis`` on the engine from the paths, or on the loaded trace."""
        if self._here:
            from tracelens.engine.protocol import run_trace
            return run_trace(analysis, self.trace, options)
        from tracelens.engine.hosts import run
        return run(analysis, self._in.paths, options, self._in.load(), self._in.engine())

    # -- the commands: each is one ``tracelens`` command's analysis --------------------------

    def summarize(self, device: int | None = None, step: int | None = None, top: int = 10,
                  memory: bool = False) -> Summary:
        """``tracelens summarize``: only ``device`` (every host) and ``step``'s window when
        given (each must be in the trace), ``top`` kernels; ``memory`` (``--all``): with the
        ``memory`` section and its finding where the files record allocator events (a search
        of every file's bytes for them, so only when asked).

        >>> a = TraceAnalysis("sample_traces/mi300x_8gpu_llama_step.xplane.pb")
        >>> a.summarize(step=999)
        Traceback (most recent call last):
        tracelens.core.errors.TraceInputError: ...: step 999 is not in the trace ...
        """
        return self._summary(device, step, top, False, memory)  # type: ignore[return-value]

    def _summary_task(self) -> "tuple[SummaryAnalysis, SummaryOptions]":
        """The analysis and options of :attr:`summary` (its defaults), for an engine run
        that reads the files for another analysis too."""
        from tracelens.analyze.summary.build import SummaryAnalysis
        from tracelens.analyze.summary.types import SummaryOptions
        rows = self._in.rows()
        return SummaryAnalysis(), SummaryOptions(
            top=10, gpu=self._gpu, gpu_specs=self._extra_specs,
            filters=rows if rows.active() else None)

    def _summary(self, device: int | None, step: int | None, top: int, window: bool,
                 memory: bool = False) -> "Summary | tuple[Summary, TimelineWindow | None]":
        if not self._here:
            from tracelens.api.jobs import job_summary
            got = job_summary(self._in, device, step, top, self._gpu, self._extra_specs,
                              window=window)
            if not memory:
                return got
            if isinstance(got, tuple):
                return self._with_memory(got[0]), got[1]
            return self._with_memory(got)
        from tracelens.analyze.summary.build import SummaryAnalysis
        from tracelens.analyze.summary.types import SummaryOptions
        check_device_and_step(self.trace, self._names, device, step)
        rows = self._in.rows()
        res = self._run(SummaryAnalysis(), SummaryOptions(
            device=device, step=step, top=top, gpu=self._gpu, gpu_specs=self._extra_specs,
            filters=rows if rows.active() else None)).with_filters(self._in.active())
        res = self._with_memory(res) if memory else res
        return (res, self.window(step, device)) if window else res

    def _with_memory(self, res: Summary) -> Summary:
        """``res`` with its ``memory`` section and the memory findings, where the files
        record allocator events (``memory``'s answer over the summary's steps)."""
        from tracelens.analyze.memory import analyze, read_memory, summary_frames

        mem, _ = read_memory(self._memory_paths())
        if mem.is_empty():
            return res
        steps, devices = summary_frames(res.devices)
        several = res.headline.hosts > 1
        # several hosts: the job's steps are on one clock the hosts were shifted onto, each
        # host's allocator events on its own: no step is named (``memory`` names them)
        m = analyze(mem, None if several else steps, devices, top=5)
        if several:
            m = replace(m, warnings=("memory: several hosts, so no peak is placed in a step "
                                     "here (tracelens memory places each host's)",))
        return replace(res, memory=m, findings=replace(
            res.findings, items=res.findings.items + m.findings))

    @cached_property
    def summary(self) -> Summary:
        """:meth:`summarize` with its defaults: the typed result behind ``tracelens
        summarize`` (its JSON form is :func:`tracelens.to_json`: what ``tracelens summarize
        --format json`` prints).

        >>> import tracelens
        >>> a = TraceAnalysis(tracelens.load("sample_traces/mi300x_8gpu_llama_step.xplane.pb"))
        >>> s = a.summary
        >>> s.headline.active_devices, s.headline.steps
        (8, 3)
        """
        return self.summarize()

    def report(self, output: str | Path, title: str | None = None, device: int | None = None,
               step: int | None = None, top: int = 100, memory: bool = False) -> int:
        """``tracelens report``: the self-contained HTML report written to ``output`` (checked
        before any input is read); returns its size in bytes. ``memory`` (``--memory``): with
        the memory section where the files record allocator events (a second pass over
        them, so only when asked)."""
        from reports.html.page import render_html

        output = Path(output)
        check_output_path(output, self._paths, "-o")
        summary, window = self._summary(device, step, top, True,  # type: ignore[misc]
                                        memory)
        html = render_html(summary, title=title, window=window)
        try:
            output.write_text(html, encoding="utf-8")
        except OSError as exc:
            raise TraceInputError(output, f"cannot write the report: {exc.strerror or exc}") \
                from None
        return len(html.encode())

    def collectives_report(self, top: int = 10, mesh: "str | tuple[tuple[str, int], ...] | "
                           "None" = None, nic_gb_per_s: float | None = None,
                           ranks_per_host: int | None = None) -> Collectives:
        """``tracelens collectives``: per-type time, exposure and busbw, per mesh axis
        (``mesh``, e.g. ``"dp=8,tp=8"``; default inferred), the ``top`` worst instances,
        stragglers."""
        from dataclasses import replace

        from tracelens.api.jobs import job_collectives, mesh_errors
        from tracelens.analyze.communication.axes import AxesOptions
        axes = AxesOptions(mesh_axes(mesh), nic_gb_per_s, ranks_per_host)
        if not self._here:
            return job_collectives(self._in, top, axes)
        from tracelens.analyze.communication.collective_parts import (
            CollectivesAnalysis,
            CollectivesOptions,
        )
        from tracelens.core.notices import COSTS, run_warnings
        with mesh_errors():
            res = self._run(CollectivesAnalysis(), CollectivesOptions(self._in.rows(), top, axes))
        return replace(res, filters=self._in.active() or None,
                       warnings=run_warnings(self.trace.meta.notices, skip=COSTS))

    @cached_property
    def collectives(self) -> Collectives:
        """:meth:`collectives_report` with its defaults: collectives per type and op (time,
        exposed time, busbw), the instances of largest arrival skew and the devices others
        waited for.

        >>> import tracelens
        >>> a = TraceAnalysis(tracelens.load("sample_traces/mi355x_2x8gpu_straggler"))
        >>> s = a.collectives.stragglers[0]   # the planted straggler: host 1, GPU 3
        >>> (s.host, s.device, s.times_last > 0)
        ('mi355x-node1', 3, True)
        """
        return self.collectives_report()

    def _memory_paths(self) -> list[Path]:
        """The files whose allocator events ``memory`` reads: the paths, or the loaded
        trace's sources."""
        return [Path(p) for p in self._paths] or [Path(s["path"])
                                                  for s in self.trace.meta.sources]

    def memory_report(self, top: int = 10) -> "MemoryResult":
        """``tracelens memory``: per allocator (a device's memory, or the host's) its
        capacity, peak bytes in use and when (time, step, the op that allocated last), what
        is live at the peak (the ``top`` largest groups), the peak per step; one line per
        file without allocator events (docs/memory.md)."""
        from tracelens.analyze.memory import analyze, merged, read_memory_files
        from tracelens.results.memory import MemoryResult

        parts, without = read_memory_files(self._memory_paths())
        if not parts:
            _ = self.trace  # no allocator event: still a readable job, or the input error
            return MemoryResult(devices=(), without=tuple(without))
        if self._loaded is not None or (len(parts) == 1 and not without):
            t = self.trace  # the job is that one file (or a trace given loaded)
            mem = pl.concat([m for _, m in parts])
            return merged([analyze(mem, t.steps, t.devices, (), top, start_ns=_first_ns(t))],
                          without)
        # several files: each host's events are on its own clock (the job's shifts hosts
        # onto one), so each file's own steps, one file loaded at a time
        from tracelens.loading.loader import load
        out = []
        for path, mem in parts:
            t = load([path], rules=self._rules, step_marker=self._step_marker)
            out.append(analyze(mem, t.steps, t.devices, (), top, start_ns=_first_ns(t)))
            del t
        return merged(out, without)

    def hlo_lens(self, program: str | None = None, top: int | None = 20,
                 devices_per_host: int | None = None) -> HloLensResult:
        """``tracelens hlo``: each compiled program's collectives and the ``top`` findings
        (None: all), costed with their measured exposed time per step; the path may also be
        an XLA dump (a file or a ``--xla_dump_to`` folder). ``program``: one program (name
        or id); ``devices_per_host``: replica-group ids are host-major, that many per
        host."""
        if self._here:
            from tracelens.analyze.compute.hlo_findings import (LensAnalysis, LensOptions,
                                                        require_programs)
            from tracelens.hlo.lens import HostMap
            hosts = HostMap(host_of=lambda d: f"host{d // devices_per_host}") \
                if devices_per_host else None
            res = self._run(LensAnalysis(), LensOptions(program, hosts))
            require_programs(res, joined(self._names), program)
        else:
            from tracelens.api.jobs import hlo_lens
            res = hlo_lens(self._in, program, devices_per_host)
        return res if top is None else res.top(top)

    @cached_property
    def hlo(self) -> HloLensResult:
        """The HLO lens (:meth:`hlo_lens`, every finding).

        >>> a = TraceAnalysis("sample_traces/mi300x_8gpu_llama_step.xplane.pb")
        >>> len(a.hlo.programs) > 0
        True
        """
        return self.hlo_lens(top=None)

    def window(self, step: int | None = None, device: int | None = None,
               max_devices: int = 4, max_events: int = 1500) -> "TimelineWindow | None":
        """The stretch of the timeline ``report`` draws: ``step``'s window (default: the
        median step), the busiest ``max_devices`` devices (or ``device`` on every host),
        at most ``max_events`` activities; None without device activity. ``step`` and
        ``device`` must be in the trace (as ``report --step``).

        >>> a = TraceAnalysis("sample_traces/mi300x_8gpu_llama_step.xplane.pb")
        >>> w = a.window()
        >>> w.end_ns > w.start_ns and w.events.height > 0
        True
        """
        from tracelens.analyze.timeline.window_parts import WindowOptions, window_of_trace
        rows = self._in.rows()
        opts = WindowOptions(device, step, rows if rows.active() else None, max_devices,
                             max_events)
        if self._here:
            check_device_and_step(self.trace, self._names, device, step)
            return window_of_trace(self.trace, opts)
        from tracelens.api.jobs import job_window
        return job_window(self._in, opts)

    def critical_path(self, step: int | None = None, window: str | None = None,
                      time: "str | Window | None" = None, rank: int | None = None,
                      top: int = 10, activities: str = "all") -> CriticalPathResult:
        """``tracelens critical-path``: what sets the step time, per device, and what each
        fix saves. The window: ``step`` (default: the middle step), the k-th host
        annotation matching ``window`` (``"REGEX#k"``) or a stretch of ``time``
        (``"START:END"``, wins); ``rank``: only that rank; ``top`` what-ifs; ``activities``:
        which paths list their activities (``"all"``, ``"longest"``, ``"none"``)."""
        if self._filtered:
            raise TraceUsageError("the critical path takes no filters (its window is a step, "
                                  "an annotation or a stretch of time)")
        if activities not in ("all", "longest", "none"):
            raise TraceUsageError(f"activities={activities!r}: 'all', 'longest' or 'none'")
        from tracelens.api.jobs import critical_path
        return critical_path(self._in, step, window, time_window(time), rank, top, activities,
                             self.trace if self._here else None)

    def axes(self, mesh: "str | tuple[tuple[str, int], ...] | None" = None,
             nic_gb_per_s: float | None = None, ranks_per_host: int | None = None) -> Axes:
        """Communication per mesh axis, all-to-all balance and pipeline bubbles (what
        ``tracelens axes`` prints); ``mesh``: e.g. ``"fsdp=4,tp=4"`` (default: inferred).

        >>> import tracelens
        >>> a = TraceAnalysis(tracelens.load("sample_traces/mi355x_2x8gpu_straggler"))
        >>> [(x.axis, x.size) for x in a.axes().axes]
        [('axis0', 16)]
        """
        from tracelens.api.jobs import mesh_errors, run_noticed
        from tracelens.analyze.communication.axes import AxesAnalysis, AxesOptions
        from tracelens.core.notices import COSTS, run_warnings
        opts = AxesOptions(mesh_axes(mesh), nic_gb_per_s, ranks_per_host)
        with mesh_errors():
            if self._here:
                from tracelens.engine.protocol import run_trace
                res, notices = run_trace(AxesAnalysis(), self.trace, opts), \
                    tuple(self.trace.meta.notices)
            else:
                res, notices = run_noticed(AxesAnalysis(), opts, self._in)
        return replace(res, warnings=run_warnings(notices, skip=COSTS))

    def table(self, name: str = "events") -> pl.DataFrame:
        """One table of ``tracelens export`` (``events``, ``kernels``, ``steps``,
        ``devices``, ``collectives``, ``host_events``) as a frame."""
        from tracelens.analyze.timeline.tables import TABLES, build_table
        if name not in TABLES:
            raise TraceUsageError(f"{name!r} is not one of {', '.join(TABLES)}", "--table")
        return build_table(self.trace, name)

    def export(self, output: str | Path | None = None, table: str = "events",
               perfetto: str | Path | None = None) -> list[tuple[Path, str]]:
        """``tracelens export``: ``table`` written to ``output`` (.parquet, .csv, .jsonl)
        and/or a Chrome/Perfetto trace-event file to ``perfetto`` (.json, .json.gz); returns
        (file, what it holds) for each file written. Both paths are checked first."""
        from tracelens.version import __version__
        from reports.files.export import format_of, write_table

        if output is None and perfetto is None:
            raise TraceUsageError("give -o FILE (a table) and/or --perfetto FILE (a timeline)")
        output = None if output is None else Path(output)
        perfetto = None if perfetto is None else Path(perfetto)
        if output is not None:
            check_output_path(output, self._paths, "-o")
            if output.suffix and format_of(output) is None:
                raise TraceUsageError(f"-o {output}: unknown table format {output.suffix!r} "
                                      "(.parquet, .csv, .jsonl)")
        if perfetto is not None:
            check_output_path(perfetto, self._paths, "--perfetto")
        rows = self._in.filters()  # every filter given (host, category, kernel, time)
        if output is not None and table == "host_events" and (
                rows.time is not None or rows.categories or rows.kernel is not None):
            raise TraceUsageError("--table host_events takes --host only: --time, --category "
                                  "and --kernel select device activities")
        wrote: list[tuple[Path, str]] = []
        try:
            if output is not None:
                df = self.table(table)
                write_table(df, output, table, __version__)
                wrote.append((output, f"{table}: {df.height:,} rows"))
            if perfetto is not None:
                from tracelens.analyze.timeline.tables import counter_intervals
                from reports.files.perfetto import write_perfetto
                trace = self.trace
                n = write_perfetto(trace.events, trace.steps, trace.devices,
                                   counter_intervals(trace), perfetto,
                                   {"tracelens_version": __version__,
                                    "inputs": [s["path"] for s in trace.meta.sources]})
                wrote.append((perfetto, f"{n:,} trace events"))
        except OSError as exc:
            target = output if perfetto is None else perfetto
            raise TraceInputError(getattr(exc, "filename", None) or target,
                                  f"cannot write: {exc.strerror or exc}") from None
        return wrote

    def xcheck(self) -> "XCheck":
        """``tracelens xcheck``: the kernel table next to XProf's own kernel_stats for the
        XSpace file or each XSpace file of the folder (needs ``tracelens[xprof]``): a row per
        file and kernel, ``agrees`` each, and the files not checked with why (other formats,
        all-CPU traces); each file is read alone, as XProf reads one host's file."""
        from tracelens.loading.loader import load
        from tracelens.results.xcheck import xcheck_result
        from tracelens.analyze.xcheck import check_path

        if len(self._in.paths) != 1:
            raise TraceUsageError("xcheck compares one XSpace file (.xplane.pb) or the XSpace "
                                  "files of one folder with XProf")
        return xcheck_result(*check_path(self._in.paths[0], lambda f: load(
            [f], rules=self._rules, step_marker=self._step_marker, progress=self._in.progress)))

    @cached_property
    def profile(self) -> RunProfile:
        """The run's step time split into components that add up to it (the input of
        :func:`compare` and :func:`scaling`).

        >>> import tracelens
        >>> a = TraceAnalysis(tracelens.load("sample_traces/mi300x_8gpu_llama_step.xplane.pb"))
        >>> p = a.profile
        >>> abs(sum(p.components.values()) - p.step_ns) < 1e-6 * p.step_ns
        True
        """
        return self._profile_and_source[0]

    @cached_property
    def _profile_and_source(self) -> "tuple[RunProfile, str]":
        if self._here or len(self._paths) != 1:
            from tracelens.analyze.runs.scaling import profile
            src = self.trace.meta.sources
            return (profile(self.trace, str(src[0]["path"]) if len(src) == 1 else ""),
                    self.trace.meta.steps_source)
        from tracelens.analyze.runs.profile_parts import run_profiles
        return run_profiles(list(self._in.paths), self._in.rows(), self._in.load(),
                            self._in.engine())[0]

    @property
    def steps_source(self) -> str:
        """Where the step windows came from (``steps_source`` in every JSON output)."""
        if self._here:
            return self.trace.meta.steps_source
        return self.summary.steps_source


def _analyses(runs: Sequence["TraceAnalysis | str | Path"], inputs: dict[str, Any]
              ) -> list[TraceAnalysis]:
    return [r if isinstance(r, TraceAnalysis) else TraceAnalysis(r, **inputs) for r in runs]


def _profiles(runs: list[TraceAnalysis], summaries: bool = False
              ) -> "list[tuple[RunProfile, str]]":
    """Each run's (profile, steps source); runs of one path each, read with the same
    options, share one engine cluster (``tracelens compare``/``scaling``). ``summaries``:
    each run's :attr:`TraceAnalysis.summary` too, from the same read of its files (compare's
    findings; a run's file is read once)."""
    first = runs[0]._in
    together = all(len(r._paths) == 1 and not r._here and "_profile_and_source" not in
                   r.__dict__ and r._in == replace(first, paths=r._in.paths) for r in runs)
    if together:
        from tracelens.analyze.runs.profile_parts import run_profiles
        from tracelens.engine.protocol import Task
        extra = [Task(*r._summary_task()) for r in runs[:1]] if summaries and not any(
            "summary" in r.__dict__ for r in runs) else []
        found = run_profiles([r._in.paths[0] for r in runs], first.rows(), first.load(),
                             first.engine(), extra)
        for r, f in zip(runs, found):
            r.__dict__["_profile_and_source"] = f[:2]
            if extra:
                r.__dict__["summary"] = f[2].with_filters(r._in.active())
    return [r._profile_and_source for r in runs]


def compare(base: "TraceAnalysis | str | Path", new: "TraceAnalysis | str | Path",
            top: int = 15, fail_above: float | None = None, **inputs: Any) -> Comparison:
    """Where ``new`` spends more or less time per step than ``base`` (``tracelens
    compare``); either may be a path (read with ``inputs``: :class:`TraceAnalysis`'s
    keywords). ``fail_above``: the gate (``gate.regression``: the step time grew by more
    than that percent). Runs whose filters leave nothing to compare are an input error.

    >>> import tracelens
    >>> a = load_analysis("sample_traces/mi300x_8gpu_llama_step.xplane.pb")
    >>> c = compare(a, a)
    >>> c.delta_ns, len(c.only_base), len(c.only_new)
    (0.0, 0, 0)
    """
    from tracelens.analyze.runs.compare import check_comparable, comparison
    from tracelens.results.runs import Gate

    a, b = _analyses([base, new], inputs)
    fail_above = None if fail_above is None else float(fail_above)  # as --fail-above reads it
    ((pa, sa), (pb, sb)), active = _profiles([a, b], summaries=True), a._in.active()
    for p in (pa, pb):
        check_comparable(p, active)
    res = comparison(pa, pb, top=top)
    regressed = (fail_above is not None and res.delta_pct is not None
                 and res.delta_pct > fail_above)
    from tracelens.results.findings import findings_change
    return replace(res, base=replace(res.base, steps_source=sa),
                   new=replace(res.new, steps_source=sb), filters=active or None,
                   gate=Gate(fail_above, regressed),
                   findings=findings_change(a.summary.findings, b.summary.findings),
                   memory=_memory_change(a, b))


def _first_ns(trace: Trace) -> int | None:
    """The trace's first activity (device or host), where ``memory``'s text counts from."""
    firsts = [f["start_ns"].min() for f in (trace.events, trace.host_events) if f.height]
    return int(min(firsts)) if firsts else None  # type: ignore[type-var, arg-type]


def _memory_change(a: TraceAnalysis, b: TraceAnalysis) -> "tuple[MemoryChange, ...]":
    """Each allocator's peak in both runs, where both record allocator events (read apart
    from the profiles: no step or device is needed for a peak)."""
    from tracelens.analyze.memory import analyze, memory_changes, read_memory

    mems = [read_memory(t._memory_paths())[0] for t in (a, b)]
    if any(m.is_empty() for m in mems):
        return ()
    return memory_changes(analyze(mems[0], top=1), analyze(mems[1], top=1))


def scaling(runs: Sequence["TraceAnalysis | str | Path"], strong: bool = False,
            **inputs: Any) -> Scaling:
    """Why step time changes from each run to the next (``tracelens scaling``); runs may be
    paths (read with ``inputs``). ``strong``: the same global work in every run.

    >>> a = load_analysis("sample_traces/mi300x_8gpu_llama_step.xplane.pb")
    >>> s = scaling([a, a])
    >>> len(s.transitions), s.transitions[0].delta_ns
    (1, 0.0)
    """
    from tracelens.analyze.runs.scaling import scaling as build

    if len(runs) < 2:
        raise TraceUsageError("scaling needs at least two runs")
    analyses = _analyses(runs, inputs)
    found = _profiles(analyses)
    return build([p for p, _ in found], [s for _, s in found], strong=strong,
                 filters=analyses[0]._in.active())


def load_analysis(paths: str | Path | Sequence[str | Path], **kwargs: object
                  ) -> TraceAnalysis:
    """``TraceAnalysis(tracelens.load(paths))``: every host loaded here at once; keyword
    arguments go to ``load``."""
    from tracelens.loading.loader import load
    return TraceAnalysis(load(paths, **kwargs))  # type: ignore[arg-type]
