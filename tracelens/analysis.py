"""The Python facade: one :class:`TraceAnalysis` per loaded trace, in the style of HTA's
``TraceAnalysis``, whose answers are each computed once (cached) and typed: polars frames
for tables, frozen dataclasses for the summary, collectives, comparison and scaling.

The CLI runs the same functions; this is the short way to them from a notebook. (The
functions live in :mod:`tracelens.analyze`, whose submodules are named ``timeline``,
``roofline``, ``collectives``, ... so the facade is a class rather than functions of that
package with the same names.)
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Sequence, TypeVar

import polars as pl

from tracelens.model import Trace
from tracelens.results.axes import Axes
from tracelens.results.collectives import Collectives
from tracelens.results.hlo import HloLensResult
from tracelens.results.runs import Comparison, Scaling
from tracelens.results.summary import Summary

if TYPE_CHECKING:
    from tracelens.analyze.scaling import RunProfile
    from tracelens.analyze.window import TimelineWindow
    from tracelens.classify import RuleSet
    from tracelens.protocol import Analysis

Opt = TypeVar("Opt")
P = TypeVar("P")
R = TypeVar("R")


class TraceAnalysis:
    """Answers about one job, each computed on first use and kept.

    ``source``: trace file(s) or folder(s) (what ``tracelens summarize`` takes), or a
    :class:`~tracelens.model.Trace` already loaded. From paths, the job-level answers
    (:attr:`summary`, :attr:`collectives`, :attr:`hlo`, :attr:`profile`, :meth:`window`) run
    per host on the engine, in this process or on Dask (``workers``, ``scheduler``, as
    ``--workers``/``--scheduler``: a 128-host job from a notebook never holds every host's
    events at once); the frame answers (:attr:`timeline`, :attr:`kernels`, ...) need the
    events and load the whole job here on first use (:attr:`trace`).

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
                 rules: "RuleSet | None" = None, step_marker: str | None = None,
                 workers: int | None = None, scheduler: str | None = None) -> None:
        """``gpu`` forces one GPU spec for every device, ``gpu_specs`` adds specs from a
        TOML/JSON file (as ``--gpu`` and ``--gpu-specs``); ``rules``: classification rules
        (:func:`tracelens.classify.load_rules`); ``step_marker``: as ``--step-marker``."""
        self._paths: tuple[str | Path, ...] = ()
        if isinstance(source, Trace):
            self.__dict__["trace"] = source
        else:
            self._paths = (source,) if isinstance(source, (str, Path)) else tuple(source)
        self._gpu = gpu
        self._gpu_specs = gpu_specs
        self._rules = rules
        self._step_marker = step_marker
        self._workers = workers
        self._scheduler = scheduler

    @cached_property
    def trace(self) -> Trace:
        """The whole job loaded in this process (the frame answers read its events)."""
        from tracelens.loader import load
        return load(list(self._paths), rules=self._rules, step_marker=self._step_marker)

    def _run(self, analysis: "Analysis[Opt, P, R]", options: Opt) -> R:
        """``analysis`` on the engine from the paths, or on the loaded trace."""
        if "trace" in self.__dict__ or not self._paths:
            from tracelens.protocol import run_trace
            return run_trace(analysis, self.trace, options)
        from tracelens.engine import EngineOptions, LoadOptions, run
        return run(analysis, self._paths, options, LoadOptions(self._rules, self._step_marker),
                   EngineOptions(self._workers, self._scheduler))

    @cached_property
    def _breakdown(self):  # type: ignore[no-untyped-def]
        from tracelens.analyze.timeline import device_breakdown
        return device_breakdown(self.trace.events)

    @cached_property
    def timeline(self) -> pl.DataFrame:
        """Per device: span, busy, compute, communication (exposed and overlapped), memory
        and idle time in ns; the parts add up exactly (DESIGN §5).

        >>> import tracelens
        >>> a = TraceAnalysis(tracelens.load("sample_traces/mi300x_8gpu_llama_step.xplane.pb"))
        >>> t = a.timeline.row(0, named=True)
        >>> t["busy_ns"] + t["idle_ns"] == t["span_ns"]
        True
        """
        return self._breakdown.timeline

    @cached_property
    def categories(self) -> pl.DataFrame:
        """Per device and category: kernel count, summed and exclusive time (ns).

        >>> import tracelens
        >>> a = TraceAnalysis(tracelens.load("sample_traces/mi300x_8gpu_llama_step.xplane.pb"))
        >>> (a.categories.filter(device=0).sort("exclusive_ns", descending=True)
        ...  .select("category", "exclusive_ns").head(3).rows())
        [('gemm', 8032099), ('collective', 6320112), ('attention', 1371664)]
        """
        return self._breakdown.categories

    @cached_property
    def step_timeline(self) -> pl.DataFrame:
        """:attr:`timeline` per device and step window (empty without steps).

        >>> import tracelens
        >>> a = TraceAnalysis(tracelens.load("sample_traces/mi300x_8gpu_llama_step.xplane.pb"))
        >>> a.step_timeline.select("step").unique().height == a.trace.steps["step"].n_unique()
        True
        """
        from tracelens.analyze.timeline import DEVICE_KEYS, step_breakdown
        ev = self.trace.events
        return step_breakdown(ev, self.trace.steps, ev.select(DEVICE_KEYS).unique()).timeline

    @cached_property
    def _specs(self) -> pl.DataFrame:
        from tracelens.analyze.roofline import device_specs, spec_frame
        from tracelens.hardware import load_specs_file
        extra = load_specs_file(self._gpu_specs) if self._gpu_specs is not None else None
        return spec_frame(device_specs(self.trace.devices, gpu=self._gpu, extra=extra))

    @cached_property
    def roofline(self) -> pl.DataFrame:
        """Per op group (HLO op, else kernel name) and GPU spec: time, FLOPs, bytes,
        achieved TFLOP/s and TB/s, the roofline's attainable rate, bound and efficiency;
        unknown costs stay null.

        >>> import tracelens
        >>> a = TraceAnalysis(tracelens.load("sample_traces/mi300x_8gpu_llama_step.xplane.pb"))
        >>> a.roofline.filter(pl.col("bound") == "compute").row(0, named=True)["op"]
        'custom-call.31'
        """
        from tracelens.analyze.roofline import roofline
        return roofline(self.trace.events, self._specs)

    @cached_property
    def mfu(self) -> pl.DataFrame:
        """Per device: model FLOPs / (window × dense peak of the dominant dtype), the window
        being the device's median step when the trace has steps, else its span (the MFU
        ``summarize`` shows; ``mfu_basis`` says which).

        >>> import tracelens
        >>> a = TraceAnalysis(tracelens.load("sample_traces/mi300x_8gpu_llama_step.xplane.pb"))
        >>> r = a.mfu.row(0, named=True)
        >>> round(r["mfu"], 4), r["mfu_basis"]
        (0.3263, 'median step')
        """
        from tracelens.analyze.roofline import device_mfu
        return device_mfu(self.trace.events, self._specs, self.trace.steps)

    @cached_property
    def summary(self) -> Summary:
        """The typed result behind ``tracelens summarize`` (its JSON form is
        :func:`tracelens.to_json`: what ``tracelens summarize --format json`` prints).

        >>> import tracelens
        >>> a = TraceAnalysis(tracelens.load("sample_traces/mi300x_8gpu_llama_step.xplane.pb"))
        >>> s = a.summary
        >>> s.headline.active_devices, s.headline.steps
        (8, 3)
        """
        from tracelens.analyze.summary import options
        from tracelens.analyze.summary import SummaryAnalysis
        return self._run(SummaryAnalysis(), options(gpu=self._gpu, gpu_specs=self._gpu_specs))


    @cached_property
    def collectives(self) -> Collectives:
        """Collectives per type and op (time, exposed time, busbw), the instances of largest
        arrival skew and the devices others waited for.

        >>> import tracelens
        >>> a = TraceAnalysis(tracelens.load("sample_traces/mi355x_2x8gpu_straggler"))
        >>> s = a.collectives.stragglers[0]   # the planted straggler: host 1, GPU 3
        >>> (s.host, s.device, s.times_last > 0)
        ('mi355x-node1', 3, True)
        """
        from tracelens.analyze.collective_partials import CollectivesAnalysis, CollectivesOptions
        return self._run(CollectivesAnalysis(), CollectivesOptions(top=10))

    @cached_property
    def hlo(self) -> HloLensResult:
        """The HLO lens (``tracelens hlo``): each compiled program's collectives and the
        findings, costed with their measured exposed time per step.

        >>> a = TraceAnalysis("sample_traces/mi300x_8gpu_llama_step.xplane.pb")
        >>> len(a.hlo.programs) > 0
        True
        """
        from tracelens.analyze.hlo_findings import LensAnalysis, LensOptions
        return self._run(LensAnalysis(), LensOptions())

    def window(self, step: int | None = None, device: int | None = None,
               max_devices: int = 4, max_events: int = 1500) -> "TimelineWindow | None":
        """The stretch of the timeline ``report`` draws: ``step``'s window (default: the
        median step), the busiest ``max_devices`` devices (or ``device`` on every host),
        at most ``max_events`` activities; None without device activity.

        >>> a = TraceAnalysis("sample_traces/mi300x_8gpu_llama_step.xplane.pb")
        >>> w = a.window()
        >>> w.end_ns > w.start_ns and w.events.height > 0
        True
        """
        from tracelens.analyze.window_parts import (WindowChoice, WindowOptions, job_window,
                                                    window_of_trace)
        opts = WindowOptions(device, step, None, max_devices, max_events)
        if "trace" in self.__dict__ or not self._paths:
            return window_of_trace(self.trace, opts)
        from tracelens.engine import EngineOptions, LoadOptions, run_tasks
        from tracelens.protocol import Task
        load = LoadOptions(self._rules, self._step_marker)
        engine = EngineOptions(self._workers, self._scheduler)
        (chosen,), job = run_tasks([Task(WindowChoice(), opts)], self._paths, load, engine)
        if chosen is None:
            return None
        return job_window(chosen, job, opts, load, engine)

    @cached_property
    def kernels(self) -> pl.DataFrame:
        """Per kernel name (with its kind, category and rule): count, total, mean, min, p50,
        p90 and max ns, devices it ran on and its launch shape (``export --table kernels``).

        >>> a = TraceAnalysis("sample_traces/mi300x_8gpu_llama_step.xplane.pb")
        >>> k = a.kernels.row(0, named=True)
        >>> k["total_ns"] == a.kernels["total_ns"].max()
        True
        """
        from tracelens.analyze.tables import kernel_stats
        return kernel_stats(self.trace.events)

    @cached_property
    def idle(self) -> pl.DataFrame:
        """Per device: why it was idle, in ns (host launch, sync wait, launch latency, no
        host data); the parts add up to the timeline's ``idle_ns``.

        >>> a = TraceAnalysis("sample_traces/mi300x_8gpu_llama_step.xplane.pb")
        >>> i, t = a.idle.row(0, named=True), a.timeline.row(0, named=True)
        >>> sum(v for k, v in i.items() if k.endswith("_ns")) == t["idle_ns"]
        True
        """
        from tracelens.analyze.idle import idle_breakdowns
        ev = self.trace.events
        return idle_breakdowns(ev, self.trace.host_events, [(None, None)])[0]

    def axes(self, mesh: str | None = None, nic_gb_per_s: float | None = None,
             ranks_per_host: int | None = None) -> "Axes":
        """Communication per mesh axis, all-to-all balance and pipeline bubbles (what
        ``tracelens axes`` prints); ``mesh``: e.g. ``"fsdp=4,tp=4"`` (default: inferred).

        >>> import tracelens
        >>> a = TraceAnalysis(tracelens.load("sample_traces/mi355x_2x8gpu_straggler"))
        >>> [(x.axis, x.size) for x in a.axes().axes]
        [('axis0', 16)]
        """
        from tracelens.analyze.axes import AxesAnalysis, AxesOptions
        from tracelens.analyze.mesh import parse_mesh
        return self._run(AxesAnalysis(), AxesOptions(
            parse_mesh(mesh) if mesh else (), nic_gb_per_s, ranks_per_host))

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
        if "trace" in self.__dict__ or len(self._paths) != 1:
            from tracelens.analyze.scaling import profile
            src = self.trace.meta.sources
            return profile(self.trace, str(src[0]["path"]) if len(src) == 1 else "")
        return self._run_profile()[0]

    def _run_profile(self) -> "tuple[RunProfile, str]":
        from tracelens.analyze.profile_partials import run_profiles
        from tracelens.engine import EngineOptions, LoadOptions
        return run_profiles([Path(self._paths[0])], None,
                            LoadOptions(self._rules, self._step_marker),
                            EngineOptions(self._workers, self._scheduler))[0]

    @property
    def steps_source(self) -> str:
        """Where the step windows came from (``steps_source`` in every JSON output)."""
        if "trace" in self.__dict__ or not self._paths:
            return self.trace.meta.steps_source
        return self.summary.steps_source


