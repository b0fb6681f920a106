"""Reader for AMD rocmProfileData (RPD) SQLite files, as ``rpd_tracer`` writes them.

Schema facts (ROCm/rocmProfileData ``rocpd_python/rocpd/schema_data/tableSchema.cmd``,
schema versions 1-2 in ``rocpd_metadata`` tag ``schema_version``; ``rpd_tracer``'s
``RoctracerDataSource``/``RocprofDataSource``): ``rocpd_op`` holds device work (``gpuId``
0-based, ``queueId``, ``start``/``end`` in ns, ``description_id`` and ``opType_id`` into
``rocpd_string``); ``rocpd_api`` host API calls (``pid``, ``tid``, ``start``, ``end``,
``apiName_id``, ``args_id``); ``rocpd_api_ops(api_id, op_id)`` links a call to the work it
enqueued; ``rocpd_kernelapi`` (keyed by ``api_ptr_id``) a launch's grid and workgroup sizes
and ``groupSegmentSize``, ``rocpd_kernelcodeobject`` its VGPRs; ``rocpd_copyapi`` a copy
call's ``size``. ROCTx ranges and marks are API rows named ``UserMarker`` whose ``args`` is
the message. There is no agent table: one GPU agent per ``gpuId`` is made, product unknown.

Device work by op type: ``KernelExecution`` and ``Task`` (kernels replayed from a HIP graph,
the kernel name in ``description``) are kernels, ``Copy*`` (and rocprofiler-sdk's
``MEMORY_COPY_*``) memory copies; any other type is counted in one warning. The records
become the same per-process frames the rocpd reader makes (:mod:`.records`), one process per
``rocpd_api.pid``; the safety is the rocpd reader's: read as SQLite reads it (a ``-wal`` or
hot ``-journal`` applied in a private copy), ``PRAGMA quick_check``, only objects of type
``table``, a time bound on every statement.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import polars as pl

from parsers.rocprof.build import build_trace
from parsers.rocprof.records import (API_SCHEMA, COPY_SCHEMA, DISPATCH_SCHEMA, MARKER_SCHEMA,
                                     Process, frame)
from parsers.rocprof.agents import agent_frame
from parsers.rocprof.dedupe import drop_copied_ops
from parsers.rocprof.sqlite_db import read_db, refuse_views, sanitize
from tracelens.core.errors import TraceInputError
from tracelens.core.model import Notice, Trace

FORMAT = "rpd"
CLOCK = "CLOCK_MONOTONIC"  # rpd_tracer's clocktime_ns (roctracer/rocprofiler-sdk times)
KERNEL_TYPES = ("KernelExecution", "Task")
MARKER_API = "UserMarker"
_KNOWN_VERSIONS = ("1", "2")
_MAX_GPU = 1 << 16
_NEEDED = ("rocpd_op", "rocpd_string")  # the tables an RPD database must hold
_FIELDS = {"start": "rocpd_op.start", "end": "rocpd_op.end", "agent": "gpuId",
           "queue": "queueId", "op": "opType"}
_DIRECTION = r"(?i)^(?:copy|memory_copy_)(host|device)_?to_?(host|device)"


def read(path: Path, step_marker: str | None = None) -> Trace:
    return build(read_db(path, lambda con: processes(con, path), "RPD"), path, step_marker)


def processes(con: sqlite3.Connection, path: Path) -> list[Process]:
    """The per-process records of the RPD database open on ``con``."""
    return _Rpd(con, path).processes()


def build(procs: list[Process], path: Path, step_marker: str | None) -> Trace:
    return build_trace(procs, path, FORMAT, step_marker, clock=CLOCK)


class _Rpd:
    """One RPD database: its tables (type ``table`` only) and their columns."""

    def __init__(self, con: sqlite3.Connection, path: Path) -> None:
        self.con, self.path = con, path
        self.warnings: list[Notice] = []
        self._strings: dict[str, pl.DataFrame] = {}
        self.tables = {r[0] for r in con.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
        refuse_views(con, path, [t for t in _NEEDED if t not in self.tables],
                     "an RPD database not read")
        for need in _NEEDED:
            if need not in self.tables:
                raise TraceInputError(path, f"an RPD database without a {need} table "
                                      "(not rpd_tracer output)")
        self.columns = {t: self._columns(t) for t in self.tables if t.startswith("rocpd_")}
        self._need("rocpd_op", "id", "gpuId", "queueId", "start", "end", "description_id",
                   "opType_id")
        self._need("rocpd_string", "id", "string")
        if "rocpd_api" in self.tables:
            self._need("rocpd_api", "id", "pid", "tid", "start", "end", "apiName_id")

    def _columns(self, table: str) -> set[str]:
        cur = self.con.execute(f'SELECT * FROM "{table}" LIMIT 0')
        return {d[0].lower() for d in cur.description}

    def _need(self, table: str, *cols: str) -> None:
        lacking = [c for c in cols if c.lower() not in self.columns[table]]
        if lacking:
            raise TraceInputError(self.path, f"{table} lacks column(s) {', '.join(lacking)}: "
                                  "not an RPD schema tracelens knows")

    def _has(self, table: str, *cols: str) -> bool:
        return table in self.tables and {c.lower() for c in cols} <= self.columns[table]

    def _frame(self, sql: str, schema: dict[str, pl.DataType]) -> pl.DataFrame:
        """Rows into polars in chunks; a value that does not fit its column's type is read
        as unknown (null) and counted, as the rocpd reader does, so that its row is dropped
        by name later."""
        bad: dict[str, int] = {}
        cur = self.con.execute(sql)
        cur.arraysize = 262_144
        parts = []
        while rows := cur.fetchmany():
            try:
                parts.append(pl.DataFrame(rows, schema=schema, orient="row"))
            except (pl.exceptions.PolarsError, TypeError, OverflowError, ValueError):
                parts.append(pl.DataFrame(sanitize(rows, schema, bad), schema=schema,
                                          orient="row"))
        for col, n in bad.items():
            self.warnings.append(Notice.of("rocprof.db_wrong_type", "{n} values of {column} are "
                                           "not of its type ({dtype}); read as unknown", n=n,
                                           column=col, dtype=str(schema[col])))
        return pl.concat(parts, rechunk=True) if parts else pl.DataFrame(schema=schema)

    def _named(self, df: pl.DataFrame, ids: dict[str, str], table: str = "rocpd_string"
               ) -> pl.DataFrame:
        """``df`` with each string-id column replaced by its string (``{id_col: name}``),
        joined in polars: a string shared by many rows is then stored once, where a SQL
        join would make one Python copy per row."""
        if table not in self._strings:
            self._strings[table] = self._frame(
                f'SELECT id, string FROM "{table}"', {"id": pl.Int64, "string": pl.String}
            ).unique("id", keep="first", maintain_order=True)
        strings = self._strings[table]
        for col, name in ids.items():
            df = df.join(strings.rename({"id": col, "string": name}), on=col, how="left",
                         maintain_order="left").drop(col)
        return df

    def _int(self, alias: str, table: str, col: str) -> str:
        """An integer column, NULL where the value is text (rpd_tracer writes '' in some
        NOT NULL integer columns) or the column is absent."""
        if col.lower() not in self.columns.get(table, ()):
            return "NULL"
        return f"CASE WHEN typeof({alias}.\"{col}\") = 'integer' THEN {alias}.\"{col}\" END"

    # ---- tables ------------------------------------------------------------------------

    def _ops(self) -> pl.DataFrame:
        ops = self._frame(
            'SELECT id, gpuId, queueId, start, "end", description_id, opType_id FROM rocpd_op',
            {"op_id": pl.Int64, "agent": pl.Int64, "queue": pl.Int64, "start": pl.Int64,
             "end": pl.Int64, "description_id": pl.Int64, "opType_id": pl.Int64})
        return ops  # named by the caller, once copies are dropped (on the ids: cheap)

    def _links(self) -> pl.DataFrame:
        """op id -> the API call that enqueued it (the first link where an op has several,
        counted); and how many ops each call enqueued."""
        schema = {"api_id": pl.Int64, "op_id": pl.Int64}
        if not self._has("rocpd_api_ops", "api_id", "op_id"):
            return pl.DataFrame(schema={**schema, "n_ops": pl.UInt32})
        order = " ORDER BY id" if self._has("rocpd_api_ops", "id") else ""
        links = self._frame(f"SELECT api_id, op_id FROM rocpd_api_ops{order}", schema)
        links = links.drop_nulls()
        first = links.unique("op_id", keep="first", maintain_order=True)
        if first.height < links.height:
            self.warnings.append(Notice.of("rpd.relinked_ops", "{n} rocpd_api_ops rows link an "
                                           "op already linked to another API call; the first "
                                           "link is kept", n=links.height - first.height))
        return first.with_columns(n_ops=pl.len().over("api_id"))

    def _apis(self) -> pl.DataFrame:
        schema = {"corr": pl.Int64, "pid": pl.Int64, "tid": pl.Int64, "start": pl.Int64,
                  "end": pl.Int64, "name_id": pl.Int64, "args_id": pl.Int64,
                  "domain_id": pl.Int64}
        names = {"name_id": "name", "domain_id": "domain"}
        if "rocpd_api" not in self.tables:
            return self._named(pl.DataFrame(schema=schema), {**names, "args_id": "args"})
        c = lambda n: f'"{n}"' if n.lower() in self.columns["rocpd_api"] else "NULL"  # noqa: E731
        apis = self._named(self._frame(
            f'SELECT id, pid, tid, start, "end", apiName_id, {c("args_id")}, {c("domain_id")} '
            "FROM rocpd_api", schema), names)
        # newer rpd_tracer keeps args in rocpd_ustring
        args = "rocpd_ustring" if self._has("rocpd_ustring", "id", "string") else "rocpd_string"
        return self._named(apis, {"args_id": "args"}, args)

    def _launches(self, table: str, key: str) -> pl.DataFrame:
        """Launch geometry, VGPRs (from the code object) and kernel name, keyed ``key``:
        ``rocpd_kernelapi`` by API id, ``rocpd_kernelop`` by op id (older files)."""
        cols = {key: "api_ptr_id" if key == "api_id" else "op_ptr_id", "grid_x": "gridX",
                "grid_y": "gridY", "grid_z": "gridZ", "wg_x": "workgroupX",
                "wg_y": "workgroupY", "wg_z": "workgroupZ", "lds": "groupSegmentSize"}
        schema = {c: pl.Int64 for c in [*cols, "vgpr", "kernel_name_id"]}
        if not self._has(table, cols[key]):
            return self._named(pl.DataFrame(schema=schema), {"kernel_name_id": "kernel_name"})
        code = self._has("rocpd_kernelcodeobject", "id", "vgpr")
        parts = [self._int("K", table, c) for c in cols.values()]
        sql = (f"SELECT {', '.join(parts)}, "
               f"{self._int('C', 'rocpd_kernelcodeobject', 'vgpr') if code else 'NULL'}, "
               f'{self._int("K", table, "kernelName_id")} FROM "{table}" K'
               + (" LEFT JOIN rocpd_kernelcodeobject C ON C.id = "
                  f"{self._int('K', table, 'codeObject_id')}" if code else ""))
        launches = self._frame(sql, schema).unique(key, keep="first", maintain_order=True)
        return self._named(launches, {"kernel_name_id": "kernel_name"})

    def _copy_sizes(self, table: str, key: str) -> pl.DataFrame:
        """Copy sizes: ``rocpd_copyapi`` by API id (schema 2), ``rocpd_copyop`` by op id."""
        col = "api_ptr_id" if key == "api_id" else "op_ptr_id"
        schema = {key: pl.Int64, "bytes": pl.Int64}
        if not self._has(table, col, "size"):
            return pl.DataFrame(schema=schema)
        return self._frame(f"SELECT {self._int('C', table, col)}, "
                           f'{self._int("C", table, "size")} FROM "{table}" C',
                           schema).unique(key, keep="first", maintain_order=True)

    def _version(self) -> str | None:
        if not self._has("rocpd_metadata", "tag", "value"):
            return None
        row = self.con.execute("SELECT value FROM rocpd_metadata WHERE tag = "
                               "'schema_version'").fetchone()
        return str(row[0]) if row and row[0] is not None else None

    # ---- records -----------------------------------------------------------------------

    def processes(self) -> list[Process]:
        version = self._version()
        if version is not None and version not in _KNOWN_VERSIONS:
            self.warnings.append(Notice.of("rpd.schema_version", "RPD schema version {version} "
                                           "(known: 1, 2); columns are read by name",
                                           version=version))
        apis = self._apis()
        ops = self._ops().join(self._links(), on="op_id", how="left", maintain_order="left")
        # a copied rocpd_op row (a new id, every other field equal) is one op written twice
        ops = self._named(drop_copied_ops(ops, ["agent", "queue", "start", "end",
                                                "description_id", "opType_id"], self.warnings),
                          {"description_id": "description", "opType_id": "op_type"})
        ops = ops.join(apis.select(api_id="corr", pid="pid", tid="tid"), on="api_id",
                       how="left", maintain_order="left")
        kind = (pl.when(pl.col("op_type").is_in(KERNEL_TYPES)).then(pl.lit("kernel"))
                .when(pl.col("op_type").str.contains(r"^(?:Copy|MEMORY_COPY)"))
                .then(pl.lit("copy")))
        ops = ops.with_columns(kind=kind)
        self._count_other_types(ops)
        pids = sorted(p for p in apis["pid"].unique().to_list() if p is not None) or [None]
        if len(pids) > 1:
            lost = ops.filter(pl.col("kind").is_not_null() & pl.col("pid").is_null()).height
            if lost:
                self.warnings.append(Notice.of("rpd.unlinked_ops", "dropped {n} device ops that "
                                               "link to no API call: their process is unknown "
                                               "({processes} processes)", n=lost,
                                               processes=len(pids)))
        markers = apis.filter(pl.col("name") == MARKER_API)
        calls = apis.filter(pl.col("name").fill_null("") != MARKER_API)
        dispatches = self._dispatches(ops.filter(pl.col("kind") == "kernel"))
        copies = self._copies(ops.filter(pl.col("kind") == "copy"))
        procs = []
        for pid in pids:
            def mine(df: pl.DataFrame, pid: int | None = pid) -> pl.DataFrame:
                return df if len(pids) == 1 else df.filter(pl.col("pid") == pid)
            d, c = mine(dispatches), mine(copies)
            procs.append(Process(
                host=None, pid=pid, agents=_agents(d, c), dispatches=frame(d, DISPATCH_SCHEMA),
                copies=frame(c, COPY_SCHEMA), apis=frame(_api_rows(mine(calls)), API_SCHEMA),
                markers=frame(mine(markers).with_columns(
                    name="args", domain=pl.lit("MARKER_CORE_RANGE_API")), MARKER_SCHEMA),
                warnings=list(self.warnings), info={"schema_version": version},
                fields=_FIELDS))
        return procs

    def _count_other_types(self, ops: pl.DataFrame) -> None:
        other = ops.filter(pl.col("kind").is_null()).group_by("op_type").len().sort(
            "len", "op_type", descending=[True, False])
        if other.height:
            parts = ", ".join(f"{t if t is not None else '(no type)'} {n}"
                              for t, n in other.iter_rows())
            self.warnings.append(Notice.of("rpd.other_op_types", "{n} rocpd_op rows of other op "
                                           "types are not read ({types})",
                                           n=int(other["len"].sum()), types=parts))

    def _dispatches(self, k: pl.DataFrame) -> pl.DataFrame:
        """Kernels, named by the op's description (else by the launch row's kernel name);
        launch geometry from the op's own ``rocpd_kernelop`` row (older files), else from the
        ``rocpd_kernelapi`` row of its call, only for a ``KernelExecution`` op that the call
        enqueued alone: a graph launch (``Task`` ops) has one kernelapi row, of zero sizes,
        that describes none of its kernels."""
        launch = [c for c in DISPATCH_SCHEMA if c.startswith(("grid_", "wg_"))] + ["vgpr", "lds"]
        by_op = self._launches("rocpd_kernelop", "op_id").rename(
            lambda c: c if c == "op_id" else f"{c}_op")
        k = (k.join(self._launches("rocpd_kernelapi", "api_id"), on="api_id", how="left",
                    maintain_order="left")
             .join(by_op, on="op_id", how="left", maintain_order="left"))
        many = (pl.col("n_ops").fill_null(0) != 1) | (pl.col("op_type") != "KernelExecution")
        own = lambda c: pl.col(f"{c}_op")  # noqa: E731
        api = lambda c: pl.when(~many).then(pl.col(c))  # noqa: E731
        return k.with_columns([pl.coalesce(own(c), api(c)).alias(c) for c in launch]).select(
            "pid", "agent", "queue", "tid", *launch, corr="api_id", start="start", end="end",
            stream="queue", dispatch_id="op_id",
            name=pl.coalesce(pl.when(pl.col("description") != "").then("description"),
                             pl.when(own("kernel_name") != "").then(own("kernel_name")),
                             pl.when(api("kernel_name") != "").then(api("kernel_name"))))

    def _copies(self, c: pl.DataFrame) -> pl.DataFrame:
        """Copies, direction from the op type (``CopyHostToDevice`` ->
        ``MEMORY_COPY_HOST_TO_DEVICE``, the name the rocprofv3 readers give); bytes from the
        op's ``rocpd_copyop`` row (older files), else from the copy call where it enqueued this
        one op."""
        c = (c.join(self._copy_sizes("rocpd_copyapi", "api_id"), on="api_id", how="left",
                    maintain_order="left")
             .join(self._copy_sizes("rocpd_copyop", "op_id").rename({"bytes": "bytes_op"}),
                   on="op_id", how="left", maintain_order="left"))
        parts = pl.col("op_type").str.extract_groups(_DIRECTION)
        direction = pl.format("MEMORY_COPY_{}_TO_{}",
                              parts.struct.field("1").str.to_uppercase(),
                              parts.struct.field("2").str.to_uppercase())
        return c.select(
            "pid", "tid", "start", "end", op=pl.coalesce(direction, "op_type"),
            src_agent="agent", dst_agent="agent", stream="queue", corr="api_id",
            bytes=pl.coalesce("bytes_op", pl.when(pl.col("n_ops") == 1).then(pl.col("bytes"))))


def _api_rows(calls: pl.DataFrame) -> pl.DataFrame:
    """API calls; the domain is RCCL for ``nccl*``/``rccl*`` names (what the collective
    typing looks for), else the file's where it records one (newer ``rpd_tracer``:
    ``domain_id``), else HIP."""
    return calls.with_columns(
        domain=pl.when(pl.col("name").str.contains(r"^(?:nccl|rccl)")).then(pl.lit("RCCL_API"))
        .when(pl.col("domain").fill_null("") != "").then(pl.col("domain"))
        .otherwise(pl.lit("HIP_API")))


def _agents(dispatches: pl.DataFrame, copies: pl.DataFrame) -> pl.DataFrame:
    """One GPU agent per ``gpuId`` the process's work ran on (RPD has no agent table: the
    product is unknown); the node id is the gpuId, the GPU ordinal too. A negative gpuId, or
    one past ``_MAX_GPU``, is no ordinal: its work is dropped and counted by the builder as
    work on an agent the agent table lacks."""
    ids = sorted({g for g in dispatches["agent"].to_list() + copies["src_agent"].to_list()
                  if g is not None and 0 <= g < _MAX_GPU})
    return agent_frame([{"node_id": g, "logical_index": g, "type_index": g, "type": "GPU"}
                        for g in ids])
