"""One aggregation of the events for every per-kernel sum ``summarize`` needs.

:func:`kernel_table` groups the events ONCE by every key a kernel sum is taken over (device,
kind, name, category, subcategory, rule, op, program, module, dtype, cost note, and whether
flops, bytes and the collective size are known): a few thousand rows for millions of
events. The top kernels' groups, the roofline and its mix, the kernels without FLOPs, the
FLOPs coverage and the no-cost counts are each a small group-by of that table instead of
another pass over the events, with the same values as the passes over the events:

- counts and durations are integers: their sums are exact in any order;
- the roofline's FLOPs and bytes are floats: summed by parts they are the row-order sums
  only when every partial sum is exact, i.e. every value is a finite integer and each op
  group's sum of magnitudes stays below 2**52 (true on every trace measured: the HLO cost
  model counts whole FLOPs and bytes; a step's clipped costs are fractions). Otherwise
  :func:`roofline_of` returns None and the roofline is summed over the rows
  (:func:`tracelens.analyze.compute.roofline.roofline`);
- "first in row order" (an op group's module) is the table row with the smallest first-row
  index ``_i``.
"""

from __future__ import annotations

import polars as pl

from tracelens.analyze.compute.roofline import roofline_bounds
from tracelens.analyze.timeline.breakdown import DEVICE_KEYS
from tracelens.core.model import COMPUTE_CATEGORIES, Text, on_async_lane

KEYS = ("host", "rank", "device", "kind", "name", "category", "subcategory", "rule", "op",
        "program_id", "module", "dtype", "cost_note", "_fn", "_bn", "_mn")
"""The table's keys: ``_fn``, ``_bn``, ``_mn``: flops, bytes, msg_bytes are null."""

EXACT_BELOW = 2.0 ** 52  # a sum of integer magnitudes below it is exact in any order
ROOFLINE_KEYS = ["_group", "program_id", "spec"]


def kernel_table(events: pl.DataFrame, detail: bool = False) -> pl.DataFrame:
    """Per distinct :data:`KEYS`: ``count``, ``sum_ns``, ``flops``, ``bytes`` (sums of the
    known values), ``_i`` (the group's first row), and per float column whether every known
    value is a finite integer (``_fint``, ``_bint``) and the sum of magnitudes
    (``_fabs``, ``_babs``). String keys are grouped as categorical codes (each string hashed
    once) and returned as strings; row order: by ``_i``.

    ``detail`` (``export --table kernels``, which reports distributions): the launch shape
    is a key too, and each group keeps its durations (``_durs``, a list), so nearest-rank
    percentiles, minima and maxima are taken from the same table.

    A TPU copy's or slice's span in flight on an async lane
    (:func:`~tracelens.core.model.on_async_lane`) is not a row of its own: it is the same op as
    its start on the core's op line (same name, same bytes), whose time the core spent; the
    transfer's time in flight counts in the timeline (memory, exposed memory), not here."""
    keys = (*KEYS, "launch") if detail else KEYS
    strings = [k for k in keys if events.schema.get(k) in (pl.String, Text)]
    integral = [(c, f"_{c[0]}int", f"_{c[0]}abs") for c in ("flops", "bytes")]
    lazy = events.lazy()
    if "hlo_category" in events.columns \
            and events["hlo_category"].null_count() < events.height:  # (only TPU ops have one)
        lazy = lazy.filter(~on_async_lane())  # ONE op's transfer in flight: its op counts
    coded = lazy.with_row_index("_i").select(
        "_i", *[pl.col(k).cast(pl.Categorical) if k in strings else pl.col(k)
                for k in keys if not k.startswith("_")],
        _fn=pl.col("flops").is_null(), _bn=pl.col("bytes").is_null(),
        _mn=pl.col("msg_bytes").is_null(), _d=pl.col("end_ns") - pl.col("start_ns"),
        flops="flops", bytes="bytes")
    out = coded.group_by(keys).agg(
        _i=pl.col("_i").min(), count=pl.len(), sum_ns=pl.col("_d").sum(),
        flops=pl.col("flops").sum(), bytes=pl.col("bytes").sum(),
        **{ok: (pl.col(c).is_finite() & (pl.col(c) == pl.col(c).round())).all()
           for c, ok, _ in integral},
        **{ab: pl.col(c).abs().sum() for c, _, ab in integral},
        **({"_durs": pl.col("_d")} if detail else {}),
    ).collect()
    # the host stays as the model has it (a key of the device frames it is joined with)
    plain = [k for k in strings if k != "host" or events.schema[k] == pl.String]
    return out.with_columns(pl.col(plain).cast(pl.String)).sort("_i")