def compare(base: TraceAnalysis, new: TraceAnalysis, top: int = 15) -> Comparison:
    """Where ``new`` spends more or less time per step than ``base`` (``tracelens compare``).

    >>> import tracelens
    >>> a = load_analysis("sample_traces/mi300x_8gpu_llama_step.xplane.pb")
    >>> c = compare(a, a)
    >>> c.delta_ns, len(c.only_base), len(c.only_new)
    (0.0, 0, 0)
    """
    from tracelens.analyze.compare import comparison
    return comparison(base.profile, new.profile, top=top)


def scaling(runs: Sequence[TraceAnalysis], strong: bool = False) -> Scaling:
    """Why step time changes from each run to the next (``tracelens scaling``).

    >>> a = load_analysis("sample_traces/mi300x_8gpu_llama_step.xplane.pb")
    >>> s = scaling([a, a])
    >>> len(s.transitions), s.transitions[0].delta_ns
    (1, 0.0)
    """
    from tracelens.analyze.scaling import scaling as build
    return build([r.profile for r in runs], [r.steps_source for r in runs], strong=strong)


def load_analysis(paths: str | Path | Sequence[str | Path], **kwargs: object
                  ) -> TraceAnalysis:
    """``TraceAnalysis(tracelens.load(paths))``: every host loaded here at once; keyword
    arguments go to ``load``."""
    from tracelens.loader import load
    return TraceAnalysis(load(paths, **kwargs))  # type: ignore[arg-type]
