"""Communication per mesh axis (issue 28), unrounded; JSON through ``results.encode``.

Times are integer ns, bytes integers, bandwidths GB/s floats as computed; ``None`` where
unknown (no message size, no link peak, hosts of the group's members not in the trace).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tracelens.results.collectives import Busbw
from tracelens.results.encode import rounded


@dataclass(frozen=True)
class MeshAxis:
    """One axis of the job's device mesh, outermost first: its name, its size and the id
    stride between neighbours along it (1: the innermost, contiguous axis). ``source``:
    ``mesh`` (the --mesh option), ``trace`` (the name the trace's process groups give),
    ``inferred`` (from the groups' structure, named ``axis<i>``); ``observed``: some
    collective's group lies along it."""

    name: str
    size: int
    stride: int
    source: str
    observed: bool


@dataclass(frozen=True)
class AxisTotals:
    """The collectives whose group lies along one axis (or several: ``fsdp+tp``).

    ``count``: activities (one per device per execution); ``bytes``: their message bytes
    summed (``unsized``: activities without a size, not in ``bytes``); ``time_ns``: their
    durations summed; ``exposed_ns``: the part no compute kernel on their device hid;
    ``exposed_share``: that part of the exposed time of every collective activity.
    ``crosses_hosts``: some group of the axis has members on two hosts (None: a member's
    host is not in the trace). ``link``: ``intra`` (xGMI/NVLink) or ``inter`` (network) or
    None (unknown); ``busbw.link_pct`` compares with that link's per-direction peak."""

    axis: str
    size: int
    crosses_hosts: bool | None
    types: tuple[str, ...]
    count: int
    bytes: int
    unsized: int
    time_ns: int
    exposed_ns: int
    exposed_share: float | None = field(metadata=rounded(4))
    link: str | None
    link_gb_per_s: float | None = field(metadata=rounded(3))
    busbw: Busbw


@dataclass(frozen=True)
class Unmapped:
    """Collective activities without an axis, and why."""

    reason: str
    count: int
    exposed_ns: int


@dataclass(frozen=True)
class InstanceAxis:
    """One matched collective instance and its axis (None: see ``reason``)."""

    type: str
    op: str | None
    occurrence: int
    start_ns: int
    participants: int
    axis: str | None
    reason: str | None
    key: str = field(default="", metadata={"json": False})  # ``instances.with_instance_keys``


@dataclass(frozen=True)
class Axes:
    """The whole result: the mesh, per-axis totals (most exposed first), the activities
    without an axis by reason, and every instance's axis (in start order)."""

    mesh: tuple[MeshAxis, ...]
    world: int
    axes: tuple[AxisTotals, ...]
    unmapped: tuple[Unmapped, ...]
    activities: int
    exposed_ns: int
    instances: tuple[InstanceAxis, ...] = field(metadata={"json": False})
