"""Roofline per op group and MFU per device and step on hand-made frames, the ``summarize``
contract of the new keys, the renderers, and the ``gpus``/``--gpu`` command line."""

from __future__ import annotations

import csv
from dataclasses import replace
import io
import json
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

import tracelens
from tests.conftest import GPU_TRACES, SAMPLES, real_trace
from tracelens.analyze.compute.roofline import device_specs, mfu, roofline, spec_frame
from tracelens.cli.commands import main
from tracelens.core.model import (DEVICE_SCHEMA, EVENT_SCHEMA, HOST_EVENT_SCHEMA, MODULE_SCHEMA,
                             STEP_SCHEMA, Trace, conform)

SAMPLE = SAMPLES / "mi300x_8gpu_llama_step.xplane.pb"


def make_trace() -> Trace:
    """One MI300X; steps [0,1000) and [1000,2000); a GEMM [500,1500) at exactly the bf16
    peak (half of it in each step); a memory-bound fusion; a kernel without cost; an
    all-reduce (left out of the roofline)."""
    peak_flops_per_ns = 1307.4e3  # 1307.4 TFLOP/s
    rows = [
        dict(name="Cijk_gemm", op="custom-call.1", program_id=1, module="jit_f",
             category="gemm", start_ns=500, end_ns=1500, flops=peak_flops_per_ns * 1000,
             bytes=1e6, dtype="bf16", cost_source="hlo"),
        dict(name="loop_fusion.kd", op="loop_fusion", program_id=1, module="jit_f",
             category="elementwise", start_ns=0, end_ns=100, flops=1e3, bytes=265_000.0,
             dtype="bf16", cost_source="hlo"),
        dict(name="__amd_rocclr_copyBuffer.kd", category="memory", start_ns=1600,
             end_ns=1700),
        dict(name="ncclDevKernel_Generic_1", op="all-reduce.1", program_id=1,
             category="collective", start_ns=1700, end_ns=1990, msg_bytes=1 << 20,
             group_size=8, cost_source="hlo"),
    ]
    base = {"host": "h0", "rank": 0, "device": 0, "stream": 1, "kind": "kernel",
            "rule": "test"}
    events = conform(pl.DataFrame([{**base, **r} for r in rows], infer_schema_length=None),
                     EVENT_SCHEMA)
    devices = conform(pl.DataFrame([{"host": "h0", "rank": 0, "device": 0, "vendor": "amd",
                                     "arch": "gfx942", "product": "AMD Instinct MI300X",
                                     "compute_units": 304, "clock_mhz": 2100.0,
                                     "memory_bytes": 206_141_652_992, "spec_id": "mi300x"}]),
                      DEVICE_SCHEMA)
    steps = conform(pl.DataFrame({"rank": [0, 0], "step": [0, 1], "start_ns": [0, 1000],
                                  "end_ns": [1000, 2000], "source": ["test"] * 2}), STEP_SCHEMA)
    return Trace(events=events, host_events=pl.DataFrame(schema=HOST_EVENT_SCHEMA),
                 steps=steps, devices=devices, modules=pl.DataFrame(schema=MODULE_SCHEMA))


def test_roofline_groups_bounds_and_efficiency() -> None:
    t = make_trace()
    specs = spec_frame(device_specs(t.devices))
    rows = {r["op"]: r for r in roofline(t.events, specs).iter_rows(named=True)}
    assert set(rows) == {"custom-call.1", "loop_fusion", "__amd_rocclr_copyBuffer.kd"}
    g = rows["custom-call.1"]
    assert g["tflops_per_s"] == pytest.approx(1307.4) and g["intensity"] == pytest.approx(
        1307.4)
    assert g["bound"] == "compute" and g["efficiency"] == pytest.approx(1.0)
    assert g["attainable_tflops_per_s"] == 1307.4 and g["kernel"] == "Cijk_gemm"
    f = rows["loop_fusion"]
    assert f["tb_per_s"] == pytest.approx(2.65) and f["bound"] == "memory"
    assert f["efficiency"] == pytest.approx(0.5)  # 2.65 of 5.3 TB/s
    assert f["attainable_tflops_per_s"] == pytest.approx(1e3 / 265_000 * 5.3)
    c = rows["__amd_rocclr_copyBuffer.kd"]
    assert c["flops"] is None and c["bound"] is None and c["efficiency"] is None
    assert c["no_cost_count"] == 1 and c["program_id"] is None


