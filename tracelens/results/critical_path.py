"""The ``tracelens critical-path`` result: per-device paths and ranked what-ifs.

Times are integer ns on the job's clock. JSON comes from :func:`tracelens.results.encode`.
"""

from __future__ import annotations

from dataclasses import dataclass

from tracelens.results import display
from tracelens.results.consistency import Consistency


@dataclass(frozen=True)
class Window:
    start_ns: int
    end_ns: int


@dataclass(frozen=True)
class Component:
    """ns of the path attributed to one component: a device category (``gemm``, ...,
    ``memory``), ``communication``, ``wait:<host>/GPU<d>`` (waiting for that participant's
    arrival at a collective), ``host``, ``launch_latency``, ``sync`` or ``idle``."""

    component: str
    ns: int


@dataclass(frozen=True)
class PathActivity:
    """One activity with time on the path (host events: device and stream null)."""

    kind: str
    name: str
    category: str | None
    host: str
    device: int | None
    stream: int | None
    start_ns: int
    end_ns: int
    on_path_ns: int


@dataclass(frozen=True)
class DevicePath:
    """The critical path of one device's window: ``composition`` adds up to ``length_ns``
    (= the window) exactly; ``graph`` is ``host+device`` or ``device-only`` (the trace has
    no host events for this rank)."""

    rank: int
    host: str
    device: int
    step: int | None
    window: Window
    length_ns: int
    graph: str
    composition: tuple[Component, ...]
    activities: tuple[PathActivity, ...]
    # GPU, TPU or CPU (tracelens.core.model.DEVICE_KINDS): how the labels name the device; a plain
    # field, so orjson writes a whole trace's paths itself (results.encode._direct)
    kind: str = "GPU"
    # the window's ns after the device's last node on the path: its own work ended that much
    # before the window's end (another device set it); the step's path is the one whose work
    # ended last (tracelens.analyze.critical.walk.step_path_key)
    idle_after_ns: int = 0


@dataclass(frozen=True)
class WhatIf:
    """One projection: the graph changed as ``change`` says for ``target`` and solved again.
    ``step_ns``: the longest path now (over the paths shown), ``projected_step_ns`` after the
    change; ``on_path_ns``: the time the change removes that is on the paths now (the most on
    any one path: the saving never exceeds it)."""

    change: str
    target: str
    step_ns: int
    projected_step_ns: int
    saved_ns: int
    on_path_ns: int


@dataclass(frozen=True)
class CriticalPathResult:
    paths: tuple[DevicePath, ...]
    what_if: tuple[WhatIf, ...]
    notes: tuple[str, ...] = ()
    # what the readers said of the files (set by ``tracelens critical-path``, as summarize's;
    # a plain field: orjson writes the result itself, a GB for a whole trace)
    warnings: tuple[str, ...] = ()
    # the paths' shares and the what-ifs checked against the window's measured facts
    # (tracelens.analyze.consistency; no checks run where the facts were not taken)
    consistency: Consistency = Consistency()

    # in a notebook: a screen or less (tracelens.results.display); the whole: to_dict()
    __repr__ = display.short_repr
    _repr_html_ = display.html_repr
    __rich__ = display.rich_table
    to_dict = display.to_dict
