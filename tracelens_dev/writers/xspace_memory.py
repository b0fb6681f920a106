"""Add allocator events to an XSpace file (a written one, or a copy of a real one): the
``MemoryAllocation`` / ``MemoryDeallocation`` events the TPU runtime and the XLA GPU BFC
allocators record on the host threads plane (``/host:CPU``), with the stats XProf's
``memory_profile`` reads, on a line of their own."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from parsers.xplane_schema import xspace_class

HOST_PLANE = "/host:CPU"


@dataclass(frozen=True)
class AllocatorEvent:
    """One allocation (``free`` False) or free at ``ns`` (the line starts at 0) with the
    allocator's totals after it; ``allocator``: an ``allocator_name`` (GPU BFC) or, as
    digits, the TPU's ``index_on_host``."""

    ns: int
    addr: int
    allocation_bytes: int
    heap_bytes: int
    free: bool = False
    stack_bytes: int = 0
    available_bytes: int = 16 << 30
    allocator: str = "0"
    op: str = ""
    shape: str = ""


def add_allocator_events(path: Path, events: list[AllocatorEvent]) -> None:
    """Rewrite ``path`` with ``events`` on a new line of its host plane (made if missing)."""
    space = xspace_class()()
    space.ParseFromString(path.read_bytes())
    plane = next((p for p in space.planes if p.name == HOST_PLANE), None)
    if plane is None:
        plane = space.planes.add()
        plane.name = HOST_PLANE
    ids: dict[str, int] = {m.name: k for k, m in plane.stat_metadata.items()}
    names: dict[str, int] = {m.name: k for k, m in plane.event_metadata.items()}

    def stat_id(name: str) -> int:
        if name not in ids:
            ids[name] = max([0, *plane.stat_metadata.keys(), *ids.values()]) + 1
            plane.stat_metadata[ids[name]].id = ids[name]
            plane.stat_metadata[ids[name]].name = name
        return ids[name]

    def event_id(name: str) -> int:
        if name not in names:
            names[name] = max([0, *plane.event_metadata.keys()]) + 1
            plane.event_metadata[names[name]].id = names[name]
            plane.event_metadata[names[name]].name = name
        return names[name]

    line = plane.lines.add()
    line.id = max([0, *(ln.id for ln in plane.lines)]) + 1
    line.name = "allocator"
    line.timestamp_ns = 0
    for e in events:
        ev = line.events.add()
        ev.metadata_id = event_id("MemoryDeallocation" if e.free else "MemoryAllocation")
        ev.offset_ps = e.ns * 1000
        ints = {"bytes_reserved": e.stack_bytes, "bytes_allocated": e.heap_bytes,
                "bytes_available": e.available_bytes, "peak_bytes_in_use": 0,
                "requested_bytes": e.allocation_bytes, "allocation_bytes": e.allocation_bytes,
                "addr": e.addr}
        if e.allocator.isdigit():
            ints["index_on_host"] = int(e.allocator)
        for name, v in ints.items():
            st = ev.stats.add()
            st.metadata_id = stat_id(name)
            st.int64_value = v
        strs = {"tf_op": e.op, "shape": e.shape}
        if not e.allocator.isdigit():
            strs["allocator_name"] = e.allocator
        for name, text in strs.items():
            st = ev.stats.add()
            st.metadata_id = stat_id(name)
            st.str_value = text
    path.write_bytes(space.SerializeToString())
