"""The ``tracelens collectives`` result, unrounded (docs/definitions.md#collectives).

Times are integer ns; bandwidths GB/s floats as computed; ``None`` where unknown (no message
size, no link bandwidth in the hardware table, no unique last arrival). The JSON is
:func:`tracelens.results.encode.encode` of it: busbw rounded to 3 decimals, its share of the
link to 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tracelens.results import display
from tracelens.results.encode import flattened, optional, renamed, rounded
from tracelens.results.filters import ActiveFilters

GBPS = rounded(3)


@dataclass(frozen=True)
class Busbw:
    """Bus bandwidth over a group's activities: median and nearest-rank p10/p90 (GB/s), and
    the median's percentage of the per-direction link bandwidth."""

    median: float | None = field(metadata=GBPS | renamed("busbw_gb_per_s"))
    p10: float | None = field(metadata=GBPS | renamed("busbw_p10_gb_per_s"))
    p90: float | None = field(metadata=GBPS | renamed("busbw_p90_gb_per_s"))
    link_pct: float | None = field(metadata=rounded(1) | renamed("busbw_link_pct"))


@dataclass(frozen=True)
class TypeTotals:
    """One collective type: activities, time and exposed (not hidden by compute) time."""

    type: str
    count: int
    sum_ns: int
    exposed_ns: int
    busbw: Busbw = field(metadata=flattened())


@dataclass(frozen=True)
class OpTotals:
    """One (type, HLO op): as :class:`TypeTotals`, with the largest message size."""

    type: str
    op: str | None
    count: int
    msg_bytes: int | None
    sum_ns: int
    exposed_ns: int
    busbw: Busbw = field(metadata=flattened())
    # where its type and message size come from, as the reader says (Kineto:
    # record_param_comms, c10d::alltoall_base_, nccl:all_to_all Input Dims, kernel name)
    type_source: str | None = field(default=None, metadata=optional())
    size_source: str | None = field(default=None, metadata=optional())


@dataclass(frozen=True)
class Participant:
    host: str
    rank: int
    device: int


@dataclass(frozen=True)
class Instance:
    """One matched execution of a collective across its participants."""

    type: str
    op: str | None
    module: str | None
    occurrence: int
    participants: int
    start_ns: int  # the first participant's start
    arrival_skew_ns: int
    transfer_ns: int  # shortest participant duration
    exposed_ns: int
    busbw_gb_per_s: float | None = field(metadata=GBPS)
    last: Participant | None  # the unique last arrival, if any
    axis: str | None = None  # its mesh axis, None: unknown (``Collectives.unmapped``)
    key: str | None = field(default=None, compare=False,
                            metadata={"json": False})  # instance key (not in the JSON)


@dataclass(frozen=True)
class Straggler:
    """One device: how often it arrived last, the waiting it caused and its own waiting."""

    host: str
    rank: int
    device: int
    instances: int
    times_last: int
    wait_ns: int
    own_wait_ns: int


@dataclass(frozen=True)
class MeshAxis:
    """One axis of the job's device mesh, outermost first: its name, its size and the id
    stride between neighbours along it (1: the innermost, contiguous axis). ``source``:
    ``mesh`` (the --mesh option), ``hlo`` (the mesh JAX's Shardy records in the HLO
    module, ``xla.sdy.meshes``), ``trace`` (the name the trace's process groups give),
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
    # its activities whose group was inferred from the ranks that matched them
    groups_inferred: int | None = field(default=None, metadata=optional())

@dataclass(frozen=True)
class Unmapped:
    """Collective activities without an axis, and why."""

    reason: str
    count: int
    exposed_ns: int


@dataclass(frozen=True)
class Collectives:
    """The whole result. ``worst`` holds the ``top`` instances of largest arrival skew;
    ``instances`` counts all matched instances. ``steps_source`` and ``filters`` are the
    command's (set by ``tracelens collectives``; ``filters`` only when one is active)."""

    by_type: tuple[TypeTotals, ...]
    ops: tuple[OpTotals, ...] = field(metadata=renamed("collectives"))
    worst: tuple[Instance, ...] = field(metadata=renamed("worst_instances"))
    stragglers: tuple[Straggler, ...]
    alignment: str
    instances: int
    link_gb_per_s: float | None
    # busbw counts one direction per GPU (nccl-tests): half the aggregate link
    link_unidirectional_gb_per_s: float | None = field(init=False)
    # per mesh axis (``tracelens.analyze.communication.axes``): the mesh outermost first,
    # the
    # axes most exposed first, the activities without an axis by reason
    mesh: tuple[MeshAxis, ...] = ()
    axes: tuple[AxisTotals, ...] = ()
    unmapped: tuple[Unmapped, ...] = ()
    groups_inferred: int | None = field(default=None, metadata=optional())  # as Axes'
    groups_inferred_how: str | None = field(default=None, metadata=optional())
    steps_source: str | None = field(default=None, metadata=optional())
    filters: ActiveFilters | None = field(default=None, metadata=optional())
    # what the readers said of the files (set by ``tracelens collectives``, as summarize's)
    warnings: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        half = self.link_gb_per_s / 2 if self.link_gb_per_s else None
        object.__setattr__(self, "link_unidirectional_gb_per_s", half)

    # in a notebook: a screen or less (tracelens.results.display); the whole: to_dict()
    __repr__ = display.short_repr
    _repr_html_ = display.html_repr
    __rich__ = display.rich_table
    to_dict = display.to_dict


@dataclass(frozen=True)
class SummaryCollectives:
    """``summarize``'s collectives: per type, and up to three devices the others waited for
    (those that arrived last at least once)."""

    by_type: tuple[TypeTotals, ...]
    stragglers: tuple[Straggler, ...]


def top_lines(c: Collectives) -> SummaryCollectives:
    return SummaryCollectives(c.by_type, tuple(s for s in c.stragglers if s.times_last)[:3])
