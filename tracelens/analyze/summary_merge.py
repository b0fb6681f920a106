"""Joining summary partials: :func:`concat_partials` (parts of one job already on one clock,
distinct ranks) and :func:`merge_partials`, the partial-level twin of
:func:`tracelens.combine.combine` and the loader's later stages for hosts loaded one by one
(rank renumbering, duplicate host names, clock shifts, the warnings the loader computes on the
combined trace)."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING

import polars as pl

from tracelens.analyze.roofline import roofline_bounds
from tracelens.model import CATEGORIES

if TYPE_CHECKING:
    from tracelens.analyze.summary_types import SummaryPartial

_CLIPPED = re.compile(r"^clipped (\d+) same-stream overlaps \(largest (\d+) ns\): an "
                      r"in-order stream cannot run two activities at once$")


def clipped_facts(warnings: list[str] | tuple[str, ...]) -> tuple[int, int]:
    """(how many same-stream overlaps the loader clipped, the largest in ns) from its
    warning (``tracelens.loader``), (0, 0) without one."""
    for w in warnings:
        m = _CLIPPED.match(w)
        if m:
            return int(m.group(1)), int(m.group(2))
    return 0, 0


def clipped_warning(n: int, largest: int) -> str:
    """The loader's text for ``n`` clipped overlaps (the same sentence, rebuilt)."""
    return (f"clipped {n} same-stream overlaps (largest {largest} ns): "
            "an in-order stream cannot run two activities at once")


def _concat(frames: list[pl.DataFrame]) -> pl.DataFrame:
    frames = [f for f in frames if f.width]
    return pl.concat(frames, how="vertical_relaxed") if len(frames) > 1 else frames[0]


def concat_partials(partials: list["SummaryPartial"]) -> "SummaryPartial":
    """One partial of several whose ranks are distinct and whose times share one clock:
    frames concatenated in order, counts summed, roofline groups re-merged, warnings
    de-duplicated in order; meta facts (alignment, steps source, filters) from the first."""
    first = partials[0]
    warnings: list[str] = []
    for p in partials:
        warnings += [w for w in p.warnings if w not in warnings]
    n_clip = sum(p.clipped[0] for p in partials)
    return replace(
        first,
        inputs=tuple(i for p in partials for i in p.inputs), warnings=tuple(warnings),
        host_names=tuple(dict.fromkeys(n for p in partials for n in p.host_names)),
        devices=_concat([p.devices for p in partials]),
        steps=_concat([p.steps for p in partials]),
        device_rows=tuple(sorted((d for p in partials for d in p.device_rows),
                                 key=lambda d: (d.rank, d.device))),
        kernels=_concat([p.kernels for p in partials]),
        kernel_ns=sum(p.kernel_ns for p in partials),
        specs=_concat([p.specs for p in partials]),
        roofline=merge_roofline(partials),
        roofline_mix=_concat([p.roofline_mix for p in partials]),
        gaps=_concat([p.gaps for p in partials]),
        no_cost_data=sum(p.no_cost_data for p in partials),
        no_cost_data_ns=sum(p.no_cost_data_ns for p in partials),
        acts=_concat([p.acts for p in partials]),
        hlo_findings=first.hlo_findings,
        clipped=(n_clip, max(p.clipped[1] for p in partials)),
    )


def merge_roofline(partials: list["SummaryPartial"]) -> pl.DataFrame:
    """The roofline of several partials' op groups, as one pass over all their kernels
    gives it: counts, time, FLOPs and bytes summed per (op, program, spec), the first known
    module, the longest kernel name (ties: the smallest), the most common category (ties: the
    first in CATEGORIES) and dtype (ties: the smallest)."""
    frames = [p.roofline for p in partials if p.roofline.height]
    if len(frames) <= 1:
        return frames[0] if frames else partials[0].roofline
    keys = ["_group", "program_id", "spec"]
    rows = pl.concat([f.select("op", "program_id", "spec", "module", "count", "sum_ns",
                               "flops", "bytes", "no_cost_count") for f in frames],
                     how="vertical_relaxed").rename({"op": "_group"})
    agg = rows.group_by(keys, maintain_order=True).agg(
        module=pl.col("module").drop_nulls().first(), count=pl.col("count").sum(),
        sum_ns=pl.col("sum_ns").sum(),
        flops=pl.when(pl.col("flops").is_not_null().any()).then(pl.col("flops").sum()),
        bytes=pl.when(pl.col("bytes").is_not_null().any()).then(pl.col("bytes").sum()),
        no_cost_count=pl.col("no_cost_count").sum())
    mix = pl.concat([p.roofline_mix for p in partials], how="vertical_relaxed") \
        .rename({"op": "_group"})
    kernel = (mix.group_by(*keys, "name").agg(pl.col("sum_ns").sum())
              .sort(["sum_ns", "name"], descending=[True, False])
              .group_by(keys, maintain_order=True).agg(kernel=pl.col("name").first()))
    order = {c: i for i, c in enumerate(CATEGORIES)}
    category = (mix.group_by(*keys, "category").agg(pl.col("count").sum())
                .with_columns(_o=pl.col("category").replace_strict(order, default=len(order)))
                .sort(["count", "_o"], descending=[True, False])
                .group_by(keys, maintain_order=True).agg(category=pl.col("category").first()))
    dtype = (mix.filter(pl.col("dtype").is_not_null())
             .group_by(*keys, "dtype").agg(pl.col("count").sum())
             .sort(["count", "dtype"], descending=[True, False])
             .group_by(keys, maintain_order=True).agg(dtype=pl.col("dtype").first()))
    agg = agg.join(kernel, on=keys, how="left", nulls_equal=True) \
        .join(category, on=keys, how="left", nulls_equal=True) \
        .join(dtype, on=keys, how="left", nulls_equal=True)
    specs = _concat([p.specs for p in partials]).unique("spec", keep="first",
                                                         maintain_order=True)
    return roofline_bounds(agg, specs)