def test_mfu_per_device_and_per_step_splits_a_crossing_kernel() -> None:
    t = make_trace()
    specs = spec_frame(device_specs(t.devices))
    dev = mfu(t.events, specs).row(0, named=True)
    assert dev["window_ns"] == 1990 and dev["mfu_dtype"] == "bf16"
    assert dev["mfu"] == pytest.approx(1000 / 1990)  # the GEMM ran at peak for 1000 ns
    per_step = mfu(t.events, specs, t.steps).sort("step")
    assert per_step["mfu"].to_list() == pytest.approx([0.5, 0.5])
    assert per_step["model_flops"].to_list() == pytest.approx([1307.4e3 * 500] * 2)


def test_summarize_contract_and_renderers() -> None:
    t = make_trace()
    s = tracelens.summarize(t)
    row = s["roofline"][0]
    assert {"op", "category", "count", "sum_ns", "flops", "bytes", "intensity", "tflops_per_s",
            "tb_per_s", "bound", "efficiency"} <= set(row)
    assert row["op"] == "custom-call.1" and row["category"] == "gemm"
    d = s["devices"][0]
    assert {"name", "peak_tflops", "hbm_tb_per_s"} <= set(d["spec"])
    assert d["spec"]["peak_tflops"]["bf16"] == 1307.4 and d["spec"]["hbm_tb_per_s"] == 5.3
    assert [st["mfu"] for st in d["steps"]] == pytest.approx([0.5, 0.5])
    # with steps, the device's (and the headline's) MFU is its median step's
    assert d["mfu"] == s["headline"]["mfu"] == pytest.approx(0.5)
    assert s["headline"]["mfu_basis"] == "median step"
    # without, over the span: first start → last end
    bare = replace(t, steps=t.steps.head(0))
    spanned = tracelens.summarize(bare)
    assert spanned["devices"][0]["mfu"] == pytest.approx(1000 / 1990, rel=1e-5)
    assert spanned["headline"]["mfu_basis"] == "span"
    assert s["no_cost_data"] == 1 and s["no_cost_data_ns"] == 100
    one = tracelens.summarize(t, step=1)
    assert one["devices"][0]["mfu"] == pytest.approx(0.5)
    assert one["roofline"][0]["flops"] == pytest.approx(1307.4e3 * 500)  # half inside step 1
    json.dumps(s)  # JSON-ready
    from reports import summary as render
    from tracelens.analyze.summary.build import summarize
    typed = summarize(t)
    md = render.render_markdown(typed, all_rows=True)
    assert "## Roofline" in md and "| MFU |" in md and "| 100.0% |" in md
    rows = list(csv.DictReader(io.StringIO(render.render_csv(typed))))
    assert float(rows[0]["mfu"]) == pytest.approx(d["mfu"])
    assert [float(r["mfu"]) for r in rows[1:]] == pytest.approx([0.5, 0.5])


def test_gpu_override_changes_the_ceilings() -> None:
    t = make_trace()
    s = tracelens.summarize(t, gpu="h100")
    assert s["devices"][0]["spec"]["name"] == "NVIDIA H100 SXM"
    assert s["roofline"][0]["efficiency"] == pytest.approx(1307.4 / 989.4)


def test_gemm_trace_roofline_matches_true_rates() -> None:
    s = tracelens.summarize(tracelens.load(real_trace(GPU_TRACES["gemm08"])))
    top = s["roofline"][0]
    # oracle README §5: program 49, 549.756 GFLOP per call, 611.001 µs average: 899.8 TFLOP/s
    assert (top["op"], top["program_id"], top["count"]) == ("custom-call.1", 49, 3)
    assert top["tflops_per_s"] == pytest.approx(899.8, abs=0.1) and top["bound"] == "compute"
    assert s["devices"][0]["mfu"] is not None and 0 < s["devices"][0]["mfu"] < 1


