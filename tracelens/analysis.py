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
from typing import Sequence

import polars as pl

from tracelens.model import Trace
from tracelens.results.summary import Summary


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
        """Per device: model FLOPs / (span × dense peak of the dominant dtype).

        >>> import tracelens
        >>> a = TraceAnalysis(tracelens.load("sample_traces/mi300x_8gpu_llama_step.xplane.pb"))
        >>> round(a.mfu.row(0, named=True)["mfu"], 4)
        0.2887
        """
        from tracelens.analyze.roofline import mfu
        return mfu(self.trace.events, self._specs)

    @cached_property
    def summary(self) -> Summary:
        """The typed result behind ``tracelens summarize`` (its JSON form is
        :func:`tracelens.results.jsonify.summary_json`).

        >>> import tracelens
        >>> a = TraceAnalysis(tracelens.load("sample_traces/mi300x_8gpu_llama_step.xplane.pb"))
        >>> s = a.summary
        >>> s.headline.active_devices, s.headline.steps
        (8, 1)
        """
        from tracelens.analyze.summary import summarize
        return summarize(self.trace, gpu=self._gpu, gpu_specs=self._gpu_specs)


def load_analysis(paths: str | Path | Sequence[str | Path], **kwargs: object
                  ) -> TraceAnalysis:
    """``TraceAnalysis(tracelens.load(paths))``; keyword arguments go to ``load``."""
    from tracelens.loader import load
    return TraceAnalysis(load(paths, **kwargs))  # type: ignore[arg-type]
