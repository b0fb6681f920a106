"""Writer for rocmProfileData (RPD) SQLite files, as ``rpd_tracer`` writes them (schema 2).

One file for the whole trace (``rpd_tracer`` appends every process of a run to one
database). From the same per-process records the rocpd writer writes
(:func:`tracelens_dev.writers.rocprof.export.export`), as ``RoctracerDataSource`` records:

- each kernel is a ``rocpd_op`` row of type ``KernelExecution`` (its name in
  ``description``) on ``gpuId`` = the device ordinal and ``queueId`` = its HSA queue,
  enqueued by a ``hipLaunchKernel`` call (or by its RCCL call, for collectives) linked
  through ``rocpd_api_ops``, with a ``rocpd_kernelapi`` row (grid, workgroup, LDS bytes)
  and a ``rocpd_kernelcodeobject`` row for its VGPRs;
- kernels whose name matches ``task_kernels`` are ``Task`` ops, as HIP graph replays record
  them: each run of them on one thread is enqueued by one ``hipGraphLaunch`` call (whose
  kernelapi row has zero sizes, as ``rpd_tracer`` writes it);
- memory copies are ``CopyHostToDevice``/``CopyDeviceToHost``/``CopyDeviceToDevice`` ops
  enqueued by a ``hipMemcpyAsync`` call with a ``rocpd_copyapi`` row (size, kind);
- ROCTx ranges (steps as ``step_name``) are ``UserMarker`` API rows whose ``args`` is the
  message; ``extra_ops`` adds ops of other types (``{"FillBuffer": 3}``) a reader must count.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import polars as pl

from parsers.rocprof.records import Process
from tracelens.core.model import Trace
from tracelens_dev.writers.rocprof.export import STEP_NAME, export

SCHEMA_VERSION = "2"
_PK = '"id" integer NOT NULL PRIMARY KEY AUTOINCREMENT'
_TABLES = {
    "rocpd_kernelcodeobject": f'{_PK}, "vgpr" integer NOT NULL, "sgpr" integer NOT NULL, '
                              '"fbar" integer NOT NULL',
    "rocpd_string": f'{_PK}, "string" varchar(4096) NOT NULL',
    "rocpd_barrierop": '"op_ptr_id" integer NOT NULL PRIMARY KEY, "signalCount" integer NOT '
                       'NULL, "aquireFence" varchar(8) NOT NULL, "releaseFence" varchar(8) '
                       'NOT NULL',
    "rocpd_copyapi": '"api_ptr_id" integer NOT NULL PRIMARY KEY, "stream" varchar(18) NOT '
                     'NULL, "size" integer NOT NULL, "width" integer NOT NULL, "height" '
                     'integer NOT NULL, "kind" integer NOT NULL, "dst" varchar(18) NOT NULL, '
                     '"src" varchar(18) NOT NULL, "dstDevice" integer NOT NULL, "srcDevice" '
                     'integer NOT NULL, "sync" bool NOT NULL, "pinned" bool NOT NULL',
    "rocpd_op_inputSignals": f'{_PK}, "from_op_id" integer NOT NULL, "to_op_id" integer '
                             'NOT NULL',
    "rocpd_op": f'{_PK}, "gpuId" integer NOT NULL, "queueId" integer NOT NULL, "sequenceId" '
                'integer NOT NULL, "completionSignal" varchar(18) NOT NULL, "start" integer '
                'NOT NULL, "end" integer NOT NULL, "description_id" integer NOT NULL, '
                '"opType_id" integer NOT NULL',
    "rocpd_api": f'{_PK}, "pid" integer NOT NULL, "tid" integer NOT NULL, "start" integer '
                 'NOT NULL, "end" integer NOT NULL, "apiName_id" integer NOT NULL, "args_id" '
                 'integer NOT NULL',
    "rocpd_api_ops": f'{_PK}, "api_id" integer NOT NULL, "op_id" integer NOT NULL',
    "rocpd_kernelapi": '"api_ptr_id" integer NOT NULL PRIMARY KEY, "stream" varchar(18) NOT '
                       'NULL, "gridX" integer NOT NULL, "gridY" integer NOT NULL, "gridZ" '
                       'integer NOT NULL, "workgroupX" integer NOT NULL, "workgroupY" integer '
                       'NOT NULL, "workgroupZ" integer NOT NULL, "groupSegmentSize" integer '
                       'NOT NULL, "privateSegmentSize" integer NOT NULL, "kernelArgAddress" '
                       'varchar(18) NOT NULL, "aquireFence" varchar(8) NOT NULL, '
                       '"releaseFence" varchar(8) NOT NULL, "codeObject_id" integer NOT NULL, '
                       '"kernelName_id" integer NOT NULL',
    "rocpd_metadata": f'{_PK}, "tag" varchar(4096) NOT NULL, "value" varchar(4096) NOT NULL',
    "rocpd_monitor": f'{_PK}, "deviceType" varchar(16) NOT NULL, "deviceId" integer NOT '
                     'NULL, "monitorType" varchar(16) NOT NULL, "start" integer NOT NULL, '
                     '"end" integer NOT NULL, "value" varchar(255) NOT NULL',
}
_VIEWS = (  # rpd_tracer's utility views (utilitySchema.cmd): never read by tracelens
    "CREATE VIEW api AS SELECT rocpd_api.id,pid,tid,start,end,A.string AS apiName, B.string "
    "AS args FROM rocpd_api INNER JOIN rocpd_string A ON A.id = rocpd_api.apiName_id INNER "
    "JOIN rocpd_string B ON B.id = rocpd_api.args_id",
    "CREATE VIEW op AS SELECT rocpd_op.id,gpuId,queueId,sequenceId,start,end,A.string AS "
    "description, B.string AS opType FROM rocpd_op INNER JOIN rocpd_string A ON A.id = "
    "rocpd_op.description_id INNER JOIN rocpd_string B ON B.id = rocpd_op.opType_id",
)
_COPY_TYPES = {"MEMORY_COPY_HOST_TO_DEVICE": ("CopyHostToDevice", 1),
               "MEMORY_COPY_DEVICE_TO_HOST": ("CopyDeviceToHost", 2),
               "MEMORY_COPY_DEVICE_TO_DEVICE": ("CopyDeviceToDevice", 3)}
_LAUNCH = ("grid_x", "grid_y", "grid_z", "wg_x", "wg_y", "wg_z", "lds")


def write(trace: Trace, path: Path, step_name: str = STEP_NAME,
          task_kernels: str | None = None, extra_ops: dict[str, int] | None = None
          ) -> list[Path]:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    con = sqlite3.connect(path)
    try:
        con.execute("PRAGMA journal_mode=OFF")
        for name, cols in _TABLES.items():
            con.execute(f'CREATE TABLE "{name}" ({cols})')
        for view in _VIEWS:
            con.execute(view)
        out = _Out(con)
        con.execute("INSERT INTO rocpd_metadata (tag, value) VALUES ('schema_version', ?)",
                    (SCHEMA_VERSION,))
        for i, p in enumerate(export(trace, step_name)):
            _write_process(out, p, task_kernels, extra_ops if i == 0 else None)
        out.flush()
        con.commit()
    finally:
        con.close()
    return [path]


class _Out:
    """Rows to insert, and the string table (``''`` is id 1, as in rpd_tracer)."""

    def __init__(self, con: sqlite3.Connection) -> None:
        self.con = con
        self.strings: dict[str, int] = {"": 1}
        self.rows: dict[str, list[tuple]] = {t: [] for t in _TABLES}
        self.codes: dict[int, int] = {}
        self.next_op = 1
        self.next_api = 1

    def sid(self, s: str | None) -> int:
        return self.strings.setdefault(s or "", len(self.strings) + 1)

    def code(self, vgpr: int | None) -> Any:
        if vgpr is None:
            return ""  # rpd_tracer leaves codeObject_id empty where it has none
        if vgpr not in self.codes:
            self.codes[vgpr] = len(self.codes) + 1
            self.rows["rocpd_kernelcodeobject"].append((self.codes[vgpr], vgpr, 0, 0))
        return self.codes[vgpr]

    def api(self, pid: int, tid: int, start: int, end: int, name: str, args: str = "") -> int:
        i = self.next_api
        self.next_api += 1
        self.rows["rocpd_api"].append((i, pid, tid, start, end, self.sid(name), self.sid(args)))
        return i

    def op(self, api: int | None, gpu: int, queue: int, start: int, end: int, desc: str,
           kind: str) -> int:
        i = self.next_op
        self.next_op += 1
        self.rows["rocpd_op"].append((i, gpu, queue, 0, "", start, end, self.sid(desc),
                                      self.sid(kind)))
        if api is not None:
            self.rows["rocpd_api_ops"].append((len(self.rows["rocpd_api_ops"]) + 1, api, i))
        return i

    def flush(self) -> None:
        self.con.executemany("INSERT INTO rocpd_string (id, string) VALUES (?, ?)",
                             [(i, s) for s, i in self.strings.items()])
        for table, rows in self.rows.items():
            if rows:
                marks = ", ".join("?" * len(rows[0]))
                self.con.executemany(f'INSERT INTO "{table}" VALUES ({marks})', rows)


def _launch_call(k: dict[str, Any]) -> tuple[int, int]:
    """A launch call's times: before its kernel starts (never before 0)."""
    start = max(0, k["start"] - 5_000)
    return start, max(start, k["start"] - 3_000)


