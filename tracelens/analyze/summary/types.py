"""The options and the per-trace partial result of ``summarize`` (see
:mod:`tracelens.analyze.summary.build` for the map and :mod:`tracelens.analyze.summary.reduce` for
the reduce)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import polars as pl

from tracelens.loading.filters import Filters
from tracelens.core.hardware import GpuSpec
from tracelens.core.model import Notice
from tracelens.results.filters import SummaryFilters
from tracelens.results.summary import DeviceSummary

if TYPE_CHECKING:
    from tracelens.analyze.compute.hlo_findings import LensTimeline
    from tracelens.loading.combine import PartFacts


@dataclass(frozen=True)
class SummaryOptions:
    """What narrows and parameterizes a summary. ``device`` keeps one GPU ordinal (on every
    host); ``step`` restricts every number to that step's window; ``filters`` (hosts,
    categories, kernel regex, time window) are applied to the trace first; ``gpu`` forces a
    GPU spec and ``gpu_specs`` adds or replaces specs (``tracelens.core.hardware``); ``top`` rows of
    top kernels and roofline; ``collectives_top`` worst instances in the full collectives
    report."""

    device: int | None = None
    step: int | None = None
    top: int = 10
    gpu: str | None = None
    gpu_specs: dict[str, GpuSpec] | None = None
    filters: Filters | None = None
    collectives_top: int = 10


@dataclass(frozen=True)
class SummaryPartial:
    """What one trace (one host, or several already combined) contributes to a summary.
    Picklable, and small: no event-level frame except the collective activities ``acts``
    (the only data that matches across hosts)."""

    inputs: tuple[dict[str, str], ...]
    notices: tuple[Notice, ...]  # the trace's own notices, unfolded
    alignment: str
    steps_source: str
    filters: SummaryFilters
    devices: pl.DataFrame  # the device table (narrowed by ``device``)
    steps: pl.DataFrame  # the step windows (narrowed by ``step``)
    device_rows: tuple[DeviceSummary, ...]  # active devices, by (rank, device)
    kernels: pl.DataFrame  # name, category, subcategory, rule, host, rank, device, count, sum_ns
    kernel_ns: int  # all activity time of the selected events (top kernels' share base)
    specs: pl.DataFrame  # tracelens.analyze.compute.roofline.spec_frame of the devices
    roofline: pl.DataFrame  # tracelens.analyze.compute.roofline.roofline, every group
    roofline_mix: pl.DataFrame  # op, program_id, spec, name, category, dtype -> count, sum_ns
    gaps: pl.DataFrame  # tracelens.analyze.compute.roofline.without_flops
    no_cost_data: int
    no_cost_data_ns: int
    acts: pl.DataFrame  # collective activities of the selected events
    hlo: "LensTimeline | None"  # the lens inputs of the whole trace, None without HLO
    # what tracelens.loading.combine knows of a trace read from one file (hosts, ranks, clock);
    # None for a trace combined from several files already
    host_facts: "PartFacts | None" = None
    # False when a host name was made up by a reader (Kineto ranks): they count as ranks
    hosts_named: bool = True
    # the world sizes its files record (Kineto distributedInfo): groups are inferred from them
    world_sizes: tuple[int, ...] = ()
