"""The one kernel table (issue 26) changes no value: every sum ``summarize`` derives from it
equals the pass over the events it replaced (kept in ``analyze.roofline`` as the row path), on
random frames with mixed op groups, nulls, ties, several devices and specs, non-integer and
huge FLOPs (where the roofline must fall back to the rows), and on the bundled traces."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

import tracelens
from tests.conftest import SAMPLES
from tracelens.analyze.compute import kernel_table as kt
from tracelens.analyze.compute import roofline
from tracelens.core.model import CATEGORIES

BASE = tracelens.load(SAMPLES / "mi300x_8gpu_llama_step.xplane.pb").events.head(1)
FLOPS = [None, 0.0, 1.0, 3.0, 2.0**40, 0.5, 2.0**60, float("inf"), 7.0]

row = st.tuples(
    st.sampled_from(["h0", "h1"]), st.integers(0, 1), st.integers(0, 2),  # host rank device
    st.sampled_from(["kernel", "memcpy"]), st.sampled_from(["k1", "k2", "k3", None]),
    st.sampled_from(CATEGORIES), st.sampled_from(["op1", "op2", None]),
    st.sampled_from([1, 2, None]), st.sampled_from(["m", None]),
    st.sampled_from(["bf16", "fp8", None]), st.sampled_from(FLOPS), st.sampled_from(FLOPS),
    st.sampled_from([None, 64]), st.integers(0, 50), st.integers(0, 30),
    st.sampled_from(["n1", None]))


def frame(rows: list[tuple]) -> pl.DataFrame:
    cols = list(zip(*rows))
    names = ["host", "rank", "device", "kind", "name", "category", "op", "program_id",
             "module", "dtype", "flops", "bytes", "msg_bytes"]
    ev = pl.concat([BASE] * len(rows))
    ev = ev.with_columns(pl.Series(n, c, dtype=ev.schema[n], strict=False)
                         for n, c in zip(names, cols))
    start = pl.Series("start_ns", cols[13], dtype=pl.Int64)
    end = (start + pl.Series(cols[14], dtype=pl.Int64)).alias("end_ns")
    return ev.with_columns(start, end, pl.Series("cost_note", cols[15], dtype=pl.String),
                           subcategory=pl.col("name"), rule=pl.col("op"))


def specs_of(ev: pl.DataFrame, split: bool) -> pl.DataFrame:
    devs = ev.select("host", "rank", "device").unique().sort("host", "rank", "device")
    spec = {}
    for i, (h, r, d) in enumerate(devs.iter_rows()):
        if not (split and i % 3 == 2):  # an unlisted device has no spec (null)
            spec[(h, r, d)] = tracelens.core.hardware.spec_for_device(
                "mi300x" if not split or i % 2 else "h100", None, None, None)
    return roofline.spec_frame(spec)


def old_kernel_groups(events: pl.DataFrame) -> pl.DataFrame:
    """``summary._kernel_groups`` before the kernel table (commit 5750f9a)."""
    cat = pl.Categorical
    schema = {"name": cat, "category": cat, "subcategory": cat, "rule": cat, "host": cat,
              "rank": pl.Int32, "device": pl.Int32, "count": pl.UInt32, "sum_ns": pl.Int64}
    coded = events.lazy().select(
        pl.col("name").cast(cat), pl.col("category").cast(pl.String).cast(cat),
        pl.col("subcategory").cast(cat), pl.col("rule").cast(cat), pl.col("host").cast(cat),
        "rank", "device", _d=pl.col("end_ns") - pl.col("start_ns"))
    keys = ["name", "category", "subcategory", "rule", "host", "rank", "device"]
    return coded.group_by(keys).agg(count=pl.len(), sum_ns=pl.col("_d").sum()).collect() \
        .cast(schema)


def old_roofline_mix(frame: pl.DataFrame) -> pl.DataFrame:
    """``summary._roofline_mix`` before the kernel table (commit 5750f9a)."""
    keys = ["op", "program_id", "spec", "name", "category", "dtype"]
    return frame.group_by(op="_group", program_id="program_id", spec="spec", name="name",
                          category="category", dtype="_dtype_code").agg(
        count=pl.len(), sum_ns=pl.col("_dur").sum()) \
        .with_columns(pl.col("op", "spec", "name", "category", "dtype").cast(pl.String)) \
        .sort(keys, nulls_last=True)


def by_all(df: pl.DataFrame) -> pl.DataFrame:
    return df.with_columns(pl.col(pl.Categorical).cast(pl.String)).sort(
        df.columns, nulls_last=True)


def assert_table_equals_rows(ev: pl.DataFrame, specs: pl.DataFrame) -> bool:
    """Every table-derived sum equals the row path; True when the roofline came from the
    table (False: it declined, as it must when sums by parts could differ)."""
    table = kt.kernel_table(ev)
    assert_frame_equal(by_all(kt.kernel_groups(table)), by_all(old_kernel_groups(ev)))
    assert_frame_equal(kt.without_flops(table), roofline.without_flops(ev))
    assert_frame_equal(kt.flops_coverage(table), roofline.flops_coverage(ev).select(
        kt.flops_coverage(table).columns))
    frame_ = roofline.roofline_frame(ev, specs)
    assert_frame_equal(kt.roofline_mix(table, specs), old_roofline_mix(frame_),
                       check_dtypes=False)
    dur = pl.col("end_ns") - pl.col("start_ns")
    nc = roofline.no_cost_data()
    want = ev.select(n=nc.sum(), ns=dur.filter(nc).sum(), total=dur.sum()).row(0)
    assert kt.no_cost_sums(table) == tuple(int(x or 0) for x in want)
    got = kt.roofline_of(table, specs)
    rows = roofline.roofline(ev, specs)
    if got is None:
        # declined only when the rows' sums by parts could differ: empty, or some value not
        # a finite integer, or the magnitudes summing past 2**52
        kern = ev.filter((pl.col("kind") == "kernel") & (pl.col("category") != "collective"))
        for c in ("flops", "bytes"):
            v = kern[c].drop_nulls()
            if not ((v.is_finite() & (v == v.round())).all() and v.abs().sum() < 2**52):
                return False
        assert kern.is_empty()
        return False
    assert_frame_equal(by_all(got), by_all(rows))
    return True


@settings(max_examples=300, deadline=None)
@given(st.lists(row, min_size=1, max_size=30), st.booleans())
def test_kernel_table_sums_equal_the_passes_over_the_events(rows: list, split: bool) -> None:
    ev = frame(rows)
    assert_table_equals_rows(ev, specs_of(ev, split))


def test_integer_flops_use_the_table_and_fractions_or_huge_values_fall_back() -> None:
    rows = [("h0", 0, d, "kernel", k, "gemm", "op1", 1, "m", "bf16", f, 8.0, None, s, 5, None)
            for d in range(2) for k, f in (("k1", 2.0**40), ("k2", 3.0)) for s in (0, 10)]
    ev = frame(rows)
    specs = specs_of(ev, False)
    assert assert_table_equals_rows(ev, specs)  # exact integers: from the table
    half = ev.with_columns(flops=pl.col("flops") + 0.1)
    assert not assert_table_equals_rows(half, specs)  # fractions: summed over the rows
    huge = ev.with_columns(flops=pl.lit(2.0**51))
    assert not assert_table_equals_rows(huge, specs)  # sums past 2**52: over the rows


@pytest.mark.parametrize("path", sorted(SAMPLES.glob("*.xplane.pb")) +
                         [SAMPLES / "mi355x_2x8gpu_straggler"], ids=lambda p: Path(p).name)
def test_kernel_table_on_the_samples(path: Path) -> None:
    t = tracelens.load(path)
    specs = roofline.spec_frame(roofline.device_specs(t.devices))
    assert assert_table_equals_rows(t.events, specs)


def old_kernel_partial(trace: tracelens.core.model.Trace) -> pl.DataFrame:
    """``scaling.kernel_partial`` before the kernel table (commit 5750f9a): per event."""
    from tracelens.analyze.runs.kernels import run_windows as _windows
    from tracelens.analyze.timeline.breakdown import clip_to_windows
    from tracelens.analyze.runs.kernels import normalize_kernel_expr

    ev = clip_to_windows(trace.events, _windows(trace)) if trace.steps.height else trace.events
    ev = ev.with_columns(pl.col(pl.Categorical).cast(pl.String))
    return ev.with_columns(category=pl.col("category").cast(pl.String),
                           key=normalize_kernel_expr()).group_by(
        "category", "module", "program_id", "op", "key").agg(
        name=pl.col("name").min(), ns=(pl.col("end_ns") - pl.col("start_ns")).sum(),
        count=pl.len().cast(pl.Int64))


@pytest.mark.parametrize("steps", [True, False])
def test_scaling_kernel_partial_from_the_table_equals_the_events(steps: bool) -> None:
    from tracelens.analyze.runs.kernels import kernel_partial

    keys = ["category", "module", "program_id", "op", "key"]
    for path in [SAMPLES / "mi355x_8gpu_llama_fsdp.xplane.pb",
                 SAMPLES / "mi355x_2x8gpu_straggler"]:
        t = tracelens.load(path)
        if not steps:
            t.steps = t.steps.head(0)
        assert t.steps.height or not steps
        old = old_kernel_partial(t).sort(keys, nulls_last=True)
        # (the partial also carries each program's first start and each op's JAX op now)
        assert_frame_equal(kernel_partial(t).sort(keys, nulls_last=True).select(old.columns),
                           old)


def old_kernel_stats(events: pl.DataFrame) -> pl.DataFrame:
    """``tables.kernel_stats`` before it was taken from the kernel table (its own pass)."""
    from tracelens.analyze.timeline.breakdown import DEVICE_KEYS

    keys = ["name", "kind", "category", "subcategory", "rule"]
    dur = (pl.col("end_ns") - pl.col("start_ns")).alias("_d")
    events = events.with_columns(pl.col(pl.Categorical).cast(pl.String))  # as events were
    return events.select(*keys, *DEVICE_KEYS, "launch", dur).group_by(keys).agg(
        count=pl.len().cast(pl.Int64), total_ns=pl.col("_d").sum(),
        mean_ns=pl.col("_d").mean(), min_ns=pl.col("_d").min(),
        p50_ns=pl.col("_d").quantile(0.5, "nearest").cast(pl.Int64),
        p90_ns=pl.col("_d").quantile(0.9, "nearest").cast(pl.Int64),
        max_ns=pl.col("_d").max(), devices=pl.struct(DEVICE_KEYS).n_unique().cast(pl.Int64),
        launch=pl.col("launch").drop_nulls().mode().sort().first(),
        launches=pl.col("launch").drop_nulls().n_unique().cast(pl.Int64),
    ).sort(["total_ns", "name", "kind", "rule", "category", "subcategory"],  # + tie-breaks
           descending=[True, False, False, False, False, False],
           nulls_last=True).select(*keys, "count", "total_ns", "mean_ns", "min_ns", "p50_ns",
                                   "p90_ns", "max_ns", "devices", "launch", "launches")


LAUNCHES = ["grid=1,1,1 block=64,1,1", "grid=2,1,1 block=64,1,1", None]


@settings(max_examples=200, deadline=None)
@given(st.lists(row, min_size=1, max_size=30),
       st.lists(st.sampled_from(LAUNCHES), min_size=30, max_size=30))
def test_export_kernel_stats_from_the_table_equal_the_pass_over_the_events(
        rows: list, launches: list) -> None:
    """The export's per-kernel table (percentiles, mode of the launch shapes with ties to
    the smallest, distinct devices) from the one kernel aggregation equals its old pass:
    random names, devices, durations (ties and zeros) and launch shapes (nulls, ties)."""
    from tracelens.analyze.timeline.tables import kernel_stats

    ev = frame(rows).with_columns(launch=pl.Series(launches[:len(rows)], dtype=pl.String))
    assert_frame_equal(kernel_stats(ev), old_kernel_stats(ev))
