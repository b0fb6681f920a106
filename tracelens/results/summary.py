"""The ``summarize`` result as typed, frozen records with unrounded values.

Exact integers stay integers (ns, counts); ratios are the floats as computed. Rounding for
the JSON contract happens only in :mod:`tracelens.results.jsonify`. Every number a renderer
shows lives here, computed once by :mod:`tracelens.analyze.summary` (renderers never sum or
take medians themselves).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from tracelens.hardware import GpuSpec

DeviceKey = tuple[str, int, int]
"""(host, rank, device): one device of the job."""


@dataclass(frozen=True, slots=True)
class IdleBreakdown:
    """Why a device was idle (README: idle breakdown); the parts add up to ``idle_ns``."""

    host_launch_ns: int = 0
    sync_wait_ns: int = 0
    launch_latency_ns: int = 0
    no_host_data_ns: int = 0


@dataclass(frozen=True, slots=True)
class Timeline:
    """Exact interval arithmetic of one device over a window (DESIGN: timeline)."""

    span_ns: int
    busy_ns: int
    compute_ns: int
    comm_ns: int
    exposed_comm_ns: int
    overlapped_comm_ns: int
    memory_ns: int
    exposed_memory_ns: int
    idle_ns: int
    idle_breakdown: IdleBreakdown | None = None  # None on totals (summed over devices)


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
    mfu: float | None


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
    spec: GpuSpec | None
    mfu: float | None
    mfu_dtype: str | None
    model_flops: float | None
    model_kernels_without_cost: int
    flops_coverage: float | None
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
    devices: int
    active_devices: int
    hardware: tuple[HardwareCount, ...]
    steps: int
    median_step_ns: int | None
    max_span_ns: int
    busy_pct: float | None
    compute_pct: float | None
    exposed_comm_pct: float | None
    exposed_memory_pct: float | None
    idle_pct: float | None
    mfu: float | None  # the median device's (lower median); None when no device has one
    mfu_lower_bound: bool
    flops_coverage: float | None
    totals: Timeline  # summed over the active devices (no idle breakdown)
    # what each device's MFU is over: "median step" (the trace has steps: the device's median
    # step's MFU) or "span" (its first start to last end)
    mfu_basis: str = "span"
    # False: the trace names no host (Kineto), ``hosts`` counts its ranks
    hosts_named: bool = True


@dataclass(frozen=True, slots=True)
class TopKernel:
    name: str
    category: str
    subcategory: str | None
    rule: str | None
    count: int
    sum_ns: int
    mean_ns: float
    share_pct: float | None  # of all kernel time in the (filtered) trace
    devices: int


@dataclass(frozen=True, slots=True)
class RooflineRow:
    """One op group of the roofline (``tracelens.analyze.roofline``), unrounded."""

    op: str
    program_id: int | None
    module: str | None
    kernel: str | None
    category: str | None
    dtype: str | None
    spec: str | None
    count: int
    sum_ns: int
    flops: float | None
    bytes: float | None
    intensity: float | None
    tflops_per_s: float | None
    tb_per_s: float | None
    attainable_tflops_per_s: float | None
    bound: str | None
    efficiency: float | None
    no_cost_count: int


@dataclass(frozen=True, slots=True)
class NoFlops:
    """Compute kernels without FLOPs in one category, and their share of busy time."""

    category: str
    count: int
    sum_ns: int
    share_of_busy_pct: float | None


@dataclass(frozen=True, slots=True)
class StepTotal:
    """One step summed over the devices that ran it (the report's per-step bars)."""

    step: int
    devices: int
    timeline: Timeline  # summed (no idle breakdown)
    mfu_mean: float | None  # mean over the devices whose MFU of the step is known


@dataclass(frozen=True, slots=True)
class Summary:
    """The whole ``summarize`` result. ``collectives_full`` is the complete
    ``collectives_report`` of the same events (what ``tracelens report`` renders); the JSON
    contract's ``collectives`` holds its top lines. ``category_totals`` and the fields after
    it are what the renderers show beyond the JSON contract."""

    version: str
    inputs: tuple[dict[str, str], ...]
    alignment: str
    steps_source: str
    warnings: tuple[str, ...]
    filters: dict[str, Any]
    headline: Headline
    devices: tuple[DeviceSummary, ...]
    idle_devices: tuple[DeviceKey, ...]
    top_kernels: tuple[TopKernel, ...]
    collectives_full: dict[str, Any]
    hlo_findings: tuple[Any, ...]  # tracelens.hlo.lens.Finding
    roofline: tuple[RooflineRow, ...]
    no_cost_data: int
    no_cost_data_ns: int
    no_flops: tuple[NoFlops, ...]
    category_totals: tuple[CategoryTime, ...]  # over the reported devices, by exclusive time
    step_totals: tuple[StepTotal, ...]  # by step
    # per-device tables past MAX_DEVICE_ROWS devices: (role, index into devices) of the
    # median, best and worst device by compute share and the outliers; else every device
    device_roles: tuple[tuple[str, int], ...]
    # the median device's share of its span (%): timeline columns ("compute_ns", ...) and
    # compute categories' exclusive time ("excl:gemm", ...); empty under two devices
    median_shares: dict[str, float]
    specs: tuple[GpuSpec, ...]  # the devices' distinct specs, the most used first
    # communication per mesh axis (issue 28: tracelens.analyze.axes), when groups are known
    axes: tuple[Any, ...] = ()  # tracelens.results.axes.AxisTotals

    @property
    def collectives(self) -> dict[str, Any]:
        """The top lines of ``tracelens collectives``: per type, and up to three devices the
        others waited for."""
        rep = self.collectives_full
        return {"by_type": rep["by_type"],
                "stragglers": [s for s in rep["stragglers"] if s["times_last"]][:3]}

    def with_filters(self, extra: dict[str, Any]) -> "Summary":
        from dataclasses import replace
        return replace(self, filters={**self.filters, **extra})
