"""The cost model on the real traces (skipped when ../shared is absent): GEMM FLOPs against
independently known shapes, conv attribution, XProf hlo_stats agreement with every difference
named and explained, the JAX CPU trace's matmuls and all-reduce, and no-cost kernels."""

from __future__ import annotations

import json
from functools import lru_cache

import polars as pl
import pytest

import tracelens
from tests.conftest import CPU_TRACE, GPU_TRACES, oracle, real_trace
from tracelens.hlo.index import HloIndex
from tracelens.cost.opcost import ARITHMETIC
from tracelens.core.model import Trace

STRUCTURE_KINDS = ("reduction", "elementwise", "copy", "sort")  # non-GEMM fusions by body

# (M, N, K, batch) per GEMM program, from shared/oracles/README.md §5 (shapes read from the HLO
# text XProf prints) and shared/reference/hlo.md §7.3 (the Triton fusions): an independent
# check of what we decode from the HloProto.
GEMM_SHAPES = {
    "gemm08": {49: (8192, 8192, 4096, 1), 79: (16384, 4096, 1024, 1),
               34: (4096, 4096, 4096, 1), 64: (2048, 2048, 8192, 1),
               21: (1024, 1024, 1024, 1), 5: (256, 256, 256, 1)},
    "attention08": {19: (8192, 1024, 1024, 1), 73: (8192, 4096, 1024, 1),
                    98: (8192, 1024, 4096, 1), 32: (2048, 2048, 1024, 4),
                    59: (2048, 1024, 512, 16)},  # split-K: [4,4] batch, K = 2048 / 4
}
# XProf's GPU cost model charges transcendentals far more than 3 per element (see below).
TRANSCENDENTAL = {"tanh", "exponential", "sqrt", "rsqrt", "log", "log-plus-one", "logistic",
                  "exponential-minus-one", "power", "sine", "cosine", "tan", "erf", "cbrt",
                  "atan2"}


@lru_cache(maxsize=None)
def load(key: str) -> Trace:
    name = GPU_TRACES.get(key, CPU_TRACE if key == "cpu" else key)
    return tracelens.load(real_trace(name))


def xprof_hlo_stats(key: str) -> list[dict]:
    """Per row: program, op, occurrences, FLOPs and bytes per occurrence (from the rates)."""
    table = json.loads(oracle(key, "xprof_hlo_stats.json").read_text())
    cols = [c["id"] for c in table["cols"]]
    out = []
    for row in table["rows"]:
        r = dict(zip(cols, (c["v"] if c else None for c in row["c"])))
        t_s, n = r["total_time"] * 1e-6, r["occurrences"]
        out.append({"program_id": int(r["program_id"]), "op": r["hlo_op_name"],
                    "category": r["category"], "n": int(n),
                    "flops": r["model_flop_rate"] * 1e9 * t_s / n,  # GFLOP/s
                    "bytes": r["measured_memory_bw"] * 2**30 * t_s / n})  # GiB/s
    return out


@pytest.mark.parametrize("key", sorted(GEMM_SHAPES))
def test_every_gemm_kernel_gets_2mnk_batch_flops(key: str) -> None:
    ev = load(key).events.filter(pl.col("category") == "gemm")
    assert ev.height and ev["name"].cast(pl.String).str.contains(r"^(Cijk_|gemm_fusion_dot)").all()
    assert set(ev["program_id"].to_list()) == set(GEMM_SHAPES[key])
    table = load(key).meta.op_costs
    for pid, (m, n, k, b) in GEMM_SHAPES[key].items():
        flops = ev.filter(pl.col("program_id") == pid)["flops"]
        assert flops.null_count() == 0 and (flops == 2.0 * m * n * k * b).all(), pid
        detail = table.filter(pl.col("program_id") == pid, pl.col("cost_kind") == "gemm")[
            "detail"][0]
        assert f"M={m} N={n} K={k} batch={b} " in detail, (pid, detail)
    assert (ev["dtype"] == "bf16").all() and (ev["cost_source"] == "hlo").all()


