"""What the short ``summarize`` shows beyond the full tables, computed once in the
reduce: each step's spread over the devices (one row a step, not one a device and step),
the roofline with rows that differ only in an instruction number as one, and each compute
category's efficiency against its roofline (the findings' evidence)."""

from __future__ import annotations

import statistics
from typing import Sequence

import polars as pl

from tracelens.results.summary import DeviceSummary, RooflineGroup, StepSpread

_INSTRUCTION_NUMBER = r"\.\d+$"  # custom-call.31 -> custom-call


def step_spread(devs: Sequence[DeviceSummary]) -> tuple[StepSpread, ...]:
    """Per step: the devices that ran it, their median (lower) span and the lowest, median
    and highest busy, exposed-communication and idle shares of the step."""
    by_step: dict[int, list] = {}
    for d in devs:
        for st in d.steps:
            by_step.setdefault(st.step, []).append(st)
    out = []
    for step, sts in sorted(by_step.items()):
        mfu = [s.mfu for s in sts if s.mfu is not None]
        out.append(StepSpread(step, len(sts),
                              statistics.median_low([s.timeline.span_ns for s in sts]),
                              _spread(sts, "busy_ns"), _spread(sts, "exposed_comm_ns"),
                              _spread(sts, "idle_ns"),
                              statistics.median_low(mfu) if mfu else None))
    return tuple(out)


def _spread(sts: list, col: str) -> tuple[float, float, float]:
    """The lowest, median (lower) and highest share of the step of ``col`` over devices."""
    v = sorted(100.0 * getattr(s.timeline, col) / s.timeline.span_ns
               if s.timeline.span_ns else 0.0 for s in sts)
    return (v[0], statistics.median_low(v), v[-1])


def category_efficiency(roofline: pl.DataFrame) -> dict[str, tuple[float, int]]:
    """Per category: the roofline efficiency of its op groups weighted by their time (the
    share of the attainable rate the category's time ran at), and how many groups had one."""
    if roofline.is_empty() or "efficiency" not in roofline.columns:
        return {}
    agg = (roofline.filter(pl.col("efficiency").is_not_null() & pl.col("category").is_not_null()
                           & (pl.col("sum_ns") > 0))
           .group_by("category")
           .agg(eff=(pl.col("efficiency") * pl.col("sum_ns")).sum() / pl.col("sum_ns").sum(),
                n=pl.len())
           .sort("category"))
    return {r["category"]: (float(r["eff"]), int(r["n"])) for r in agg.iter_rows(named=True)}


def roofline_groups(roofline: pl.DataFrame, top: int) -> tuple[RooflineGroup, ...]:
    """The ``top`` costliest groups of roofline rows that differ only in an instruction
    number; a group's FLOPs and bytes are summed only when every row has them."""
    if roofline.is_empty() or top <= 0:
        return ()
    base = pl.col("op").str.replace(_INSTRUCTION_NUMBER, "")
    keys = ["_base", "module", "program_id", "category", "bound"]
    agg = (roofline.with_columns(_base=base)
           .group_by(keys)
           .agg(ops=pl.len(), first=pl.col("op").sort().first(), count=pl.col("count").sum(),
                sum_ns=pl.col("sum_ns").sum(),
                flops=pl.when(pl.col("flops").null_count() == 0).then(pl.col("flops").sum()),
                bytes=pl.when(pl.col("bytes").null_count() == 0).then(pl.col("bytes").sum()),
                eff_ns=pl.col("sum_ns").filter(pl.col("efficiency").is_not_null()).sum(),
                eff_w=(pl.col("efficiency") * pl.col("sum_ns")).sum())
           .filter(pl.col("flops").is_not_null() | pl.col("bytes").is_not_null())
           .sort(["sum_ns", "first"], descending=[True, False]).head(top))
    out = []
    for r in agg.iter_rows(named=True):
        ns = r["sum_ns"]
        op = r["first"] if r["ops"] == 1 else f"{r['_base']}.* ({r['ops']} ops)"
        out.append(RooflineGroup(
            op, int(r["ops"]), r["module"], r["program_id"], r["category"], int(r["count"]),
            int(ns), r["flops"], r["bytes"],
            r["flops"] / ns / 1e3 if r["flops"] is not None and ns else None,
            r["bytes"] / ns / 1e3 if r["bytes"] is not None and ns else None, r["bound"],
            r["eff_w"] / r["eff_ns"] if r["eff_ns"] else None))
    return tuple(out)