def _compute_kernel() -> pl.Expr:
    return (pl.col("kind") == "kernel") & \
        pl.col("category").is_in(COMPUTE_CATEGORIES).fill_null(False)


def no_cost_sums(table: pl.DataFrame) -> tuple[int, int, int]:
    """(kernels without cost data, their time, all activity time): the table form of
    :func:`tracelens.analyze.compute.roofline.no_cost_data`."""
    nocost = (_compute_kernel() & pl.col("_fn")) | (
        (pl.col("kind") == "kernel") & pl.col("_fn") & pl.col("_bn") & pl.col("_mn"))
    row = table.select(n=pl.col("count").filter(nocost).sum(),
                       ns=pl.col("sum_ns").filter(nocost).sum(),
                       total=pl.col("sum_ns").sum()).row(0)
    return int(row[0] or 0), int(row[1] or 0), int(row[2] or 0)


def kernel_groups(table: pl.DataFrame) -> pl.DataFrame:
    """Activity count and time per (name, category, subcategory, rule) and device: the top
    kernels' mergeable input. Strings categorical (each long kernel name stored once)."""
    cat = pl.Categorical
    schema = {"name": cat, "category": cat, "subcategory": cat, "rule": cat, "host": cat,
              "rank": pl.Int32, "device": pl.Int32, "count": pl.UInt32, "sum_ns": pl.Int64}
    if table.is_empty():
        return pl.DataFrame(schema=schema)
    keys = ["name", "category", "subcategory", "rule", *DEVICE_KEYS]
    return table.group_by(pl.col("name"), pl.col("category").cast(pl.String),
                          "subcategory", "rule", *DEVICE_KEYS).agg(
        count=pl.col("count").sum(), sum_ns=pl.col("sum_ns").sum()).select(
        *keys, "count", "sum_ns").cast(schema).sort(
        "rank", "device", "sum_ns", descending=[False, False, True])


def without_flops(table: pl.DataFrame) -> pl.DataFrame:
    """:func:`tracelens.analyze.compute.roofline.without_flops` of the table's events."""
    schema = {"category": pl.String, "op": pl.String, "cost_note": pl.String,
              "count": pl.UInt32, "sum_ns": pl.Int64}
    rows = table.filter(_compute_kernel() & pl.col("_fn"))
    if rows.is_empty():
        return pl.DataFrame(schema=schema)
    return (rows.group_by(category=pl.col("category").cast(pl.String),
                          op=pl.coalesce("op", "name"), cost_note=pl.col("cost_note"))
            .agg(count=pl.col("count").sum(), sum_ns=pl.col("sum_ns").sum())
            .sort(["sum_ns", "category", "op", "cost_note"],
                  descending=[True, False, False, False], nulls_last=True)
            .cast(schema))


def flops_coverage(table: pl.DataFrame) -> pl.DataFrame:
    """:func:`tracelens.analyze.compute.roofline.flops_coverage` of the table's events."""
    rows = table.filter(_compute_kernel())
    out = rows.group_by(DEVICE_KEYS).agg(
        compute_kernel_ns=pl.col("sum_ns").sum(),
        covered_ns=pl.col("sum_ns").filter(~pl.col("_fn")).sum())
    return out.with_columns(flops_coverage=pl.when(pl.col("compute_kernel_ns") > 0).then(
        pl.col("covered_ns") / pl.col("compute_kernel_ns"))).sort(DEVICE_KEYS)


def _roofline_rows(table: pl.DataFrame, specs: pl.DataFrame) -> pl.DataFrame:
    """The table's rows the roofline groups (kernels but collectives), with their group
    (op, else kernel name) and their device's spec."""
    rows = table.filter((pl.col("kind") == "kernel") & (pl.col("category") != "collective"))
    rows = rows.join(specs.select(*DEVICE_KEYS, "spec"), on=DEVICE_KEYS, how="left",
                     maintain_order="left")
    return rows.with_columns(_group=pl.coalesce("op", "name"))


