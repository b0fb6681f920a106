"""Communication per mesh axis, unrounded; JSON through ``results.encode``.

Times are integer ns, bytes integers, bandwidths GB/s floats as computed; ``None`` where
unknown (no message size, no link peak, hosts of the group's members not in the trace).
``MeshAxis``, ``AxisTotals`` and ``Unmapped`` live in :mod:`tracelens.results.collectives`
(the collectives result holds them; re-exported here).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tracelens.results import display
from tracelens.results.collectives import (AxisTotals, Busbw, MeshAxis, Participant,  # noqa: F401
                                           Unmapped)
from tracelens.results.encode import optional, rounded


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
    balance: "Balance | None" = None  # all-to-all balance, when the job has all-to-alls
    pipeline: "Pipeline | None" = None  # bubbles per stage, when the job has stages
    # activities whose process group was inferred (the trace records none), and how
    groups_inferred: int | None = field(default=None, metadata=optional())
    groups_inferred_how: str | None = field(default=None, metadata=optional())
    # what the readers said of the files (set by ``tracelens axes``, as summarize's)
    warnings: tuple[str, ...] = ()

    # in a notebook: a screen or less (tracelens.results.display); the whole: to_dict()
    __repr__ = display.short_repr
    _repr_html_ = display.html_repr
    __rich__ = display.rich_table
    to_dict = display.to_dict


@dataclass(frozen=True)
class SlowRank:
    """A device that was the slowest participant of all-to-all instances, how often."""

    host: str
    rank: int
    device: int
    times: int
    instances: int  # the all-to-all instances it took part in


@dataclass(frozen=True)
class A2AInstance:
    """One all-to-all (dispatch/combine) execution within one group: per-rank time (from
    the last participant's arrival to its own end) and bytes, max/mean over its ranks."""

    type: str
    op: str | None
    occurrence: int
    group: str | None
    axis: str | None
    step: int | None
    participants: int
    start_ns: int
    time_imbalance: float | None = field(metadata=rounded(4))
    bytes_imbalance: float | None = field(metadata=rounded(4))
    slowest: Participant | None  # the unique slowest participant, if any


@dataclass(frozen=True)
class StepBalance:
    """One step: each rank's all-to-all time (and bytes) summed over the step, max/mean."""

    step: int
    instances: int
    time_imbalance: float | None = field(metadata=rounded(4))
    bytes_imbalance: float | None = field(metadata=rounded(4))


@dataclass(frozen=True)
class Balance:
    """MoE all-to-all balance: per instance, per step, and the ranks that were
    the slowest participant, most often first; ``time_basis``: what a rank's time is."""

    time_basis: str
    instances: tuple[A2AInstance, ...]
    steps: tuple[StepBalance, ...]
    slowest: tuple[SlowRank, ...]


@dataclass(frozen=True)
class StageBubble:
    """One pipeline stage, over its devices and steps
    (``tracelens.analyze.communication.pipeline``):
    mean step time and bubble (ns), the bubble's fraction of the step time, and its
    warm-up / cool-down shares (None: no bubble)."""

    stage: int
    devices: int
    device_steps: int
    step_ns: float = field(metadata=rounded(1))
    bubble_ns: float = field(metadata=rounded(1))
    bubble_fraction: float | None = field(metadata=rounded(4))
    warmup_share: float | None = field(metadata=rounded(4))
    cooldown_share: float | None = field(metadata=rounded(4))


@dataclass(frozen=True)
class Pipeline:
    """The pipeline axis and each stage's bubbles."""

    axis: str
    stages: tuple[StageBubble, ...]
