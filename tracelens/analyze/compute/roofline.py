"""Roofline per op group and MFU per device and step (docs/definitions.md#roofline).

Per op group (the HLO op, keyed by program, or the kernel name when there is no op), over the
reported devices: count, time, flops, bytes, intensity = flops/bytes, achieved TFLOP/s and TB/s,
attainable = min(peak(dtype), intensity × HBM), bound (compute when intensity × HBM ≥ peak,
else memory) and efficiency = achieved / attainable (TFLOP/s against the peak when compute
bound, TB/s against HBM when memory bound, so a zero-FLOP copy still gets one). Collectives and
memcpy/memset are left out.

MFU = model FLOPs (``gemm`` + ``attention`` + ``convolution`` kernels) / (window time × dense
peak of the window's dominant dtype, the one with the most model FLOPs). A kernel crossing a
window edge contributes the fraction of its FLOPs inside the window.
"""

from __future__ import annotations


import polars as pl

from tracelens.analyze.timeline.breakdown import DEVICE_KEYS, clip_to_windows
from tracelens.core.frames import distinct
from tracelens.core.hardware import DTYPES, GpuSpec, spec_for_device
from tracelens.core.model import COMPUTE_CATEGORIES, Text, on_async_lane
from tracelens.loading.prepare import assign_steps

MODEL_CATEGORIES = ("gemm", "attention", "convolution")
_DUR = pl.col("end_ns") - pl.col("start_ns")


def device_specs(devices: pl.DataFrame, gpu: str | None = None,
                 extra: dict[str, GpuSpec] | None = None) -> dict[tuple, GpuSpec | None]:
    """(host, rank, device) -> the spec it uses (``hardware.spec_for_device``); CPU devices
    and unidentified devices without derivable peaks get None."""
    out: dict[tuple, GpuSpec | None] = {}
    for r in devices.iter_rows(named=True):
        key = (r["host"], r["rank"], r["device"])
        if r["vendor"] == "cpu" and gpu is None:
            out[key] = None
            continue
        out[key] = spec_for_device(r["spec_id"], r["arch"], r["compute_units"], r["clock_mhz"],
                                   gpu=gpu, extra=extra, own=(r.get("peak_tflops"),
                                                              r.get("peak_hbm_tb_per_s")),
                                   own_name=r.get("product"))
    return out


def spec_frame(specs: dict[tuple, GpuSpec | None]) -> pl.DataFrame:
    """One row per device: keys, ``spec`` id, ``hbm_tb_per_s`` and ``peak_<dtype>``."""
    rows = []
    for (host, rank, device), s in specs.items():
        row = {"host": host, "rank": rank, "device": device, "spec": s.id if s else None,
               "hbm_tb_per_s": s.hbm_tb_per_s if s else None}
        row.update({f"peak_{d}": (s.peak(d) if s else None) for d in DTYPES})
        rows.append(row)
    schema = {"host": Text, "rank": pl.Int32, "device": pl.Int32, "spec": pl.String,
              "hbm_tb_per_s": pl.Float64, **{f"peak_{d}": pl.Float64 for d in DTYPES}}
    return pl.DataFrame(rows, schema=schema)


def _peak_of_dtype(dtype_col: str = "dtype") -> pl.Expr:
    expr = pl.lit(None, dtype=pl.Float64)
    for d in DTYPES:
        expr = pl.when(pl.col(dtype_col) == d).then(pl.col(f"peak_{d}")).otherwise(expr)
    return expr


