"""The allocator events of an XSpace: ``MemoryAllocation`` and ``MemoryDeallocation`` on the
host threads plane (``/host:CPU``), where the TPU runtime and the GPU BFC allocators record
each buffer with the allocator's running totals (the events XProf's ``memory_profile`` reads).

Few events, so a plain pass over the plane's events of those two metadata ids; a file without
them costs a search of its bytes for the two names (no decode)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from parsers.xspace.planes import stat_value
from parsers.memory_scan import mentions
from parsers.xspace.space import load_xspace
from tracelens.core.model import MEMORY_SCHEMA, empty_memory, host_from_file_name

HOST_PLANE = "/host:CPU"
_KINDS = {"MemoryAllocation": "alloc", "MemoryDeallocation": "free"}
# stat name -> column; the allocator id is decided apart (allocator_name wins over indices)
_INT_STATS = {"bytes_reserved": "stack_bytes", "bytes_allocated": "heap_bytes",
              "bytes_available": "free_bytes", "peak_bytes_in_use": "peak_lifetime",
              "requested_bytes": "requested_bytes", "allocation_bytes": "allocation_bytes",
              "group_id": "step_id"}
_STR_STATS = {"tf_op": "op", "region_type": "region", "shape": "shape",
              "tensor_shapes": "shape"}
# TensorFlow DataType enum values (the allocator's data_type stat); 0 (DT_INVALID) is unknown
_DTYPES = {1: "float", 2: "double", 3: "int32", 4: "uint8", 5: "int16", 6: "int8",
           7: "string", 8: "complex64", 9: "int64", 10: "bool", 14: "bfloat16", 17: "uint16",
           18: "complex128", 19: "half", 22: "uint32", 23: "uint64"}


def read_memory(path: Path, space: Any | None = None) -> pl.DataFrame:
    """The allocator events of one XSpace file (``MEMORY_SCHEMA``), empty when it has none."""
    if space is None:
        if not mentions(path, (b"MemoryAllocation", b"MemoryDeallocation")):
            return empty_memory()  # no such event name: no need to decode the file
        space = load_xspace(path)
    host = next((h for h in space.hostnames if h), None) or host_from_file_name(path.name)
    rows: list[dict[str, Any]] = []
    for plane in space.planes:
        if plane.name != HOST_PLANE:
            continue
        kinds = {k: _KINDS[m.name] for k, m in plane.event_metadata.items() if m.name in _KINDS}
        if not kinds:
            continue
        refs = {k: v.name for k, v in plane.stat_metadata.items()}
        for line in plane.lines:
            base_ns = line.timestamp_ns
            for ev in line.events:
                kind = kinds.get(ev.metadata_id)
                if kind is not None:
                    rows.append(_row(host, kind, base_ns, ev, refs, len(rows)))
    if not rows:
        return empty_memory()
    return pl.DataFrame(rows, schema=MEMORY_SCHEMA)


def _row(host: str, kind: str, base_ns: int, ev: Any, refs: dict[int, str],
         seq: int) -> dict[str, Any]:
    row: dict[str, Any] = {"host": host, "kind": kind, "seq": seq,
                           "time_ns": base_ns + ev.offset_ps // 1000, "offset_ps": ev.offset_ps}
    name_id = index_id = None
    for st in ev.stats:
        name = refs.get(st.metadata_id)
        value = stat_value(st, refs)
        if name in _INT_STATS:
            row[_INT_STATS[name]] = int(value)
        elif name in _STR_STATS:
            row[_STR_STATS[name]] = value or None
        elif name == "addr":
            row["address"] = int(value) & 0xFFFFFFFFFFFFFFFF
        elif name == "fragmentation":
            row["fragmentation"] = float(value)
        elif name == "data_type":
            row["dtype"] = _DTYPES.get(int(value))
        elif name == "allocator_name":
            name_id = str(value)
        elif name in ("index_on_host", "device_ordinal"):
            index_id = str(int(value))
    row["allocator"] = name_id if name_id is not None else index_id
    if "stack_bytes" in row or "heap_bytes" in row:
        row["in_use"] = row.get("stack_bytes", 0) + row.get("heap_bytes", 0)
    return row
