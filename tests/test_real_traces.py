"""Real MI300X and CPU traces from ../shared/traces, checked against XProf's own converter."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

import tracelens
from tests.conftest import CPU_TRACE, GPU_TRACES, kernel_stats_by_name, oracle, real_trace
from tracelens.core.model import validate


def xprof_kernel_stats(trace: Path, tmp_path: Path) -> dict[str, tuple[int, float]]:
    """XProf 'kernel_stats' per kernel name: (occurrences, total µs), summed over its rows.

    The converter writes cache files next to its input, so it runs on a copy.
    """
    from xprof.convert import raw_to_tool_data

    copy = tmp_path / trace.name
    shutil.copy(trace, copy)
    data, _ = raw_to_tool_data.xspace_to_tool_data([str(copy)], "kernel_stats", {})
    return kernel_stats_by_name(json.loads(data))


@pytest.mark.parametrize("key", sorted(GPU_TRACES))
def test_kernel_counts_and_time_match_xprof_kernel_stats(key: str, tmp_path: Path) -> None:
    path = real_trace(GPU_TRACES[key])
    trace = tracelens.load(path)
    ours = {r["name"]: (r["count"], r["sum_ns"] / 1000.0) for r in trace.events.group_by(
        "name").agg(count=pl.len(), sum_ns=(pl.col("end_ns") - pl.col("start_ns")).sum())
        .iter_rows(named=True)}
    theirs = xprof_kernel_stats(path, tmp_path)
    # XProf leaves no kernel out on these traces: same names, same counts.
    assert set(ours) == set(theirs)
    for name, (count, us) in theirs.items():
        assert ours[name][0] == count, name
        assert ours[name][1] == pytest.approx(us, rel=1e-3), name


@pytest.mark.parametrize("key", sorted(GPU_TRACES))
def test_timeline_matches_tracelens_gpu_timeline_where_definitions_agree(key: str) -> None:
    """busy and span equal TraceLens's gpu_timeline to the ns (docs/definitions.md#timeline keeps
    them
    compatible); TraceLens counts __amd_rocclr_copyBuffer as computation (oracle defect 8), we
    count it as memory, so our compute is smaller by the copies' exclusive time."""
    path = real_trace(GPU_TRACES[key])
    rows = pl.read_csv(oracle(key, "tracelens_gpu_timeline.csv"))
    s = tracelens.summarize(tracelens.load(path))
    for d in s["devices"]:
        pid = d["device"] + 1
        tl = {r["type"]: r["time ms"] for r in rows.filter(pl.col("gpu_pid") == pid)
              .iter_rows(named=True)}
        t = d["timeline"]
        assert t["busy_ns"] == pytest.approx(tl["busy_time"] * 1e6, abs=1)
        assert t["span_ns"] == pytest.approx(tl["total_time"] * 1e6, abs=1)
        mem_excl = next((c["exclusive_ns"] for c in d["categories"]
                         if c["category"] == "memory"), 0)
        assert t["compute_ns"] + mem_excl == pytest.approx(tl["computation_time"] * 1e6, abs=1)


def test_conv_trace_has_eight_devices() -> None:
    trace = tracelens.load(real_trace(GPU_TRACES["conv08"]))
    assert validate(trace) == []
    s = tracelens.summarize(trace)
    assert [d["device"] for d in s["devices"]] == list(range(8))
    assert {d["product"] for d in s["devices"]} == {"AMD Instinct MI300X"}
    assert {d["arch"] for d in s["devices"]} == {"gfx942"}
    assert s["headline"]["active_devices"] == 8


def test_gemm_trace_reports_idle_planes() -> None:
    s = tracelens.summarize(tracelens.load(real_trace(GPU_TRACES["gemm08"])))
    assert s["headline"]["devices"] == 8 and s["headline"]["active_devices"] == 1
    assert len(s["idle_devices"]) == 7


@pytest.mark.parametrize("key", sorted(GPU_TRACES))
def test_categories_on_real_traces(key: str) -> None:
    trace = tracelens.load(real_trace(GPU_TRACES[key]))
    cats = dict(zip(trace.events["name"], trace.events["category"]))
    for name, cat in cats.items():
        if name.startswith("__amd_rocclr_copyBuffer"):
            assert cat == "memory"
        if name.startswith("Cijk_") and key != "conv08":
            assert cat == "gemm", name
        if name.startswith("gemm_fusion_dot"):
            assert cat == "gemm", name
    s = tracelens.summarize(trace)
    for d in s["devices"]:
        other = sum(c["exclusive_ns"] for c in d["categories"] if c["category"] == "other")
        assert other < 0.10 * d["timeline"]["busy_ns"], (key, d["device"], other)


def test_conv_kernels_count_as_convolution() -> None:
    """The Tensile GEMM and Im3d2Col kernels that implement cudnn-conv.1 are convolution."""
    ev = tracelens.load(real_trace(GPU_TRACES["conv08"])).events
    conv = ev.filter(pl.col("op").cast(pl.String).str.starts_with("cudnn-conv"))
    assert conv.height == 79 and set(conv["category"]) == {"convolution"}


def test_cpu_trace_devices_steps_and_ops() -> None:
    trace = tracelens.load(real_trace(CPU_TRACE))
    assert validate(trace) == []
    assert trace.devices["vendor"].to_list() == ["cpu"] * 4
    assert trace.steps.sort("step")["step"].to_list() == [0, 1, 2]
    # XProf's overview_page step times are exactly the StepTraceAnnotation durations.
    overview = json.loads(oracle("cpu_dp4", "xprof_overview_page.json").read_text())
    table = overview[1]
    cols = [c["id"] for c in table["cols"]]
    xprof_ms = [dict(zip(cols, (c["v"] for c in r["c"])))["stepTimeMs"] for r in table["rows"]]
    ours_ms = (trace.steps.sort("step").select((pl.col("end_ns") - pl.col("start_ns")) / 1e6)
               .to_series().to_list())
    assert ours_ms == pytest.approx([float(x) for x in xprof_ms], abs=1e-6)
    ev = trace.events
    assert ev.height == 156 and ev.group_by("device").len()["len"].to_list() == [39] * 4
    ar = ev.filter(pl.col("op") == "all-reduce.3")
    assert ar.height == 12 and set(ar["category"]) == {"collective"}
    assert set(ar["subcategory"]) == {"all-reduce"}
    assert ev.filter(pl.col("step").is_null()).height == 0
    # ynn_fusion.1/.2/.3 hide dots (HLO says so): gemm by structure; the loss fusion (its body
    # reduces to the f32[] loss) is a reduction by structure, no longer other
    ynn = ev.filter(pl.col("name").cast(pl.String).str.starts_with("ynn_fusion"))
    assert ynn.filter(pl.col("category") == "gemm")["rule"].unique().to_list() == [
        "gemm.hlo_structure"]
    loss = ynn.filter(pl.col("name") == "ynn_fusion")
    assert loss.height and set(loss["rule"]) == {"reduction.hlo_structure"}
    assert ynn.filter(pl.col("category") == "other").height == 0


def test_hlo_modules_are_kept_by_program_id() -> None:
    """Module names repeat (jit_dot five times in gemm08): program_id is the key."""
    trace = tracelens.load(real_trace(GPU_TRACES["gemm08"]))
    mods = trace.modules
    assert mods.height == 16
    assert mods.filter(pl.col("module") == "jit_dot")["program_id"].to_list() == [5, 21, 34,
                                                                                 49, 64, 79]
    assert mods["hlo_proto"].bin.size().min() > 0
    used = set(trace.events["program_id"].drop_nulls())
    assert used <= set(mods["program_id"])
