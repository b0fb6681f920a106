"""The ``summarize`` result as typed, frozen records with unrounded values.

Exact integers stay integers (ns, counts); ratios are the floats as computed. The JSON
contract (README "summarize --format json") is :func:`tracelens.results.encode.encode` of
these records: field order is key order, and each field declares its rounding there
(ratios -- MFU, FLOPs coverage -- 6 decimals, percentages 3, mean kernel time 0.1 ns,
roofline rates 6-7 significant digits). Every number a renderer shows lives here, computed
once by :mod:`tracelens.analyze.summary.build` (renderers never sum or take medians themselves).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, NamedTuple

from tracelens.results import display
from tracelens.core.hardware import DTYPES, GpuSpec
from tracelens.results.collectives import (AxisTotals, Collectives, SummaryCollectives,
                                           top_lines)
from tracelens.results.critical_path import Component, PathActivity, WhatIf
from tracelens.results.encode import converted, optional, renamed, rounded
from tracelens.results.consistency import Consistency
from tracelens.results.filters import SummaryFilters
from tracelens.results.findings import Findings
from tracelens.results.memory import MemoryResult
from tracelens.core.model import shown_program_id

if TYPE_CHECKING:  # annotations only: summarize need not import the HLO lens
    from tracelens.hlo.lens import Finding

HIDDEN = {"json": False}
RATIO = rounded(6)  # MFU, FLOPs coverage
PERCENT = rounded(3)


class DeviceKey(NamedTuple):
    """(host, rank, device): one device of the job (a JSON object of the three)."""

    host: str
    rank: int
    device: int


@dataclass(frozen=True, slots=True)
class IdleBreakdown:
    """Why a device was idle (docs/definitions.md#idle-breakdown); the parts add up to
    ``idle_ns``."""

    host_launch_ns: int = 0
    sync_wait_ns: int = 0
    launch_latency_ns: int = 0
    no_host_data_ns: int = 0


@dataclass(frozen=True, slots=True)
class Timeline:
    """Exact interval arithmetic of one device over a window (docs/definitions.md#timeline)."""

    span_ns: int
    busy_ns: int
    compute_ns: int
    comm_ns: int
    exposed_comm_ns: int
    overlapped_comm_ns: int
    memory_ns: int
    exposed_memory_ns: int
    idle_ns: int
    # None on totals (summed over devices), which the JSON writes without it
    idle_breakdown: IdleBreakdown | None = field(default=None, metadata=optional())


@dataclass(frozen=True, slots=True)
class CategoryTime:
    """One category's kernels: how many, their summed and their exclusive time."""

    category: str
    count: int
    sum_ns: int
    exclusive_ns: int


@dataclass(frozen=True, slots=True)
class StepSummary:
    """One device's timeline over one step window, with the step's MFU (None: unknown)."""

    step: int
    start_ns: int
    end_ns: int
    timeline: Timeline
    mfu: float | None = field(metadata=RATIO)


@dataclass(frozen=True, slots=True)
class SpecView:
    """What the JSON says of a device's :class:`~tracelens.core.hardware.GpuSpec` (``tracelens
    gpus`` lists the rest); peaks in :data:`tracelens.core.hardware.DTYPES` order."""

    id: str
    name: str
    peak_tflops: dict[str, float]
    hbm_tb_per_s: float | None
    link_gb_per_s: float | None
    memory_gb: float | None
    source: str


def spec_view(spec: GpuSpec) -> SpecView:
    return SpecView(spec.id, spec.name, {d: spec.peak_tflops[d] for d in DTYPES
                                         if d in spec.peak_tflops},
                    spec.hbm_tb_per_s, spec.link_gb_per_s, spec.memory_gb, spec.source)


@dataclass(frozen=True, slots=True)
class DeviceSummary:
    """One active device: timeline, categories (by exclusive time), steps, spec, MFU and
    FLOPs coverage (``flops_coverage`` None without compute kernels)."""

    host: str
    rank: int
    device: int
    vendor: str | None
    arch: str | None
    product: str | None
    timeline: Timeline
    categories: tuple[CategoryTime, ...]
    steps: tuple[StepSummary, ...]
    spec: GpuSpec | None = field(metadata=converted(spec_view))  # type: ignore[arg-type]
    mfu: float | None = field(metadata=RATIO)
    mfu_dtype: str | None
    model_flops: float | None
    model_kernels_without_cost: int
    flops_coverage: float | None = field(metadata=RATIO)
    compute_kernel_ns: int
    flops_covered_ns: int
    mfu_lower_bound: bool

    @property
    def key(self) -> DeviceKey:
        return (self.host, self.rank, self.device)


@dataclass(frozen=True, slots=True)
class HardwareCount:
    product: str | None
    arch: str | None
    vendor: str | None
    count: int

    @property
    def kind(self) -> str | None:
        """What the device is, as far as the trace says: its product, else its arch."""
        return self.product or self.arch


def hardware_text(counts: Iterable[HardwareCount]) -> str:
    """``2× NVIDIA A100 40GB, 1× gfx942``: the headline's hardware line (also ``compare``'s
    and its warnings'); ``unknown`` for no device."""
    return ", ".join(f"{c.count}× {c.kind or 'unknown device'}" for c in counts) or "unknown"


@dataclass(frozen=True, slots=True)
class Headline:
    """The job in one screen: shares are of the summed device spans (None when zero)."""

    hosts: int
    # False: the trace names no host (Kineto), ``hosts`` counts its ranks
    hosts_named: bool = field(default=True, kw_only=True)
    devices: int
    active_devices: int
    hardware: tuple[HardwareCount, ...]
    steps: int
    median_step_ns: int | None
    max_span_ns: int
    busy_pct: float | None = field(metadata=PERCENT)
    compute_pct: float | None = field(metadata=PERCENT)
    exposed_comm_pct: float | None = field(metadata=PERCENT)
    exposed_memory_pct: float | None = field(metadata=PERCENT)
    idle_pct: float | None = field(metadata=PERCENT)
    # the median device's (lower median); None when no device has one
    mfu: float | None = field(metadata=RATIO)
    mfu_lower_bound: bool
    # what each device's MFU is over: "median step" (the trace has steps: the device's median
    # step's MFU) or "span" (its first start to last end)
    mfu_basis: str = field(default="span", kw_only=True)
    flops_coverage: float | None = field(metadata=RATIO)
    totals: Timeline  # summed over the active devices (no idle breakdown)


@dataclass(frozen=True, slots=True)
class TopKernel:
    name: str
    category: str
    subcategory: str | None
    rule: str | None
    count: int
    sum_ns: int
    mean_ns: float = field(metadata=rounded(1))
    # of all kernel time in the (filtered) trace
    share_pct: float | None = field(metadata=PERCENT)
    devices: int


@dataclass(frozen=True, slots=True)
class RooflineRow:
    """One op group of the roofline (``tracelens.analyze.compute.roofline``), unrounded."""

    op: str
    program_id: int | None = field(metadata=converted(shown_program_id))
    module: str | None
    kernel: str | None
    category: str | None
    dtype: str | None
    spec: str | None
    count: int
    sum_ns: int
    flops: float | None
    bytes: float | None
    intensity: float | None = field(metadata=rounded(sig=6))
    tflops_per_s: float | None = field(metadata=rounded(sig=6))
    tb_per_s: float | None = field(metadata=rounded(sig=7))
    attainable_tflops_per_s: float | None = field(metadata=rounded(sig=6))
    bound: str | None
    efficiency: float | None = field(metadata=rounded(sig=7))
    no_cost_count: int


@dataclass(frozen=True, slots=True)
class NoFlops:
    """Compute kernels without FLOPs in one category, and their share of busy time."""

    category: str
    count: int
    sum_ns: int
    share_of_busy_pct: float | None = field(metadata=PERCENT)


@dataclass(frozen=True, slots=True)
class StepTotal:
    """One step summed over the devices that ran it (the report's per-step bars)."""

    step: int
    devices: int
    timeline: Timeline  # summed (no idle breakdown)
    mfu_mean: float | None  # mean over the devices whose MFU of the step is known


@dataclass(frozen=True, slots=True)
class StepSpread:
    """One step over the devices that ran it: the median device's span and the lowest,
    median and highest busy, exposed-communication and idle shares of the step (%)."""

    step: int
    devices: int
    median_span_ns: int
    busy_pct: tuple[float, float, float]
    exposed_comm_pct: tuple[float, float, float]
    idle_pct: tuple[float, float, float]
    mfu_median: float | None


@dataclass(frozen=True, slots=True)
class RooflineGroup:
    """Roofline rows of one program whose ops differ only in an instruction number
    (``custom-call.4``, ``custom-call.9``, ...), summed: ``ops`` of them; rates from the sums;
    ``efficiency`` time-weighted (None when no row has one)."""

    op: str
    ops: int
    module: str | None
    program_id: int | None
    category: str | None
    count: int
    sum_ns: int
    flops: float | None
    bytes: float | None
    tflops_per_s: float | None
    tb_per_s: float | None
    bound: str | None
    efficiency: float | None


@dataclass(frozen=True, slots=True)
class CriticalPathLines:
    """``summarize``'s lines of ``tracelens critical-path``: the step whose paths
    were taken, its longest path (whose device, and what its time went to: the parts add up
    to ``step_ns``) and the three changes that would shorten the step most. ``activities``:
    the longest path's device activities (what ``report`` draws on its timeline of the same
    step; not in the JSON, which ``tracelens critical-path`` has)."""

    step: int | None
    step_ns: int
    host: str
    device: int
    composition: tuple[Component, ...]
    what_if: tuple[WhatIf, ...]
    activities: tuple[PathActivity, ...] = field(default=(), metadata={"json": False})


@dataclass(frozen=True, slots=True)
class Summary:
    """The whole ``summarize`` result; its JSON is ``encode(summary)``. ``collectives`` is the
    complete ``tracelens collectives`` result of the same events (what ``tracelens report``
    renders); the JSON writes its top lines (:func:`~tracelens.results.collectives.top_lines`).
    ``category_totals`` and the fields after it are what the renderers show beyond the JSON
    contract."""

    version: str = field(metadata=renamed("tracelens_version"))
    inputs: tuple[dict[str, str], ...]
    alignment: str
    steps_source: str
    warnings: tuple[str, ...]
    # what the tool corrected and says once (a trace's own stat it does not use, and why)
    notes: tuple[str, ...] = field(default=(), kw_only=True, metadata=optional())
    filters: SummaryFilters
    # what to fix first (:mod:`tracelens.analyze.summary.findings`), set once the critical path's
    # what-ifs are known
    findings: Findings = field(default=Findings((), None, None, 1.0), kw_only=True)
    # the findings and the critical path checked against the step's measured facts
    # (:mod:`tracelens.analyze.consistency`); None where no check ran (no critical path)
    consistency: Consistency | None = field(default=None, kw_only=True, metadata=optional())
    headline: Headline
    devices: tuple[DeviceSummary, ...]
    idle_devices: tuple[DeviceKey, ...]
    top_kernels: tuple[TopKernel, ...]
    collectives: Collectives = field(metadata=converted(top_lines))  # type: ignore[arg-type]
    hlo_findings: tuple[Finding, ...]  # the costliest of ``tracelens hlo``
    roofline: tuple[RooflineRow, ...]
    no_cost_data: int
    no_cost_data_ns: int
    no_flops: tuple[NoFlops, ...]
    # over the reported devices, by exclusive time
    category_totals: tuple[CategoryTime, ...] = field(metadata=HIDDEN)
    step_totals: tuple[StepTotal, ...] = field(metadata=HIDDEN)  # by step
    # per-device tables past MAX_DEVICE_ROWS devices: (role, index into devices) of the
    # median, best and worst device by compute share and the outliers; else every device
    device_roles: tuple[tuple[str, int], ...] = field(metadata=HIDDEN)
    # the median device's share of its span (%): timeline columns ("compute_ns", ...) and
    # compute categories' exclusive time ("excl:gemm", ...); empty under two devices
    median_shares: dict[str, float] = field(metadata=HIDDEN)
    # the devices' distinct specs, the most used first
    specs: tuple[GpuSpec, ...] = field(metadata=HIDDEN)
    # communication per mesh axis (tracelens.analyze.communication.axes), when groups are
    # known
    axes: tuple[AxisTotals, ...] = field(default=(), metadata=optional())
    # the critical path's top projections (None: no path, or per-row filters given)
    critical_path: CriticalPathLines | None = field(default=None, metadata=optional())
    # each allocator's peak and what holds it (tracelens memory, its 5 largest live groups),
    # where the trace records allocator events
    memory: MemoryResult | None = field(default=None, kw_only=True, metadata=optional())
    # the short tables' device rows: the median, slowest, fastest and outliers past
    # BRIEF_DEVICE_ROWS devices (``device_roles`` of the ``--all`` tables, at a lower limit)
    brief_roles: tuple[tuple[str, int], ...] = field(default=(), metadata=HIDDEN)
    # per step over the devices that ran it: the spread (:class:`StepSpread`)
    step_spread: tuple["StepSpread", ...] = field(default=(), metadata=HIDDEN)
    # per compute category: (time-weighted efficiency vs the roofline, op groups with costs)
    category_efficiency: dict[str, tuple[float, int]] = field(default_factory=dict,
                                                              metadata=HIDDEN)
    # the roofline's rows with those that differ only in an instruction number as one
    roofline_groups: tuple["RooflineGroup", ...] = field(default=(), metadata=HIDDEN)
    # the trace replays CUDA/HIP graphs (analyze.blocked): no graph-launch finding
    replays_graphs: bool = field(default=False, metadata=HIDDEN)

    @property
    def summary_collectives(self) -> SummaryCollectives:
        """The JSON's ``collectives``: per type, and up to three devices the others waited
        for."""
        return top_lines(self.collectives)

    def device_name(self, host: str, device: int) -> str:
        """How the critical path names one of the devices: ``<host>/<kind><ordinal>``, the
        kind from its vendor (:data:`tracelens.core.model.DEVICE_KINDS`: TPU, CPU, else GPU)."""
        from tracelens.core.model import DEVICE_KINDS

        vendor = next((d.vendor for d in self.devices if d.host == host
                       and d.device == device), None)
        return f"{host}/{DEVICE_KINDS.get((vendor or '').lower(), 'GPU')}{device}"

    def with_filters(self, extra: SummaryFilters) -> "Summary":
        """This summary with the filters of ``extra`` set as well (the CLI's job-wide ones)."""
        from dataclasses import replace
        return replace(self, filters=self.filters.merged(extra))

    # in a notebook: a screen or less (tracelens.results.display); the whole: to_dict()
    __repr__ = display.short_repr
    _repr_html_ = display.html_repr
    __rich__ = display.rich_table
    to_dict = display.to_dict
