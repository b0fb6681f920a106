"""Write a :class:`tracelens.core.model.Trace` as Kineto JSON, one file per rank (``rank-R.json``).

For the synthetic scenarios and the parity tests: what the PyTorch profiler would record for
the same device activity. Per rank: ``deviceProperties`` from the device rows,
``distributedInfo``, every activity as a ``kernel``/``gpu_memcpy``/``gpu_memset`` event on
``pid = device``, ``tid = stream``, launched by a runtime call (``cudaLaunchKernel`` or
``hipLaunchKernel``) with its correlation id on one CPU thread; collectives inside a
``record_param_comms`` op with their type, size, dtype and group (size, and the ranks and
description of the process group when the trace's ``groups`` holds one group); steps as GPU-side
``ProfilerStep#N`` annotations, those whose ``source`` is ``annotation:cpu*`` as CPU-side
ones around the launches of the activity starting in their window (the reader gives that
activity's span back; a window without activity is written as it is). ``op_args`` (op
name -> the ``args`` of its CPU op, e.g. ``Input Dims``) wraps the launches of events with
that ``op`` in a ``cpu_op`` of that name.
CPU events are laid out one launch every 10 µs (the CPU timeline is not what is compared).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import polars as pl

from tracelens_dev.writers import plain_text


from tracelens.loading import identify
from tracelens.core.model import Trace

_TYPES = {"all-reduce": "allreduce", "all-gather": "allgather",
          "reduce-scatter": "reduce_scatter", "all-to-all": "all_to_all",
          "collective-broadcast": "broadcast", "send": "send", "recv": "recv",
          "reduce": "reduce", "gather": "gather", "scatter": "scatter"}
_DTYPES = {"fp32": ("Float", 4), "fp64": ("Double", 8), "fp16": ("Half", 2),
           "bf16": ("BFloat16", 2), "int8": ("Char", 1), "int32": ("Int", 4),
           "int64": ("Long", 8)}
_CATS = {"kernel": "kernel", "memcpy": "gpu_memcpy", "memset": "gpu_memset"}
_BASE_NS = 1_700_000_000_000_000_000


def _us(ns: int) -> float:
    """ns -> µs with 3 decimals, as Kineto writes them (exact: the reader reverses it)."""
    return round(ns / 1000, 3)


def _properties(devices: pl.DataFrame) -> list[dict[str, Any]]:
    caps = {v: k for k, v in identify.AMD_ARCH_BY_CAP.items()}
    out = []
    for d in devices.sort("device").iter_rows(named=True):
        arch = d["arch"] or ""
        if arch.startswith("sm_") and arch[3:].isdigit():
            major, minor = int(arch[3:-1]), int(arch[-1])
        else:
            major, minor = caps.get(arch, (0, 0))
        out.append({"id": d["device"], "name": d["product"] or "",
                    "totalGlobalMem": d["memory_bytes"] or 0, "computeMajor": major,
                    "computeMinor": minor, "warpSize": 64 if d["vendor"] == "amd" else 32,
                    "numSms": d["compute_units"] or 0})
    return out


def launch_args(launch: str | None) -> dict[str, Any]:
    """The model's ``launch`` text as Kineto kernel ``args`` (``grid``/``block`` lists,
    ``registers per thread``, ``shared memory``): what the reader turns back into that text."""
    out: dict[str, Any] = {}
    keys = {"grid": "grid", "block": "block", "regs": "registers per thread",
            "shared": "shared memory"}
    for part in (launch or "").split():
        key, _, value = part.partition("=")
        if key in ("grid", "block"):
            out[keys[key]] = [int(x) for x in value.split(",")]
        elif key in keys:
            out[keys[key]] = int(value)
    return out


def _group_args(e: dict[str, Any]) -> dict[str, Any]:
    """``Process Group Ranks`` (PyTorch's text of the list) and ``Description`` of a
    collective whose ``groups`` is one group (the rank's own, as PyTorch records it)."""
    out: dict[str, Any] = {}
    if e.get("groups") and ";" not in e["groups"]:
        out["Process Group Ranks"] = "[" + ", ".join(e["groups"].split(",")) + "]"
    if e.get("group_name"):
        out["Process Group Description"] = e["group_name"]
    return out


def _rank_events(ev: pl.DataFrame, steps: pl.DataFrame, amd: bool, pid: int,
                 op_args: dict[str, dict[str, Any]],
                 calls: pl.DataFrame | None = None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    launch = "hipLaunchKernel" if amd else "cudaLaunchKernel"
    t0 = int(ev["start_ns"].min()) if ev.height else 0
    at: dict[int, int] = {}  # the trace's own calls: correlation id -> call start
    if calls is not None:
        for c in calls.sort("start_ns", "tid").iter_rows(named=True):
            corr = int(c["correlation_id"])
            at.setdefault(corr, int(c["start_ns"]))
            out.append({"ph": "X", "cat": "cuda_runtime", "name": c["name"], "pid": pid,
                        "tid": int(c["tid"]) if c["tid"] is not None else 1,
                        "ts": _us(int(c["start_ns"])),
                        "dur": _us(int(c["end_ns"]) - int(c["start_ns"])),
                        "args": {"correlation": corr, "External id": corr}})
    for i, e in enumerate(ev.sort("start_ns", "device", "stream").iter_rows(named=True)):
        corr, cpu = i + 1, t0 + i * 10_000
        if calls is not None:
            corr = int(e["correlation_id"])
            cpu = at.get(corr, cpu) - 1_000
        args: dict[str, Any] = {"device": e["device"], "stream": e["stream"],
                                "correlation": corr, "External id": corr}
        if e["kind"] != "kernel" and e["bytes"] is not None:
            args["bytes"] = int(e["bytes"])
        if e["kind"] == "kernel":
            args.update(launch_args(e.get("launch")))
        out.append({"ph": "X", "cat": _CATS[e["kind"]], "name": e["name"], "pid": e["device"],
                    "tid": e["stream"], "ts": _us(e["start_ns"]),
                    "dur": _us(e["end_ns"] - e["start_ns"]), "args": args})
        if calls is None:
            out.append({"ph": "X", "cat": "cuda_runtime", "name": launch, "pid": pid, "tid": 1,
                        "ts": _us(cpu + 2_000), "dur": 1.0,
                        "args": {"correlation": corr, "External id": corr}})
        if e["op"] in op_args:
            out.append({"ph": "X", "cat": "cpu_op", "name": e["op"], "pid": pid, "tid": 1,
                        "ts": _us(cpu + 1_000), "dur": 4.0,
                        "args": {"External id": corr, **op_args[e["op"]]}})
        if e["category"] == "collective" and e["subcategory"] in _TYPES:
            name, size = _DTYPES.get(e["dtype"] or "", ("Byte", 1))
            if e["msg_bytes"] is not None and e["msg_bytes"] % size:
                name, size = "Byte", 1
            n = e["msg_bytes"] // size if e["msg_bytes"] is not None else None
            out.append({"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": pid,
                        "tid": 1, "ts": _us(cpu), "dur": 6.0,
                        "args": {"Collective name": _TYPES[e["subcategory"]],
                                 "In msg nelems": n, "Out msg nelems": n, "dtype": name,
                                 "Group size": e["group_size"], **_group_args(e)}})
    cpu_side = pl.col("source").fill_null("").str.starts_with("annotation:cpu")
    launched = ev.sort("start_ns", "device", "stream").with_row_index("_i").select(
        "_i", "start_ns")
    for s in steps.filter(cpu_side).iter_rows(named=True):
        # a CPU-side ProfilerStep: around the launches of the activity starting in its window
        # (the reader's device window is that activity's span), else the window itself
        mine = launched.filter(pl.col("start_ns").is_between(s["start_ns"], s["end_ns"],
                                                             closed="left"))["_i"]
        lo, hi = ((t0 + int(mine.min()) * 10_000 + 1_500, t0 + int(mine.max()) * 10_000 + 3_500)
                  if mine.len() else (s["start_ns"], s["end_ns"]))
        out.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s['step']}",
                    "pid": pid, "tid": 1, "ts": _us(lo), "dur": _us(hi - lo), "args": {}})
    for d in ev["device"].unique().sort().to_list():
        for s in steps.filter(~cpu_side).iter_rows(named=True):
            out.append({"ph": "X", "cat": "gpu_user_annotation",
                        "name": f"ProfilerStep#{s['step']}", "pid": d, "tid": 0,
                        "ts": _us(s["start_ns"]), "dur": _us(s["end_ns"] - s["start_ns"]),
                        "args": {}})
    return out


