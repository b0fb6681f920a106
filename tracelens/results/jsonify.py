"""The JSON contract of ``tracelens summarize --format json`` (README "summarize --format
json (contract)"), as TypedDicts, and the one function that writes it from a typed
:class:`~tracelens.results.summary.Summary`. All rounding of the contract happens here:
ratios (MFU, FLOPs coverage) to 6 decimals, percentages to 3, mean kernel time to 0.1 ns,
roofline rates to 6-7 significant digits; integers (ns, counts) are exact.
"""

from __future__ import annotations

from typing import Any, TypedDict

from tracelens.hardware import GpuSpec
from tracelens.results.summary import (IdleBreakdown, NoFlops, RooflineRow, StepSummary,
                                       Summary, Timeline, TopKernel, DeviceSummary, Headline)


class IdleJSON(TypedDict):
    host_launch_ns: int
    sync_wait_ns: int
    launch_latency_ns: int
    no_host_data_ns: int


class TotalsJSON(TypedDict):
    span_ns: int
    busy_ns: int
    compute_ns: int
    comm_ns: int
    exposed_comm_ns: int
    overlapped_comm_ns: int
    memory_ns: int
    exposed_memory_ns: int
    idle_ns: int


class TimelineJSON(TotalsJSON):
    idle_breakdown: IdleJSON


class CategoryJSON(TypedDict):
    category: str
    count: int
    sum_ns: int
    exclusive_ns: int


class StepJSON(TypedDict):
    step: int
    start_ns: int
    end_ns: int
    timeline: TimelineJSON
    mfu: float | None


class SpecJSON(TypedDict):
    id: str
    name: str
    peak_tflops: dict[str, float]
    hbm_tb_per_s: float | None
    link_gb_per_s: float | None
    memory_gb: float | None
    source: str


DeviceJSON = TypedDict("DeviceJSON", {
    "host": str, "rank": int, "device": int, "vendor": "str | None", "arch": "str | None",
    "product": "str | None", "timeline": TimelineJSON, "categories": "list[CategoryJSON]",
    "steps": "list[StepJSON]", "spec": "SpecJSON | None", "mfu": "float | None",
    "mfu_dtype": "str | None", "model_flops": "float | None",
    "model_kernels_without_cost": int, "flops_coverage": "float | None",
    "compute_kernel_ns": int, "flops_covered_ns": int, "mfu_lower_bound": bool})


class HardwareJSON(TypedDict):
    product: str | None
    arch: str | None
    vendor: str | None
    count: int


class HeadlineJSON(TypedDict):
    hosts: int
    devices: int
    active_devices: int
    hardware: list[HardwareJSON]
    steps: int
    median_step_ns: int | None
    max_span_ns: int
    busy_pct: float | None
    compute_pct: float | None
    exposed_comm_pct: float | None
    exposed_memory_pct: float | None
    idle_pct: float | None
    mfu: float | None
    mfu_lower_bound: bool
    flops_coverage: float | None
    totals: TotalsJSON


class IdleDeviceJSON(TypedDict):
    host: str
    rank: int
    device: int


class TopKernelJSON(TypedDict):
    name: str
    category: str
    subcategory: str | None
    rule: str | None
    count: int
    sum_ns: int
    mean_ns: float
    share_pct: float | None
    devices: int


class CollectivesJSON(TypedDict):
    by_type: list[dict[str, Any]]  # the rows of ``tracelens collectives``' by_type
    stragglers: list[dict[str, Any]]  # its stragglers that arrived last at least once, ≤ 3


class RooflineJSON(TypedDict):
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


class NoFlopsJSON(TypedDict):
    category: str
    count: int
    sum_ns: int
    share_of_busy_pct: float | None


class SummaryJSON(TypedDict):
    tracelens_version: str
    inputs: list[dict[str, str]]
    alignment: str
    steps_source: str
    warnings: list[str]
    filters: dict[str, Any]
    headline: HeadlineJSON
    devices: list[DeviceJSON]
    idle_devices: list[IdleDeviceJSON]
    top_kernels: list[TopKernelJSON]
    collectives: CollectivesJSON
    hlo_findings: list[dict[str, Any]]
    roofline: list[RooflineJSON]
    no_cost_data: int
    no_cost_data_ns: int
    no_flops: list[NoFlopsJSON]


def ratio(x: float | None) -> float | None:
    """A fraction (MFU, FLOPs coverage) as the contract writes it: 6 decimals."""
    return None if x is None else round(float(x), 6)


def percent(x: float | None) -> float | None:
    """A percentage as the contract writes it: 3 decimals."""
    return None if x is None else round(x, 3)


def _sig(x: float | None, digits: int) -> float | None:
    return None if x is None else float(f"{x:.{digits + 2}g}")


def _idle(b: IdleBreakdown | None) -> IdleJSON:
    b = b or IdleBreakdown()
    return {"host_launch_ns": b.host_launch_ns, "sync_wait_ns": b.sync_wait_ns,
            "launch_latency_ns": b.launch_latency_ns, "no_host_data_ns": b.no_host_data_ns}


