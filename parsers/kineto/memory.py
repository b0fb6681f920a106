"""The allocator events of a PyTorch profiler (Kineto) trace: the ``[memory]`` instant events
that ``profile_memory=True`` records, one per allocation (``Bytes`` > 0) or free (< 0), each
with the caching allocator's totals after it (``Total Allocated``, ``Total Reserved``), its
device (``Device Type`` 0 = CPU, 1 = CUDA, 6 = HIP; ``Device Id``) and address (``Addr``).

A device's capacity is its ``totalGlobalMem`` in the trace's ``deviceProperties`` (the entry
whose ``id`` is the event's ``Device Id``). The op that allocated is the CPU op (``cat``
``cpu_op``) running on the same thread at the event's time, the latest started one that still
runs (the innermost), when there is one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import polars as pl

from parsers.memory_scan import mentions
from parsers.rawfile import read_maybe_gzip
from tracelens.core.errors import TraceInputError
from tracelens.core.model import MEMORY_SCHEMA, empty_memory, host_from_file_name

MEMORY_EVENT = "[memory]"
_DEVICE_TYPES = {0: "cpu", 1: "cuda", 6: "hip"}  # c10::DeviceType


def _ns(us: Any) -> int:
    """µs (int or float) to integer ns, as the Kineto reader rounds (half to even)."""
    if isinstance(us, int):
        return us * 1000
    whole = int(us // 1)
    return whole * 1000 + round((us - whole) * 1000)


def read_memory(path: Path) -> pl.DataFrame:
    """The ``[memory]`` events of one Kineto trace (``MEMORY_SCHEMA``), empty when it has
    none."""
    if not mentions(path, (MEMORY_EVENT.encode(),)):
        return empty_memory()  # no [memory] event: no need to parse the JSON
    raw = read_maybe_gzip(path, text=True)
    try:
        doc = orjson.loads(raw)
        events = doc["traceEvents"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        raise TraceInputError(path, "not a Kineto trace: no 'traceEvents' list") from None
    dist = doc.get("distributedInfo") if isinstance(doc, dict) else None
    rank = dist.get("rank") if isinstance(dist, dict) else None
    host = f"rank{rank}" if isinstance(rank, int) else host_from_file_name(path.name)
    props = doc.get("deviceProperties") if isinstance(doc, dict) else None
    sizes = {p.get("id"): p.get("totalGlobalMem") for p in props or () if isinstance(p, dict)}
    rows: list[dict[str, Any]] = []
    ops: list[tuple[Any, Any, int, int, str]] = []
    for ev in events:
        if not isinstance(ev, dict):
            continue
        name = ev.get("name")
        if name == MEMORY_EVENT and ev.get("ph") == "i":
            rows.append(_row(host, ev, len(rows), sizes))
        elif ev.get("cat") == "cpu_op" and ev.get("ph") == "X" and isinstance(name, str):
            ops.append((str(ev.get("pid")), str(ev.get("tid")), _ns(ev["ts"]),
                        _ns(ev.get("dur", 0)), name))
    if not rows:
        return empty_memory()
    mem = pl.DataFrame(rows, schema={**MEMORY_SCHEMA, "pid": pl.String, "tid": pl.String})
    return _with_ops(mem, ops).select(list(MEMORY_SCHEMA))


def _row(host: str, ev: dict[str, Any], seq: int, sizes: dict[Any, Any]) -> dict[str, Any]:
    a = ev.get("args") or {}
    nbytes = a.get("Bytes")
    dev_type, dev_id = a.get("Device Type"), a.get("Device Id")
    kind_name = _DEVICE_TYPES.get(dev_type, f"type{dev_type}")
    allocator = kind_name if kind_name == "cpu" else f"{kind_name}:{dev_id}"
    total = a.get("Total Allocated")
    addr = a.get("Addr")
    return {"host": host, "allocator": allocator, "seq": seq, "time_ns": _ns(ev["ts"]),
            "kind": None if nbytes is None else ("alloc" if nbytes > 0 else "free"),
            "allocation_bytes": None if nbytes is None else abs(int(nbytes)),
            "address": None if addr is None else int(addr) & 0xFFFFFFFFFFFFFFFF,
            "in_use": total, "heap_bytes": total, "reserved_bytes": a.get("Total Reserved"),
            "pid": str(ev.get("pid")), "tid": str(ev.get("tid")),
            "capacity_bytes": sizes.get(dev_id) if dev_type != 0 else None}


def _with_ops(mem: pl.DataFrame, ops: list[tuple[str, str, int, int, str]]) -> pl.DataFrame:
    """``op``: the CPU op on the event's thread that started last at or before the event,
    when it still runs then (the innermost running op, unless a child of it had already
    ended: then unknown, null)."""
    if not ops:
        return mem
    op = pl.DataFrame(ops, schema={"pid": pl.String, "tid": pl.String, "start": pl.Int64,
                                   "dur": pl.Int64, "op_name": pl.String}, orient="row")
    op = op.sort(["start", "dur"], descending=[False, True])  # at one start: the parent first
    hit = (mem.select("seq", "pid", "tid", "time_ns").sort("time_ns")
           .join_asof(op, left_on="time_ns", right_on="start", by=["pid", "tid"],
                      strategy="backward", check_sortedness=False)
           .filter(pl.col("time_ns") <= pl.col("start") + pl.col("dur"))
           .select("seq", "op_name"))
    return mem.join(hit, on="seq", how="left").with_columns(op=pl.col("op_name")).sort("seq")
