"""Writer for XSpace files, the mirror of ``parsers.xprof``: tests and sample traces use it to
build traces whose answers are known by construction.

It writes what jax.profiler writes for a GPU run (shared/reference/xprof.md §2.2): one
``/device:GPU:<k>`` plane per device with plane stats and ``Stream #N`` lines, interned string
stats (``ref_value``), host step markers with ``step_num`` on a ``python`` line of
``/host:CPU``, and a ``Task Environment`` plane with the profile start time. Line timestamps
are relative to the profile start, as JAX exports them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from parsers.xplane_schema import xspace_class

AMD_MI300X_STATS: dict[str, Any] = {
    "device_vendor": "AMD", "clock_rate": 2_100_000, "core_count": 304,
    "memory_bandwidth": 2_662_400_000_000, "memory_size": 206_141_652_992,
    "compute_cap_major": 9, "compute_cap_minor": 4,
}


@dataclass
class Activity:
    """One device activity. ``stats`` values: str (interned), int, float or bytes."""

    device: int
    stream: int
    name: str
    start_ns: int
    dur_ns: int
    stats: dict[str, Any] = field(default_factory=dict)
    line_name: str | None = None  # default "Stream #<stream>"


class _PlaneBuilder:
    def __init__(self, plane: Any) -> None:
        self.plane = plane
        self._stat_ids: dict[str, int] = {}
        self._event_ids: dict[str, int] = {}
        self._lines: dict[tuple[int, str], Any] = {}

    def stat_id(self, name: str) -> int:
        if name not in self._stat_ids:
            sid = len(self._stat_ids) + 1
            self._stat_ids[name] = sid
            self.plane.stat_metadata[sid].id = sid
            self.plane.stat_metadata[sid].name = name
        return self._stat_ids[name]

    def event_id(self, name: str) -> int:
        if name not in self._event_ids:
            eid = len(self._event_ids) + 1
            self._event_ids[name] = eid
            self.plane.event_metadata[eid].id = eid
            self.plane.event_metadata[eid].name = name
        return self._event_ids[name]

    def set_stat(self, stat: Any, name: str, value: Any) -> None:
        stat.metadata_id = self.stat_id(name)
        if isinstance(value, bool):
            stat.int64_value = int(value)
        elif isinstance(value, int):
            if value >= 2**63:
                stat.uint64_value = value
            else:
                stat.int64_value = value
        elif isinstance(value, float):
            stat.double_value = value
        elif isinstance(value, bytes):
            stat.bytes_value = value
        else:
            stat.ref_value = self.stat_id(str(value))

    def line(self, line_id: int, name: str) -> Any:
        key = (line_id, name)
        if key not in self._lines:
            line = self.plane.lines.add()
            line.id = line_id
            line.name = name
            line.timestamp_ns = 0
            self._lines[key] = line
        return self._lines[key]

    def add_event(self, line: Any, name: str, start_ns: int, dur_ns: int,
                  stats: dict[str, Any]) -> None:
        ev = line.events.add()
        ev.metadata_id = self.event_id(name)
        ev.offset_ps = (start_ns - line.timestamp_ns) * 1000
        ev.duration_ps = dur_ns * 1000
        for k, v in stats.items():
            self.set_stat(ev.stats.add(), k, v)


def build_xspace(activities: Iterable[Activity], *, host: str = "host0",
                 device_stats: dict[int, dict[str, Any]] | None = None,
                 steps: Iterable[tuple[int, int, int]] = (),
                 cpu_ops: Iterable[tuple[int, int, str, int, int]] = (),
                 profile_start_ns: int | None = 1_700_000_000_000_000_000) -> bytes:
    """Serialize a single-host XSpace.

    ``device_stats``: plane stats per GPU ordinal (planes are written even for idle devices).
    ``steps``: (step_num, start_ns, end_ns) host step markers. ``cpu_ops``: XLA:CPU op events
    (thread id, device_ordinal, hlo_op, start_ns, dur_ns) on ``tf_XLAEigen`` host threads.
    """
    space = xspace_class()()
    space.hostnames.append(host)
    acts = sorted(activities, key=lambda a: (a.device, a.stream, a.start_ns))
    ordinals = sorted(set(device_stats or {}) | {a.device for a in acts})
    builders: dict[int, _PlaneBuilder] = {}
    for k in ordinals:
        plane = space.planes.add()
        plane.id = k
        plane.name = f"/device:GPU:{k}"
        b = builders[k] = _PlaneBuilder(plane)
        for name, value in (device_stats or {}).get(k, AMD_MI300X_STATS).items():
            b.set_stat(plane.stats.add(), name, value)
    for a in acts:
        b = builders[a.device]
        line = b.line(a.stream, a.line_name or f"Stream #{a.stream}")
        b.add_event(line, a.name, a.start_ns, a.dur_ns, a.stats)
    host_plane = space.planes.add()
    host_plane.name = "/host:CPU"
    hb = _PlaneBuilder(host_plane)
    steps = list(steps)
    if steps:
        py = hb.line(1, "python")
        for num, start, end in steps:
            hb.add_event(py, "train", start, end - start, {"step_num": num, "_r": 1})
    for tid, ordinal, op, start, dur in cpu_ops:
        line = hb.line(tid, f"tf_XLAEigen/{tid}")
        hb.add_event(line, op, start, dur, {"hlo_op": op, "hlo_module": "jit_step",
                                           "program_id": 1, "device_ordinal": ordinal})
    if profile_start_ns is not None:
        env = space.planes.add()
        env.name = "Task Environment"
        eb = _PlaneBuilder(env)
        eb.set_stat(env.stats.add(), "profile_start_time", profile_start_ns)
    return space.SerializeToString()
