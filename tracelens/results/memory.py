"""The ``tracelens memory`` result, unrounded (docs/memory.md).

Bytes are integers as the allocator records them, times integer ns on the trace's clock;
``None`` where the trace does not say (no capacity, no step, no fragmentation), never a
guessed zero."""

from __future__ import annotations

from dataclasses import dataclass, field

from tracelens.results import display
from tracelens.results.encode import optional, rounded
from tracelens.results.findings import RankedFinding


@dataclass(frozen=True)
class LiveAllocation:
    """Allocations live at the peak that look alike (same size, requested size, op, shape,
    data type and region), with how many there are; the first one's allocation time."""

    allocation_bytes: int
    count: int
    total_bytes: int
    requested_bytes: int | None
    op: str | None
    shape: str | None
    dtype: str | None
    region: str | None
    first_time_ns: int
    step: int | None


@dataclass(frozen=True)
class StepPeak:
    """The most bytes in use within one step's window, and when (the first time)."""

    step: int
    peak_bytes: int
    time_ns: int


@dataclass(frozen=True)
class DeviceMemory:
    """One allocator of one host (a device's memory, or the host's): its peak in use within
    the profile and what was live at it."""

    host: str
    allocator: str
    device: int | None  # the device the allocator serves; None: host memory or unknown
    events: int  # allocations and frees recorded
    capacity_bytes: int | None
    capacity_source: str | None  # "allocator" (in use + available), "device properties"
    capacity_note: str | None = field(metadata=optional())  # why the capacity is unknown
    peak_bytes: int  # in use at the peak: heap + stack (XSpace), allocated (Kineto)
    peak_time_ns: int
    peak_step: int | None
    peak_op: str | None  # the op of the last allocation at or before the peak
    peak_pct_of_capacity: float | None = field(metadata=rounded(2))
    heap_bytes: int | None  # allocated bytes at the peak
    stack_bytes: int | None  # the allocator's stack reservation at the peak (XSpace)
    reserved_bytes: int | None  # the caching allocator's reserved segments (Kineto)
    cached_free_bytes: int | None  # reserved but not allocated at the peak (Kineto)
    fragmentation: float | None = field(metadata=rounded(6))  # as the allocator says
    lifetime_peak_bytes: int | None  # the allocator's own peak since it started (XSpace)
    live_count: int  # allocations made in the profile and live at the peak
    live_bytes: int
    unattributed_bytes: int | None  # heap at the peak not allocated within the profile
    live: tuple[LiveAllocation, ...]  # the largest, ``top`` of them
    most: LiveAllocation | None  # the group holding the most bytes at the peak
    steps: tuple[StepPeak, ...]
    # (time_ns, bytes in use): every event, or past TIMELINE_POINTS of them the most of each
    # of that many runs of consecutive events (the peak is always among them)
    timeline: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class MemoryResult:
    """``tracelens memory``: per allocator with events, its peak and what holds it; the
    files without allocator events, each with one line saying so."""

    devices: tuple[DeviceMemory, ...]
    without: tuple[str, ...]  # one line per file without allocator events
    start_ns: int | None = None  # the trace's first activity (the text's times count from it)
    # a device whose peak is over FULL_PCT of its capacity (kind "memory_peak"); no step
    # time to project, so each keeps saved_ns null and says why
    findings: tuple[RankedFinding, ...] = ()
    warnings: tuple[str, ...] = ()

    # in a notebook: a screen or less (tracelens.results.display); the whole: to_dict()
    __repr__ = display.short_repr
    _repr_html_ = display.html_repr
    __rich__ = display.rich_table
    to_dict = display.to_dict


@dataclass(frozen=True)
class MemoryChange:
    """``compare``: one allocator's peak in use in base and new (matched by host and
    allocator, or by the host's place in its run where the runs' host names differ)."""

    host: str
    allocator: str
    device: int | None
    base_peak_bytes: int
    new_peak_bytes: int
    delta_bytes: int
    delta_pct: float | None = field(metadata=rounded(2))
    base_pct_of_capacity: float | None = field(metadata=rounded(2))
    new_pct_of_capacity: float | None = field(metadata=rounded(2))