def write(trace: Trace, out: Path, op_args: dict[str, dict[str, Any]] | None = None,
          world_size: int | None = None, host_calls: bool = False) -> list[Path]:
    """Write one ``rank-R.json`` per rank of ``trace`` into directory ``out``.

    ``host_calls``: write the trace's own runtime calls (``host_events`` of kind ``api``,
    with their threads, times and correlation ids; the device activity keeps its
    correlation ids) instead of laying out one launch every 10 µs: for the step simulator
    (tracelens_dev/sim), whose host timeline is part of the truth."""
    trace = plain_text(trace)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    ranks = sorted(set(trace.devices["rank"].to_list()) | set(trace.events["rank"].to_list()))
    paths = []
    for r in ranks:
        devs = trace.devices.filter(pl.col("rank") == r)
        amd = "amd" in devs["vendor"].to_list()
        ev = trace.events.filter(pl.col("rank") == r)
        steps = trace.steps.filter(pl.col("rank") == r)
        doc = {"schemaVersion": 1, "deviceProperties": _properties(devs),
               "distributedInfo": {"backend": "nccl", "rank": r,
                                   "world_size": world_size or len(ranks)},
               "baseTimeNanoseconds": _BASE_NS,
               "traceEvents": _rank_events(
                   ev, steps, amd, 1000 + r, op_args or {},
                   trace.host_events.filter((pl.col("rank") == r) & (pl.col("kind") == "api")
                                            & pl.col("correlation_id").is_not_null())
                   if host_calls else None)}
        if amd:
            doc["hip_runtime_version"] = 1
        path = out / f"rank-{r}.json"
        path.write_bytes(orjson.dumps(doc))
        paths.append(path)
    return paths
