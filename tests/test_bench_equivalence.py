"""The speed-ups of issue 8 change no value: each rewritten step of ``load`` and ``summarize``
against the implementation it replaced (kept here, or as the fallback path), on random frames
and on the bundled traces; and reading a log directory with several workers gives what
reading it file by file gives."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

import tracelens
from tests.conftest import SAMPLES
from tracelens.loading import prepare
from tracelens.cost import events as cost
from tracelens.analyze.communication import collectives
from tracelens.analyze.summary import build as summary
from tracelens.analyze.summary import reduce as summary_reduce
from tracelens.analyze.timeline import breakdown as timeline
from tracelens.core.errors import TraceInputError
from tracelens.core.model import CATEGORIES, COMPUTE_CATEGORIES, CategoryDtype

DEVICE_KEYS = ["host", "rank", "device"]
STREAM_KEYS = ["host", "rank", "device", "stream"]


# ---------------------------------------------------------------------------------------------
# The replaced implementations (as they were before issue 8)
# ---------------------------------------------------------------------------------------------

def old_clip_stream_overlaps(events: pl.DataFrame) -> tuple[pl.DataFrame, int, int]:
    if events.is_empty():
        return events, 0, 0
    ev = events.sort([*STREAM_KEYS, "start_ns", "end_ns"])
    next_start = pl.col("start_ns").shift(-1).over(STREAM_KEYS)
    clipped_end = pl.when(next_start.is_not_null() & (next_start < pl.col("end_ns"))) \
        .then(next_start).otherwise(pl.col("end_ns"))
    ev = ev.with_columns(_clip=pl.col("end_ns") - clipped_end, end_ns=clipped_end)
    stats = ev.select(n=(pl.col("_clip") > 0).sum(), mx=pl.col("_clip").max()).row(0)
    return ev.drop("_clip"), int(stats[0] or 0), int(stats[1] or 0)


def old_assign_steps(events: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    if steps.is_empty() or events.is_empty():
        return events.with_columns(step=pl.lit(None, dtype=pl.Int32))
    order = events.with_row_index("_row").sort("start_ns")
    win = steps.select("rank", pl.col("start_ns").alias("_s"), pl.col("end_ns").alias("_e"),
                       pl.col("step").alias("_step")).sort("_s")
    joined = order.join_asof(win, left_on="start_ns", right_on="_s", by="rank",
                             strategy="backward", check_sortedness=False)
    joined = joined.with_columns(step=pl.when(pl.col("start_ns") < pl.col("_e"))
                                 .then(pl.col("_step")).otherwise(None).cast(pl.Int32))
    return joined.sort("_row").drop("_row", "_s", "_e", "_step")


def old_clip_to_windows(events: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame:
    w = windows.select("rank", "step", "start_ns", "end_ns").sort("rank", "start_ns") \
        .with_columns(_i=pl.int_range(pl.len()).over("rank"))
    lo_tab = w.select("rank", _ws="start_ns", _we="end_ns", _lo="_i")
    hi_tab = w.select("rank", _ws2="start_ns", _hi="_i")
    ev = events.drop("step", strict=False).with_row_index("_row")
    ev = ev.sort("start_ns").join_asof(lo_tab.sort("_ws"), left_on="start_ns", right_on="_ws",
                                       by="rank", strategy="backward", check_sortedness=False)
    ev = ev.with_columns(_lo=pl.when(pl.col("_lo").is_null()).then(0)
                         .when(pl.col("start_ns") >= pl.col("_we")).then(pl.col("_lo") + 1)
                         .otherwise(pl.col("_lo")))
    ev = ev.with_columns(_end_m1=pl.col("end_ns") - 1).sort("_end_m1").join_asof(
        hi_tab.sort("_ws2"), left_on="_end_m1", right_on="_ws2", by="rank",
        strategy="backward", check_sortedness=False)
    ev = ev.filter(pl.col("_hi").is_not_null() & (pl.col("_hi") >= pl.col("_lo")))
    ev = ev.with_columns(_i=pl.int_ranges(pl.col("_lo"), pl.col("_hi") + 1)).explode("_i")
    ev = ev.join(w.select("rank", "_i", "step", _s="start_ns", _e="end_ns"),
                 on=["rank", "_i"], how="inner")
    ev = ev.with_columns(start_ns=pl.max_horizontal("start_ns", "_s"),
                         end_ns=pl.min_horizontal("end_ns", "_e"))
    ev = ev.filter(pl.col("end_ns") > pl.col("start_ns"))
    return ev.sort("_row", "step").drop("_row", "_ws", "_we", "_lo", "_ws2", "_hi", "_end_m1",
                                        "_i", "_s", "_e", strict=False)


def old_compute_segments(events: pl.DataFrame) -> pl.DataFrame:
    return collectives._compute_segments_per_device(
        events.filter(pl.col("category").is_in(list(COMPUTE_CATEGORIES))))


def old_hidden(coll: pl.DataFrame, events: pl.DataFrame) -> pl.Series:
    seg = old_compute_segments(events)
    return (collectives._covered_until(coll, seg, "end_ns")
            - collectives._covered_until(coll, seg, "start_ns"))


def old_prio_unions(ev: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    return timeline._prio_unions_by_level(
        ev.select(*keys, "start_ns", "end_ns", "_prio").sort([*keys, "start_ns"]), keys)


def old_mark_main_annotate(events: pl.DataFrame, table: pl.DataFrame) -> pl.DataFrame:
    keys = ["host", "rank", "device", "program_id", "op"]
    ev = events.with_row_index("_row")
    totals = (ev.filter(pl.col("op").is_not_null()).group_by(*keys, "name")
              .agg(_t=(pl.col("end_ns") - pl.col("start_ns")).sum())
              .sort(["_t", "name"], descending=[True, False])
              .group_by(keys, maintain_order=True)
              .agg(_main=pl.col("name").first(), _names=pl.len()))
    ev = ev.join(totals, on=keys, how="left", nulls_equal=True).with_columns(
        _is_main=pl.col("_names").is_null() | (pl.col("_names") <= 1)
        | (pl.col("name") == pl.col("_main"))).drop("_main", "_names")
    ev = ev.join(table.select(*cost.KEY, "_flops", "_bytes", "_dtype", "_msg_bytes",
                              "_group_size"), on=cost.KEY, how="left", nulls_equal=False)
    return ev.sort("_row").select("_row", "_is_main", "_flops", "_bytes")


def old_top_kernels(events: pl.DataFrame, top: int) -> pl.DataFrame:
    dur = pl.col("end_ns") - pl.col("start_ns")
    return (events.group_by("name", "category", "subcategory", "rule")
            .agg(count=pl.len(), sum_ns=dur.sum(), devices=pl.struct(DEVICE_KEYS).n_unique())
            .sort(["sum_ns", "name"], descending=[True, False]).head(top))


# ---------------------------------------------------------------------------------------------
# Random frames
# ---------------------------------------------------------------------------------------------

row = st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 2), st.integers(0, 2),
                st.integers(0, 2), st.integers(-40, 160), st.integers(0, 40),
                st.sampled_from(CATEGORIES))
rows = st.lists(row, min_size=1, max_size=40)


def frame(rs: list[tuple]) -> pl.DataFrame:
    return pl.DataFrame(
        [(h, r, d, s, st_, st_ + du, c, f"k{i % 5}") for i, (h, r, d, s, st_, du, c) in
         enumerate(rs)],
        schema={"host": pl.String, "rank": pl.Int32, "device": pl.Int32, "stream": pl.Int64,
                "start_ns": pl.Int64, "end_ns": pl.Int64, "category": CategoryDtype,
                "name": pl.String}, orient="row")


@st.composite
def windows(draw: st.DrawFn) -> pl.DataFrame:
    out = []
    for rank in draw(st.sets(st.integers(0, 2), min_size=1, max_size=3)):
        t = draw(st.integers(-50, 50))
        for i in range(draw(st.integers(1, 5))):
            n = draw(st.integers(1, 60))
            out.append((rank, draw(st.integers(0, 1000)) if draw(st.booleans()) else i, t,
                        t + n))
            t += n + draw(st.sampled_from([0, 0, 5, -(n // 2)]))  # some overlap
    df = pl.DataFrame(out, schema={"rank": pl.Int32, "step": pl.Int32, "start_ns": pl.Int64,
                                   "end_ns": pl.Int64}, orient="row")
    return df.unique(["rank", "start_ns"], keep="first", maintain_order=True) \
        .unique(["rank", "step"], keep="first", maintain_order=True)


def _order_free(df: pl.DataFrame) -> pl.DataFrame:
    return df.sort(df.columns)


@settings(max_examples=150, deadline=None)
@given(rows)
def test_clip_stream_overlaps_unchanged(rs: list) -> None:
    # Activities equal in (stream, start, end) came out of the old multi-column sort in an
    # arbitrary order (it is not stable), which decides which of them is clipped; the new
    # sort keeps their input order. Both agree whenever that order is defined:
    ev = frame(rs).unique([*STREAM_KEYS, "start_ns", "end_ns"], maintain_order=True)
    old, new = old_clip_stream_overlaps(ev), prepare.clip_stream_overlaps(ev)
    assert old[1:] == new[1:]
    assert_frame_equal(_order_free(old[0]), _order_free(new[0]))
    ordered = old[0]  # already sorted: kept in its order
    assert_frame_equal(prepare.clip_stream_overlaps(ordered)[0], old_clip_stream_overlaps(
        ordered)[0])


@settings(max_examples=150, deadline=None)
@given(rows, windows())
def test_assign_steps_and_clip_to_windows_unchanged(rs: list, win: pl.DataFrame) -> None:
    ev = frame(rs).with_columns(step=pl.lit(None, dtype=pl.Int32))
    assert_frame_equal(prepare.assign_steps(ev, win), old_assign_steps(ev, win))
    assert_frame_equal(timeline.clip_to_windows(ev, win), old_clip_to_windows(ev, win))


@settings(max_examples=150, deadline=None)
@given(rows)
def test_unions_segments_and_hidden_compute_unchanged(rs: list) -> None:
    ev = frame(rs)
    prio = ev.with_columns(_prio=pl.col("category").to_physical().cast(pl.Int32))
    for keys in (DEVICE_KEYS, [*DEVICE_KEYS, "stream"]):
        unions, sums = timeline._prio_unions(prio, keys)
        assert_frame_equal(unions.sort(keys), old_prio_unions(prio, keys).sort(keys))
        old_sums = ev.group_by(*keys, "category").agg(
            count=pl.len().cast(pl.Int64), sum_ns=(pl.col("end_ns") - pl.col("start_ns")).sum())
        assert_frame_equal(sums.sort([*keys, "category"]),
                           old_sums.sort([*keys, "category"]))
    assert_frame_equal(collectives.compute_segments(ev), old_compute_segments(ev))
    coll = ev.filter(pl.col("category") == "collective").sort([*DEVICE_KEYS, "start_ns"])
    if coll.height:
        assert_frame_equal(collectives._hidden_by_compute(coll, ev).to_frame("h"),
                           old_hidden(coll, ev).to_frame("h"))


@settings(max_examples=100, deadline=None)
@given(rows, windows())
def test_breakdowns_same_on_fallback_path(rs: list, win: pl.DataFrame) -> None:
    """The one-axis fast paths against the per-group paths they fall back to."""
    import unittest.mock

    ev = frame(rs)
    fast = [timeline.device_breakdown(ev), timeline.step_breakdown(
        ev, win, ev.select(DEVICE_KEYS).unique())]
    with unittest.mock.patch.object(timeline, "on_one_axis", lambda *a, **k: None):
        slow = [timeline.device_breakdown(ev), timeline.step_breakdown(
            ev, win, ev.select(DEVICE_KEYS).unique())]
    for a, b in zip(fast, slow):
        assert_frame_equal(a.timeline, b.timeline)
        assert_frame_equal(a.categories, b.categories)


def test_times_too_large_for_one_axis_fall_back() -> None:
    ev = frame([("a", 0, 0, 0, 0, 10, "gemm"), ("a", 0, 1, 0, 0, 5, "collective")])
    far = ev.with_columns(pl.col("start_ns") + 2**62, pl.col("end_ns") + 2**62)
    prio = far.with_columns(_prio=pl.col("category").to_physical().cast(pl.Int32))
    unions, sums = timeline._prio_unions(prio, DEVICE_KEYS)
    assert sums is None  # the per-level fallback ran
    assert_frame_equal(unions.sort(DEVICE_KEYS), old_prio_unions(prio, DEVICE_KEYS).sort(
        DEVICE_KEYS))
    assert_frame_equal(collectives.compute_segments(far), old_compute_segments(far))


# ---------------------------------------------------------------------------------------------
# Bundled traces: the steps that need a classified trace
# ---------------------------------------------------------------------------------------------

TRACES = sorted(SAMPLES.glob("*.xplane.pb")) + [SAMPLES / "mi355x_2x8gpu_straggler"]


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name)
def test_cost_annotation_and_top_kernels_unchanged(path: Path) -> None:
    trace = tracelens.load(path)
    table = trace.meta.op_costs
    ev = trace.events
    new = ev.hstack(cost._per_kernel(ev, table)).with_row_index("_row").select(
        "_row", "_is_main", "_flops", "_bytes")
    assert_frame_equal(new, old_mark_main_annotate(ev, table))
    old_top = old_top_kernels(ev, 10)
    total = int(ev.select((pl.col("end_ns") - pl.col("start_ns")).sum()).item())
    got = summary_reduce._top_kernels(summary._kernel_groups(ev), total, 10)
    assert [(k.name, k.count, k.sum_ns, k.devices) for k in got] == \
        [(r["name"], r["count"], r["sum_ns"], r["devices"])
         for r in old_top.iter_rows(named=True)]
    win = trace.steps
    if win.height:
        assert_frame_equal(timeline.clip_to_windows(ev, win), old_clip_to_windows(ev, win))


def test_parallel_read_equals_serial(monkeypatch: pytest.MonkeyPatch) -> None:
    run = next((SAMPLES / "mi355x_2x8gpu_straggler").rglob("*.xplane.pb")).parent
    monkeypatch.setenv("TRACELENS_WORKERS", "1")
    serial = tracelens.load(run)
    monkeypatch.setenv("TRACELENS_WORKERS", "2")
    parallel = tracelens.load(run)
    for key in ("events", "host_events", "steps", "devices", "modules"):
        assert_frame_equal(getattr(serial, key), getattr(parallel, key))
    assert serial.meta.warnings == parallel.meta.warnings
    assert serial.meta.alignment == parallel.meta.alignment
    assert serial.meta.sources == parallel.meta.sources


def test_parallel_read_reports_the_first_bad_file(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    run = next((SAMPLES / "mi355x_2x8gpu_straggler").rglob("*.xplane.pb")).parent
    for i, f in enumerate(sorted(run.glob("*.xplane.pb"))):
        data = f.read_bytes()
        (tmp_path / f"h{i}.xplane.pb").write_bytes(data if i else data[: len(data) // 3])
    monkeypatch.setenv("TRACELENS_WORKERS", "2")
    with pytest.raises(TraceInputError) as exc:
        tracelens.load(tmp_path)
    assert exc.value.path == str(tmp_path / "h0.xplane.pb")


def test_worker_processes_read_other_formats(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Formats other than XSpace are read by spawned processes (Arrow IPC back)."""
    from tracelens.loading import reading
    from tracelens.loading.formats import reader_for

    f = next((SAMPLES / "mi355x_2x8gpu_straggler").rglob("*.xplane.pb"))
    status, value = reading.read_in_worker("xspace", f, None)
    assert status == "ok"
    part = reading.from_worker((status, value))
    direct = reading.read_one(lambda p: reader_for("xspace", f).read(p, None, None), f)
    assert_frame_equal(part.events, direct.events)
    assert part.meta.warnings == direct.meta.warnings
    bad = tmp_path / "bad.xplane.pb"
    bad.write_bytes(b"\x0a\xff\xff")
    with pytest.raises(TraceInputError):
        reading.from_worker(reading.read_in_worker("xspace", bad, None))


