"""The documented JSON of the collectives, compare and scaling results: the only place where
their values are rounded. Keys and their order are the contract (README); ``TypedDict``s
name them.
"""

from __future__ import annotations

from typing import Optional, TypedDict

from tracelens.results.collectives import Busbw, Collectives, Instance, Participant


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
