"""Attention and grouped-GEMM FLOPs from the HLO (issue 12 item 1) on a constructed XSpace:
Transformer Engine ``te_fused_attn_{forward,backward}_ffi`` custom calls whose ``backend_config``
is the MLIR attribute dictionary TE writes, launching CK ``FmhaFwd``/``FmhaBwd*`` kernels on an
MI355X. Every expected number is computed here by hand from the attributes."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import tracelens
from tracelens_dev.writers.xspace import write
from tests.hlo_build import ModuleBuilder
from tracelens.core.model import (DEVICE_SCHEMA, EVENT_SCHEMA, HOST_EVENT_SCHEMA, MODULE_SCHEMA,
                             STEP_SCHEMA, Trace, conform)

B, N, KV, S, D = 2, 16, 4, 2048, 128  # batch, query heads, kv heads (GQA), seq, head dim
PROGRAM = 5
FWD = ("ck_tile::kentry<ck_tile::gfx950_t, 2, "
       "ck_tile::FmhaFwdKernel<ck_tile::BlockFmhaPipelineQRKSVSAsync<bf16>>>")
BWD_DOT = "ck_tile::kentry<256, 1, ck_tile::FmhaBwdOGradDotOKernel<bf16>>"
BWD_MAIN = "ck_tile::kentry<256, 1, ck_tile::FmhaBwdDQDKDVKernel<bf16>>"
BWD_CONVERT = "ck_tile::kentry<256, 1, ck_tile::FmhaBwdConvertQGradKernel<bf16>>"
GEMM = "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x256x64_MI16x16x1"
PEAK_BF16 = 2516.6  # MI355X dense bf16 TFLOP/s (docs/cost-model.md §7)


def te_attrs(mask: int, v_dim: int | None = None, segments: int = 1, window: int = -1) -> str:
    """The attribute dictionary as TE's FFI lowering prints it (typed ints, f32 floats)."""
    v = f"v_head_dim = {v_dim} : i64, " if v_dim is not None else ""
    return ("{attn_heads = %d : i64, bias_heads = 0 : i64, bias_type = 0 : i64, "
            "deterministic = false, dropout_probability = 0.000000e+00 : f32, "
            "input_batch = %d : i64, is_training = true, kv_max_seqlen = %d : i64, "
            "mask_type = %d : i64, max_segments_per_seq = %d : i64, num_gqa_groups = %d : i64, "
            "q_max_seqlen = %d : i64, qk_head_dim = %d : i64, qkv_layout = 9 : i64, "
            "scaling_factor = 8.838835e-02 : f32, %swindow_size_left = %d : i64, "
            "window_size_right = %d : i64, wkspace_size = 0 : i64}"
            % (N, B, S, mask, segments, KV, S, D, v, window, 0 if mask == 2 else -1))


def attention_module(packed_ok: bool = True) -> bytes:
    """Forward causal, backward causal, forward non-causal with v_head_dim 64, a forward over
    packed sequences (not costable), and a plain dot GEMM."""
    b = ModuleBuilder("jit_train_step", PROGRAM)
    main = b.computation("main.9")
    q, kv, kv64 = f"bf16[{B},{S},{N},{D}]", f"bf16[{B},{S},{KV},{D}]", f"bf16[{B},{S},{KV},64]"
    stats, rng = f"f32[{B},{N},{S},1]", "u64[2]"
    b.inst(main, "q", "parameter", q)
    b.inst(main, "k", "parameter", kv, parameter_number=1)
    b.inst(main, "v", "parameter", kv, parameter_number=2)
    b.inst(main, "v64", "parameter", kv64, parameter_number=3)
    b.inst(main, "w", "parameter", "bf16[4096,4096]", parameter_number=4)
    b.inst(main, "x", "parameter", "bf16[8192,4096]", parameter_number=5)

    def te(name: str, target: str, operands: tuple, result: tuple, attrs: str) -> None:
        i = b.inst(main, name, "custom-call", result, operands, custom_call_target=target,
                   custom_call_api_version=4)
        i.backend_config = attrs.encode()

    te("custom-call.3", "te_fused_attn_forward_ffi", ("q", "k", "v"), (q, stats, rng),
       te_attrs(mask=2))
    te("custom-call.7", "te_fused_attn_backward_ffi", ("q", "k", "v", "q", "q"),
       (q, kv, kv), te_attrs(mask=2))
    te("custom-call.11", "te_fused_attn_forward_ffi", ("q", "k", "v64"),
       (f"bf16[{B},{S},{N},64]", stats, rng), te_attrs(mask=0, v_dim=64))
    te("custom-call.15", "te_fused_attn_forward_ffi", ("q", "k", "v"), (q, stats, rng),
       te_attrs(mask=2, segments=4))
    b.inst(main, "dot.1", "dot", "bf16[8192,4096]", ("x", "w"), root=True,
           dot_dimension_numbers=lambda d: (d.lhs_contracting_dimensions.append(1),
                                            d.rhs_contracting_dimensions.append(0)))
    b.entry(main)
    return b.bytes()