main_row = st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 1),
                     st.sampled_from([None, 7]), st.sampled_from([None, "op.1", "op.2"]),
                     st.sampled_from([None, "k", "kk", "k2", "Kz", "é"]), st.integers(0, 4))


@settings(max_examples=200, deadline=None)
@given(st.lists(main_row, min_size=1, max_size=30))
@example([("a", 0, 7, "op.1", None, 3), ("a", 0, 7, "op.1", "k", 3),
          ("a", 0, 7, "op.1", "k2", 1)])  # a null name ties: no main, every kernel keeps it
@example([("a", 0, 7, "op.1", "kk", 3), ("a", 0, 7, "op.1", "k", 3),
          ("a", 0, 7, "op.1", "k2", 1)])
def test_main_kernel_of_each_op_unchanged(rs: list) -> None:
    """An op group's main kernel (largest total, ties to the smallest name, a null name
    first) as the sort over every (group, name) row picked it: tied totals, null names,
    ops and programs."""
    ev = pl.DataFrame(
        [(h, 0, d, pid, op, nm, 0, du) for h, d, pid, op, nm, du in rs],
        schema={"host": pl.String, "rank": pl.Int32, "device": pl.Int32,
                "program_id": pl.Int64, "op": pl.String, "name": pl.String,
                "start_ns": pl.Int64, "end_ns": pl.Int64}, orient="row")
    table = pl.DataFrame({"host": ["a", "b"], "program_id": [7, 7], "op": ["op.1", "op.2"],
                          "_flops": [10.0, 20.0], "_bytes": [1.0, 2.0]}).with_columns(
        *[pl.lit(None, dtype=t).alias(c) for c, t in
          (("_dtype", pl.String), ("_msg_bytes", pl.Int64), ("_group_size", pl.Int32),
           ("_groups", pl.String), ("_note", pl.String))])
    for text in (pl.String, pl.Categorical):
        typed = ev.with_columns(pl.col("host", "op", "name").cast(text))
        new = typed.hstack(cost._per_kernel(typed, table.with_columns(
            pl.col("host", "op").cast(text)))).with_row_index("_row").select(
            "_row", pl.col("_is_main").fill_null(True), "_flops", "_bytes")
        old = old_mark_main_annotate(ev, table).with_columns(
            pl.col("_is_main").fill_null(True))
        assert_frame_equal(new, old)
