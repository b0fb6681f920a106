"""The collective type of RCCL kernels, from RCCL API rows on the launching thread.

RCCL's ``ncclDevKernel_Generic_N`` kernels do not say which collective they run
(shared/reference/rocprof.md §4.1). With ``--rccl-trace`` the host calls are recorded: a
kernel is launched inside ``ncclAllReduce``/``ncclAllGather``/... (its correlation id is that
call's, or that of a HIP launch nested in it), or inside the ``ncclGroupEnd`` that closes a
group of calls. So: find the kernel's launching API row through its correlation id, then the
latest collective call (or group end) on that thread that contains the launch; a group's type
is its calls' type when they agree (``ncclSend`` + ``ncclRecv`` is ``send-recv``). A kernel
with no correlated API row falls back to the latest collective call on its dispatching thread
before it started (counted separately). Anything else stays null: never a guess.
"""

from __future__ import annotations

import polars as pl

from tracelens.core.model import Notice

RCCL_KERNEL = r"(?i)nccl|rccl|msccl|oneRankReduce"

API_TYPES: dict[str, str] = {
    "ncclAllReduce": "all-reduce", "ncclAllGather": "all-gather",
    "ncclReduceScatter": "reduce-scatter", "ncclAllToAll": "all-to-all",
    "ncclAllToAllv": "all-to-all", "ncclBroadcast": "collective-broadcast",
    "ncclBcast": "collective-broadcast", "ncclReduce": "reduce", "ncclSend": "send",
    "ncclRecv": "recv", "ncclGather": "gather", "ncclScatter": "scatter",
}
"""RCCL API function -> subcategory (the names of tracelens's ``collective_type`` map)."""

TYPE_APIS: dict[str, str] = {v: k for k, v in reversed(list(API_TYPES.items()))}
"""subcategory -> the RCCL API function a writer records for it."""

_KEYS = ["rank", "tid"]


def _launch_rows(rccl: pl.DataFrame) -> pl.DataFrame:
    """Collective calls and group ends, each with the type of the group it belongs to."""
    name = pl.col("name")
    calls = (rccl.with_columns(
        ctype=name.replace_strict(API_TYPES, default=None, return_dtype=pl.String),
        delta=pl.when(name == "ncclGroupStart").then(1)
        .when(name == "ncclGroupEnd").then(-1).otherwise(0))
        .filter(pl.col("ctype").is_not_null() | (pl.col("delta") != 0))
        .sort([*_KEYS, "start"]).with_row_index("_i"))
    calls = calls.with_columns(after=pl.col("delta").cum_sum().over(_KEYS))
    calls = calls.with_columns(before=pl.col("after") - pl.col("delta"))
    outer = (pl.col("delta") == 1) & (pl.col("before") <= 0)
    calls = calls.with_columns(gid=outer.cum_sum().over(_KEYS))
    calls = calls.with_columns(key=pl.when((pl.col("before") > 0) | outer)
                               .then(pl.col("gid")).otherwise(-1 - pl.col("_i").cast(pl.Int64)))
    types = (calls.filter(pl.col("ctype").is_not_null())
             .group_by([*_KEYS, "key"])
             .agg(types=pl.col("ctype").unique().sort()))
    types = types.with_columns(gtype=pl.when(pl.col("types").list.len() == 1)
                               .then(pl.col("types").list.first())
                               .when(pl.col("types") == pl.lit(["recv", "send"]))
                               .then(pl.lit("send-recv")).otherwise(pl.lit("mixed")))
    return (calls.filter(pl.col("ctype").is_not_null() | (pl.col("delta") == -1))
            .join(types.select(*_KEYS, "key", "gtype"), on=[*_KEYS, "key"], how="left")
            .select(*_KEYS, "corr", "start", "end", "gtype"))


def collective_types(kernels: pl.DataFrame, apis: pl.DataFrame) -> tuple[pl.Series, dict]:
    """Subcategory per kernel row (null where unknown) and counts of how each was decided.

    ``kernels``: rank, tid, corr, name, start. ``apis``: rank, domain, name, tid, corr,
    start, end (every traced API domain: HIP/HSA rows locate the launch inside RCCL calls).
    """
    null = pl.repeat(None, kernels.height, dtype=pl.String, eager=True).alias("subcategory")
    rccl = apis.filter(pl.col("domain").str.starts_with("RCCL"))
    is_rccl = kernels["name"].str.contains(RCCL_KERNEL).fill_null(False)
    stats = {"rccl_kernels": int(is_rccl.sum()), "by_api": 0, "by_time": 0, "mixed": 0}
    if rccl.is_empty() or not stats["rccl_kernels"]:
        return null, stats
    launch = _launch_rows(rccl)
    rk = kernels.with_row_index("_row").filter(is_rccl)
    direct = launch.select("rank", "corr", direct="gtype").unique(["rank", "corr"])
    callers = apis.select("rank", "corr", l_tid="tid", l_start="start").unique(
        ["rank", "corr"])
    rk = (rk.join(direct, on=["rank", "corr"], how="left")
          .join(callers, on=["rank", "corr"], how="left")
          .with_columns(by_api=pl.col("l_start").is_not_null(),
                        t=pl.coalesce("l_start", "start"),
                        tid=pl.coalesce("l_tid", "tid")))
    asof = (rk.sort("t").join_asof(
        launch.select(*_KEYS, s="start", e="end", near="gtype").sort("s"),
        left_on="t", right_on="s", by=_KEYS, strategy="backward", check_sortedness=False))
    asof = asof.with_columns(
        near=pl.when(~pl.col("by_api") | (pl.col("e") >= pl.col("t"))).then(pl.col("near")))
    asof = asof.with_columns(sub=pl.coalesce("direct", "near"))
    stats["mixed"] = int((asof["sub"] == "mixed").sum())
    typed = asof.filter(pl.col("sub").is_not_null() & (pl.col("sub") != "mixed"))
    stats["by_api"] = int(typed["by_api"].sum())
    stats["by_time"] = typed.height - stats["by_api"]
    out = (kernels.with_row_index("_row").select("_row")
           .join(typed.select("_row", "sub"), on="_row", how="left", maintain_order="left"))
    return out["sub"].alias("subcategory"), stats


def warnings_for(stats: dict, where: str) -> list[Notice]:
    """The user-facing account of how RCCL kernels were typed."""
    n = stats.get("rccl_kernels", 0)
    if not n:
        return []
    typed = stats["by_api"] + stats["by_time"]
    out = []
    if typed < n:
        why = ("no RCCL API rows (profile with --rccl-trace to get them)" if typed == 0
               and not stats["mixed"] else "no RCCL API call contains their launch")
        out.append(Notice.of("rocprof.untyped_rccl", "{where}: {n} of {total} RCCL kernels "
                             "have no collective type: {why}", where=where, n=n - typed,
                             total=n, why=why))
    if stats["mixed"]:
        out.append(Notice.of("rocprof.mixed_rccl", "{where}: {n} RCCL kernels were launched by "
                             "a group of different collectives; their type is left unknown",
                             where=where, n=stats["mixed"]))
    if stats["by_time"]:
        out.append(Notice.of("rocprof.rccl_by_time", "{where}: {n} RCCL kernels have no "
                             "correlated API row; typed by the latest RCCL call on their "
                             "thread before they started", where=where, n=stats["by_time"]))
    return out