# Per execution, by hand: Q·Kᵀ + P·V = 2·B·N·Sq·Skv·(Dqk + Dv); backward ×2.5; causal ×½.
FWD_CAUSAL = 2 * B * N * S * S * (D + D) / 2
BWD_CAUSAL = FWD_CAUSAL * 2.5
FWD_V64 = 2 * B * N * S * S * (D + 64)
GEMM_FLOPS = 2 * 8192 * 4096 * 4096


def make_trace(packed_ns: int = 1_000, executions: int = 2) -> Trace:
    """An MI355X running the program ``executions`` times: per execution the forward (one CK
    kernel), the backward (dot-do-o, the dQdKdV main kernel, convert-dq), the v64 forward, the
    packed forward (``packed_ns`` long) and the GEMM, back to back on one stream."""
    per_exec = [("custom-call.3", FWD, 400_000), ("custom-call.7", BWD_DOT, 20_000),
                ("custom-call.7", BWD_MAIN, 900_000), ("custom-call.7", BWD_CONVERT, 30_000),
                ("custom-call.11", FWD, 300_000), ("custom-call.15", FWD, packed_ns),
                ("dot.1", GEMM, 500_000)]
    rows, t = [], 1_000
    for _ in range(executions):
        for op, name, dur in per_exec:
            rows.append(dict(host="node0", rank=0, device=0, stream=1, kind="kernel",
                             name=name, op=op, module="jit_train_step", program_id=PROGRAM,
                             start_ns=t, end_ns=t + dur))
            t += dur + 1_000
    events = conform(pl.DataFrame(rows), EVENT_SCHEMA)
    devices = conform(pl.DataFrame([dict(host="node0", rank=0, device=0, vendor="amd",
                                         arch="gfx950", compute_units=256, clock_mhz=2400.0,
                                         memory_bytes=288 << 30)]), DEVICE_SCHEMA)
    modules = conform(pl.DataFrame([dict(host="node0", rank=0, program_id=PROGRAM,
                                         module="jit_train_step",
                                         hlo_proto=attention_module())],
                                   schema_overrides={"hlo_proto": pl.Binary}), MODULE_SCHEMA)
    return Trace(events=events, host_events=pl.DataFrame(schema=HOST_EVENT_SCHEMA),
                 steps=pl.DataFrame(schema=STEP_SCHEMA), devices=devices, modules=modules)


def load(tmp_path: Path, **kw: int) -> Trace:
    path = tmp_path / "te.xplane.pb"
    write(make_trace(**kw), path)
    return tracelens.load(path)


