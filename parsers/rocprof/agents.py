"""Agents (HSA CPUs and GPUs): GPU ordinals, device rows, and agent references in CSV files.

Facts (shared/reference/rocprof.md §2.1, §5): the agent table maps each agent's absolute HSA
``node_id`` (what rocpd stores) to ``logical_node_id`` and ``logical_node_type_id`` (0-based
per type: the first GPU is 0, which is the HIP ordinal when every GPU is visible). CSV files
name agents by numeric node id (ROCm <= 6.4) or by ``"Agent N"`` (N = logical node id, the 7.x
default), ``"GPU N"`` (type-relative) or absolute ``"Agent N"``. Peaks derive from ``cu_count``
and ``max_engine_clk_fcompute`` (MHz).
"""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from parsers.rocprof.records import AGENT_SCHEMA, frame
from tracelens.core.model import DEVICE_FACTS_SCHEMA, Notice, conform

_GFX = re.compile(r"^gfx[0-9a-f]+$")


def arch_of(name: str | None, gfx_target_version: int | None) -> str | None:
    """``gfx950`` from the agent name, else from ``gfx_target_version`` (90500 -> gfx950)."""
    if isinstance(name, str) and _GFX.match(name.strip()):
        return name.strip()
    v = gfx_target_version
    if isinstance(v, int) and v > 0:
        major, minor, step = v // 10000, (v // 100) % 100, v % 100
        return f"gfx{major}{minor:x}{step:x}"
    return None


def gfx_target_version(arch: str | None) -> int:
    """Inverse of :func:`arch_of` for writers: ``gfx942`` -> 90402, ``gfx90a`` -> 90010."""
    m = re.match(r"^gfx(\d+)([0-9a-f])([0-9a-f])$", arch or "")
    if not m:
        return 0
    return int(m.group(1)) * 10000 + int(m.group(2), 16) * 100 + int(m.group(3), 16)


def gpu_memory(mem_banks: Any) -> int | None:
    """Device memory from an agent's ``mem_banks`` (frame-buffer heaps: heap_type 1 or 2)."""
    if not isinstance(mem_banks, list):
        return None
    sizes = [b.get("size_in_bytes") for b in mem_banks if isinstance(b, dict)
             and type(b.get("heap_type")) is int and b.get("heap_type") in (1, 2)
             and as_int(b.get("size_in_bytes")) is not None]
    return max(sizes) if sizes else None


def as_int(v: Any) -> int | None:
    """An int64 value, else None (a bool, float, string or object is not an id or a count)."""
    return v if type(v) is int and -(1 << 63) <= v < (1 << 63) else None


