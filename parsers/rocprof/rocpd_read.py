"""Reader for the rocprofv3 rocpd SQLite database (``<pid>_results.db``, ROCm >= 7.0).

Schema facts (shared/reference/rocprof.md §2.5; rocprofiler-sdk ``rocpd_tables.sql`` and
``generateRocpd.cpp``): physical tables are ``<table>_<uuid>`` with un-suffixed views of the
same name; ``rocpd_info_agent.id`` is the agent's absolute node id; process and thread ids are
the OS pid/tid; ``rocpd_event.stack_id`` is a record's internal correlation id and
``parent_stack_id`` its ancestor; ``rocpd_region`` holds host API calls with a duration (the
ROCTx message in ``rocpd_event.extdata`` ``$.message``), ``rocpd_sample`` the instantaneous
ones. The convenience views (``kernels``, ``regions``) use inner joins that silently drop rows
with dangling references, so the base views are read and joined here with left joins.

The file is read as SQLite reads it, nothing written beside it (:mod:`.sqlite_db`: a
``-wal`` or hot ``-journal`` applied in a private copy); an RPD database (rocmProfileData's
``rocpd_op``/``rocpd_api_ops``), a different format, is handed to
:mod:`parsers.rocprof.rpd_read` (the format sniffer routes it there already; this covers a
direct call and a gzipped file whose schema the sniffer did not see).
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import polars as pl

from parsers.rocprof.agents import as_int, agent_frame, agent_row
from parsers.rocprof.build import build_trace
from parsers.rocprof.sqlite_db import read_db, refuse_views, sanitize
from parsers.rocprof.records import (API_SCHEMA, COPY_SCHEMA, COUNTER_SCHEMA, DISPATCH_SCHEMA,
                                     LAUNCH_COLUMNS, MARKER_SCHEMA, Process, frame)
from tracelens.core.errors import TraceInputError
from tracelens.core.model import Notice, Trace

FORMAT = "rocpd"
_MARKER_DOMAINS = ("MARKER_CORE_API", "MARKER_CORE_RANGE_API")
_REQUIRED = ("rocpd_kernel_dispatch", "rocpd_info_agent")
_RPD_TABLES = ("rocpd_op", "rocpd_string", "rocpd_api")  # an RPD database's, named if views
_FIELDS = {"start": "start", "end": "end", "agent": "agent_id", "queue": "queue_id",
           "op": "name_id"}


_UUID = r"_[0-9A-Fa-f]{8}(?:_[0-9A-Fa-f]{4}){3}_[0-9A-Fa-f]{12}"


def read(path: Path, step_marker: str | None = None) -> Trace:
    """The rocpd database, or (when the sniffer could not tell, e.g. a ``.db.gz`` whose
    schema is past its first bytes) an RPD one, read on the same open connection: the file
    is opened, and a ``.db.gz`` inflated, once."""
    from parsers.rocprof import rpd_read

    rpd = []

    def sets(con: sqlite3.Connection) -> list[Process]:
        try:
            return _read_sets(con, path)
        except _IsRpd:
            rpd.append(True)
            return rpd_read.processes(con, path)
    procs = read_db(path, sets, "rocpd")
    return rpd_read.build(procs, path, step_marker) if rpd else \
        build_trace(procs, path, FORMAT, step_marker)


class _IsRpd(Exception):
    """The database is rocmProfileData's RPD, read by :mod:`parsers.rocprof.rpd_read`."""