def test_te_attention_flops_per_execution_on_its_main_kernel(tmp_path: Path) -> None:
    ev = load(tmp_path).events
    assert set(ev.filter(pl.col("op").cat.starts_with("custom-call"))["category"]) == {
        "attention"}

    def flops(op: str, name: str) -> list[float | None]:
        return ev.filter((pl.col("op") == op) & (pl.col("name") == name))["flops"].to_list()

    assert flops("custom-call.3", FWD) == [FWD_CAUSAL] * 2  # forward, causal, GQA 16/4
    assert flops("custom-call.7", BWD_MAIN) == [BWD_CAUSAL] * 2  # backward: ×2.5
    assert flops("custom-call.7", BWD_DOT) == [0.0] * 2  # helpers: covered, no double count
    assert flops("custom-call.7", BWD_CONVERT) == [0.0] * 2
    assert flops("custom-call.11", FWD) == [FWD_V64] * 2  # non-causal, v_head_dim 64
    te = ev.filter(pl.col("op").is_in(["custom-call.3", "custom-call.7", "custom-call.11"]))
    assert set(te["cost_source"]) == {"hlo"} and te["cost_note"].null_count() == te.height
    assert set(te["dtype"]) == {"bf16"}
    # packed sequences: null with the reason, counted
    packed = ev.filter(pl.col("op") == "custom-call.15")
    assert packed["flops"].to_list() == [None, None]
    assert packed["cost_note"].to_list() == [
        "te_fused_attn_forward_ffi: packed sequences (max_segments_per_seq = 4); the work "
        "depends on runtime segment lengths"] * 2
    # bytes: operands + results (no workspace leaf)
    q = B * S * N * D * 2
    kv = B * S * KV * D * 2
    fwd_bytes = q + 2 * kv + q + B * N * S * 4 + 16
    assert ev.filter((pl.col("op") == "custom-call.3"))["bytes"].to_list() == [fwd_bytes] * 2


def test_coverage_and_mfu_rise_with_attention_flops(tmp_path: Path) -> None:
    trace = load(tmp_path)
    # MFU over the span: without steps (with them it is the median step's, test_one_mfu.py)
    trace.steps = trace.steps.head(0)
    trace.events = trace.events.with_columns(step=pl.lit(None, trace.events["step"].dtype))
    s = tracelens.summarize(trace)
    d = s["devices"][0]
    compute = 2 * (400_000 + 20_000 + 900_000 + 30_000 + 300_000 + 1_000 + 500_000)
    assert d["compute_kernel_ns"] == compute
    assert d["flops_covered_ns"] == compute - 2 * 1_000
    assert d["flops_coverage"] == pytest.approx((compute - 2_000) / compute, abs=1e-6)
    assert d["flops_coverage"] >= 0.95 and s["headline"]["flops_coverage"] == d["flops_coverage"]
    model = 2 * (FWD_CAUSAL + BWD_CAUSAL + FWD_V64 + GEMM_FLOPS)
    assert d["model_flops"] == pytest.approx(model)
    window = trace.events["end_ns"].max() - trace.events["start_ns"].min()
    assert d["spec"]["peak_tflops"]["bf16"] == PEAK_BF16
    assert d["mfu"] == pytest.approx(model / (window * PEAK_BF16 * 1e3), abs=1e-6)
    # what MFU was when attention had no FLOPs: the GEMM alone
    assert d["mfu"] / (2 * GEMM_FLOPS / (window * PEAK_BF16 * 1e3)) == pytest.approx(
        model / (2 * GEMM_FLOPS), rel=1e-5)
    # the packed forward is still unknown: MFU is a lower bound, but coverage is above 95%
    assert d["model_kernels_without_cost"] == 2 and d["mfu_lower_bound"] is True
    assert s["no_cost_data"] == 2
    assert s["no_flops"] == [{"category": "attention", "count": 2, "sum_ns": 2_000,
                              "share_of_busy_pct": pytest.approx(100 * 2_000 / compute,
                                                                 abs=1e-3)}]
    assert not [w for w in s["warnings"] if w.startswith("FLOPs cover")]