def as_str(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def agent_row(a: dict[str, Any]) -> dict[str, Any]:
    """One agent object (JSON ``agents[]`` or rocpd ``extdata``) as an AGENT_SCHEMA row;
    values of the wrong type are unknown (None)."""
    t = a.get("type")
    kind = {1: "CPU", 2: "GPU", 3: "NIC"}.get(t) if type(t) is int else as_str(t)
    ident = a.get("id")
    clock = a.get("max_engine_clk_fcompute")
    return {
        "node_id": as_int(a.get("node_id")), "logical_index": as_int(a.get("logical_node_id")),
        "type_index": as_int(a.get("logical_node_type_id")), "type": kind,
        "name": as_str(a.get("name")), "gfx_target_version": as_int(a.get("gfx_target_version")),
        "product_name": as_str(a.get("product_name")), "vendor_name": as_str(a.get("vendor_name")),
        "cu_count": as_int(a.get("cu_count")),
        "clock_mhz": float(clock) if type(clock) in (int, float) and clock > 0 else None,
        "memory_bytes": gpu_memory(a.get("mem_banks")),
        "handle": as_int(ident.get("handle")) if isinstance(ident, dict) else None,
    }


def with_ordinals(agents: pl.DataFrame) -> pl.DataFrame:
    """Add ``device``: the GPU ordinal (``logical_node_type_id``; else the rank of the logical
    node id among GPU agents)."""
    gpus = agents.filter(pl.col("type").str.to_uppercase() == "GPU")
    fallback = pl.col("logical_index").fill_null(pl.col("node_id")).rank("dense") - 1
    gpus = gpus.with_columns(device=pl.col("type_index").fill_null(fallback).cast(pl.Int32))
    return gpus


def resolve_refs(refs: pl.Series, agents: pl.DataFrame) -> tuple[pl.Series, int]:
    """CSV ``Agent_Id`` values -> node ids, through the agent table; and how many failed.

    Numbers are node ids (ROCm <= 6.4); ``Agent N`` is the logical node id (the 7.x default;
    it equals the absolute id when no GPU is hidden); ``GPU N``/``CPU N`` are type-relative.
    Without an agent table, numbers are kept as they are.
    """
    s = refs.cast(pl.String).str.strip_chars()
    parts = s.str.extract_groups(r"^(?i:(Agent|GPU|CPU|NIC))?[\s_-]*(\d+)$")
    df = pl.DataFrame({"kind": parts.struct.field("1").str.to_uppercase(),
                       "num": parts.struct.field("2").cast(pl.Int64, strict=False)})
    if agents.is_empty():
        agent = df["num"]
    else:
        a = agents.select("node_id", "logical_index", "type_index",
                          pl.col("type").str.to_uppercase().alias("kind"))
        logical = a.select(num=pl.col("logical_index").fill_null(pl.col("node_id")),
                           n_logical="node_id")
        typed = a.filter(pl.col("type_index").is_not_null()).select(
            "kind", num="type_index", n_typed="node_id")
        j = (df.join(logical.unique("num"), on="num", how="left", maintain_order="left")
             .join(typed.unique(["kind", "num"]), on=["kind", "num"], how="left",
                   maintain_order="left"))
        agent = j.select(pl.when(pl.col("kind").is_null()).then(pl.col("num"))
                         .when(pl.col("kind") == "AGENT").then(pl.col("n_logical"))
                         .otherwise(pl.col("n_typed")))[:, 0]
    bad = int((agent.is_null() & s.is_not_null() & (s != "")).sum())
    return agent.alias("agent"), bad


def devices(agents: pl.DataFrame, active: set[int], host: str, rank: int, notes_at: int = 0
            ) -> pl.DataFrame:
    """DEVICE_FACTS_SCHEMA rows for the GPU agents with activity (:mod:`tracelens.loading.devices`
    identifies them; ``notes_at``: where in the file's warnings its notes go)."""
    gpus = with_ordinals(agents).filter(pl.col("node_id").is_in(sorted(active)))
    rows = []
    for a in gpus.sort("device").iter_rows(named=True):
        arch = arch_of(a["name"], a["gfx_target_version"])
        vendor_raw = (a["vendor_name"] or "").strip().lower()
        vendor = "amd" if vendor_raw in ("amd", "advanced micro devices, inc.") or (
            arch and arch.startswith("gfx")) else (vendor_raw or None)
        rows.append({"host": host, "rank": rank, "device": a["device"], "vendor": vendor,
                     "arch": arch, "name": (a["product_name"] or "").strip() or None,
                     "compute_units": a["cu_count"], "clock_mhz": a["clock_mhz"],
                     "memory_bytes": a["memory_bytes"], "agent": a["node_id"],
                     "notes_at": notes_at})
    if not rows:
        return pl.DataFrame(schema=DEVICE_FACTS_SCHEMA)
    return conform(pl.DataFrame(rows, schema_overrides=DEVICE_FACTS_SCHEMA,
                                infer_schema_length=None), DEVICE_FACTS_SCHEMA)


def agent_frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    return frame(pl.DataFrame(rows, infer_schema_length=None, strict=False)
                 if rows else pl.DataFrame(), AGENT_SCHEMA)


def unique_agents(agents: pl.DataFrame, warn: list[Notice]) -> pl.DataFrame:
    """One row per agent id (per process where the table has ``pid``): a repeated row would
    multiply every dispatch joined to it. The first is kept and the others counted."""
    keys = [c for c in ("node_id", "pid") if c in agents.columns]
    first = agents.select(pl.struct(keys).is_first_distinct()
                          | pl.col("node_id").is_null())[:, 0]
    repeated = agents.height - int(first.sum())
    if not repeated:
        return agents
    warn.append(Notice.of("rocprof.repeated_agents", "dropped {n} agent rows that repeat an "
                          "agent id already listed (the first row of each id is kept)",
                          n=repeated))
    return agents.filter(first)
