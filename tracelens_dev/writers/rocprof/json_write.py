"""Writer for rocprofv3 JSON output (``--output-format json``), as ``generateJSON.cpp`` writes it.

One file per process (rank): ``path`` itself for a one-rank trace, else
``path/<host>/<pid>_results.json``. ``{"rocprofiler-sdk-tool": [process]}`` with
``metadata``, ``agents``, ``strings`` (the ROCm 7.x kind table with operation names, ROCTx
messages keyed by correlation id as cereal writes a map: ``[{"key", "value"}]``),
``code_objects``, ``kernel_symbols`` (entry 0 is the empty placeholder), and
``buffer_records`` (kernel dispatches, memory copies, RCCL and marker API records, the other
lists empty).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from tracelens_dev.writers.rocprof.export import STEP_NAME, export
from parsers.rocprof.names import (BUFFER_KINDS, CALLBACK_KINDS, MARKER_MARK_OP,
                                   MARKER_RANGE_OP, kind_id, op_id, strings_table)
from parsers.rocprof.records import Process
from tracelens_dev.writers.rocprof.rocpd_write import agent_json, output_paths
from tracelens.core.model import Trace

_EMPTY_BUFFERS = ("hip_api", "hsa_api", "memory_allocation", "scratch_memory",
                  "rocdecode_api", "rocjpeg_api", "pc_sample_host_trap", "pc_sample_stochastic")


def write(trace: Trace, path: Path, step_name: str = STEP_NAME,
          counters: pl.DataFrame | None = None) -> list[Path]:
    procs = export(trace, step_name, counters)
    paths = output_paths(procs, path, "_results.json")
    for p, out in zip(procs, paths):
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"rocprofiler-sdk-tool": [process_object(p)]}))
    return paths


def _symbol(kernel_id: int, name: str, vgpr: int | None) -> dict[str, Any]:
    return {"size": 88 if kernel_id else 0, "kernel_id": kernel_id,
            "code_object_id": 1 if kernel_id else 0, "kernel_name": name,
            "kernel_object": 0, "kernarg_segment_size": 8, "kernarg_segment_alignment": 8,
            "group_segment_size": 0, "private_segment_size": 0, "sgpr_count": 32,
            "arch_vgpr_count": vgpr or 0, "accum_vgpr_count": 0, "kernel_code_entry_byte_offset": 0,
            "kernel_address": {"handle": 0}, "formatted_kernel_name": name or "0",
            "demangled_kernel_name": name or "0",
            "truncated_kernel_name": (name.split("(")[0] if name else "0")}


def _launch_info(r: dict[str, Any]) -> dict[str, Any]:
    """``dispatch_info``'s LDS bytes and sizes of one dispatch row; a part whose value is
    unknown is left out (the reader then has it as unknown)."""
    out: dict[str, Any] = {}
    if r["lds"] is not None:
        out["group_segment_size"] = r["lds"]
    for key, prefix in (("workgroup_size", "wg_"), ("grid_size", "grid_")):
        if all(r[prefix + a] is not None for a in "xyz"):
            out[key] = {a: r[prefix + a] for a in "xyz"}
    return out


def _api_records(df: pl.DataFrame, kind: str, op_of: Any) -> list[dict[str, Any]]:
    return [{"size": 48, "kind": kind_id(kind), "operation": op_id(kind, op_of(r)),
             "correlation_id": {"internal": r["corr"], "external": 0,
                                "ancestor": r.get("parent") or 0},
             "start_timestamp": r["start"], "end_timestamp": r["end"], "thread_id": r["tid"]}
            for r in df.iter_rows(named=True)]


def _counter_records(p: Process, infos: list[dict[str, Any]]
                     ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Counter definitions and one ``counter_collection`` record per dispatch with counters
    (``dispatch_data`` and ``records[{counter_id, value}]``, shared/reference/rocprof.md §2.4)."""
    if p.counters.is_empty():
        return [], []
    names = sorted(set(p.counters["counter"].to_list()))
    ids = {n: i for i, n in enumerate(names, 1)}
    defs = [{"id": {"handle": ids[n]}, "name": n, "description": "", "block": "",
             "expression": "", "is_constant": 0, "is_derived": 0} for n in names]
    rows = p.dispatches
    by_dispatch = p.counters.group_by("dispatch_id", maintain_order=True).agg(
        "counter", "value")
    records = []
    for d, cs, vs in by_dispatch.iter_rows():
        r = rows.row(d - 1, named=True)
        records.append({"size": 96, "dispatch_data": {
            "size": 112, "correlation_id": {"internal": r["corr"], "external": 0},
            "dispatch_info": infos[d - 1], "start_timestamp": r["start"],
            "end_timestamp": r["end"]}, "thread_id": r["tid"], "arch_vgpr_count": 32,
            "sgpr_count": 32, "lds_block_size_v": 0,
            "records": [{"counter_id": {"handle": ids[c]}, "value": v}
                        for c, v in zip(cs, vs)]})
    return defs, records