def invoke(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(main, list(args))
    return r.exit_code, r.stdout, r.stderr


def test_gpus_command_lists_the_table() -> None:
    code, out, _ = invoke("gpus", "--format", "json")
    assert code == 0
    table = {g["id"]: g for g in json.loads(out)}
    assert {"mi300x", "mi325x", "mi350x", "mi355x", "h100", "h200", "b200"} <= set(table)
    assert table["mi300x"]["peak_tflops"]["bf16"] == 1307.4 and table["mi300x"]["sources"]
    code, out, _ = invoke("gpus")
    assert code == 0 and "mi355x" in out and "10066.3" in out
    code, out, _ = invoke("gpus", "--format", "csv")
    assert out.splitlines()[0].startswith("id,name,arch,CUs,MHz,fp64")


def test_summarize_gpu_flags(tmp_path: Path) -> None:
    code, out, _ = invoke("summarize", "--gpu", "b200", "--format", "json", str(SAMPLE))
    assert code == 0 and {d["spec"]["name"] for d in json.loads(out)["devices"]} == {
        "NVIDIA B200"}
    code, _, err = invoke("summarize", "--gpu", "nope", str(SAMPLE))
    assert code == 2 and "unknown GPU" in err
    bad = tmp_path / "bad.toml"
    bad.write_text("[x]\nbogus = 1\n")
    code, _, err = invoke("summarize", "--gpu-specs", str(bad), str(SAMPLE))
    assert code == 2 and err.startswith(f"error: {bad}: bad GPU specs file") and \
        "Traceback" not in err
    good = tmp_path / "mine.toml"
    good.write_text('[mine]\nbase = "mi300x"\nhbm_tb_per_s = 4.0\n')
    code, out, _ = invoke("summarize", "--gpu-specs", str(good), "--format", "json",
                          str(SAMPLE))
    assert code == 0 and json.loads(out)["devices"][0]["spec"]["hbm_tb_per_s"] == 4.0


def test_headline_mfu_is_the_median_device_mfu() -> None:
    import tracelens
    from tests.conftest import SAMPLES

    s = tracelens.summarize(tracelens.load(SAMPLES / "mi355x_8gpu_llama_fsdp.xplane.pb"))
    mfus = sorted(d["mfu"] for d in s["devices"])
    assert s["headline"]["mfu"] == mfus[(len(mfus) - 1) // 2] and 0 < s["headline"]["mfu"] < 1


def test_roofline_category_tie_goes_to_the_higher_priority_category() -> None:
    """An op group whose kernels are split evenly between categories gets the first of them
    in CATEGORIES order, whatever the row order (polars' ``mode`` returns ties in hash order,
    which changed ``summarize`` output from run to run on a real Kineto trace)."""
    import itertools

    from tracelens.core.model import CATEGORIES

    perms = list(itertools.permutations(CATEGORIES[:6]))[::37]  # 20 row orders
    rows = [dict(host="h0", rank=0, device=0, stream=1, kind="kernel", rule="test",
                 name=f"k{j}", op=f"op{i}", category=c, start_ns=10 * j, end_ns=10 * j + 5)
            for i, p in enumerate(perms) for j, c in enumerate(p)]
    events = conform(pl.DataFrame(rows), EVENT_SCHEMA)
    t = make_trace()
    specs = spec_frame(device_specs(t.devices))
    got = roofline(events, specs)
    assert got.height == len(perms)
    assert got["category"].to_list() == ["gemm"] * len(perms)


def test_category_efficiency_and_grouped_rows_are_time_weighted() -> None:
    """Planted: two GEMM ops of one program, 1000 ns at the bf16 peak and 3000 ns at half of
    it: GEMMs run at (1000 + 1500) / 4000 = 62.5% of their attainable rate, time-weighted
    (the findings' "run at 62%"; an unweighted mean would say 75%), and the two ops, which
    differ only in an instruction number, are one roofline row of 4000 ns (``--all``)."""
    from tracelens.analyze.summary.brief import category_efficiency, roofline_groups

    t = make_trace()
    peak = 1307.4e3
    half = t.events.filter(pl.col("op") == "custom-call.1").with_columns(
        op=pl.lit("custom-call.2"), start_ns=pl.lit(2000, pl.Int64),
        end_ns=pl.lit(5000, pl.Int64), flops=pl.lit(peak * 3000 / 2))
    events = conform(pl.concat([t.events.with_columns(pl.col(pl.Categorical).cast(pl.String)),
                                half.with_columns(pl.col(pl.Categorical).cast(pl.String))]),
                     EVENT_SCHEMA)
    frame = roofline(events, spec_frame(device_specs(t.devices)))
    eff, groups = category_efficiency(frame)["gemm"]
    assert eff == pytest.approx(0.625) and groups == 2
    (row,) = [r for r in roofline_groups(frame, 10) if r.category == "gemm"]
    assert (row.op, row.ops, row.count, row.sum_ns) == ("custom-call.* (2 ops)", 2, 2, 4000)
    assert row.efficiency == pytest.approx(0.625)
    assert row.tflops_per_s == pytest.approx(1307.4 * 2500 / 4000)