def _write_process(out: _Out, p: Process, task_kernels: str | None,
                   extra_ops: dict[str, int] | None) -> None:
    pid = int(p.pid or 0)
    gpu = dict(p.agents.filter(pl.col("type") == "GPU").select("node_id", "type_index")
               .iter_rows())
    rccl = {}
    for a in p.apis.sort("start").iter_rows(named=True):
        api = out.api(pid, a["tid"], a["start"], a["end"], a["name"])
        if a["corr"] is not None:
            rccl[a["corr"]] = api
    k = p.dispatches.sort("start").with_columns(
        task=pl.col("name").str.contains(task_kernels) if task_kernels else pl.lit(False))
    graph: dict[int, tuple[int, bool]] = {}  # tid -> (its current hipGraphLaunch, in a run)
    for r in k.iter_rows(named=True):
        dev = gpu[r["agent"]]
        if r["task"]:
            api, running = graph.get(r["tid"], (0, False))
            if not running:
                start, end = _launch_call(r)
                api = out.api(pid, r["tid"], start, end, "hipGraphLaunch",
                              "graphExec = 0x1 | stream = 0x0")
                out.rows["rocpd_kernelapi"].append(
                    (api, "0x0", 0, 0, 0, 0, 0, 0, 0, 0, "", "", "", "",
                     out.sid("Graph Kernel (0x1)")))
                graph[r["tid"]] = (api, True)
            out.op(api, dev, r["queue"], r["start"], r["end"], r["name"], "Task")
            continue
        graph[r["tid"]] = (0, False)
        api = rccl.get(r["corr"])
        if api is None:
            start, end = _launch_call(r)
            api = out.api(pid, r["tid"], start, end, "hipLaunchKernel")
        out.op(api, dev, r["queue"], r["start"], r["end"], r["name"], "KernelExecution")
        if any(r[c] is not None for c in (*_LAUNCH, "vgpr")):
            out.rows["rocpd_kernelapi"].append(
                (api, "0x0", *(r[c] or 0 for c in _LAUNCH), 0, "", "", "",
                 out.code(r["vgpr"]), out.sid(r["name"])))
    for c in p.copies.sort("start").iter_rows(named=True):
        kind, code = _COPY_TYPES[c["op"]]
        dev = gpu.get(c["dst_agent"] if code == 1 else c["src_agent"], 0)
        start, end = _launch_call(c)
        api = out.api(pid, c["tid"], start, end, "hipMemcpyAsync")
        out.rows["rocpd_copyapi"].append(
            (api, "0x0", c["bytes"] or 0, 0, 0, code, "", "", c["dst_agent"] or 0,
             c["src_agent"] or 0, 0, 0))
        out.op(api, dev, c["stream"], c["start"], c["end"], "", kind)
    for m in p.markers.sort("start").iter_rows(named=True):
        out.api(pid, m["tid"], m["start"], m["end"], "UserMarker", m["name"])
    t0 = int(k["start"].min() or 0)
    for kind, n in (extra_ops or {}).items():
        for i in range(n):
            out.op(None, min(gpu.values(), default=0), 0, t0 + 10 * i, t0 + 10 * i + 5, "",
                   kind)
