"""The JSON contracts of the commands, as TypedDicts, and the functions that write them
from the typed results (:mod:`tracelens.results`): the only module that rounds.

``summarize`` (README "summarize --format json (contract)"): ratios (MFU, FLOPs coverage)
to 6 decimals, percentages to 3, mean kernel time to 0.1 ns, roofline rates to 6-7
significant digits; integers (ns, counts) are exact. ``collectives``: busbw to 3 decimals,
its share of the link to 1. ``compare`` and ``scaling``: values as computed.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Iterable, Optional, TypedDict

from tracelens.hardware import GpuSpec
from tracelens.results.encode import encode
from tracelens.results.summary import (HardwareCount, IdleBreakdown, NoFlops, RooflineRow,
                                       StepSummary, Summary, Timeline, TopKernel,
                                       DeviceSummary, Headline)

if TYPE_CHECKING:  # annotations only: summarize need not import the HLO lens or compare
    from tracelens.hlo.lens import Finding
    from tracelens.results.collectives import Busbw, Collectives, Instance, Participant
    from tracelens.results.hlo import HloLensResult
    from tracelens.results.runs import Cause, ComparedRun, Comparison, Scaling, Transition


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
    hosts_named: bool  # False: the trace names no host (Kineto), hosts counts its ranks
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
    mfu_basis: str
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


class SummaryCollectivesJSON(TypedDict):
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
    collectives: SummaryCollectivesJSON
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


def hardware_json(counts: Iterable[HardwareCount]) -> list[HardwareJSON]:
    """The headline's (and each ``compare`` side's) ``hardware`` list."""
    return [{"product": x.product, "arch": x.arch, "vendor": x.vendor, "count": x.count}
            for x in counts]


def headline_json(h: Headline) -> HeadlineJSON:
    return {"hosts": h.hosts, "hosts_named": h.hosts_named, "devices": h.devices,
            "active_devices": h.active_devices,
            "hardware": hardware_json(h.hardware),
            "steps": h.steps, "median_step_ns": h.median_step_ns,
            "max_span_ns": h.max_span_ns, "busy_pct": percent(h.busy_pct),
            "compute_pct": percent(h.compute_pct),
            "exposed_comm_pct": percent(h.exposed_comm_pct),
            "exposed_memory_pct": percent(h.exposed_memory_pct),
            "idle_pct": percent(h.idle_pct), "mfu": ratio(h.mfu),
            "mfu_lower_bound": h.mfu_lower_bound, "mfu_basis": h.mfu_basis,
            "flops_coverage": ratio(h.flops_coverage),
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
        # communication per mesh axis (issue 28), only where the trace gives groups
        **({"axes": encode(list(s.axes))} if s.axes else {}),  # type: ignore[typeddict-item]
    }


# collectives, compare and scaling

def _num(v: float | None, nd: int = 3) -> float | None:
    return None if v is None else round(float(v), nd)


def _pct(v: float | None) -> float | None:
    return None if v is None else round(v, 1)


class ParticipantJSON(TypedDict):
    host: str
    rank: int
    device: int


class TypeJSON(TypedDict):
    type: str
    count: int
    sum_ns: int
    exposed_ns: int
    busbw_gb_per_s: Optional[float]
    busbw_p10_gb_per_s: Optional[float]
    busbw_p90_gb_per_s: Optional[float]
    busbw_link_pct: Optional[float]


class OpJSON(TypedDict):
    type: str
    op: Optional[str]
    count: int
    msg_bytes: Optional[int]
    sum_ns: int
    exposed_ns: int
    busbw_gb_per_s: Optional[float]
    busbw_p10_gb_per_s: Optional[float]
    busbw_p90_gb_per_s: Optional[float]
    busbw_link_pct: Optional[float]


class InstanceJSON(TypedDict):
    type: str
    op: Optional[str]
    module: Optional[str]
    occurrence: int
    participants: int
    start_ns: int
    arrival_skew_ns: int
    transfer_ns: int
    exposed_ns: int
    busbw_gb_per_s: Optional[float]
    last: Optional[ParticipantJSON]
    axis: Optional[str]


class StragglerJSON(TypedDict):
    host: str
    rank: int
    device: int
    instances: int
    times_last: int
    wait_ns: int
    own_wait_ns: int


class CollectivesJSON(TypedDict):
    by_type: list[TypeJSON]
    collectives: list[OpJSON]
    worst_instances: list[InstanceJSON]
    stragglers: list[StragglerJSON]
    alignment: str
    instances: int
    link_gb_per_s: Optional[float]
    link_unidirectional_gb_per_s: Optional[float]
    mesh: list[Any]  # results.axes.MeshAxis, through results.encode
    axes: list[Any]  # results.axes.AxisTotals
    unmapped: list[Any]  # results.axes.Unmapped


def _busbw(b: Busbw) -> dict:
    return {"busbw_gb_per_s": _num(b.median), "busbw_p10_gb_per_s": _num(b.p10),
            "busbw_p90_gb_per_s": _num(b.p90), "busbw_link_pct": _pct(b.link_pct)}


def _participant(p: Participant | None) -> ParticipantJSON | None:
    return None if p is None else {"host": p.host, "rank": p.rank, "device": p.device}


def _instance(r: Instance) -> InstanceJSON:
    return {"type": r.type, "op": r.op, "module": r.module, "occurrence": r.occurrence,
            "participants": r.participants, "start_ns": r.start_ns,
            "arrival_skew_ns": r.arrival_skew_ns, "transfer_ns": r.transfer_ns,
            "exposed_ns": r.exposed_ns, "busbw_gb_per_s": _num(r.busbw_gb_per_s),
            "last": _participant(r.last), "axis": r.axis}


def collectives_json(c: Collectives) -> CollectivesJSON:
    """``tracelens collectives --format json`` (before the CLI's ``steps_source`` and
    ``filters``); busbw rounded to 3 decimals, link percentages to 1."""
    return {
        "by_type": [{"type": r.type, "count": r.count, "sum_ns": r.sum_ns,  # type: ignore[misc]
                     "exposed_ns": r.exposed_ns, **_busbw(r.busbw)} for r in c.by_type],
        "collectives": [{"type": r.type, "op": r.op,  # type: ignore[misc]
                         "count": r.count, "msg_bytes": r.msg_bytes, "sum_ns": r.sum_ns,
                         "exposed_ns": r.exposed_ns, **_busbw(r.busbw)} for r in c.ops],
        "worst_instances": [_instance(r) for r in c.worst],
        "stragglers": [{"host": s.host, "rank": s.rank, "device": s.device,
                        "instances": s.instances, "times_last": s.times_last,
                        "wait_ns": s.wait_ns, "own_wait_ns": s.own_wait_ns}
                       for s in c.stragglers],
        "alignment": c.alignment, "instances": c.instances,
        "link_gb_per_s": c.link_gb_per_s,
        "link_unidirectional_gb_per_s": c.link_unidirectional_gb_per_s,
        # per mesh axis (issue 28): written by the generic encoder from the result types
        "mesh": encode(list(c.mesh)), "axes": encode(list(c.axes)),  # type: ignore[typeddict-item]
        "unmapped": encode(list(c.unmapped)),  # type: ignore[typeddict-item]
    }


class CauseJSON(TypedDict, total=False):
    component: str
    delta_ns: float
    share: Optional[float]
    hlo_finding: str  # only when there is one


# functional form: "from" is a Python keyword
TransitionJSON = TypedDict("TransitionJSON", {
    "from": str, "to": str, "devices": list[int], "efficiency": Optional[float], "mode": str,
    "step_ns": list[float], "delta_ns": float, "causes": list[CauseJSON],
    "busbw": dict[str, list[Optional[float]]],
    "arrival_skew_ns": dict[str, list[Optional[float]]],
    "stragglers": list[dict[str, Any]],  # TypeStraggler fields
    "warnings": list[str], "verdict": list[str]})


class ScalingRunJSON(TypedDict):
    path: str
    devices: int
    hosts: int
    steps: int
    steps_source: str
    step_ns: float
    components: dict[str, float]


class ScalingJSON(TypedDict, total=False):
    runs: list[ScalingRunJSON]
    transitions: list[TransitionJSON]
    filters: dict[str, Any]  # only when a filter is active


class ComparedRunJSON(TypedDict, total=False):
    path: str
    devices: int
    hardware: list[HardwareJSON]
    steps: int
    step_ns: float
    steps_source: str  # only from the CLI


class ComparisonJSON(TypedDict, total=False):
    base: ComparedRunJSON
    new: ComparedRunJSON
    warnings: list[str]  # hardware mismatches, then "base: ..." and "new: ..." warnings
    delta_ns: float
    delta_pct: Optional[float]
    components: list[dict[str, Any]]  # ComponentChange fields
    busbw: dict[str, list[Optional[float]]]
    arrival_skew_ns: dict[str, list[Optional[float]]]
    kernels: list[dict[str, Any]]  # KernelChange fields
    only_base: list[dict[str, Any]]  # KernelOnly fields
    only_new: list[dict[str, Any]]
    matching: dict[str, int]  # Matching fields
    verdict: list[str]
    filters: dict[str, Any]  # only when a filter is active
    fail_above_pct: Optional[float]  # these two only from the CLI
    regression: bool


def _pairs(d: dict[str, tuple[float | None, float | None]]) -> dict[str, list[float | None]]:
    return {k: list(v) for k, v in d.items()}


def _cause(c: Cause) -> CauseJSON:
    out: CauseJSON = {"component": c.component, "delta_ns": c.delta_ns, "share": c.share}
    if c.hlo_finding is not None:
        out["hlo_finding"] = c.hlo_finding
    return out


def transition_json(t: Transition) -> TransitionJSON:
    """One ``scaling`` transition (also what ``compare`` reads its busbw and skew from)."""
    return {"from": t.from_path, "to": t.to_path,
            "devices": list(t.devices), "efficiency": t.efficiency, "mode": t.mode,
            "step_ns": list(t.step_ns), "delta_ns": t.delta_ns,
            "causes": [_cause(c) for c in t.causes], "busbw": _pairs(t.busbw),
            "arrival_skew_ns": _pairs(t.arrival_skew_ns),
            "stragglers": [asdict(s) for s in t.stragglers], "warnings": list(t.warnings),
            "verdict": list(t.verdict)}


def scaling_json(s: Scaling) -> ScalingJSON:
    """``tracelens scaling --format json``."""
    out: ScalingJSON = {"runs": [asdict(r) for r in s.runs],  # type: ignore[typeddict-item]
                        "transitions": [transition_json(t) for t in s.transitions]}
    if s.filters:
        out["filters"] = s.filters
    return out


def _run(r: ComparedRun) -> ComparedRunJSON:
    out: ComparedRunJSON = {"path": r.path, "devices": r.devices,
                            "hardware": hardware_json(r.hardware), "steps": r.steps,
                            "step_ns": r.step_ns}
    if r.steps_source is not None:
        out["steps_source"] = r.steps_source
    return out


def comparison_json(c: Comparison) -> ComparisonJSON:
    """``tracelens compare --format json``."""
    out: ComparisonJSON = {
        "base": _run(c.base), "new": _run(c.new), "warnings": list(c.warnings),
        "delta_ns": c.delta_ns,
        "delta_pct": c.delta_pct, "components": [asdict(r) for r in c.components],
        "busbw": _pairs(c.busbw), "arrival_skew_ns": _pairs(c.arrival_skew_ns),
        "kernels": [asdict(k) for k in c.kernels],
        "only_base": [asdict(k) for k in c.only_base],
        "only_new": [asdict(k) for k in c.only_new], "matching": asdict(c.matching),
        "verdict": list(c.verdict)}
    if c.filters:
        out["filters"] = c.filters
    if c.gate is not None:
        out["fail_above_pct"] = c.gate.fail_above_pct
        out["regression"] = c.gate.regression
    return out


# hlo

def finding_json(f: Finding) -> dict[str, Any]:
    return {"kind": f.kind, "program": f.program, "program_id": f.program_id,
            "instruction": f.instruction, "instructions": list(f.instructions),
            "opcode": f.opcode,
            "message": f.message, "bytes_per_step": f.bytes_per_step,
            "exposed_ns_per_step": None if f.exposed_ns_per_step is None
            else round(f.exposed_ns_per_step, 3),
            "exposed_note": f.exposed_note or None,
            "compilations": len(f.program_ids) or 1, "program_ids": list(f.program_ids),
            "executed": f.executed}


def lens_json(result: HloLensResult, top: int | None = None) -> dict[str, Any]:
    """The documented JSON contract of ``tracelens hlo`` (README)."""
    programs = [{
        "module": p.module, "program_id": p.program_id, "scheduled": p.scheduled,
        "executed": p.executed, "notes": list(p.notes),
        "collectives": [{
            "name": c.name, "opcode": c.opcode, "dtype": c.dtype, "bytes": c.bytes,
            "group_size": c.group_size, "async": c.is_async, "done": c.done,
            "wrapped": c.wrapped,
            "computation": c.computation, "in_loop": c.in_loop, "loop": c.loop,
            "trip_count": c.trip_count, "trip_note": c.trip_note or None,
            "executions_per_step": c.executions_per_step,
            "bytes_per_step": c.bytes_per_step, "spans_hosts": c.spans_hosts,
            "overlap_ops": c.overlap_ops, "overlap_flops": c.overlap_flops,
            "overlap_bytes": c.overlap_bytes,
            "groups": None if c.groups is None else [list(g) for g in c.groups],
        } for c in p.collectives]} for p in result.programs]
    shown = result.findings if top is None else result.findings[:top]
    return {"programs": programs, "findings": [finding_json(f) for f in shown],
            "findings_total": len(result.findings), "timed": result.timed,
            "problems": list(result.problems)}