def _read_sets(con: sqlite3.Connection, path: Path) -> list[Process]:
    """Every set of rocpd tables, each read once. rocprofv3 writes one set per process
    (``<table>_<uuid>``); a merged database holds several. Only objects of type ``table``
    are read: the views rocprofv3 adds beside them are redundant, and a view could hold
    any query. A set whose process (guid) or dispatches repeat an earlier set's is skipped
    and counted, since reading it would double every dispatch."""
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    pat = re.compile(r"rocpd_kernel_dispatch(" + _UUID + ")?$")
    suffixes = sorted(m.group(1) or "" for t in tables if (m := pat.match(t)))
    if not suffixes:
        _Reader(con, path, tables, "")  # raises: says what the database is instead
    procs: list[Process] = []
    seen: dict[Any, str] = {}
    skipped = []
    for suffix in suffixes:
        reader = _Reader(con, path, tables, suffix)
        key = reader.fingerprint()
        if key in seen:
            skipped.append(f"{suffix.lstrip('_') or '(no uuid)'} repeats "
                           f"{seen[key].lstrip('_') or '(no uuid)'}")
            continue
        seen[key] = suffix
        procs += reader.processes()
    if len(suffixes) > 1:
        note = Notice.of("rocpd.table_sets", "{n} sets of rocpd tables (one per uuid), each "
                         "read once", n=len(suffixes)) if not skipped else Notice.of(
            "rocpd.table_sets_skipped", "{n} sets of rocpd tables (one per uuid), each read "
            "once; {skipped} skipped as copies of another set ({which})", n=len(suffixes),
            skipped=len(skipped), which=", ".join(skipped))
        for p in procs:
            p.warnings.append(note)
    return procs