def clip_costs_to_windows(events: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame:
    """``clip_to_windows`` that also scales ``flops`` and ``bytes`` by the part of each event
    inside its window (an event split between two steps shares its cost by time)."""
    ev = events.with_columns(_dur0=_DUR)
    ev = clip_to_windows(ev, windows)
    frac = pl.when(pl.col("_dur0") > 0).then(_DUR / pl.col("_dur0")).otherwise(1.0)
    return ev.with_columns(flops=pl.col("flops") * frac, bytes=pl.col("bytes") * frac) \
        .drop("_dur0")


def _compute_kernel() -> pl.Expr:
    return (pl.col("kind") == "kernel") & \
        pl.col("category").is_in(COMPUTE_CATEGORIES).fill_null(False)


def no_cost_data() -> pl.Expr:
    """Kernels without FLOPs in a compute category (every category but collective and memory),
    and any kernel without any cost (no flops, no bytes, no collective size)."""
    kernel = pl.col("kind") == "kernel"
    return (_compute_kernel() & pl.col("flops").is_null()) | (
        kernel & pl.col("flops").is_null() & pl.col("bytes").is_null()
        & pl.col("msg_bytes").is_null())


COVERAGE_FLOOR = 0.95  # below it MFU is labelled a lower bound and a warning names the gaps


def flops_coverage(events: pl.DataFrame) -> pl.DataFrame:
    """Per device: ``compute_kernel_ns`` (summed durations of compute kernels),
    ``covered_ns`` (those that carry FLOPs, helper kernels' 0 included) and
    ``flops_coverage`` = covered / all (null without compute kernels)."""
    ev = events.lazy().filter(_compute_kernel()).select(
        *DEVICE_KEYS, _d=_DUR, _has=pl.col("flops").is_not_null())
    out = _per_device(
        ev, compute_kernel_ns=pl.col("_d").sum(),
        covered_ns=pl.col("_d").filter(pl.col("_has")).sum())
    return out.with_columns(flops_coverage=pl.when(pl.col("compute_kernel_ns") > 0).then(
        pl.col("covered_ns") / pl.col("compute_kernel_ns"))).collect().sort(DEVICE_KEYS)


def without_flops(events: pl.DataFrame) -> pl.DataFrame:
    """Compute kernels without FLOPs grouped by category, op (or kernel name) and reason:
    ``count``, ``sum_ns``; longest first, ties by name (deterministic)."""
    schema = {"category": pl.String, "op": pl.String, "cost_note": pl.String,
              "count": pl.UInt32, "sum_ns": pl.Int64}
    ev = events.lazy().filter(_compute_kernel() & pl.col("flops").is_null()) \
        .select("category", "op", "name", "cost_note", "start_ns", "end_ns").collect()
    if ev.is_empty():
        return pl.DataFrame(schema=schema)
    # eager group-by: the streaming one holds far more memory with many distinct names
    return (ev.group_by(category=pl.col("category").cast(pl.String),
                        op=pl.coalesce("op", "name"), cost_note=pl.col("cost_note"))
            .agg(count=pl.len(), sum_ns=_DUR.sum())
            .sort(["sum_ns", "category", "op", "cost_note"],
                  descending=[True, False, False, False], nulls_last=True)
            .cast(schema))


def roofline_frame(events: pl.DataFrame, specs: pl.DataFrame) -> pl.DataFrame:
    """The kernel rows the roofline groups, narrowed to what its groups read (``_group``,
    ``program_id``, ``module``, ``category``, ``dtype``, ``name``, ``_dtype_code``, ``_dur``,
    ``flops``, ``bytes``, ``_nocost``, ``spec``), string keys categorical: built once and
    shared by :func:`roofline` and ``summarize``'s roofline mix (no second scan of the
    events)."""
    kernels = events.lazy().filter((pl.col("kind") == "kernel")
                                   & (pl.col("category") != "collective"))
    if "hlo_category" in events.columns:  # a TPU transfer in flight on its lane is no op
        kernels = kernels.filter(~on_async_lane())
    # only what the groups read, string keys as categoricals (each string hashed once, the
    # group-bys run on codes): no copy of the other event columns
    read = [pl.coalesce("op", "name").cast(pl.Categorical).alias("_group"), "program_id",
            "module", "category", "dtype", pl.col("name").cast(pl.Categorical),
            pl.col("dtype").cast(pl.Categorical).alias("_dtype_code"), _DUR.alias("_dur"),
            "flops", "bytes", (pl.col("flops").is_null() & pl.col("bytes").is_null())
            .alias("_nocost")]
    one = _single_spec(events, specs)
    if one is not None:
        ev = kernels.select(*read, spec=pl.lit(one[0], dtype=pl.String)).collect()
    else:
        ev = kernels.select(*DEVICE_KEYS, *read).collect()
        ev = ev.join(specs.select(*DEVICE_KEYS, "spec"), on=DEVICE_KEYS, how="left") \
            .drop(DEVICE_KEYS)
    return ev.with_columns(pl.col("spec").cast(pl.Categorical))


def roofline(events: pl.DataFrame, specs: pl.DataFrame,
             frame: pl.DataFrame | None = None) -> pl.DataFrame:
    """One row per op group (see module doc), sorted by time (descending); ``frame``:
    :func:`roofline_frame` of the same arguments, when the caller has it already."""
    cols = ["op", "program_id", "module", "kernel", "category", "spec", "dtype", "count",
            "sum_ns", "flops", "bytes", "intensity", "tflops_per_s", "tb_per_s",
            "peak_tflops", "hbm_tb_per_s", "attainable_tflops_per_s", "bound", "efficiency",
            "no_cost_count"]
    ev = roofline_frame(events, specs) if frame is None else frame
    if ev.is_empty():
        return pl.DataFrame(schema={c: pl.String for c in cols}).clear()
    keys = ["_group", "program_id", "spec"]
    # eager: each group's float sums run in row order (the same bits every run)
    agg = ev.group_by(keys).agg(
        module=pl.col("module").drop_nulls().first(),
        count=pl.len(), sum_ns=pl.col("_dur").sum(),
        flops=pl.when(pl.col("flops").is_not_null().any()).then(pl.col("flops").sum()),
        bytes=pl.when(pl.col("bytes").is_not_null().any()).then(pl.col("bytes").sum()),
        no_cost_count=pl.col("_nocost").sum(),
        kernel=pl.col("name").first(), category=pl.col("category").first(),
        dtype=pl.col("dtype").drop_nulls().first(),
        _mixed=_varies("name") | _varies("category") | _varies("_dtype_code", nulls=False))
    # Most groups hold one kernel name, category and dtype; only the others need the
    # longest kernel (ties to the smallest name) and the most common category (ties to the
    # first in CATEGORIES order: mode alone returns ties in hash order) and dtype (ties to the
    # smallest), worked out on their rows alone.
    mixed = agg.filter(pl.col("_mixed")).select(keys)
    if mixed.height:
        sub = ev.join(mixed, on=keys, how="semi", nulls_equal=True)
        by_name = (sub.group_by(*keys, "name").agg(_t=pl.col("_dur").sum())
                   .with_columns(pl.col("name").cast(pl.String))
                   .sort(["_t", "name"], descending=[True, False])
                   .group_by(keys, maintain_order=True).agg(_kernel=pl.col("name").first()))
        modes = sub.group_by(keys).agg(
            _category=pl.col("category").mode().sort().first().cast(pl.String),
            _dtype=pl.col("dtype").drop_nulls().mode().sort().first())
        agg = agg.join(by_name, on=keys, how="left", nulls_equal=True) \
            .join(modes, on=keys, how="left", nulls_equal=True).with_columns(
            kernel=pl.coalesce(pl.col("_kernel"), pl.col("kernel").cast(pl.String)),
            category=pl.coalesce(pl.col("_category"), pl.col("category").cast(pl.String)),
            dtype=pl.when(pl.col("_mixed")).then(pl.col("_dtype")).otherwise(pl.col("dtype")))
    agg = agg.with_columns(pl.col("kernel", "category").cast(pl.String))
    agg = agg.with_columns(pl.col("_group", "spec").cast(pl.String))
    return roofline_bounds(agg, specs)


def roofline_bounds(agg: pl.DataFrame, specs: pl.DataFrame) -> pl.DataFrame:
    """The rates, bound and efficiency of op groups summed already (``_group``,
    ``program_id``, ``spec``, ``module``, ``count``, ``sum_ns``, ``flops``, ``bytes``,
    ``no_cost_count``, ``kernel``, ``category``, ``dtype``), sorted by time; shared by
    :func:`roofline` and the merge of per-host summary partials."""
    cols = ["op", "program_id", "module", "kernel", "category", "spec", "dtype", "count",
            "sum_ns", "flops", "bytes", "intensity", "tflops_per_s", "tb_per_s",
            "peak_tflops", "hbm_tb_per_s", "attainable_tflops_per_s", "bound", "efficiency",
            "no_cost_count"]
    peaks = specs.select("spec", "hbm_tb_per_s", *[f"peak_{d}" for d in DTYPES]) \
        .unique("spec", keep="first")
    agg = agg.join(peaks, on="spec", how="left", nulls_equal=False)
    t = pl.col("sum_ns").cast(pl.Float64)
    agg = agg.with_columns(
        intensity=pl.when(pl.col("bytes") > 0).then(pl.col("flops") / pl.col("bytes")),
        tflops_per_s=pl.when(t > 0).then(pl.col("flops") / t / 1e3),
        tb_per_s=pl.when(t > 0).then(pl.col("bytes") / t / 1e3),
        peak_tflops=_peak_of_dtype(),
    )
    # an op that moves no HBM bytes but computes (a TPU fusion whose operands are all in
    # VMEM) is compute-bound: its memory roof is infinitely high
    ridge_ok = pl.col("peak_tflops").is_not_null() & pl.col("hbm_tb_per_s").is_not_null() \
        & pl.col("flops").is_not_null() & pl.col("bytes").is_not_null() \
        & ((pl.col("bytes") > 0) | (pl.col("flops") > 0))
    mem_roof = pl.when(pl.col("bytes") > 0).then(
        pl.col("intensity") * pl.col("hbm_tb_per_s")).otherwise(float("inf"))
    compute_bound = mem_roof >= pl.col("peak_tflops")
    agg = agg.with_columns(
        attainable_tflops_per_s=pl.when(ridge_ok).then(
            pl.min_horizontal(pl.col("peak_tflops"), mem_roof)),
        bound=pl.when(ridge_ok).then(pl.when(compute_bound).then(pl.lit("compute"))
                                     .otherwise(pl.lit("memory"))),
        efficiency=pl.when(ridge_ok).then(
            pl.when(compute_bound).then(pl.col("tflops_per_s") / pl.col("peak_tflops"))
            .otherwise(pl.col("tb_per_s") / pl.col("hbm_tb_per_s"))),
    )
    return agg.rename({"_group": "op"}).select(cols).sort(["sum_ns", "op"],
                                                           descending=[True, False])


def model_kernels(events: pl.DataFrame) -> pl.DataFrame:
    """The model kernels (``MODEL_CATEGORIES``) with the columns :func:`mfu` reads."""
    return events.lazy().filter(pl.col("category").is_in(MODEL_CATEGORIES)) \
        .select(*DEVICE_KEYS, "start_ns", "end_ns", "flops", "bytes", "dtype").collect()


def mfu(events: pl.DataFrame, specs: pl.DataFrame, windows: pl.DataFrame | None = None,
        model: pl.DataFrame | None = None, spans: pl.DataFrame | None = None,
        inside: bool = False) -> pl.DataFrame:
    """MFU per device (``windows`` None: the device's first start → last end) or per device
    and step (``windows``: rank, step, start_ns, end_ns). Columns: keys [+ step],
    model_flops, mfu_dtype, peak_tflops, window_ns, mfu, model_kernels_without_cost.
    ``model``: :func:`model_kernels` of ``events``, and ``spans`` (device keys and
    ``window_ns``, whole-trace only) when the caller has them already. ``inside``: no
    activity crosses a window's start or end (``timeline.step_rows``): each model kernel is
    then whole in the window holding its start or in none, found by a binary search instead
    of clipping (the events' own ``step`` is not read: a ``--time`` filter cuts activities
    after their steps were assigned)."""
    keys = list(DEVICE_KEYS)
    model = model_kernels(events) if model is None else model
    if windows is None:
        spans = _per_device(events.lazy(), window_ns=pl.col("end_ns").max()
                            - pl.col("start_ns").min()).collect() if spans is None else spans
    else:
        keys.append("step")
        if inside and model.height:  # what clipping keeps: each piece whole, in its window
            # (lazy: only the columns grouped below are filtered, not a copy of ``model``)
            step = assign_steps(model.select("rank", "start_ns"), windows)["step"]
            lazy = model.lazy().with_columns(step).filter(
                pl.col("step").is_not_null() & (pl.col("end_ns") > pl.col("start_ns")))
        else:
            lazy = (clip_costs_to_windows(model, windows) if model.height else
                    model.with_columns(step=pl.lit(None, dtype=pl.Int32))).lazy()
        spans = distinct(events, keys[:3]).join(
            windows.select("rank", "step", window_ns=pl.col("end_ns") - pl.col("start_ns")),
            on="rank")
    if windows is None:
        lazy = model.lazy()
    per_dtype = lazy.filter(pl.col("flops").is_not_null()).group_by(*keys, "dtype") \
        .agg(f=pl.col("flops").sum()).collect()
    dominant = (per_dtype.sort(["f", "dtype"], descending=[True, False])
                .group_by(keys, maintain_order=True)
                .agg(mfu_dtype=pl.col("dtype").first(), model_flops=pl.col("f").sum()))
    # counted on the kernels without flops only (a key without any: 0, after the join)
    missing = lazy.filter(pl.col("flops").is_null()).group_by(keys).agg(
        model_kernels_without_cost=pl.len().cast(pl.Int64)).collect()
    out = spans.join(dominant, on=keys, how="left").join(missing, on=keys, how="left") \
        .join(specs, on=DEVICE_KEYS, how="left")
    out = out.with_columns(peak_tflops=_peak_of_dtype("mfu_dtype"),
                           model_kernels_without_cost=pl.col("model_kernels_without_cost")
                           .fill_null(0))
    out = out.with_columns(mfu=pl.when((pl.col("window_ns") > 0)
                                       & pl.col("peak_tflops").is_not_null()
                                       & pl.col("model_flops").is_not_null())
                           .then(pl.col("model_flops") / (pl.col("window_ns").cast(pl.Float64)
                                                          * pl.col("peak_tflops") * 1e3)))
    return out.select(*keys, "model_flops", "mfu_dtype", "peak_tflops", "window_ns", "mfu",
                      "model_kernels_without_cost").sort(keys)


def device_mfu(events: pl.DataFrame, specs: pl.DataFrame, steps: pl.DataFrame | None = None,
               by_step: pl.DataFrame | None = None, model: pl.DataFrame | None = None,
               spans: pl.DataFrame | None = None) -> pl.DataFrame:
    """Per device, the MFU every output shows (README "One MFU"): with steps its median
    step's (:func:`median_step_mfu`; ``by_step``: :func:`mfu` per step when the caller has
    it, else computed from ``steps``), else over its span; a device without steps keeps its
    span's. Columns of :func:`mfu` (``model_flops``, ``mfu_dtype``, ``window_ns`` over the
    span) and ``mfu_basis``: ``"median step"`` or ``"span"``."""
    span = mfu(events, specs, model=model, spans=spans)
    if by_step is None and steps is not None and steps.height:
        by_step = mfu(events, specs, steps, model)
    if by_step is None:
        return span.with_columns(mfu_basis=pl.lit("span"))
    med = median_step_mfu(by_step).with_columns(_has=pl.lit(True))
    return span.join(med.rename({"mfu": "_med"}), on=list(DEVICE_KEYS), how="left").with_columns(
        mfu=pl.when(pl.col("_has")).then(pl.col("_med")).otherwise(pl.col("mfu")),
        mfu_basis=pl.when(pl.col("_has")).then(pl.lit("median step")).otherwise(pl.lit("span")),
    ).drop("_med", "_has")


def median_step_mfu(by_step: pl.DataFrame) -> pl.DataFrame:
    """Per device of ``by_step`` (:func:`mfu` per step): the MFU of its median step (the
    lower median of its steps' known MFUs, so one step's own value; null when none is
    known). With steps this is the device's MFU in every output (README, MFU): one window
    per number, the same steps the per-step rows and chart show, never the whole span, whose
    idle warm-up and tail would pull it down."""
    keys = list(DEVICE_KEYS)
    known = pl.col("mfu").filter(pl.col("mfu").is_finite()).sort()
    return by_step.group_by(keys).agg(_m=known).select(
        *keys, mfu=pl.col("_m").list.get((pl.col("_m").list.len() - 1) // 2,
                                         null_on_oob=True)).sort(keys)


def _varies(col: str, nulls: bool = True) -> pl.Expr:
    """Within a group: whether categorical or enum ``col`` takes more than one value (with
    ``nulls``, null counts as a value, as ``n_unique`` counts it), by comparing the smallest
    and largest code, which is cheaper than counting distinct values."""
    code = pl.col(col).to_physical()
    differ = (code.min() != code.max()).fill_null(False)
    if nulls:
        n_null = pl.col(col).null_count()
        differ = differ | ((n_null > 0) & (n_null < pl.len()))
    return differ


def _per_device(lf: pl.LazyFrame, **aggs: pl.Expr) -> pl.LazyFrame:
    """``group_by(DEVICE_KEYS).agg(**aggs)``, lazy (the streaming engine groups ~1.5-2x
    faster than the eager group-by on millions of rows)."""
    return lf.group_by(DEVICE_KEYS).agg(**aggs)


def _single_spec(events: pl.DataFrame, specs: pl.DataFrame) -> tuple[str | None] | None:
    """``(spec,)`` when the join of ``events`` with ``specs`` on the device keys would give
    every event that one spec (known or not): ``specs`` has one spec value and lists every
    combination of the events' hosts, ranks and ordinals; else None (join)."""
    if not specs.height or specs.select(pl.col("spec").n_unique()).item() != 1:
        return None
    values = [events[k].unique() for k in DEVICE_KEYS]
    if any(v.null_count() for v in values) or \
            values[0].len() * values[1].len() * values[2].len() > 100_000:
        return None
    every = values[0].to_frame().join(values[1].to_frame(), how="cross") \
        .join(values[2].to_frame(), how="cross")
    if not every.join(specs.select(DEVICE_KEYS), on=DEVICE_KEYS, how="anti").is_empty():
        return None
    return (specs["spec"][0],)
