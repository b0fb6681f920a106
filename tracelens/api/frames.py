"""The frame answers of the facade (:class:`tracelens.api.analysis.TraceAnalysis`): per-device
and per-kernel tables (polars frames) of the whole job loaded in this process, each computed
once. The examples run as doctests with :mod:`tracelens.api.analysis`'s names."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any

import polars as pl

if TYPE_CHECKING:
    from tracelens.core.model import Trace


class FrameAnswers:
    """The tables of :class:`~tracelens.api.analysis.TraceAnalysis` read from its events."""

    trace: Trace
    _gpu: str | None
    _extra_specs: Any

    @cached_property
    def _breakdown(self):  # type: ignore[no-untyped-def]
        from tracelens.analyze.timeline.breakdown import device_breakdown
        return device_breakdown(self.trace.events)

    @cached_property
    def timeline(self) -> pl.DataFrame:
        """Per device: span, busy, compute, communication (exposed and overlapped), memory
        and idle time in ns; the parts add up exactly (docs/definitions.md#timeline).

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
        from tracelens.analyze.timeline.breakdown import DEVICE_KEYS, step_breakdown
        ev = self.trace.events
        return step_breakdown(ev, self.trace.steps, ev.select(DEVICE_KEYS).unique()).timeline

    @cached_property
    def _specs(self) -> pl.DataFrame:
        from tracelens.analyze.compute.roofline import device_specs, spec_frame
        return spec_frame(device_specs(self.trace.devices, gpu=self._gpu,
                                       extra=self._extra_specs))

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
        from tracelens.analyze.compute.roofline import roofline
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
        from tracelens.analyze.compute.roofline import device_mfu
        return device_mfu(self.trace.events, self._specs, self.trace.steps)

    @cached_property
    def kernels(self) -> pl.DataFrame:
        """Per kernel name (with its kind, category and rule): count, total, mean, min, p50,
        p90 and max ns, devices it ran on and its launch shape (``export --table kernels``).

        >>> a = TraceAnalysis("sample_traces/mi300x_8gpu_llama_step.xplane.pb")
        >>> k = a.kernels.row(0, named=True)
        >>> k["total_ns"] == a.kernels["total_ns"].max()
        True
        """
        from tracelens.analyze.timeline.tables import kernel_stats
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
        from tracelens.analyze.timeline.idle import idle_breakdowns
        ev = self.trace.events
        return idle_breakdowns(ev, self.trace.host_events, [(None, None)])[0]
