"""Add allocator events to a Kineto trace written by :mod:`tracelens_dev.writers.kineto`:
``[memory]`` instant events as PyTorch's profiler records them with ``profile_memory=True``
(``Bytes`` > 0 an allocation, < 0 a free; the caching allocator's totals after it), and the
CPU ops (``cpu_op``) they happen in."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import orjson

from tracelens_dev.writers.kineto import _us

PID, TID = 77, 78  # the host thread the events are on


@dataclass(frozen=True)
class MemoryEvent:
    """One allocation (``nbytes`` > 0) or free (< 0) at ``ns`` on device ``device_id``
    (``device_type`` 1 = CUDA, 0 = CPU, 6 = HIP), with the totals after it."""

    ns: int
    addr: int
    nbytes: int
    total_allocated: int
    total_reserved: int
    device_id: int = 0
    device_type: int = 1


def add_memory(path: Path, events: list[MemoryEvent],
               ops: tuple[tuple[str, int, int], ...] = ()) -> None:
    """Append ``events`` and the CPU ops ``(name, start_ns, end_ns)`` to the trace file."""
    doc = orjson.loads(path.read_bytes())
    evs = doc["traceEvents"]
    for name, start, end in ops:
        evs.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": PID, "tid": TID,
                    "ts": _us(start), "dur": _us(end - start), "args": {}})
    for i, e in enumerate(events):
        evs.append({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]",
                    "pid": PID, "tid": TID, "ts": _us(e.ns),
                    "args": {"Total Reserved": e.total_reserved,
                             "Total Allocated": e.total_allocated, "Bytes": e.nbytes,
                             "Addr": e.addr, "Device Id": e.device_id,
                             "Device Type": e.device_type, "Record Id": i}})
    path.write_bytes(orjson.dumps(doc))
