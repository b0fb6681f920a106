"""A hand-built XSpace whose every timeline number is known by construction
(docs/definitions.md#timeline)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import tracelens
from tracelens_dev.writers.xspace import Activity, build_xspace
from tracelens.core.model import validate
from tests.synth_helpers import timeline_numbers

GEMM = "Cijk_Ailk_Bljk_BBS_BH_MT256x224x64_MI16x16x16x1_SN_1LDSB0.kd"
FMHA = "void ck_tile::kentry<ck_tile::gfx942_t, 2, ck_tile::FmhaFwdKernel<X>>"
RCCL = "ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)"


def handbuilt_activities() -> list[Activity]:
    """Device 0 (times in ns):
    step 0 = [0, 1000), step 1 = [1000, 2000) (host markers on rank 0)
      s1  GEMM [100, 400)  FMHA fwd [400, 500)  loop_add_fusion [900, 1100)  copyBuffer [1500, 1600)
      s2  RCCL all-reduce [350, 650)          -> hidden 150, exposed [500, 650) = 150
      s3  MemcpyH2D [600, 800)                -> exposed [650, 800) = 150
    Device 1:
      s1  GEMM [0, 50) then loop_add_fusion [40, 100): same-stream overlap, GEMM clipped to 40
    """
    return [
        Activity(0, 1, GEMM, 100, 300, {"hlo_op": "custom-call.1", "hlo_module": "jit_step",
                                        "program_id": 7, "correlation_id": 1}),
        Activity(0, 1, FMHA, 400, 100, {"hlo_op": "custom-call.2", "correlation_id": 2}),
        Activity(0, 1, "loop_add_fusion.kd", 900, 200, {"hlo_op": "loop_add_fusion"}),
        Activity(0, 1, "__amd_rocclr_copyBuffer.kd", 1500, 100, {}),
        Activity(0, 2, RCCL, 350, 300, {"hlo_op": "all-reduce-start.1"}),
        Activity(0, 3, "MemcpyH2D", 600, 200, {"memcpy_details": "kind:Unknown size:4096"},
                 line_name="Stream #3(MemcpyH2D)"),
        Activity(1, 1, GEMM, 0, 50, {"hlo_op": "custom-call.1"}),
        Activity(1, 1, "loop_add_fusion.kd", 40, 60, {"hlo_op": "loop_add_fusion"}),
    ]


@pytest.fixture()
def handbuilt(tmp_path: Path) -> Path:
    path = tmp_path / "hand.xplane.pb"
    path.write_bytes(build_xspace(handbuilt_activities(), host="node7",
                                 steps=[(0, 0, 1000), (1, 1000, 2000)]))
    return path


def _timeline(summary: dict, device: int, step: int | None = None) -> dict:
    dev = next(d for d in summary["devices"] if d["device"] == device)
    if step is None:
        return timeline_numbers(dev["timeline"])
    return timeline_numbers(next(s for s in dev["steps"] if s["step"] == step)["timeline"])


def test_parser_output_is_valid_and_classified(handbuilt: Path) -> None:
    trace = tracelens.load(handbuilt)
    assert validate(trace) == []
    ev = trace.events.sort("device", "start_ns")
    cats = dict(zip(ev["name"], ev["category"]))
    assert cats[GEMM] == "gemm" and cats[FMHA] == "attention"
    assert cats[RCCL] == "collective" and cats["MemcpyH2D"] == "memory"
    assert cats["__amd_rocclr_copyBuffer.kd"] == "memory"
    row = ev.filter(pl.col("name") == RCCL).row(0, named=True)
    assert row["subcategory"] == "all-reduce"
    memcpy = ev.filter(pl.col("name") == "MemcpyH2D").row(0, named=True)
    assert (memcpy["kind"], memcpy["subcategory"], memcpy["bytes"]) == ("memcpy", "h2d", 4096.0)
    gemm = ev.filter((pl.col("name") == GEMM) & (pl.col("device") == 0)).row(0, named=True)
    assert (gemm["op"], gemm["module"], gemm["program_id"], gemm["correlation_id"]) == (
        "custom-call.1", "jit_step", 7, 1)
    assert trace.devices.height == 2 and set(trace.devices["product"]) == {"AMD Instinct MI300X"}
    assert trace.steps.sort("step")["start_ns"].to_list() == [0, 1000]
    assert ev.filter(pl.col("device") == 0)["step"].to_list() == [0, 0, 0, 0, 0, 1]


def test_same_stream_overlap_is_clipped_and_warned(handbuilt: Path) -> None:
    trace = tracelens.load(handbuilt)
    gemm1 = trace.events.filter((pl.col("device") == 1) & (pl.col("name") == GEMM))
    assert gemm1["end_ns"].to_list() == [40]
    assert any("clipped 1 same-stream overlaps (largest 10 ns)" in w
               for w in trace.meta.warnings)


def test_whole_trace_timeline_exact(handbuilt: Path) -> None:
    s = tracelens.summarize(tracelens.load(handbuilt))
    assert _timeline(s, 0) == {
        "span_ns": 1500, "busy_ns": 1000, "compute_ns": 600, "comm_ns": 300,
        "exposed_comm_ns": 150, "overlapped_comm_ns": 150, "memory_ns": 300,
        "exposed_memory_ns": 250, "idle_ns": 500}
    assert _timeline(s, 1) == {
        "span_ns": 100, "busy_ns": 100, "compute_ns": 100, "comm_ns": 0, "exposed_comm_ns": 0,
        "overlapped_comm_ns": 0, "memory_ns": 0, "exposed_memory_ns": 0, "idle_ns": 0}
    dev0 = next(d for d in s["devices"] if d["device"] == 0)
    excl = {c["category"]: c["exclusive_ns"] for c in dev0["categories"]}
    assert excl == {"gemm": 300, "attention": 100, "elementwise": 200, "collective": 150,
                    "memory": 250}
    sums = {c["category"]: (c["count"], c["sum_ns"]) for c in dev0["categories"]}
    assert sums["memory"] == (2, 300) and sums["collective"] == (1, 300)


def test_per_step_timeline_exact(handbuilt: Path) -> None:
    s = tracelens.summarize(tracelens.load(handbuilt))
    assert _timeline(s, 0, 0) == {
        "span_ns": 1000, "busy_ns": 800, "compute_ns": 500, "comm_ns": 300,
        "exposed_comm_ns": 150, "overlapped_comm_ns": 150, "memory_ns": 200,
        "exposed_memory_ns": 150, "idle_ns": 200}
    assert _timeline(s, 0, 1) == {
        "span_ns": 1000, "busy_ns": 200, "compute_ns": 100, "comm_ns": 0,
        "exposed_comm_ns": 0, "overlapped_comm_ns": 0, "memory_ns": 100,
        "exposed_memory_ns": 100, "idle_ns": 800}
    # Device 1 is idle for the whole of step 1, which still counts as a full window.
    assert _timeline(s, 1, 1)["idle_ns"] == 1000
    assert _timeline(s, 1, 0)["busy_ns"] == 100


def test_step_filter_restricts_every_number(handbuilt: Path) -> None:
    s = tracelens.summarize(tracelens.load(handbuilt), step=1)
    assert _timeline(s, 0)["span_ns"] == 1000 and _timeline(s, 0)["compute_ns"] == 100
    names = {k["name"] for k in s["top_kernels"]}
    assert names == {"loop_add_fusion.kd", "__amd_rocclr_copyBuffer.kd"}
    top = {k["name"]: k["sum_ns"] for k in s["top_kernels"]}
    assert top["loop_add_fusion.kd"] == 100  # only the part inside step 1


def test_device_filter(handbuilt: Path) -> None:
    s = tracelens.summarize(tracelens.load(handbuilt), device=1)
    assert [d["device"] for d in s["devices"]] == [1]
    assert {k["name"] for k in s["top_kernels"]} == {GEMM, "loop_add_fusion.kd"}


def test_xla_cpu_ops_become_cpu_devices(tmp_path: Path) -> None:
    """XLA:CPU: ops on host threads with device_ordinal; thread ids small and huge alike."""
    big = 2**62 + 3
    ops = [(7, 0, "dot.3", 100, 50), (7, 0, "all-reduce.3", 150, 100),
           (big, 1, "dot.3", 100, 80), (big, 1, "all-reduce.3", 180, 70),
           (big, 0, "wrapped_tanh", 160, 20)]
    p = tmp_path / "cpu.xplane.pb"
    p.write_bytes(build_xspace([], device_stats={}, cpu_ops=ops, steps=[(0, 0, 300)]))
    trace = tracelens.load(p)
    assert validate(trace) == []
    assert trace.devices["vendor"].to_list() == ["cpu", "cpu"]
    assert sorted(trace.events["stream"].unique().to_list()) == [7, big]
    s = tracelens.summarize(trace)
    t0 = _timeline(s, 0)
    # device 0: dot [100,150) + tanh [160,180) on another thread; all-reduce [150,250)
    assert (t0["compute_ns"], t0["exposed_comm_ns"], t0["span_ns"]) == (70, 80, 150)
    assert any("XLA:CPU ops" in w for w in trace.meta.warnings)


def test_conform_of_an_empty_frame_has_no_rows() -> None:
    from tracelens.core.model import DEVICE_SCHEMA, conform

    assert conform(pl.DataFrame(), DEVICE_SCHEMA).height == 0


def test_trace_without_any_device_plane(tmp_path: Path) -> None:
    """No GPU plane and no XLA:CPU ops: a valid trace with no device at all."""
    p = tmp_path / "nodev.xplane.pb"
    p.write_bytes(build_xspace([], device_stats={}, steps=[(0, 0, 100)]))
    trace = tracelens.load(p)
    assert trace.devices.height == 0 and trace.events.height == 0
    s = tracelens.summarize(trace)
    assert s["devices"] == [] and s["idle_devices"] == []