def totals_json(t: Timeline) -> TotalsJSON:
    return {"span_ns": t.span_ns, "busy_ns": t.busy_ns, "compute_ns": t.compute_ns,
            "comm_ns": t.comm_ns, "exposed_comm_ns": t.exposed_comm_ns,
            "overlapped_comm_ns": t.overlapped_comm_ns, "memory_ns": t.memory_ns,
            "exposed_memory_ns": t.exposed_memory_ns, "idle_ns": t.idle_ns}


def _timeline(t: Timeline) -> TimelineJSON:
    return {**totals_json(t), "idle_breakdown": _idle(t.idle_breakdown)}  # type: ignore


def _step(s: StepSummary) -> StepJSON:
    return {"step": s.step, "start_ns": s.start_ns, "end_ns": s.end_ns,
            "timeline": _timeline(s.timeline), "mfu": ratio(s.mfu)}


def spec_json(spec: GpuSpec | None) -> SpecJSON | None:
    if spec is None:
        return None
    d = spec.to_dict()
    return {k: d[k] for k in ("id", "name", "peak_tflops", "hbm_tb_per_s",  # type: ignore
                              "link_gb_per_s", "memory_gb", "source")}


def device_json(d: DeviceSummary) -> DeviceJSON:
    return {"host": d.host, "rank": d.rank, "device": d.device, "vendor": d.vendor,
            "arch": d.arch, "product": d.product, "timeline": _timeline(d.timeline),
            "categories": [{"category": c.category, "count": c.count, "sum_ns": c.sum_ns,
                            "exclusive_ns": c.exclusive_ns} for c in d.categories],
            "steps": [_step(s) for s in d.steps], "spec": spec_json(d.spec),
            "mfu": ratio(d.mfu), "mfu_dtype": d.mfu_dtype, "model_flops": d.model_flops,
            "model_kernels_without_cost": d.model_kernels_without_cost,
            "flops_coverage": ratio(d.flops_coverage),
            "compute_kernel_ns": d.compute_kernel_ns, "flops_covered_ns": d.flops_covered_ns,
            "mfu_lower_bound": d.mfu_lower_bound}


def headline_json(h: Headline) -> HeadlineJSON:
    return {"hosts": h.hosts, "devices": h.devices, "active_devices": h.active_devices,
            "hardware": [{"product": x.product, "arch": x.arch, "vendor": x.vendor,
                          "count": x.count} for x in h.hardware],
            "steps": h.steps, "median_step_ns": h.median_step_ns,
            "max_span_ns": h.max_span_ns, "busy_pct": percent(h.busy_pct),
            "compute_pct": percent(h.compute_pct),
            "exposed_comm_pct": percent(h.exposed_comm_pct),
            "exposed_memory_pct": percent(h.exposed_memory_pct),
            "idle_pct": percent(h.idle_pct), "mfu": ratio(h.mfu),
            "mfu_lower_bound": h.mfu_lower_bound, "flops_coverage": ratio(h.flops_coverage),
            "totals": totals_json(h.totals)}


def top_kernel_json(k: TopKernel) -> TopKernelJSON:
    return {"name": k.name, "category": k.category, "subcategory": k.subcategory,
            "rule": k.rule, "count": k.count, "sum_ns": k.sum_ns,
            "mean_ns": round(k.mean_ns, 1), "share_pct": percent(k.share_pct),
            "devices": k.devices}


def roofline_json(r: RooflineRow) -> RooflineJSON:
    return {"op": r.op, "program_id": r.program_id, "module": r.module, "kernel": r.kernel,
            "category": r.category, "dtype": r.dtype, "spec": r.spec, "count": r.count,
            "sum_ns": r.sum_ns, "flops": r.flops, "bytes": r.bytes,
            "intensity": _sig(r.intensity, 4), "tflops_per_s": _sig(r.tflops_per_s, 4),
            "tb_per_s": _sig(r.tb_per_s, 5),
            "attainable_tflops_per_s": _sig(r.attainable_tflops_per_s, 4),
            "bound": r.bound, "efficiency": _sig(r.efficiency, 5),
            "no_cost_count": r.no_cost_count}


def _no_flops(n: NoFlops) -> NoFlopsJSON:
    return {"category": n.category, "count": n.count, "sum_ns": n.sum_ns,
            "share_of_busy_pct": percent(n.share_of_busy_pct)}


def summary_json(s: Summary) -> SummaryJSON:
    """The documented JSON form of ``s`` (keys in contract order, rounded as documented)."""
    from tracelens.analyze.hlo_findings import finding_json

    return {
        "tracelens_version": s.version,
        "inputs": list(s.inputs),
        "alignment": s.alignment,
        "steps_source": s.steps_source,
        "warnings": list(s.warnings),
        "filters": dict(s.filters),
        "headline": headline_json(s.headline),
        "devices": [device_json(d) for d in s.devices],
        "idle_devices": [{"host": h, "rank": r, "device": d} for h, r, d in s.idle_devices],
        "top_kernels": [top_kernel_json(k) for k in s.top_kernels],
        "collectives": s.collectives,  # type: ignore[typeddict-item]
        "hlo_findings": [finding_json(f) for f in s.hlo_findings],
        "roofline": [roofline_json(r) for r in s.roofline],
        "no_cost_data": s.no_cost_data,
        "no_cost_data_ns": s.no_cost_data_ns,
        "no_flops": [_no_flops(n) for n in s.no_flops],
    }