def roofline_mix(table: pl.DataFrame, specs: pl.DataFrame) -> pl.DataFrame:
    """Per roofline group and (kernel name, category, dtype): count and time (the merge's
    input for each group's longest kernel and most common category and dtype)."""
    keys = ["op", "program_id", "spec", "name", "category", "dtype"]
    rows = _roofline_rows(table, specs)
    schema = {"op": pl.String, "program_id": pl.Int64, "spec": pl.String, "name": pl.String,
              "category": pl.String, "dtype": pl.String, "count": pl.UInt32,
              "sum_ns": pl.Int64}
    return rows.group_by(op="_group", program_id="program_id", spec="spec", name="name",
                         category=pl.col("category").cast(pl.String), dtype="dtype").agg(
        count=pl.col("count").sum(), sum_ns=pl.col("sum_ns").sum()) \
        .cast(schema).sort(keys, nulls_last=True)


def roofline_of(table: pl.DataFrame, specs: pl.DataFrame) -> pl.DataFrame | None:
    """:func:`tracelens.analyze.compute.roofline.roofline` from the table, or None when its FLOPs or
    bytes sums by parts might differ in the last bits from the row-order sums (see the
    module doc): the caller then sums the rows."""
    rows = _roofline_rows(table, specs)
    if rows.is_empty():
        return None
    keys = ROOFLINE_KEYS
    agg = rows.group_by(keys).agg(
        module=pl.col("module").drop_nulls().first(),  # rows are in first-row order
        count=pl.col("count").sum(), sum_ns=pl.col("sum_ns").sum(),
        flops=pl.when((~pl.col("_fn")).any()).then(pl.col("flops").sum()),
        bytes=pl.when((~pl.col("_bn")).any()).then(pl.col("bytes").sum()),
        no_cost_count=pl.col("count").filter(pl.col("_fn") & pl.col("_bn")).sum(),
        kernel=pl.col("name").first(), category=pl.col("category").first(),
        dtype=pl.col("dtype").drop_nulls().first(),
        _mixed=(pl.col("name").n_unique() > 1) | (pl.col("category").n_unique() > 1)
        | (pl.col("dtype").drop_nulls().n_unique() > 1),
        _exact=pl.col("_fint").all() & pl.col("_bint").all()
        & (pl.col("_fabs").sum() < EXACT_BELOW) & (pl.col("_babs").sum() < EXACT_BELOW))
    if not agg["_exact"].all():
        return None
    mixed = agg.filter(pl.col("_mixed")).select(keys)
    if mixed.height:
        sub = rows.join(mixed, on=keys, how="semi", nulls_equal=True)
        by_name = (sub.group_by(*keys, "name").agg(_t=pl.col("sum_ns").sum())
                   .sort(["_t", "name"], descending=[True, False])
                   .group_by(keys, maintain_order=True).agg(_kernel=pl.col("name").first()))
        modes = _mode(sub, "category", keys).join(
            _mode(sub.filter(pl.col("dtype").is_not_null()), "dtype", keys), on=keys,
            how="left", nulls_equal=True)
        agg = agg.join(by_name, on=keys, how="left", nulls_equal=True) \
            .join(modes, on=keys, how="left", nulls_equal=True).with_columns(
            kernel=pl.coalesce(pl.col("_kernel"), pl.col("kernel")),
            category=pl.coalesce(pl.col("_category").cast(pl.String),
                                 pl.col("category").cast(pl.String)),
            dtype=pl.when(pl.col("_mixed")).then(pl.col("_dtype")).otherwise(pl.col("dtype")))
    agg = agg.with_columns(pl.col("kernel", "category", "_group", "spec").cast(pl.String),
                           pl.col("count", "no_cost_count").cast(pl.UInt32))
    return roofline_bounds(agg.drop("_exact"), specs)


def _mode(rows: pl.DataFrame, col: str, keys: list[str]) -> pl.DataFrame:
    """Per group, ``col``'s most common value by row count, ties to the smallest (in the
    column's own order: an enum's categories, strings lexically): ``mode().sort().first()``
    over the events."""
    per = rows.group_by(*keys, col).agg(_c=pl.col("count").sum())
    return per.group_by(keys).agg(
        pl.col(col).filter(pl.col("_c") == pl.col("_c").max()).sort().first()
        .alias(f"_{col}"))
