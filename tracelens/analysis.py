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
from typing import TYPE_CHECKING, Sequence

import polars as pl

from tracelens.model import Trace
from tracelens.results.axes import Axes
from tracelens.results.collectives import Collectives
from tracelens.results.runs import Comparison, Scaling
from tracelens.results.summary import Summary

if TYPE_CHECKING:
    from tracelens.analyze.scaling import RunProfile


class TraceAnalysis:
    """Answers about one trace, each computed on first use and kept.

    >>> import tracelens
    >>> a = TraceAnalysis(tracelens.load("sample_traces/mi300x_8gpu_llama_step.xplane.pb"))
    >>> a.timeline.select("device", "busy_ns", "exposed_comm_ns").head(2).rows()
    [(0, 16674187, 6320112), (1, 16659881, 6309093)]
    >>> a.timeline is a.timeline   # computed once
    True
    """

    def __init__(self, trace: Trace, gpu: str | None = None,
                 gpu_specs: str | Path | None = None) -> None:
        """``gpu`` forces one GPU spec for every device, ``gpu_specs`` adds specs from a
        TOML/JSON file (as ``--gpu`` and ``--gpu-specs``)."""
        self.trace = trace
        self._gpu = gpu
        self._gpu_specs = gpu_specs

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
        :func:`tracelens.results.jsonify.summary_json`).

        >>> import tracelens
        >>> a = TraceAnalysis(tracelens.load("sample_traces/mi300x_8gpu_llama_step.xplane.pb"))
        >>> s = a.summary
        >>> s.headline.active_devices, s.headline.steps
        (8, 3)
        """
        from tracelens.analyze.summary import summarize
        return summarize(self.trace, gpu=self._gpu, gpu_specs=self._gpu_specs)


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
        from tracelens.analyze.axes import AxesOptions, hosts_of, with_axes
        from tracelens.analyze.collectives import analyze, collective_activities, link_of
        acts = collective_activities(self.trace.events)
        res = analyze(self.trace.events, self.trace.meta.alignment, top=10,
                      link_gb_per_s=link_of(self.trace.devices), acts=acts)
        return with_axes(res, acts, self.trace.devices, hosts_of(self.trace.meta),
                         AxesOptions())

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
        from tracelens.protocol import run_trace
        return run_trace(AxesAnalysis(), self.trace, AxesOptions(
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
        from tracelens.analyze.scaling import profile
        src = self.trace.meta.sources
        return profile(self.trace, str(src[0]["path"]) if len(src) == 1 else "")


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
    return build([r.profile for r in runs], [r.trace.meta.steps_source for r in runs],
                 strong=strong)


def load_analysis(paths: str | Path | Sequence[str | Path], **kwargs: object
                  ) -> TraceAnalysis:
    """``TraceAnalysis(tracelens.load(paths))``; keyword arguments go to ``load``."""
    from tracelens.loader import load
    return TraceAnalysis(load(paths, **kwargs))  # type: ignore[arg-type]