@pytest.mark.parametrize("key", sorted(GPU_TRACES))
def test_devices_are_mi300x_with_datasheet_peaks(key: str) -> None:
    s = tracelens.summarize(load(key))
    assert s["devices"]
    for d in s["devices"]:
        assert d["product"] == "AMD Instinct MI300X"
        assert d["spec"]["name"] == "AMD Instinct MI300X"
        assert d["spec"]["peak_tflops"]["bf16"] == 1307.4
        assert d["spec"]["hbm_tb_per_s"] == 5.3
    # ROCm's XSpace memory_bandwidth (2.66 TB/s) is never the peak, and the user is told.
    # a fact the tool corrects (the datasheet's value is used): a note, not a warning
    assert any("memory_bandwidth 2.66 TB/s" in w and "5.3 TB/s" in w for w in s["notes"])


def test_attention_trace_ops_all_get_flops_and_bytes() -> None:
    """The attention trace has no fused-attention custom call (hlo.md §6: no TE/CK/cuDNN
    attention target in the samples): attention is built from matmuls, softmax fusions and
    elementwise fusions. Every kernel that names an op gets FLOPs and bytes from its HLO."""
    ev = load("attention08").events
    with_op = ev.filter(pl.col("op").is_not_null())
    assert with_op.height == 87
    assert with_op["flops"].null_count() == 0 and with_op["bytes"].null_count() == 0
    assert (with_op["cost_source"] == "hlo").all()
    softmax = with_op.filter(pl.col("program_id").is_in([49, 51, 53, 55, 57]))
    assert (softmax["flops"] > 0).all()


def test_conv_flops_counted_once_per_execution_on_the_gemm_kernel() -> None:
    ev = load("conv08").events.filter(pl.col("op") == "cudnn-conv.1")
    per_conv = 2.0 * 5120 * 16 * (32 * 60 * 104)  # XLA's valid-position count, 32.716 G
    gemm = ev.filter(pl.col("name").cast(pl.String).str.starts_with("Cijk_"))
    im2col = ev.filter(pl.col("name") == "Im3d2Col.kd")
    assert gemm.height == 40 and im2col.height == 39
    assert (gemm["flops"] == per_conv).all() and (gemm["bytes"] == 579_072_000.0).all()
    assert (im2col["flops"] == 0.0).all() and (im2col["bytes"] == 0.0).all()
    assert (im2col["cost_source"] == "hlo").all()
    s = tracelens.summarize(load("conv08"), top=50)
    row = next(r for r in s["roofline"] if r["op"] == "cudnn-conv.1")
    assert row["count"] == 79 and row["flops"] == 40 * per_conv
    # 40 × 32.716 GFLOP over both kernels' time (12.53 ms): ~104 TFLOP/s, the oracle README's
    # 104.3 (which also counts the one Im3d2Col without hlo_op); XProf says 206.2 because it
    # credits every kernel with the whole conv.
    assert row["sum_ns"] == int(ev.select((pl.col("end_ns") - pl.col("start_ns")).sum()).item())
    assert row["tflops_per_s"] == pytest.approx(row["flops"] / row["sum_ns"] / 1e3, rel=1e-5)
    assert row["tflops_per_s"] == pytest.approx(104.3, rel=0.01)


def _xprof_default_flops(key: str, pid: int, op: str) -> tuple[float, bool]:
    """XProf's GPU cost model on these MI300X traces, as the oracle shows it: 3 FLOPs per
    element of every elementwise instruction in the fusion (converts included) and 3 per
    reduced element; transcendentals cost more (returned flag)."""
    trace = load(key)
    idx = HloIndex.from_frames(trace.modules)
    module, comp, inst = idx.lookup(trace.modules["host"][0], pid, op)
    total, transcendental = 0, False
    for callee in inst.called:
        for i in module.computations[callee].instructions.values():
            ops = module.operand_shapes(i, module.computations[callee])
            if i.opcode in TRANSCENDENTAL:
                transcendental = True
            elif i.opcode in ARITHMETIC or i.opcode == "convert":
                total += 3 * i.shape.elements
            elif i.opcode == "reduce":
                total += 3 * (ops[0].elements - i.shape.elements)
    return float(total), transcendental


