"""The documented JSON of the collectives, compare and scaling results: the only place where
their values are rounded (compare and scaling values are not rounded at all). Keys and their
order are the contract (README); ``TypedDict``s name them.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, Optional, TypedDict

from tracelens.results.collectives import Busbw, Collectives, Instance, Participant
from tracelens.results.runs import Cause, ComparedRun, Comparison, Scaling, Transition


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
            "last": _participant(r.last)}


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
    steps: int
    step_ns: float
    steps_source: str  # only from the CLI


class ComparisonJSON(TypedDict, total=False):
    base: ComparedRunJSON
    new: ComparedRunJSON
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
    out: ComparedRunJSON = {"path": r.path, "devices": r.devices, "steps": r.steps,
                            "step_ns": r.step_ns}
    if r.steps_source is not None:
        out["steps_source"] = r.steps_source
    return out


def comparison_json(c: Comparison) -> ComparisonJSON:
    """``tracelens compare --format json``."""
    out: ComparisonJSON = {
        "base": _run(c.base), "new": _run(c.new), "delta_ns": c.delta_ns,
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
