"""The simulator's job description: pure data (docs/simulator.md).

A :class:`Job` is one training step on ``len(programs)`` ranks. Rank ``r`` is device
``r % gpus_per_host`` of host ``r // gpus_per_host``, with one host thread running
``programs[r]`` from t=0. Times are integer nanoseconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union

STREAMS = ("compute", "comm", "copy")
"""Each device's streams, in the order the walk prefers them on ties."""

CATEGORIES = ("gemm", "attention", "elementwise", "reduction", "memory", "convolution",
              "other")
"""Device-item categories, named as the analyzer names its components."""

COLLECTIVE_TYPES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "send-recv")


@dataclass(frozen=True)
class Kernel:
    """A device item: a kernel, or a copy (``copy`` = "h2d", "d2h" or "d2d": a memcpy record
    of category ``memory``). ``delay_ns``: the part of ``ns`` that is this rank's planted
    delay (removed by the ``on_time`` change). ``attainable_ns``: its time at the roofline
    (the ``roofline`` change), None when not modelled."""

    category: str
    ns: int
    stream: str = "compute"
    copy: str | None = None
    delay_ns: int = 0
    attainable_ns: int | None = None
    label: str = ""


@dataclass(frozen=True)
class Collective:
    """A collective kernel on the comm stream. Every member of ``group`` (ranks) launches
    one with the same ``key``; its start is that member's arrival, and every member's ends
    at the last arrival + ``transfer_ns``. ``hidden``: fully overlapped (the ``hide``
    change): each member ends at its own arrival."""

    ctype: str
    group: tuple[int, ...]
    transfer_ns: int
    key: str
    stream: str = "comm"
    hidden: bool = False
    label: str = ""

    @property
    def category(self) -> str:
        return "communication"


Item = Union[Kernel, Collective]


@dataclass(frozen=True)
class HostOp:
    """Host busy for ``ns``: a traced CPU op when ``name`` is set, an untraced gap otherwise.
    ``delay_ns``: the part of ``ns`` that is a planted delay."""

    ns: int
    name: str | None = None
    delay_ns: int = 0


@dataclass(frozen=True)
class Launch:
    """A launch API call (``Job.call_ns``) enqueuing ``item`` on its stream at the call's end."""

    item: Item


@dataclass(frozen=True)
class GraphLaunch:
    """One graph-launch call enqueuing all ``items`` at its end."""

    items: tuple[Item, ...]


@dataclass(frozen=True)
class RecordEvent:
    """Event ``ev`` completes when the last item enqueued on ``stream`` before it ends."""

    stream: str
    ev: str


@dataclass(frozen=True)
class WaitEvent:
    """Items enqueued on ``stream`` after this call start only once ``ev`` has completed."""

    stream: str
    ev: str


@dataclass(frozen=True)
class Sync:
    """Block the host until everything enqueued before on ``stream`` (None: the device) ends."""

    stream: str | None = None


@dataclass(frozen=True)
class CopyD2H:
    """A blocking device-to-host copy of ``ns`` enqueued on ``stream`` like a launch; the
    call ends when the copy does."""

    ns: int
    stream: str = "compute"


Instr = Union[HostOp, Launch, GraphLaunch, RecordEvent, WaitEvent, Sync, CopyD2H]


@dataclass(frozen=True)
class Job:
    """One step of a job. ``call_ns``: every host API call's own time (launch, graph launch,
    record, wait, sync, copy); ``launch_latency_ns``: from a launch call's end to the
    earliest start of its item; ``queue_depth``: items a stream holds enqueued and not
    finished (a launch onto a full stream blocks); ``vendor``: the device model whose kernel
    and API names the writers use (a key of tracelens_dev.synth.devices.DEVICE_MODELS)."""

    programs: tuple[tuple[Instr, ...], ...]
    call_ns: int = 3_000
    launch_latency_ns: int = 4_000
    queue_depth: int = 1024
    gpus_per_host: int = 8
    vendor: str = "h100"
    name: str = "sim"
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def ranks(self) -> int:
        return len(self.programs)

    def where(self, rank: int) -> tuple[int, int]:
        """(host index, device ordinal) of ``rank``."""
        return rank // self.gpus_per_host, rank % self.gpus_per_host

    def host_name(self, rank: int) -> str:
        return f"sim-node{self.where(rank)[0]}"

    def device_label(self, rank: int) -> str:
        """``<host>/GPU<d>``, as the analyzer names a device."""
        h, d = self.where(rank)
        return f"sim-node{h}/GPU{d}"