class _Reader:
    """One set of rocpd tables (those named ``<base><suffix>``)."""

    def __init__(self, con: sqlite3.Connection, path: Path, tables: set[str],
                 suffix: str) -> None:
        self.con, self.path, self.suffix = con, path, suffix
        self.warnings: list[Notice] = []
        self.names = tables
        self.sources = {base: self._source(base) for base in (
            "rocpd_metadata", "rocpd_string", "rocpd_info_node", "rocpd_info_process",
            "rocpd_info_agent", "rocpd_info_kernel_symbol", "rocpd_event", "rocpd_region",
            "rocpd_sample", "rocpd_track", "rocpd_kernel_dispatch", "rocpd_memory_copy",
            "rocpd_info_pmc", "rocpd_pmc_event")}
        missing = [b for b in _REQUIRED if self.sources[b] is None]
        if missing:
            refuse_views(con, path, [b + suffix for b in missing] + list(_RPD_TABLES),
                         "a SQLite database not read as a rocpd or RPD database")
            if "rocpd_op" in self.names:
                raise _IsRpd()
            if "CUPTI_ACTIVITY_KIND_KERNEL" in self.names:
                raise TraceInputError(path, "an Nsight Systems SQLite export "
                                      "(CUPTI_ACTIVITY_KIND_KERNEL), not read; pass a PyTorch "
                                      "profiler (Kineto) JSON or a jax.profiler .xplane.pb")
            if {"KERN", "OPS"} <= {n.upper() for n in self.names}:
                raise TraceInputError(path, "a rocprof (v1) results.db (tables KERN, OPS), "
                                      "not read; profile with rocprofv3 instead")
            raise TraceInputError(path, "a SQLite database that is not a rocprofv3 rocpd "
                                  f"database (no {' or '.join(missing)} table)")
        self.columns = {b: self._columns(s) for b, s in self.sources.items() if s}

    def _source(self, base: str) -> str | None:
        """This set's table of ``base``: ``<base><suffix>``, else a plain ``<base>`` table
        (a database written without uuids); views are never read."""
        for name in (base + self.suffix, base):
            if name in self.names:
                return f'"{name}"'
        return None

    def fingerprint(self) -> tuple[Any, ...]:
        """What identifies the process a set records: its guid when the metadata has one,
        else its dispatches' count and time sums."""
        meta = self.sources["rocpd_metadata"]
        if meta and {"tag", "value"} <= self.columns["rocpd_metadata"]:
            guid = self.con.execute(f"SELECT value FROM {meta} WHERE tag = 'guid'").fetchone()
            if guid and guid[0]:
                return ("guid", guid[0])
        return ("dispatches", *self.con.execute(
            f'SELECT count(*), total(start), total("end") FROM '
            f"{self.sources['rocpd_kernel_dispatch']}").fetchone())

    def _columns(self, source: str) -> set[str]:
        cur = self.con.execute(f"SELECT * FROM {source} LIMIT 0")
        return {d[0].lower() for d in cur.description}

    def _col(self, base: str, alias: str, name: str) -> str:
        return f'{alias}."{name}"' if name in self.columns.get(base, ()) else "NULL"

    def _need(self, base: str, *cols: str) -> None:
        lacking = [c for c in cols if c not in self.columns.get(base, ())]
        if lacking:
            raise TraceInputError(self.path, f"{base} lacks column(s) {', '.join(lacking)}: "
                                  "not a rocpd schema tracelens knows")

    def _frame(self, sql: str, schema: dict[str, pl.DataType]) -> pl.DataFrame:
        """Rows into polars in chunks (fewer live Python tuples than one ``fetchall``).

        SQLite columns hold any type: when a value does not fit its column (text in a
        timestamp, a real in an id), the rows are read again with every such value made
        unknown (null) and counted in a warning naming the column, so that the rows the
        model cannot hold are dropped by name later instead of failing the file."""
        try:
            return self._fetch(sql, schema, None)
        except (pl.exceptions.PolarsError, TypeError, OverflowError, ValueError):
            bad: dict[str, int] = {}
            df = self._fetch(sql, schema, bad)
            for col, n in bad.items():
                self.warnings.append(Notice.of("rocprof.db_wrong_type", "{n} values of {column} "
                                               "are not of its type ({dtype}); read as unknown",
                                               n=n, column=col, dtype=str(schema[col])))
            return df

    def _fetch(self, sql: str, schema: dict[str, pl.DataType],
               bad: dict[str, int] | None) -> pl.DataFrame:
        cur = self.con.execute(sql)
        cur.arraysize = 262_144
        parts = []
        while rows := cur.fetchmany():
            if bad is not None:
                rows = sanitize(rows, schema, bad)
            parts.append(pl.DataFrame(rows, schema=schema, orient="row"))
        return pl.concat(parts, rechunk=True) if parts else pl.DataFrame(schema=schema)

    def _join(self, base: str, alias: str, on: str) -> str:
        """LEFT JOIN of an optional table; ``guid`` is matched too when both carry it."""
        src = self.sources.get(base)
        if src is None:
            return ""
        guid = f" AND {alias}.guid = {on.split('.')[0]}.guid" if (
            "guid" in self.columns[base]) else ""
        return f" LEFT JOIN {src} {alias} ON {alias}.id = {on}{guid}"

    def processes(self) -> list[Process]:
        meta = {}
        if self.sources["rocpd_metadata"]:
            meta = dict(self.con.execute(
                f"SELECT tag, value FROM {self.sources['rocpd_metadata']}").fetchall())
        self._need("rocpd_kernel_dispatch", "agent_id", "kernel_id", "start", "end")
        self._need("rocpd_info_agent", "id")
        warnings: list[Notice] = []
        version = str(meta.get("schema_version", "")) or None
        if version and not version.startswith("3"):
            warnings.append(Notice.of("rocpd.schema_version", "rocpd schema version {version} "
                                      "(known: 3.x); columns are read by name", version=version))
        agents = self._agents()
        dispatches = self._dispatches()
        copies = self._copies()
        apis, markers = self._regions()
        counters = self._counters()
        pids = sorted({p for df in (dispatches, agents) for p in df["pid"].unique().to_list()
                       if p is not None}) or [None]
        procs = []
        for pid in pids:
            def mine(df: pl.DataFrame, pid: int | None = pid) -> pl.DataFrame:
                return df if pid is None or len(pids) == 1 else df.filter(pl.col("pid") == pid)
            host, init, fini = self._process_info(pid)
            procs.append(Process(
                host=host, pid=pid, agents=mine(agents).drop("pid"),
                dispatches=frame(mine(dispatches), DISPATCH_SCHEMA),
                copies=frame(mine(copies), COPY_SCHEMA), apis=frame(mine(apis), API_SCHEMA),
                markers=frame(mine(markers), MARKER_SCHEMA), init_ns=init, fini_ns=fini,
                counters=frame(mine(counters), COUNTER_SCHEMA),
                warnings=list(warnings) + self.warnings,
                info={"schema_version": version, "identity": self.fingerprint()},
                fields=_FIELDS))
        return procs

    def _agents(self) -> pl.DataFrame:
        import json
        c = lambda n: self._col("rocpd_info_agent", "A", n)  # noqa: E731
        rows = self.con.execute(
            f"SELECT A.id, {c('pid')}, {c('type')}, {c('absolute_index')}, "
            f"{c('logical_index')}, {c('type_index')}, {c('name')}, {c('product_name')}, "
            f"{c('vendor_name')}, {c('extdata')} FROM {self.sources['rocpd_info_agent']} A"
        ).fetchall()
        out = []
        for node, pid, kind, absolute, logical, typed, name, product, vendor, ext in rows:
            try:
                extdata = json.loads(ext) if isinstance(ext, (str, bytes)) and ext else {}
            except ValueError:
                extdata = {}
            extdata = extdata if isinstance(extdata, dict) else {}
            row = agent_row({**extdata, "node_id": absolute if absolute is not None else node,
                             "logical_node_id": logical, "logical_node_type_id": typed,
                             "type": kind, "name": name or extdata.get("name"),
                             "product_name": product or extdata.get("product_name"),
                             "vendor_name": vendor or extdata.get("vendor_name")})
            row["node_id"], row["pid"] = as_int(node), as_int(pid)
            out.append(row)
        return agent_frame(out).with_columns(
            pid=pl.Series([r["pid"] for r in out], dtype=pl.Int64))

    def _dispatches(self) -> pl.DataFrame:
        k = lambda n: self._col("rocpd_kernel_dispatch", "K", n)  # noqa: E731
        corr = "E.stack_id" if self.sources["rocpd_event"] else "NULL"
        # launch shape: grid (work-items) and workgroup sizes, group segment (LDS) bytes
        sizes = ", ".join(k(f"{w}_size_{a}") for w in ("grid", "workgroup") for a in "xyz")
        sql = (f"SELECT {k('pid')}, K.agent_id, {k('queue_id')}, {k('stream_id')}, {k('tid')}, "
               f"{corr}, K.kernel_id, K.start, K.\"end\", K.id, {sizes}, "
               f"{k('group_segment_size')} FROM {self.sources['rocpd_kernel_dispatch']} K"
               + (self._join("rocpd_event", "E", "K.event_id") if corr != "NULL" else ""))
        df = self._frame(sql, {"pid": pl.Int64, "agent": pl.Int64, "queue": pl.Int64,
                               "stream": pl.Int64, "tid": pl.Int64, "corr": pl.Int64,
                               "kernel_id": pl.Int64, "start": pl.Int64, "end": pl.Int64,
                               "dispatch_id": pl.Int64,
                               **{c: pl.Int64 for c in LAUNCH_COLUMNS if c != "vgpr"}})
        return df.join(self._symbols(), on="kernel_id", how="left")

    def _counters(self) -> pl.DataFrame:
        """PMC values per dispatch: ``rocpd_pmc_event`` rows (one per counter and hardware
        instance) tied to a dispatch by ``event_id``, named by ``rocpd_info_pmc``; the
        dispatch is keyed by its row id, as :meth:`_dispatches` keys it."""
        schema = {"pid": pl.Int64, "dispatch_id": pl.Int64, "counter": pl.String,
                  "value": pl.Float64}
        pmc, info = self.sources["rocpd_pmc_event"], self.sources["rocpd_info_pmc"]
        if pmc is None or info is None:
            return pl.DataFrame(schema=schema)
        k = lambda n: self._col("rocpd_kernel_dispatch", "K", n)  # noqa: E731
        guid = " AND K.guid = P.guid" if "guid" in self.columns["rocpd_pmc_event"] and (
            "guid" in self.columns["rocpd_kernel_dispatch"]) else ""
        sql = (f"SELECT {k('pid')}, K.id, I.name, P.value FROM {pmc} P "
               f"JOIN {self.sources['rocpd_kernel_dispatch']} K ON K.event_id = P.event_id"
               f"{guid}" + self._join("rocpd_info_pmc", "I", "P.pmc_id"))
        return self._frame(sql, schema)

    def _symbols(self) -> pl.DataFrame:
        src = self.sources["rocpd_info_kernel_symbol"]
        schema = {"kernel_id": pl.Int64, "name": pl.String, "vgpr": pl.Int64}
        if src is None:
            return pl.DataFrame(schema=schema)
        s = lambda n: self._col("rocpd_info_kernel_symbol", "S", n)  # noqa: E731
        return self._frame(f"SELECT S.id, COALESCE({s('display_name')}, {s('kernel_name')}), "
                           f"{s('arch_vgpr_count')} FROM {src} S", schema).unique(
            "kernel_id", keep="first", maintain_order=True)

    def _copies(self) -> pl.DataFrame:
        src = self.sources["rocpd_memory_copy"]
        schema = {"pid": pl.Int64, "tid": pl.Int64, "start": pl.Int64, "end": pl.Int64,
                  "op": pl.String, "src_agent": pl.Int64, "dst_agent": pl.Int64,
                  "bytes": pl.Int64, "stream": pl.Int64, "corr": pl.Int64}
        if src is None:
            return pl.DataFrame(schema=schema)
        m = lambda n: self._col("rocpd_memory_copy", "M", n)  # noqa: E731
        name = "S.string" if self.sources["rocpd_string"] else "NULL"
        corr = "E.stack_id" if self.sources["rocpd_event"] else "NULL"
        sql = (f"SELECT {m('pid')}, {m('tid')}, M.start, M.\"end\", {name}, "
               f"{m('src_agent_id')}, {m('dst_agent_id')}, {m('size')}, {m('stream_id')}, "
               f"{corr} FROM {src} M" + self._join("rocpd_string", "S", "M.name_id")
               + self._join("rocpd_event", "E", "M.event_id"))
        return self._frame(sql, schema)

    def _regions(self) -> tuple[pl.DataFrame, pl.DataFrame]:
        schema = {"pid": pl.Int64, "tid": pl.Int64, "start": pl.Int64, "end": pl.Int64,
                  "name": pl.String, "domain": pl.String, "corr": pl.Int64,
                  "parent": pl.Int64, "message": pl.String}
        parts = []
        ev = self.sources["rocpd_event"] and self.sources["rocpd_string"]
        msg = ("CASE WHEN C.string LIKE 'MARKER%' THEN json_extract(E.extdata, '$.message') "
               "END" if ev and "extdata" in self.columns["rocpd_event"] else "NULL")
        cat = "C.string" if ev else "NULL"
        events = (self._join("rocpd_event", "E", "X.event_id")
                  + self._join("rocpd_string", "C", "E.category_id")) if ev else ""
        if self.sources["rocpd_region"]:
            name = "S.string" if self.sources["rocpd_string"] else "NULL"
            parts.append(self._frame(
                f"SELECT X.pid, X.tid, X.start, X.\"end\", {name}, {cat}, "
                f"COALESCE({'E.stack_id' if ev else 'NULL'}, X.id), "
                f"{'E.parent_stack_id' if ev else 'NULL'}, {msg} "
                f"FROM {self.sources['rocpd_region']} X"
                + self._join("rocpd_string", "S", "X.name_id") + events, schema))
        if self.sources["rocpd_sample"] and self.sources["rocpd_track"] and ev:
            parts.append(self._frame(
                f"SELECT T.pid, T.tid, X.timestamp, X.timestamp, NULL, {cat}, E.stack_id, "
                f"E.parent_stack_id, {msg} FROM {self.sources['rocpd_sample']} X"
                + self._join("rocpd_track", "T", "X.track_id") + events, schema))
        regions = pl.concat(parts) if parts else pl.DataFrame(schema=schema)
        regions = regions.filter(~pl.col("domain").fill_null("").str.starts_with("KFD"))
        is_marker = pl.col("domain").is_in(_MARKER_DOMAINS)
        markers = regions.filter(is_marker).with_columns(
            name=pl.coalesce("message", "name", "domain"))
        return regions.filter(~is_marker), markers

    def _process_info(self, pid: int | None) -> tuple[str | None, int | None, int | None]:
        src, nodes = self.sources["rocpd_info_process"], self.sources["rocpd_info_node"]
        if src is None:
            return None, None, None
        p = lambda n: self._col("rocpd_info_process", "P", n)  # noqa: E731
        host = "N.hostname" if nodes and "hostname" in self.columns["rocpd_info_node"] \
            else "NULL"
        where = f" WHERE {p('pid')} = {int(pid)}" if pid is not None else ""
        row = self.con.execute(
            f"SELECT {host}, {p('init')}, {p('fini')} FROM {src} P"
            + (self._join("rocpd_info_node", "N", "P.nid") if host != "NULL" else "")
            + where).fetchone()
        return (row[0] or None, row[1], row[2]) if row else (None, None, None)