@pytest.mark.parametrize("key", sorted(GPU_TRACES))
def test_agreement_with_xprof_hlo_stats(key: str) -> None:
    """Bytes agree within 1 % on every op XProf gives bytes; FLOPs agree within 1 % on every dot,
    Triton GEMM fusion and convolution. Every other difference is named here:

    - GEMM custom calls (``__cublas$gemm`` → hipBLASLt): XProf 0 FLOPs and 0 bytes (opaque
      custom call, oracle defect 10); ours 2·M·N·K·batch (checked above).
    - elementwise/reduce fusions: XProf's GPU cost model charges 3 FLOPs per element of every
      elementwise instruction, converts included, and far more for transcendentals (tanh, exp,
      sqrt); ours counts 1 per element per arithmetic instruction and 0 for converts, so ours
      is smaller (reproduced exactly below for the fusions without transcendentals).
    - ``wrapped_convert``: a lone convert, XProf 3 FLOPs, ours 0.
    """
    ours = {(r["program_id"], r["op"]): r for r in load(key).meta.op_costs
            .iter_rows(named=True)}
    explained = {"gemm custom call": 0, "elementwise": 0}
    for x in xprof_hlo_stats(key):
        o = ours[(x["program_id"], x["op"])]
        if x["bytes"] > 0:
            assert o["_bytes"] == pytest.approx(x["bytes"], rel=0.01), x
        if x["flops"] == 0 and x["bytes"] == 0:
            assert x["category"] == "custom-call" and o["cost_kind"] == "gemm" and o["_flops"] > 0
            explained["gemm custom call"] += 1
        elif o["cost_kind"] in ("gemm", "conv"):
            assert o["_flops"] == pytest.approx(x["flops"], rel=0.01), x
        elif x["flops"] == 0:
            assert o["_flops"] == 0, x  # data movement: broadcasts, transposes, copies
        else:
            assert o["cost_kind"] in STRUCTURE_KINDS and o["_flops"] < x["flops"], x
            model, transcendental = _xprof_default_flops(key, x["program_id"], x["op"])
            if transcendental:
                assert x["flops"] > model
            else:
                assert x["flops"] == pytest.approx(model, rel=0.01), x
            explained["elementwise"] += 1
    expected = {"gemm08": {"gemm custom call": 5, "elementwise": 0},
                "attention08": {"gemm custom call": 4, "elementwise": 18},
                "conv08": {"gemm custom call": 0, "elementwise": 0}}[key]
    assert explained == expected


def test_cpu_trace_matmuls_and_all_reduce() -> None:
    """JAX CPU, 4 devices, data parallel: x [1024,256] split 4 ways, W1 [256,512], W2 [512,128].
    Forward: x·W1 and tanh(·)·W2 (Eigen/YNN fusions); the gradients dot.3/dot.4 feed one
    all-reduce of both weight gradients and the loss over the 4 devices."""
    trace = load("cpu")
    table = {r["op"]: r for r in trace.meta.op_costs.iter_rows(named=True)}
    assert "(f32[256,256] x f32[256,512])" in table["ynn_fusion.3"]["detail"]
    assert table["ynn_fusion.3"]["_flops"] == 2 * 256 * 512 * 256
    assert "(f32[256,512] x f32[512,128])" in table["ynn_fusion.2"]["detail"]
    assert table["ynn_fusion.2"]["_flops"] == 2 * 256 * 128 * 512
    assert table["dot.3"]["_flops"] == 2 * 512 * 256 * 256  # dW1ᵀ [512,256], K = 256 rows
    assert table["dot.4"]["_flops"] == 2 * 128 * 512 * 256  # dW2ᵀ [128,512]
    ar = trace.events.filter(pl.col("op") == "all-reduce.3")
    assert ar.height == 12 and ar["device"].n_unique() == 4
    assert (ar["msg_bytes"] == 512 * 256 * 4 + 128 * 512 * 4 + 4).all()  # 786,436 B
    assert (ar["group_size"] == 4).all() and ar["flops"].null_count() == 12
    dots = trace.events.filter(pl.col("op").is_in(["dot.3", "dot.4"]))
    assert dots.height == 24 and (dots["category"] == "gemm").all()
    assert dots["flops"].null_count() == 0 and (dots["dtype"] == "fp32").all()


@pytest.mark.parametrize("key,n", [("gemm08", 12), ("attention08", 18), ("conv08", 37)])
def test_kernels_without_cost_stay_null_and_are_counted(key: str, n: int) -> None:
    ev = load(key).events
    none = ev.filter(pl.col("op").is_null())  # copyBuffer on side streams, one Im3d2Col, ...
    assert none.height == n
    assert none["flops"].null_count() == n and none["bytes"].null_count() == n
    assert none["cost_source"].null_count() == n
    s = tracelens.summarize(load(key))
    assert s["no_cost_data"] == n
    assert s["no_cost_data_ns"] == int(none.select((pl.col("end_ns") - pl.col("start_ns"))
                                                   .sum()).item())
