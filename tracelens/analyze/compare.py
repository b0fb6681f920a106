"""``tracelens compare BASE NEW``: where a change made training slower (or faster).

Both runs are reduced to their profile (``tracelens.analyze.scaling.profile``): the median step
averaged over devices, split into components that add up to it. Kernels are matched by a
normalized name (``.kd``, clone and XLA numeric suffixes stripped); kernels left unmatched on
both sides are then matched by their normalized HLO op when both have one.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from tracelens.analyze.scaling import RunProfile, normalize_kernel, transition


def _kernel_table(a: RunProfile, b: RunProfile, top: int) -> dict[str, list[dict[str, Any]]]:
    ka = a.kernels.rename({"name": "base_name", "op": "base_op", "ns_per_step": "base_ns",
                           "count_per_step": "base_count", "category": "base_category"})
    kb = b.kernels.rename({"name": "new_name", "op": "new_op", "ns_per_step": "new_ns",
                           "count_per_step": "new_count", "category": "new_category"})
    both = ka.join(kb, on="key", how="full", coalesce=True)
    only_a = both.filter(pl.col("new_ns").is_null())
    only_b = both.filter(pl.col("base_ns").is_null())
    # Second chance: the same HLO op under a different kernel (e.g. another Tensile tile).
    if only_a.height and only_b.height:
        oa = only_a.filter(pl.col("base_op").is_not_null()).with_columns(
            _op=pl.col("base_op").map_elements(normalize_kernel, return_dtype=pl.String))
        ob = only_b.filter(pl.col("new_op").is_not_null()).with_columns(
            _op=pl.col("new_op").map_elements(normalize_kernel, return_dtype=pl.String))
        pairs = oa.select("key", "_op", "base_name", "base_ns", "base_count",
                          "base_category").join(
            ob.select(pl.col("key").alias("key_new"), "_op", "new_name", "new_ns",
                      "new_count", "new_category"), on="_op")
        pairs = pairs.unique("_op", keep="first").unique("key_new", keep="first")
        both = pl.concat([both.filter(pl.col("base_ns").is_not_null()
                                      & pl.col("new_ns").is_not_null()).select(
            "key", "base_name", "new_name", "base_ns", "new_ns", "base_count", "new_count",
            "base_category"), pairs.select("key", "base_name", "new_name", "base_ns", "new_ns",
                                           "base_count", "new_count", "base_category")])
        only_a = only_a.filter(~pl.col("key").is_in(pairs["key"].implode()))
        only_b = only_b.filter(~pl.col("key").is_in(pairs["key_new"].implode()))
    else:
        both = both.filter(pl.col("base_ns").is_not_null() & pl.col("new_ns").is_not_null())
    matched = both.with_columns(delta_ns=pl.col("new_ns") - pl.col("base_ns")).sort(
        pl.col("delta_ns").abs(), descending=True).head(top)

    def rows(df: pl.DataFrame, side: str) -> list[dict[str, Any]]:
        return [{"name": r[f"{side}_name"], "category": r[f"{side}_category"],
                 "ns_per_step": r[f"{side}_ns"], "count_per_step": r[f"{side}_count"]}
                for r in df.sort(f"{side}_ns", descending=True).head(top).iter_rows(named=True)]

    return {"kernels": [{"name": r["new_name"], "base_name": r["base_name"],
                         "category": r["base_category"], "base_ns": r["base_ns"],
                         "new_ns": r["new_ns"], "delta_ns": r["delta_ns"],
                         "base_count": r["base_count"], "new_count": r["new_count"]}
                        for r in matched.iter_rows(named=True)],
            "only_base": rows(only_a, "base"), "only_new": rows(only_b, "new")}


def compare(a: RunProfile, b: RunProfile, top: int = 15) -> dict[str, Any]:
    t = transition(a, b)
    delta_pct = 100.0 * (b.step_ns - a.step_ns) / a.step_ns if a.step_ns else None
    comps = sorted(set(a.components) | set(b.components))
    return {
        "base": {"path": a.path, "devices": a.devices, "steps": a.steps, "step_ns": a.step_ns},
        "new": {"path": b.path, "devices": b.devices, "steps": b.steps, "step_ns": b.step_ns},
        "delta_ns": b.step_ns - a.step_ns, "delta_pct": delta_pct,
        "components": sorted([{"component": c, "base_ns": a.components.get(c, 0.0),
                               "new_ns": b.components.get(c, 0.0),
                               "delta_ns": b.components.get(c, 0.0) - a.components.get(c, 0.0)}
                              for c in comps], key=lambda r: -abs(r["delta_ns"])),
        "busbw": t["busbw"], "arrival_skew_ns": t["arrival_skew_ns"],
        **_kernel_table(a, b, top),
        "verdict": t["verdict"],
    }
