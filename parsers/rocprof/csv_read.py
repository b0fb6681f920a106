"""Reader for rocprofv3 CSV output: every column layout of ROCm 6.2 to 7.x and ``rocpd convert``.

One input path stands for the set of CSV files of one output prefix (``<pid>_`` in the
default ``<host>/<pid>_*.csv`` layout, ``out_`` for ``rocpd convert``): ``kernel_trace.csv``
plus, when present beside it, ``agent_info.csv``, ``memory_copy_trace.csv`` and the
``hip/hsa/rccl/marker_api_trace.csv`` files. Columns are matched by name, case-insensitively
(shared/reference/rocprof.md §2.3: ``Agent_Id`` numeric in 6.x and ``"Agent N"`` in 7.x,
``Stream_Id``/``Thread_Id`` only in some versions, ``Vgpr_Count`` vs ``VGPR_Count``, a leading
``Guid`` from ``rocpd convert``, which may hold several processes told apart by ``Guid``).
CSV records neither the host name (taken from the ``<host>/`` directory when the files are
named ``<pid>_*.csv``) nor copy sizes (``bytes`` stays null).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from parsers.budget import human, memory_budget
from parsers.rawfile import check_text, is_gzip, read_maybe_gzip
from parsers.rocprof.agents import agent_frame, resolve_refs
from parsers.rocprof.build import build_trace
from parsers.rocprof.records import (API_SCHEMA, COPY_SCHEMA, COUNTER_SCHEMA, DISPATCH_SCHEMA,
                                     LAUNCH_COLUMNS, MARKER_SCHEMA, Process, frame)
from tracelens.core.errors import TraceInputError
from tracelens.core.model import Notice, Trace

FORMAT = "rocprof-csv"
TABLES = ("kernel_trace", "agent_info", "memory_copy_trace", "hip_api_trace",
          "hsa_api_trace", "rccl_api_trace", "marker_api_trace", "counter_collection")
_REQUIRED = {
    "kernel_trace": ("agent_id", "queue_id", "kernel_name", "start_timestamp",
                     "end_timestamp"),
    "agent_info": ("node_id", "agent_type"),
    "memory_copy_trace": ("direction", "source_agent_id", "destination_agent_id",
                          "start_timestamp", "end_timestamp"),
    "api": ("domain", "function", "start_timestamp", "end_timestamp"),
    "counter_collection": ("dispatch_id", "agent_id", "queue_id", "kernel_name",
                           "counter_name", "counter_value"),
}
_INTS = ("queue_id", "stream_id", "thread_id", "correlation_id", "start_timestamp", "dispatch_id",
         "end_timestamp", "kernel_id", "process_id", "node_id", "logical_node_id", "cu_count",
         "gfx_target_version", "max_engine_clk_fcompute", "grid_size_x", "grid_size_y",
         "grid_size_z", "workgroup_size_x", "workgroup_size_y", "workgroup_size_z",
         "lds_block_size", "group_segment_size", "vgpr_count")
CELL_BYTES = 16  # a polars string view per cell, beside the text itself
_MARKER_DOMAINS = ("MARKER_CORE_API", "MARKER_CORE_RANGE_API")
_FIELDS = {"start": "Start_Timestamp", "end": "End_Timestamp", "agent": "Agent_Id",
           "queue": "Queue_Id", "op": "Direction"}


def _group(path: Path) -> tuple[str, dict[str, Path]]:
    """The output prefix of ``path`` and the CSV files of that prefix beside it."""
    name = path.name
    for table in TABLES:
        if name.lower().endswith(table + ".csv"):
            prefix = name[: -len(table) - 4]
            found = {t: path.parent / f"{prefix}{t}.csv" for t in TABLES}
            return prefix, {t: p for t, p in found.items() if p.is_file()}
    return "", {"kernel_trace": path}  # a lone, renamed CSV: read it as a kernel trace


def _table(path: Path, kind: str, warnings: list[Notice]) -> pl.DataFrame:
    """One CSV with lower-case column names, integers parsed, required columns checked;
    a value that is not an integer where one belongs is unknown (null) and counted."""
    source = _source(path)
    try:
        df = pl.read_csv(source, infer_schema=False, raise_if_empty=False)
    except (pl.exceptions.PolarsError, OSError, UnicodeDecodeError) as exc:
        raise TraceInputError(path, "malformed CSV "
                              f"({str(exc).splitlines()[0][:120]})") from None
    lower = [c.strip().lower() for c in df.columns]
    if len(set(lower)) < len(lower):
        raise TraceInputError(path, "malformed CSV (duplicate column names)")
    df = df.rename(dict(zip(df.columns, lower)))
    required = _REQUIRED["api" if kind.endswith("_api_trace") else kind]
    missing = [c for c in required if c not in df.columns]
    if missing:
        titled = ", ".join(c.title() for c in missing)
        raise TraceInputError(path, f"CSV lacks column(s) {titled}: not a rocprofv3 "
                              f"{kind}.csv of a known layout")
    blank = pl.all_horizontal(pl.all().is_null())
    df = df.filter(~blank)  # blank lines (the documentation's own sample ends with one)
    if df[df.columns[-1]].null_count():  # an empty last field, or a row cut off mid-line
        line = _first_short_line(source, len(df.columns))
        if line is not None:
            raise TraceInputError(path, f"row {line} has fewer fields than the header "
                                  "(truncated or damaged CSV)")
    for col in (c for c in _INTS if c in df.columns):
        text = df[col].str.strip_chars()
        ints = text.cast(pl.Int64, strict=False)
        bad = df.filter(text.is_not_null() & (text != "") & ints.is_null())
        if bad.height:  # the row is kept; build.py drops it by name if the model needs it
            warnings.append(Notice.of("rocprof.csv_not_integers", "{table}: {n} values of "
                                      "{column} are not integers (first {first}); read as "
                                      "unknown", table=path.name, n=bad.height,
                                      column=col.title(), first=repr(bad[col][0])))
        df = df.with_columns(ints.alias(col))
    if "counter_value" in df.columns:
        text = df["counter_value"].str.strip_chars()
        values = text.cast(pl.Float64, strict=False)
        bad = df.filter(text.is_not_null() & (text != "") & values.is_null())
        if bad.height:
            warnings.append(Notice.of("rocprof.csv_not_numbers", "{table}: {n} values of "
                                      "Counter_Value are not numbers (first {first}); read as "
                                      "unknown", table=path.name, n=bad.height,
                                      first=repr(bad["counter_value"][0])))
        df = df.with_columns(values.alias("counter_value"))
    return df


def _source(path: Path) -> Path | bytes:
    """What polars reads: the file itself (memory-mapped), or for a gzip its inflated bytes
    (inflated here, within the inflation budget, not by polars without one); either is
    refused when the frame it makes would pass the memory budget (``parsers.budget``)."""
    gz = is_gzip(path)
    raw = read_maybe_gzip(path, text="CSV") if gz else None
    try:
        size = len(raw) if raw is not None else path.stat().st_size
        if raw is None:
            check_text(path, size, "CSV")  # a sparse or zero-filled file, before polars maps it
        budget = memory_budget()
        if budget is None or _frame_bytes(size, size + 1, 1) <= budget.limit:
            return raw if raw is not None else path  # small enough at any cell count
        lines, columns = _shape(raw if raw is not None else path)
    except OSError as exc:
        raise TraceInputError(path, f"cannot read: {exc.strerror or exc}") from None
    need = _frame_bytes(size, lines, columns)
    if need > budget.limit:
        raise budget.refuse(path, f"{human(size)} of CSV in {lines:,} lines of {columns} "
                            f"fields, about {human(need)} to hold in memory",
                            "too large to read on this machine")
    return raw if raw is not None else path


def _first_short_line(source: Path | bytes, columns: int) -> int | None:
    """The first line (from 1, the header's) of a record with fewer fields than
    ``columns``, or None. polars pads a short row with nulls, as it reads an empty field:
    only the record's own separators tell a row cut off from one whose last values are empty
    (rocprofv3 writes those). Fields are counted outside quotes (kernel names hold commas; a
    quoted marker message may hold newlines, so a record runs until its quotes balance);
    called only when a last field is null, so a well-formed file is not read twice."""
    raw = source if isinstance(source, bytes) else source.read_bytes()
    lines = pl.Series("text", raw.decode("utf-8", errors="replace").split("\n"),
                      dtype=pl.String)
    odd = (lines.str.count_matches('"').cum_sum() % 2 == 1).alias("open")
    # a record starts on a line before which every quote is closed
    records = pl.DataFrame([lines, odd]).with_row_index("line", offset=1).with_columns(
        record=(~pl.col("open").shift(1, fill_value=False)).cast(pl.Int64).cum_sum())
    whole = records.group_by("record", maintain_order=True).agg(
        line=pl.col("line").first(), text=pl.col("text").str.join("\n"))
    fields = pl.col("text").str.replace_all(r'"[^"]*"', "").str.count_matches(",") + 1
    short = whole.filter((pl.col("text").str.strip_chars() != "") & (fields < columns))
    return int(short["line"][0]) if short.height else None


def _frame_bytes(size: int, lines: int, columns: int) -> int:
    """What polars holds for a CSV of ``size`` bytes read as text: the text and a 16-byte
    view per cell (measured: 91 MB for 10 MB of one-byte cells, 5M of them)."""
    return size + CELL_BYTES * lines * columns


def _shape(source: Path | bytes) -> tuple[int, int]:
    """Lines and header fields of a CSV, counted in chunks (a plain file is not held)."""
    if isinstance(source, bytes):
        return _lines(source.count(b"\n"), source[-1:]), _fields(source)
    newlines, columns, last = 0, 0, b""
    with open(source, "rb") as fh:
        while chunk := fh.read(16 << 20):
            columns = columns or _fields(chunk)
            newlines += chunk.count(b"\n")
            last = chunk[-1:]
    return _lines(newlines, last), max(columns, 1)


def _lines(newlines: int, last: bytes) -> int:
    return newlines + (last not in (b"", b"\n"))


def _fields(head: bytes) -> int:
    return head.split(b"\n", 1)[0].count(b",") + 1


def _col(df: pl.DataFrame, name: str, dtype: pl.DataType = pl.Int64) -> pl.Expr:
    return pl.col(name) if name in df.columns else pl.lit(None, dtype=dtype).alias(name)


def _agents(df: pl.DataFrame | None) -> pl.DataFrame:
    if df is None or df.is_empty():
        return agent_frame([])
    kind = pl.col("agent_type").str.to_uppercase()
    logical = _col(df, "logical_node_id").fill_null(pl.col("node_id"))
    out = df.select(
        node_id="node_id", logical_index=logical, type=kind,
        type_index=(logical.rank("dense").over(kind) - 1).cast(pl.Int64),
        name=_col(df, "name", pl.String), gfx_target_version=_col(df, "gfx_target_version"),
        product_name=_col(df, "product_name", pl.String),
        vendor_name=_col(df, "vendor_name", pl.String), cu_count=_col(df, "cu_count"),
        clock_mhz=_col(df, "max_engine_clk_fcompute").cast(pl.Float64))
    out = out.with_columns(clock_mhz=pl.when(pl.col("clock_mhz") > 0).then("clock_mhz"))
    return agent_frame(out.to_dicts()) if out.height else agent_frame([])


def _synthetic_agents(ids: pl.Series) -> pl.DataFrame:
    seen = sorted(x for x in ids.unique().to_list() if x is not None)
    return agent_frame([{"node_id": n, "logical_index": n, "type_index": i, "type": "GPU"}
                        for i, n in enumerate(seen)])


def read(path: Path, step_marker: str | None = None) -> Trace:
    prefix, files = _group(path)
    warnings: list[Notice] = []
    tables = {t: _table(p, t, warnings) for t, p in files.items()}
    kernels = tables.get("kernel_trace")
    if kernels is None and "counter_collection" in tables:  # --pmc without --kernel-trace
        kernels = _dispatches_of_counters(tables["counter_collection"], path)
        tables["kernel_trace"] = kernels
    if kernels is None:
        raise TraceInputError(path, f"no {prefix}kernel_trace.csv beside it: rocprofv3 CSV "
                              "output needs its kernel trace")
    guids = sorted(kernels["guid"].unique().drop_nulls().to_list()) if (
        "guid" in kernels.columns) else []
    procs = [_process(tables, path, prefix, g, warnings) for g in (guids or [None])]
    return build_trace(procs, path, FORMAT, step_marker)


def _dispatches_of_counters(c: pl.DataFrame, path: Path) -> pl.DataFrame:
    """The kernel dispatches a counter CSV describes (one row per dispatch and counter):
    ROCm >= 7.0 writes each dispatch's timestamps on its rows; 6.x does not, and then the
    dispatches have no time and the file cannot stand alone."""
    missing = [c_ for c_ in ("start_timestamp", "end_timestamp") if c_ not in c.columns]
    if missing:
        raise TraceInputError(path, "counter_collection.csv without Start_Timestamp and "
                              "End_Timestamp (ROCm < 7.0) and no kernel_trace.csv beside it: "
                              "the dispatches have no time")
    keys = ["guid", "dispatch_id"] if "guid" in c.columns else ["dispatch_id"]
    return c.unique(keys, keep="first", maintain_order=True).drop(
        "counter_name", "counter_value")


def _process(tables: dict[str, pl.DataFrame], path: Path, prefix: str,
             guid: str | None, read_warnings: list[Notice]) -> Process:
    def mine(name: str) -> pl.DataFrame | None:
        df = tables.get(name)
        if df is None or guid is None or "guid" not in df.columns:
            return df
        return df.filter(pl.col("guid") == guid)

    warnings = list(read_warnings)
    agents = _agents(mine("agent_info"))
    k = mine("kernel_trace")
    kernel_agents, bad = resolve_refs(k["agent_id"], agents)
    if agents.is_empty():
        warnings.append(Notice.of("rocprof.csv_no_agent_info", "no {prefix}agent_info.csv: GPU "
                                  "ordinals follow the agent ids, and the product is unknown",
                                  prefix=prefix))
        agents = _synthetic_agents(kernel_agents)
    if bad:
        warnings.append(Notice.of("rocprof.csv_unknown_agents", "{n} kernel rows name an agent "
                                  "missing from agent_info.csv", n=bad))
    dispatches = k.select(
        agent=kernel_agents, queue="queue_id", stream=_col(k, "stream_id"),
        tid=_col(k, "thread_id"), corr=_col(k, "correlation_id"),
        kernel_id=_col(k, "kernel_id"), name="kernel_name", start="start_timestamp",
        end="end_timestamp", dispatch_id=_col(k, "dispatch_id"),
        # launch shape: grid in work-items; LDS is Group_Segment_Size (6.x) or LDS_Block_Size
        # (>= 7.0); VGPRs only >= 7.0. The counter CSV's Grid_Size/Workgroup_Size are
        # products, not dimensions: not read.
        **{c: _col(k, f"{w}_size_{a}") for c, (w, a) in zip(
            LAUNCH_COLUMNS[:6], [(w, a) for w in ("grid", "workgroup") for a in "xyz"])},
        vgpr=_col(k, "vgpr_count"),
        lds=pl.coalesce(_col(k, "lds_block_size"), _col(k, "group_segment_size")))
    pmc = mine("counter_collection")
    counters = frame({}, COUNTER_SCHEMA) if pmc is None else pmc.select(
        "dispatch_id", counter="counter_name", value="counter_value")
    copies = frame({}, COPY_SCHEMA)
    c = mine("memory_copy_trace")
    if c is not None and c.height:
        src, _ = resolve_refs(c["source_agent_id"], agents)
        dst, _ = resolve_refs(c["destination_agent_id"], agents)
        copies = c.select(src_agent=src, dst_agent=dst, op="direction",
                          stream=_col(c, "stream_id"), corr=_col(c, "correlation_id"),
                          start="start_timestamp", end="end_timestamp")
    apis = [mine(t) for t in ("hip_api_trace", "hsa_api_trace", "rccl_api_trace",
                              "marker_api_trace")]
    api = pl.concat([a.select(domain="domain", name="function", tid=_col(a, "thread_id"),
                              corr=_col(a, "correlation_id"), start="start_timestamp",
                              end="end_timestamp", pid=_col(a, "process_id"))
                     for a in apis if a is not None and a.height], how="vertical_relaxed") \
        if any(a is not None and a.height for a in apis) else frame({}, {
            **API_SCHEMA, "pid": pl.Int64})
    is_marker = pl.col("domain").is_in(_MARKER_DOMAINS)
    pid = int(prefix[:-1]) if prefix[:-1].isdigit() and prefix.endswith("_") else None
    if pid is None and api["pid"].drop_nulls().len():
        pid = int(api["pid"].drop_nulls()[0])
    if pid is not None and prefix[:-1].isdigit():
        host = path.parent.name or None
        warnings.append(Notice.of("rocprof.csv_host_from_directory", "host name {host!r} taken "
                                  "from the directory (CSV does not record it)", host=host))
    else:
        host = None
        warnings.append(Notice.of("rocprof.csv_no_host", "CSV output does not record the host "
                                  "name: using 'unknown'"))
    return Process(host=host, pid=pid, agents=agents,
                   dispatches=frame(dispatches, DISPATCH_SCHEMA),
                   copies=frame(copies, COPY_SCHEMA),
                   apis=frame(api.filter(~is_marker), API_SCHEMA),
                   markers=frame(api.filter(is_marker), MARKER_SCHEMA), warnings=warnings,
                   info={"layout": _layout(k)}, fields=_FIELDS,
                   counters=frame(counters, COUNTER_SCHEMA))


def _layout(k: pl.DataFrame) -> str:
    if "guid" in k.columns:
        return "rocpd convert"
    if "stream_id" in k.columns:
        return "7.x"
    return "6.3-6.4" if "thread_id" in k.columns else "6.2"
