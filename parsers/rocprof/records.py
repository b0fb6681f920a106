"""The normalized, format-independent records every rocprofv3 reader produces.

Each reader (rocpd SQLite, JSON, CSV) turns one profiled process into a :class:`Process` of
small polars frames with the schemas below; :mod:`parsers.rocprof.build` turns a list of them
into a :class:`tracelens.core.model.Trace`. Agents are referred to by their HSA node id everywhere
(rocpd ``agent_id``, JSON handles and CSV ``Agent N`` strings are resolved on the way in).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from tracelens.core.model import Notice

from parsers.launch import dims, launch_text

I64 = pl.Int64

AGENT_SCHEMA: dict[str, pl.DataType] = {
    "node_id": I64,          # absolute HSA node id (rocpd rocpd_info_agent.id)
    "logical_index": I64,    # logical_node_id
    "type_index": I64,       # logical_node_type_id: 0-based per type, the GPU ordinal
    "type": pl.String,       # "GPU" / "CPU"
    "name": pl.String,       # "gfx950"
    "gfx_target_version": I64,
    "product_name": pl.String,
    "vendor_name": pl.String,
    "cu_count": I64,
    "clock_mhz": pl.Float64,  # max_engine_clk_fcompute
    "memory_bytes": I64,
    "handle": I64,            # JSON agent_id.handle
}

LAUNCH_COLUMNS = ("grid_x", "grid_y", "grid_z", "wg_x", "wg_y", "wg_z", "vgpr", "lds")
DISPATCH_SCHEMA: dict[str, pl.DataType] = {
    "agent": I64, "queue": I64, "stream": I64, "tid": I64, "corr": I64, "kernel_id": I64,
    "name": pl.String, "start": I64, "end": I64, "dispatch_id": I64,
    **{c: I64 for c in LAUNCH_COLUMNS},
}
"""``grid_*`` is the grid size in work-items and ``wg_*`` the workgroup size, as rocprofv3
records them per dispatch; ``vgpr`` the kernel's arch VGPR count; ``lds`` the dispatch's
group segment (LDS) bytes (CSV >= 7.0: ``LDS_Block_Size``, rounded to the allocation
granularity). Null where the format lacks them."""


def launch_expr() -> pl.Expr:
    """The model's ``launch`` text from the ``LAUNCH_COLUMNS`` (grid as the trace writes it:
    work-items, not workgroups). A size with a 0 dimension is not a shape (an HSA dispatch
    packet needs each to be >= 1; the writers put 0 in rocpd's NOT NULL size columns when
    the shape is unknown), so it is left out."""
    def size(cols: tuple[str, ...]) -> pl.Expr:  # an HSA dimension is >= 1: 0 is unrecorded
        return pl.when(pl.min_horizontal(cols) > 0).then(dims(*map(pl.col, cols)))
    return launch_text(size(LAUNCH_COLUMNS[:3]), size(LAUNCH_COLUMNS[3:6]), pl.col("vgpr"),
                       pl.col("lds"))


def launch_columns(launch: pl.Expr) -> list[pl.Expr]:
    """The inverse of :func:`launch_expr` for writers: ``LAUNCH_COLUMNS`` from ``launch``
    text (a part that is absent, or not three integers, null)."""
    def part(key: str, i: int, n: int) -> pl.Expr:
        return launch.str.extract(rf"(?:^| ){key}=" + ",".join([r"(\d+)"] * n) + "(?: |$)",
                                  i).cast(I64)
    return [*(part("grid", i, 3).alias(c) for i, c in enumerate(LAUNCH_COLUMNS[:3], 1)),
            *(part("block", i, 3).alias(c) for i, c in enumerate(LAUNCH_COLUMNS[3:6], 1)),
            part("regs", 1, 1).alias("vgpr"), part("shared", 1, 1).alias("lds")]

COUNTER_SCHEMA: dict[str, pl.DataType] = {
    "dispatch_id": I64, "counter": pl.String, "value": pl.Float64,
}
"""Hardware counter values (``--pmc``), one row per dispatch, counter and (where the format
keeps them) hardware instance; :mod:`parsers.rocprof.build` sums the instances."""

COPY_SCHEMA: dict[str, pl.DataType] = {
    "src_agent": I64, "dst_agent": I64, "op": pl.String, "bytes": I64, "stream": I64,
    "tid": I64, "corr": I64, "start": I64, "end": I64,
}

API_SCHEMA: dict[str, pl.DataType] = {
    "domain": pl.String, "name": pl.String, "tid": I64, "corr": I64, "parent": I64,
    "start": I64, "end": I64,
}
"""Host API calls (HIP, HSA, RCCL, ROCTx control): ``corr`` is the internal correlation id,
``parent`` its ancestor (JSON ``ancestor``, rocpd ``parent_stack_id``) when known."""

MARKER_SCHEMA: dict[str, pl.DataType] = {
    "domain": pl.String, "name": pl.String, "tid": I64, "corr": I64, "start": I64, "end": I64,
}
"""ROCTx ranges and marks: ``name`` is the user's message (zero duration: ``roctxMark``)."""


def frame(data: Any, schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """A frame with exactly ``schema``: missing columns become typed nulls."""
    df = data if isinstance(data, pl.DataFrame) else pl.DataFrame(data)
    if not df.width:  # no columns at all: no rows (a select of literals would make one)
        return empty(schema)
    return df.select([pl.col(c).cast(t, strict=False) if c in df.columns
                      else pl.lit(None, dtype=t).alias(c) for c, t in schema.items()])


def empty(schema: dict[str, pl.DataType]) -> pl.DataFrame:
    return pl.DataFrame(schema=schema)


@dataclass
class Process:
    """Everything one profiled process recorded, in normalized frames."""

    host: str | None
    pid: int | None
    agents: pl.DataFrame
    dispatches: pl.DataFrame
    copies: pl.DataFrame = field(default_factory=lambda: empty(COPY_SCHEMA))
    apis: pl.DataFrame = field(default_factory=lambda: empty(API_SCHEMA))
    markers: pl.DataFrame = field(default_factory=lambda: empty(MARKER_SCHEMA))
    counters: pl.DataFrame = field(default_factory=lambda: empty(COUNTER_SCHEMA))
    init_ns: int | None = None
    fini_ns: int | None = None
    warnings: list[Notice] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)  # e.g. schema_version, layout
    fields: dict[str, str] = field(default_factory=dict)
    """Normalized field -> the format's own name for it (``end`` -> ``End_Timestamp``), so that
    a warning about dropped rows names the field as the user's file does."""