def process_object(p: Process) -> dict[str, Any]:
    handles = dict(zip(p.agents["node_id"], p.agents["handle"]))
    # a kernel's VGPR count is its symbol's (the first dispatch's; 0 when unknown)
    symbols = p.dispatches.select("kernel_id", "name", "vgpr").unique(
        "kernel_id", keep="first", maintain_order=True).sort("kernel_id")
    table = [_symbol(0, "", 0)] + [_symbol(k, n, v) for k, n, v in symbols.iter_rows()]
    infos = [{"size": 72, "agent_id": {"handle": handles[r["agent"]]},
              "queue_id": {"handle": r["queue"]}, "kernel_id": r["kernel_id"],
              "dispatch_id": i, "private_segment_size": 0, **_launch_info(r)}
             for i, r in enumerate(p.dispatches.iter_rows(named=True), 1)]
    dispatches = [
        {"size": 184, "kind": kind_id("KERNEL_DISPATCH"),
         "operation": op_id("KERNEL_DISPATCH", "KERNEL_DISPATCH_COMPLETE"),
         "thread_id": r["tid"], "correlation_id": {"internal": r["corr"], "external": 0},
         "start_timestamp": r["start"], "end_timestamp": r["end"], "dispatch_info": info,
         "stream_id": {"handle": r["stream"]}}
        for info, r in zip(infos, p.dispatches.iter_rows(named=True))]
    counter_defs, counter_records = _counter_records(p, infos)
    copies = [
        {"size": 80, "kind": kind_id("MEMORY_COPY"), "operation": op_id("MEMORY_COPY", r["op"]),
         "thread_id": r["tid"], "correlation_id": {"internal": r["corr"], "external": 0},
         "start_timestamp": r["start"], "end_timestamp": r["end"],
         "dst_agent_id": {"handle": handles[r["dst_agent"]]},
         "src_agent_id": {"handle": handles[r["src_agent"]]}, "bytes": r["bytes"],
         "stream_id": {"handle": r["stream"]}}
        for r in p.copies.iter_rows(named=True)]
    markers = _api_records(p.markers, "MARKER_CORE_RANGE_API",
                           lambda r: MARKER_RANGE_OP if r["end"] > r["start"] else MARKER_MARK_OP)
    messages = [{"key": c, "value": n} for c, n in zip(p.markers["corr"], p.markers["name"])]
    agents = [agent_json(a) for a in p.agents.iter_rows(named=True)]
    gpu = next((a for a in agents if a["type"] == 2), agents[0] if agents else None)
    return {
        "metadata": {"node": {"id": 0, "hash": 0, "machine_id": "0" * 32,
                              "system_name": "Linux", "hostname": p.host or "localhost",
                              "release": "6.8.0", "version": "#1 SMP",
                              "hardware_name": "x86_64", "domain_name": "(none)"},
                     "pid": p.pid, "init_time": p.init_ns, "fini_time": p.fini_ns,
                     "command": ["python", "train.py"],
                     "config": {"output_file": "%hostname%/%pid%", "json_output": True,
                                "csv_output": False, "rocpd_output": False,
                                "pftrace_output": False, "otf2_output": False,
                                "kernel_rename": False, "group_by_queue": False}},
        "agents": agents, "counters": counter_defs,
        "strings": {"callback_records": strings_table(CALLBACK_KINDS),
                    "buffer_records": strings_table(BUFFER_KINDS), "marker_api": messages,
                    "correlation_id": {"external": []}, "counters": {"dimension_ids": []},
                    "pc_sample_instructions": [], "pc_sample_comments": [],
                    "att_filenames": [], "code_object_snapshot_filenames": ["", "co_1.out"]},
        "code_objects": [{"size": 0, "code_object_id": 0, "agent_id": {"handle": 0},
                          "uri": "", "load_base": 0, "load_size": 0, "load_delta": 0,
                          "storage_type": 0},
                         {"size": 88, "code_object_id": 1,
                          "agent_id": {"handle": gpu["id"]["handle"] if gpu else 0},
                          "uri": f"memory://{p.pid}#offset=0", "load_base": 0, "load_size": 0,
                          "load_delta": 0, "storage_type": 2}],
        "kernel_symbols": table, "host_functions": [], "summary": [],
        "callback_records": {"counter_collection": counter_records},
        "buffer_records": {"kernel_dispatch": dispatches,
                           "rccl_api": _api_records(p.apis, "RCCL_API", lambda r: r["name"]),
                           "marker_api": markers, "memory_copy": copies,
                           **{k: [] for k in _EMPTY_BUFFERS}},
    }
