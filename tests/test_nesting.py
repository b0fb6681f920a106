"""Nesting on one stream is not overlap (issue 47): XLA:CPU records a ``while``,
``conditional`` or ``call`` op on the same line as the ops of its body, from before the first
to after the last. The same-stream clip resolves it (the container keeps its time before its
first inner op, the inner ops theirs), and the loader says it as nesting, apart from the
overlaps of an in-order stream it clips."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

import tracelens
from parsers import xspace as xspace_reader
from tracelens.loading.prepare import STREAM_KEYS
from tracelens_dev.writers.xspace import build_xspace

from .conftest import SAMPLES

PLANTED = SAMPLES / "hlo" / "planted.xplane.pb"  # real XLA:CPU, a 4-iteration while loop


def _union_ns(starts: np.ndarray, ends: np.ndarray) -> int:
    """The length of the union of the intervals [starts, ends): sorted by start, a new run
    begins where a start lies past every end before it."""
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    first = np.flatnonzero(np.r_[True, s[1:] > np.maximum.accumulate(e)[:-1]])
    return int((np.maximum.reduceat(e, first) - s[first]).sum())


def test_a_real_while_loop_is_nesting_not_overlap() -> None:
    """planted.xplane.pb: 24 ``while.15`` ops (3 steps x 8 devices) each hold the 32 ops of
    its 4 iterations. Before: "clipped 24 same-stream overlaps (largest 5840717 ns)"."""
    t = tracelens.load(PLANTED)
    assert not any("same-stream overlaps" in w for w in t.meta.warnings)
    said = [w for w in t.meta.warnings if w.startswith("nesting on ")]
    assert said == ["nesting on 24 ops, not overlap: each contains the ones after it "
                    "on its stream (while.15; XLA runs a while, conditional or call "
                    "around its body's ops); each keeps its time before its first inner op, "
                    "and the inner ops are the device's work"]
    clips = t.meta.clips
    assert clips["nested"].all() and clips["clipped"].sum() == 24
    # by hand from the raw trace: per device, the innermost op at each instant is the work
    raw = xspace_reader.read(PLANTED).events.sort([*STREAM_KEYS, "start_ns", "end_ns"])
    same = pl.all_horizontal(pl.col(k).shift(-1).eq_missing(pl.col(k)) for k in STREAM_KEYS)
    nxt = pl.when(same).then(pl.col("start_ns").shift(-1))
    holds = (nxt < pl.col("end_ns")) & (pl.when(same).then(pl.col("end_ns").shift(-1))
                                        <= pl.col("end_ns"))
    raw = raw.with_columns(holds=holds.fill_null(False), nxt=nxt)
    assert raw.filter("holds")["name"].cast(pl.String).unique().to_list() == ["while.15"]
    work = raw.with_columns(end_ns=pl.when("holds").then("nxt").otherwise("end_ns"))
    busy = {d["device"]: d["timeline"]["busy_ns"]
            for d in tracelens.summarize(t)["devices"]}
    for (dev,), g in work.group_by(["device"]):
        assert busy[dev] == _union_ns(g["start_ns"].to_numpy(), g["end_ns"].to_numpy()), dev
    # the body runs inside the while's interval: nothing of it is cut
    body = t.events.filter(pl.col("name").cast(pl.String) != "while.15")
    raw_body = raw.filter(pl.col("name").cast(pl.String) != "while.15")
    assert (body["end_ns"] - body["start_ns"]).sum() == (
        raw_body["end_ns"] - raw_body["start_ns"]).sum()


def _written(tmp_path: Path) -> Path:
    """An XLA:CPU trace: on one thread a while op [1000, 6000) around two body ops, on another
    two ops that overlap by 200 ns (b starts before a ends)."""
    ops = [(1, 0, "while.3", 1000, 5000), (1, 0, "fusion.1", 1200, 1000),
           (1, 0, "fusion.2", 2500, 1000), (2, 0, "a.1", 10000, 800), (2, 0, "b.1", 10600, 500)]
    path = tmp_path / "cpu.xplane.pb"
    path.write_bytes(build_xspace([], cpu_ops=ops))
    return path


def test_nesting_and_overlap_told_apart(tmp_path: Path) -> None:
    t = tracelens.load(_written(tmp_path))
    w = t.meta.warnings
    assert "clipped 1 same-stream overlaps (largest 200 ns): an in-order stream cannot run " \
           "two activities at once" in w
    assert any(x.startswith("nesting on 1 ops, not overlap: each contains the ones "
                            "after it on its stream (while.3;") for x in w)
    ev = dict(t.events.select(pl.col("name").cast(pl.String), "end_ns").iter_rows())
    assert ev == {"while.3": 1200, "fusion.1": 2200, "fusion.2": 3500, "a.1": 10600,
                  "b.1": 11100}
    # busy: while's 200 ns before its body + 1000 + 1000, then 600 + 500
    (dev,) = tracelens.summarize(t)["devices"]
    assert dev["timeline"]["busy_ns"] == 3300
    assert t.meta.clips.select("name", "nested", "clip_ns").rows() == [
        ("a.1", False, 200), ("while.3", True, 4800)]


@pytest.mark.parametrize("holds", [True, False])
def test_an_inner_op_ending_with_its_container_is_still_nesting(tmp_path: Path,
                                                               holds: bool) -> None:
    """The body's last op may end when the while does (same ns): held whole, nesting. One
    ns later it sticks out: an overlap."""
    end = 1000 + 5000 if holds else 1000 + 5001
    ops = [(1, 0, "while.3", 1000, 5000), (1, 0, "fusion.1", 1200, end - 1200)]
    path = tmp_path / "cpu.xplane.pb"
    path.write_bytes(build_xspace([], cpu_ops=ops))
    w = tracelens.load(path).meta.warnings
    assert any(x.startswith("nesting on 1") for x in w) is holds
    assert any(x.startswith("clipped 1 same-stream") for x in w) is not holds


def test_a_gpu_kernel_holding_the_next_one_is_an_overlap(tmp_path: Path) -> None:
    """A GPU stream runs one kernel at a time: a kernel whose recorded interval holds the next
    one is a clock artifact, clipped and counted as an overlap as before, never nesting."""
    from tracelens_dev.writers.xspace import Activity

    acts = [Activity(0, 1, "Cijk_a.kd", 1_000, 500, {"hlo_op": "custom-call.1"}),
            Activity(0, 1, "Cijk_b.kd", 1_200, 100, {"hlo_op": "custom-call.2"})]
    path = tmp_path / "gpu.xplane.pb"
    path.write_bytes(build_xspace(acts, steps=[(0, 900, 2_000)]))
    t = tracelens.load(path)
    assert "clipped 1 same-stream overlaps (largest 300 ns): an in-order stream cannot run " \
           "two activities at once" in t.meta.warnings
    assert not any(w.startswith("nesting") for w in t.meta.warnings)
    assert not t.meta.clips["nested"].any()


def test_nesting_notices_of_several_files_add_up() -> None:
    from tracelens.core.notices import nested, nested_total

    many = [f"while.{i}" for i in range(6)]
    assert nested_total([nested(24, ["while.15"]), nested(6, many[:2] + ["while.15"])]) == (
        30, ["while.0", "while.1", "while.15"])
    assert nested_total([]) == (0, [])
    assert "(while.0, while.1, while.2, while.3, ... 2 more;" in nested(6, many).text


def _cpu_host(path: Path, host: str) -> Path:
    ops = [(1, 0, "while.3", 1000, 5000), (1, 0, "fusion.1", 1200, 1000)]
    path.write_bytes(build_xspace([], host=host, cpu_ops=ops))
    return path


def test_hosts_summarized_apart_count_their_nesting_together(tmp_path: Path) -> None:
    from tracelens.analyze.summary.build import SummaryOptions, reduce_summary, summary_partial
    from tracelens.analyze.summary.merge import merge_partials

    files = [_cpu_host(tmp_path / f"h{i}.xplane.pb", f"h{i}") for i in range(2)]
    whole = tracelens.load(files).meta.warnings
    assert any(w.startswith("nesting on 2 ops") for w in whole)
    opts = SummaryOptions()
    merged = reduce_summary([merge_partials(
        [summary_partial(tracelens.load([f]), opts) for f in files])], opts)
    assert any(w.startswith("nesting on 2 ops") for w in merged.notes)  # a fact it corrects