def test_low_coverage_warns_with_categories_ops_and_reasons(tmp_path: Path) -> None:
    s = tracelens.summarize(load(tmp_path, packed_ns=2_000_000))
    d = s["devices"][0]
    compute = 2 * (400_000 + 20_000 + 900_000 + 30_000 + 300_000 + 2_000_000 + 500_000)
    assert d["flops_coverage"] == pytest.approx(1 - 4_000_000 / compute, abs=1e-6)
    assert d["flops_coverage"] < 0.95
    assert d["mfu_lower_bound"] and s["headline"]["mfu_lower_bound"]
    (warning,) = [w for w in s["warnings"] if w.startswith("FLOPs cover")]
    share = 100 * 4_000_000 / compute
    assert f"attention {share:.1f}%" in warning and "MFU is a lower bound" in warning
    assert f"custom-call.15 (attention, {share:.1f}%): te_fused_attn_forward_ffi: packed " \
           "sequences" in warning
    from reports import summary as render
    from tracelens.analyze.summary.build import summarize
    md = render.render_markdown(summarize(load(tmp_path, packed_ns=2_000_000)), all_rows=True)
    assert "| MFU (median step) | ≥ " in md and "(lower bound: see warnings)" in md
    short = render.render_markdown(summarize(load(tmp_path, packed_ns=2_000_000)))
    assert "MFU (median step) ≥ " in short and "(lower bound: see warnings)" in short
    assert f"| FLOPs coverage | {100 * d['flops_coverage']:.1f}% of compute-kernel time" in md


def test_summarize_json_is_deterministic(tmp_path: Path) -> None:
    import json
    a = json.dumps(tracelens.summarize(load(tmp_path, packed_ns=2_000_000)), sort_keys=True)
    b = json.dumps(tracelens.summarize(load(tmp_path, packed_ns=2_000_000)), sort_keys=True)
    assert a == b


def test_report_shows_coverage_and_lower_bound(tmp_path: Path) -> None:
    from reports.html.page import render_html
    from tracelens.analyze.summary.build import summarize
    s = summarize(load(tmp_path, packed_ns=2_000_000))
    page = render_html(s, generated="test")
    cov = 100 * s.headline.flops_coverage
    assert 'id="flops-coverage"' in page and f"{cov:.1f}%" in page
    assert "(lower bound)" in page and "≥ " in page
    assert "FLOPs cover" in page  # the warning, escaped text


@pytest.mark.parametrize("device", ["mi300x", "mi355x"])
def test_synthetic_te_job_costs_and_mfu_match_the_construction(tmp_path: Path,
                                                                device: str) -> None:
    """A synthetic Llama job whose TE calls carry TE's full attribute set: every event's
    FLOPs/bytes and every device's MFU equal the construction's truth (which computes the
    attention FLOPs from Q, K, V by hand, not through tracelens.hlo), coverage is complete,
    and MFU is higher than the same job with the shape attributes left out."""
    from tests.synth_helpers import (assert_costs_match_truth, assert_mfu_matches_truth,
                                     synthetic, write_and_load)
    kw = dict(device=device, gpus=2, steps=2, layers=2, seed=5)
    full = synthetic(te_attributes="full", **kw)
    trace, _ = write_and_load(full, tmp_path / "full")
    assert full.truth["model"]["model_ops_without_flops"] == 0
    assert_costs_match_truth(trace, full.truth)
    assert_mfu_matches_truth(trace, full.truth)
    s = tracelens.summarize(trace)
    assert s["headline"]["flops_coverage"] == 1.0 and not s["headline"]["mfu_lower_bound"]
    assert s["no_flops"] == [] and trace.events.filter(
        pl.col("category") == "attention")["flops"].null_count() == 0
    minimal, _ = write_and_load(synthetic(**kw), tmp_path / "minimal")
    m = tracelens.summarize(minimal)
    assert m["headline"]["flops_coverage"] < 0.95 and m["headline"]["mfu_lower_bound"]
    att = trace.events.filter(pl.col("category") == "attention").group_by("device").agg(
        pl.col("flops").sum()).sort("device")["flops"].to_list()
    for d_full, d_min, a in zip(s["devices"], m["devices"], att):
        assert d_full["model_flops"] == pytest.approx(d_min["model_flops"] + a, rel=1e-12)
        assert d_full["mfu"] > d_min["mfu"]
