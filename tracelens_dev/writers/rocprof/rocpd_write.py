"""Writer for rocpd SQLite databases, as ``rocprofv3 --output-format rocpd`` writes them.

One database per process (rank): ``path`` itself for a one-rank trace, else
``path/<host>/<pid>_results.db``. What goes in, as ``generateRocpd.cpp`` does it: tables
``<table>_<uuid>`` with un-suffixed views, ``rocpd_metadata`` (schema version, uuid, guid),
the string table (categories, operation names, kernel names, ROCTx messages), node, process,
threads (OS tids), agents (id = node id, the agent object as JSON ``extdata``), queues and
streams, one code object with the kernel symbols, one ``rocpd_event`` per record
(``stack_id`` = internal correlation id), API calls with a duration as ``rocpd_region`` rows
(id = correlation id) and instantaneous ones as ``rocpd_sample`` rows on a track, kernel
dispatches and memory copies.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any, Iterable

import polars as pl

from tracelens_dev.writers.rocprof.export import STEP_NAME, export
from parsers.rocprof.names import MARKER_MARK_OP, MARKER_RANGE_OP
from parsers.rocprof.records import Process
from tracelens_dev.writers.rocprof.rocpd_schema import SCHEMA_VERSION, ddl
from tracelens.core.model import Trace


def identity(host: str, pid: int) -> tuple[str, str, int]:
    """A deterministic (guid, uuid, node id) for one process: UUIDv7-shaped, from host/pid."""
    h = hashlib.sha1(f"{host}/{pid}".encode()).hexdigest()
    g = f"{h[:8]}-{h[8:12]}-7{h[13:16]}-{h[16:20]}-{h[20:32]}"
    nid = int(hashlib.sha1(host.encode()).hexdigest()[:7], 16)
    return g, g.replace("-", "_"), nid


def output_paths(procs: list[Process], path: Path, suffix: str) -> list[Path]:
    if len(procs) == 1:
        return [path]
    return [path / (p.host or "localhost") / f"{p.pid}{suffix}" for p in procs]


def write(trace: Trace, path: Path, step_name: str = STEP_NAME,
          counters: pl.DataFrame | None = None) -> list[Path]:
    procs = export(trace, step_name, counters)
    paths = output_paths(procs, path, "_results.db")
    for p, out in zip(procs, paths):
        out.parent.mkdir(parents=True, exist_ok=True)
        out.unlink(missing_ok=True)
        con = sqlite3.connect(out)
        try:
            con.execute("PRAGMA journal_mode=OFF")
            con.execute("PRAGMA synchronous=OFF")
            _write_process(con, p)
            con.commit()
        finally:
            con.close()
    return paths


def agent_json(a: dict[str, Any]) -> dict[str, Any]:
    """The agent object rocprofv3 serializes (JSON ``agents[]``, rocpd ``extdata``)."""
    gpu = a["type"] == "GPU"
    banks = [{"heap_type": 1 if gpu else 0, "size_in_bytes": a["memory_bytes"] or 0,
              "width": 8192 if gpu else 0}] if a["memory_bytes"] else []
    return {"size": 312, "id": {"handle": a["handle"]}, "type": 2 if gpu else 1,
            "cpu_cores_count": 0 if gpu else (a["cu_count"] or 0),
            "simd_count": 4 * (a["cu_count"] or 0) if gpu else 0,
            "num_xcc": 8 if gpu else 1, "cu_count": a["cu_count"] or 0,
            "simd_per_cu": 4 if gpu else 0, "wave_front_size": 64 if gpu else 0,
            "max_engine_clk_fcompute": int(a["clock_mhz"] or 0),
            "gfx_target_version": a["gfx_target_version"] or 0, "name": a["name"] or "",
            "vendor_name": a["vendor_name"] or "", "product_name": a["product_name"] or "",
            "model_name": "ip discovery" if gpu else "", "node_id": a["node_id"],
            "logical_node_id": a["logical_index"], "logical_node_type_id": a["type_index"],
            "gpu_index": a["type_index"] if gpu else -1, "mem_banks": banks,
            "runtime_visibility": {"hsa": 1, "hip": 1, "rccl": 1, "rocdecode": 1}}


def _rows(df: pl.DataFrame) -> Iterable[tuple]:
    return df.iter_rows()


def _write_process(con: sqlite3.Connection, p: Process) -> None:
    host, pid = p.host or "localhost", int(p.pid or 0)
    guid, uuid, nid = identity(host, pid)
    con.executescript(ddl(uuid, guid))
    t = {name: f'"{name}_{uuid}"' for name in ("rocpd_metadata", "rocpd_string",
         "rocpd_info_node", "rocpd_info_process", "rocpd_info_thread", "rocpd_info_agent",
         "rocpd_info_queue", "rocpd_info_stream", "rocpd_info_code_object",
         "rocpd_info_kernel_symbol", "rocpd_track", "rocpd_event", "rocpd_region",
         "rocpd_sample", "rocpd_kernel_dispatch", "rocpd_memory_copy", "rocpd_info_pmc",
         "rocpd_pmc_event")}
    con.executemany(f"INSERT INTO {t['rocpd_metadata']} (tag, value) VALUES (?, ?)",
                    [("schema_version", SCHEMA_VERSION), ("uuid", uuid), ("guid", guid)])
    # a kernel's VGPR count is its symbol's: the first dispatch's
    symbols = p.dispatches.select("kernel_id", "name", "vgpr").unique(
        "kernel_id", keep="first", maintain_order=True).sort("kernel_id")
    strings = ["", "KERNEL_DISPATCH", "MEMORY_COPY", "RCCL_API", "MARKER_CORE_RANGE_API",
               MARKER_RANGE_OP, MARKER_MARK_OP, *p.apis["name"].to_list(),
               *p.apis["domain"].to_list(), *p.markers["domain"].to_list(),
               *p.copies["op"].to_list(), *symbols["name"].to_list(),
               *p.markers["name"].to_list()]
    sid = {s: i for i, s in enumerate(dict.fromkeys(x for x in strings if x is not None), 1)}
    con.executemany(f"INSERT INTO {t['rocpd_string']} (id, string) VALUES (?, ?)",
                    [(i, s) for s, i in sid.items()])
    con.execute(f"INSERT INTO {t['rocpd_info_node']} (id, hash, machine_id, system_name, "
                "hostname, release, version, hardware_name, domain_name) VALUES "
                "(?, ?, ?, 'Linux', ?, '6.8.0', '#1 SMP', 'x86_64', '(none)')",
                (nid, nid, hashlib.md5(host.encode()).hexdigest(), host))
    con.execute(f"INSERT INTO {t['rocpd_info_process']} (id, nid, ppid, pid, init, fini, "
                "start, end, command) VALUES (?, ?, 1, ?, ?, ?, ?, ?, 'python train.py')",
                (pid, nid, pid, p.init_ns, p.fini_ns, p.init_ns, p.fini_ns))
    tids = sorted({x for df in (p.dispatches, p.copies, p.apis, p.markers)
                   for x in df["tid"].to_list() if x is not None} | {pid})
    con.executemany(f"INSERT INTO {t['rocpd_info_thread']} (id, nid, ppid, pid, tid) "
                    "VALUES (?, ?, 1, ?, ?)", [(x, nid, pid, x) for x in tids])
    agents = list(p.agents.iter_rows(named=True))
    con.executemany(
        f"INSERT INTO {t['rocpd_info_agent']} (id, nid, pid, type, absolute_index, "
        "logical_index, type_index, uuid, name, model_name, vendor_name, product_name, "
        "user_name, extdata) VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?)",
        [(a["node_id"], nid, pid, a["type"], a["node_id"], a["logical_index"],
          a["type_index"], a["name"], "ip discovery" if a["type"] == "GPU" else "",
          a["vendor_name"], a["product_name"], a["product_name"],
          json.dumps(agent_json(a))) for a in agents])
    queues = sorted({q for q in p.dispatches["queue"].to_list() + p.copies["stream"].to_list()
                     if q is not None} | {0})
    for table, label in (("rocpd_info_queue", "Queue"), ("rocpd_info_stream", "Stream")):
        con.executemany(f"INSERT INTO {t[table]} (id, nid, pid, name) VALUES (?, ?, ?, ?)",
                        [(q, nid, pid, f"Default {label}" if q == 0 else f"{label} {i - 1}")
                         for i, q in enumerate(queues)])
    gpu = next((a["node_id"] for a in agents if a["type"] == "GPU"), 0)
    con.execute(f"INSERT INTO {t['rocpd_info_code_object']} (id, nid, pid, agent_id, uri, "
                "load_base, load_size, load_delta, storage_type) VALUES "
                "(1, ?, ?, ?, ?, 0, 0, 0, 'MEMORY')", (nid, pid, gpu, f"memory://{pid}#offset=0"))
    con.executemany(
        f"INSERT INTO {t['rocpd_info_kernel_symbol']} (id, nid, pid, code_object_id, "
        "kernel_name, display_name, kernel_object, kernarg_segment_size, "
        "kernarg_segment_alignment, group_segment_size, private_segment_size, sgpr_count, "
        "arch_vgpr_count, accum_vgpr_count, extdata) VALUES (?, ?, ?, 1, ?, ?, 0, 8, 8, 0, 0, "
        "32, ?, 0, ?)",
        [(k, nid, pid, n, n, v, json.dumps({"kernel_id": k, "formatted_kernel_name": n,
                                            "demangled_kernel_name": n,
                                            "truncated_kernel_name": n.split("(")[0]}))
         for k, n, v in symbols.iter_rows()])
    _write_records(con, t, p, sid, nid, pid)


def _write_counters(con: sqlite3.Connection, t: dict[str, str], p: Process,
                    events: pl.DataFrame, nid: int, pid: int) -> None:
    """PMC counters: one ``rocpd_info_pmc`` row per counter, one ``rocpd_pmc_event`` row per
    dispatch and counter, tied to the dispatch through its ``event_id``."""
    if p.counters.is_empty():
        return
    names = sorted(set(p.counters["counter"].to_list()))
    ids = {n: i for i, n in enumerate(names, 1)}
    gpu = p.agents.filter(pl.col("type") == "GPU")
    agent = gpu["node_id"][0] if gpu.height else None
    arch = gpu["name"][0] if gpu.height else None
    con.executemany(f"INSERT INTO {t['rocpd_info_pmc']} (id, nid, pid, agent_id, target_arch, "
                    "event_code, instance_id, name, symbol, description, component, units, "
                    "value_type, block, expression, is_constant, is_derived) VALUES "
                    "(?, ?, ?, ?, ?, 0, 0, ?, ?, '', 'rocprofiler-sdk', '', 'ABS', '', '', 0, 0)",
                    [(i, nid, pid, agent, arch, n, n) for n, i in ids.items()])
    rows = p.counters.join(events, on="dispatch_id", how="inner", maintain_order="left")
    con.executemany(f"INSERT INTO {t['rocpd_pmc_event']} (event_id, pmc_id, value) "
                    "VALUES (?, ?, ?)",
                    [(e, ids[c], v) for e, c, v in rows.select("event", "counter", "value")
                     .iter_rows()])


def _write_records(con: sqlite3.Connection, t: dict[str, str], p: Process,
                   sid: dict[str, int], nid: int, pid: int) -> None:
    next_event = 1
    hosts = pl.concat([p.apis.select("domain", "name", "tid", "corr", "parent", "start", "end",
                                     message=pl.lit(None, pl.String)),
                       p.markers.select("domain", name=pl.when(pl.col("end") > pl.col("start"))
                                        .then(pl.lit(MARKER_RANGE_OP))
                                        .otherwise(pl.lit(MARKER_MARK_OP)),
                                        tid="tid", corr="corr", parent=pl.lit(None, pl.Int64),
                                        start="start", end="end", message="name")])
    rows = list(hosts.iter_rows(named=True))
    events, regions, samples, tracks = [], [], [], {}
    for r in rows:
        ext = json.dumps({"message": r["message"]}) if r["message"] is not None else "{}"
        events.append((next_event, sid[r["domain"]], r["corr"], r["parent"] or 0, 0, ext))
        if r["end"] != r["start"]:
            regions.append((r["corr"], nid, pid, r["tid"], r["start"], r["end"],
                            sid[r["name"]], next_event))
        else:
            track = tracks.setdefault((r["tid"], r["domain"]), len(tracks) + 1)
            samples.append((r["corr"], track, r["start"], next_event))
        next_event += 1
    con.executemany(f"INSERT INTO {t['rocpd_track']} (id, nid, pid, tid, name_id) "
                    "VALUES (?, ?, ?, ?, ?)",
                    [(i, nid, pid, tid, sid[dom]) for (tid, dom), i in tracks.items()])
    con.executemany(f"INSERT INTO {t['rocpd_event']} (id, category_id, stack_id, "
                    "parent_stack_id, correlation_id, extdata) VALUES (?, ?, ?, ?, ?, ?)",
                    events)
    con.executemany(f"INSERT INTO {t['rocpd_region']} (id, nid, pid, tid, start, end, name_id,"
                    " event_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", regions)
    con.executemany(f"INSERT INTO {t['rocpd_sample']} (id, track_id, timestamp, event_id) "
                    "VALUES (?, ?, ?, ?)", samples)
    d = p.dispatches.drop("dispatch_id").with_row_index("dispatch_id", offset=1).with_columns(
        event=pl.int_range(next_event, next_event + pl.len(), dtype=pl.Int64))
    next_event += d.height
    con.executemany(f"INSERT INTO {t['rocpd_event']} (id, category_id, stack_id, "
                    "parent_stack_id, correlation_id) VALUES (?, ?, ?, ?, 0)",
                    _rows(d.select("event", pl.lit(sid["KERNEL_DISPATCH"]).alias("c"), "corr",
                                    pl.col("corr").alias("p"))))
    con.executemany(
        f"INSERT INTO {t['rocpd_kernel_dispatch']} (id, nid, pid, tid, agent_id, kernel_id, "
        "dispatch_id, queue_id, stream_id, start, end, private_segment_size, "
        "group_segment_size, workgroup_size_x, workgroup_size_y, workgroup_size_z, "
        "grid_size_x, grid_size_y, grid_size_z, region_name_id, event_id) VALUES "
        f"(?, {nid}, {pid}, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?, {sid['']}, ?)",
        # sizes are NOT NULL in rocpd: 0 where the launch shape is unknown (read as unknown)
        _rows(d.select("dispatch_id", "tid", "agent", "kernel_id",
                       pl.col("dispatch_id").alias("d2"), "queue", "stream", "start", "end",
                       "lds", *(pl.col(c).fill_null(0) for c in ("wg_x", "wg_y", "wg_z",
                                                                 "grid_x", "grid_y", "grid_z")),
                       "event")))
    _write_counters(con, t, p, d.select("dispatch_id", "event"), nid, pid)
    c = p.copies.with_row_index("id", offset=1).with_columns(
        event=pl.int_range(next_event, next_event + pl.len(), dtype=pl.Int64),
        name_id=pl.col("op").replace_strict(sid, default=None, return_dtype=pl.Int64))
    con.executemany(f"INSERT INTO {t['rocpd_event']} (id, category_id, stack_id, "
                    "parent_stack_id, correlation_id) VALUES (?, ?, ?, ?, 0)",
                    _rows(c.select("event", pl.lit(sid["MEMORY_COPY"]).alias("c"), "corr",
                                    pl.col("corr").alias("p"))))
    con.executemany(
        f"INSERT INTO {t['rocpd_memory_copy']} (id, nid, pid, tid, start, end, name_id, "
        "dst_agent_id, dst_address, src_agent_id, src_address, size, stream_id, event_id) "
        f"VALUES (?, {nid}, {pid}, ?, ?, ?, ?, ?, 0, ?, 0, ?, ?, ?)",
        _rows(c.select("id", "tid", "start", "end", "name_id", "dst_agent", "src_agent",
                       "bytes", "stream", "event")))
