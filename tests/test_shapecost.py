"""FLOPs and bytes of ATen ops from recorded shapes (tracelens.cost.shapes), by hand."""

from __future__ import annotations

import pytest

from tracelens.cost.shapes import COSTED_OPS, op_cost

BF16 = "c10::BFloat16"


def test_mm_addmm_bmm_baddbmm() -> None:
    c = op_cost("aten::mm", [[64, 32], [32, 16]], [BF16, BF16], [])
    assert (c.flops, c.bytes, c.dtype) == (2 * 64 * 32 * 16, (64 * 32 + 32 * 16 + 64 * 16) * 2,
                                           "bf16")
    c = op_cost("aten::addmm", [[16], [64, 32], [32, 16]], ["float"] * 3, ["", "", "", "1", "1"])
    assert (c.flops, c.bytes, c.dtype) == (2 * 64 * 32 * 16,
                                           (16 + 64 * 32 + 32 * 16 + 64 * 16) * 4, "fp32")
    c = op_cost("aten::bmm", [[8, 64, 32], [8, 32, 16]], [BF16] * 2, [])
    assert c.flops == 2 * 8 * 64 * 32 * 16
    c = op_cost("aten::baddbmm", [[8, 64, 16], [8, 64, 32], [8, 32, 16]], [BF16] * 3, [])
    assert c.flops == 2 * 8 * 64 * 32 * 16


def test_linear_and_matmul_broadcast() -> None:
    c = op_cost("aten::linear", [[4, 128, 512], [1024, 512], [1024]], [BF16] * 3, [])
    assert c.flops == 2 * 4 * 128 * 1024 * 512
    assert c.bytes == (4 * 128 * 512 + 1024 * 512 + 1024 + 4 * 128 * 1024) * 2
    c = op_cost("aten::matmul", [[3, 1, 64, 32], [5, 32, 16]], [BF16] * 2, [])
    assert c.flops == 2 * 15 * 64 * 32 * 16  # batch dims broadcast to (3, 5)
    assert op_cost("aten::matmul", [[32], [32, 16]], [BF16] * 2, []).flops == 2 * 32 * 16


def test_scaled_mm_is_fp8_with_its_output_dtype() -> None:
    c = op_cost("aten::_scaled_mm", [[128, 256], [256, 64], [], [], [], [], []],
                ["c10::Float8_e4m3fn"] * 2 + ["float"] * 2 + [""] * 3,
                ["", "", "", "", "", "", "15", "False"])
    assert c.dtype == "fp8" and c.flops == 2 * 128 * 256 * 64
    assert c.bytes == 128 * 256 + 256 * 64 + 128 * 64 * 2  # bf16 out (ScalarType 15)


def test_attention_causal_is_half_and_backward_is_two_and_a_half() -> None:
    dims = [[2, 16, 1024, 128]] * 3 + [[], [], [], []]
    types = [BF16] * 3 + ["Scalar"] * 4
    full = op_cost("aten::_scaled_dot_product_flash_attention", dims, types,
                   ["", "", "", "0.", "False", "False", ""])
    causal = op_cost("aten::_scaled_dot_product_flash_attention", dims, types,
                     ["", "", "", "0.", "True", "False", ""])
    assert full.flops == 2 * 2 * 16 * 1024 * 1024 * (128 + 128)
    assert causal.flops == full.flops / 2
    bw_dims = [[2, 16, 1024, 128]] * 5 + [[2, 16, 1024]] + [[]] * 9
    conc = [""] * 11 + ["True"] + [""] * 3
    back = op_cost("aten::_scaled_dot_product_flash_attention_backward", bw_dims,
                   [BF16] * 6 + [""] * 9, conc)
    assert back.flops == 2.5 * causal.flops


def test_unknown_causal_flag_or_shapes_give_none() -> None:
    dims = [[2, 16, 1024, 128]] * 3
    assert op_cost("aten::_scaled_dot_product_flash_attention", dims, [BF16] * 3, []) is None
    assert op_cost("aten::mm", [[64, 32], [31, 16]], [BF16] * 2, []) is None  # K mismatch
    assert op_cost("aten::mm", [[], []], ["", ""], []) is None
    assert op_cost("aten::add", [[4], [4]], ["float"] * 2, []) is None
    assert op_cost("aten::mm", None, None, None) is None


def test_convolution_forward_and_backward() -> None:
    dims = [[8, 64, 56, 56], [128, 64, 3, 3], [128], [], [], [], [], [], []]
    conc = ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1"]
    c = op_cost("aten::convolution", dims, ["float"] * 3 + [""] * 6, conc)
    out = 8 * 128 * 56 * 56
    assert c.flops == 2 * out * 64 * 9
    bdims = [[8, 128, 56, 56], [8, 64, 56, 56], [128, 64, 3, 3]] + [[]] * 8
    bconc = ["", "", "", "[128]", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1",
             "[True, True, False]"]
    b = op_cost("aten::convolution_backward", bdims, ["float"] * 3 + [""] * 8, bconc)
    assert b.flops == 2 * c.flops
    strided = list(conc)
    strided[3] = "[2, 2]"
    assert op_cost("aten::convolution", dims, ["float"] * 3 + [""] * 6, strided).flops == \
        2 * 8 * 128 * 28 * 28 * 64 * 9


@pytest.mark.parametrize("name", sorted(COSTED_OPS))
def test_every_costed_op_refuses_garbage(name: str) -> None:
    assert op_cost(name, [["x"], [-1]], [1, 2], [None]) is None


def test_the_models_costed_ops_are_the_ops_with_a_rule() -> None:
    """Readers keep the shapes of the model's COSTED_ATEN_OPS (issue 26: they no longer import
    the cost model); each has a rule here, and no rule is left out of the list."""
    from tracelens.cost import shapes as shapecost

    ruled = set(shapecost._GEMM) | set(shapecost._ATTENTION) | set(shapecost._CONV) \
        | set(shapecost._GROUPED)
    assert ruled == set(COSTED_OPS)


def test_grouped_mm_costs_the_whole_partitioned_product() -> None:
    """MoE grouped GEMMs (issue 28): the groups partition one dimension, so the FLOPs do not
    depend on the (unrecorded) group sizes: tokens [ΣM, K] × experts [G, K, N]; batched
    [G, M, K] × [G, K, N]; the weight gradient [M, ΣK] × [ΣK, N] into G outputs."""
    bf = "c10::BFloat16"
    c = op_cost("aten::_grouped_mm", [[8192, 4096], [8, 4096, 1024], [8]], [bf, bf, "int"],
                ["", "", "", "", ""])
    assert c is not None and c.flops == 2.0 * 8192 * 4096 * 1024 and c.dtype == "bf16"
    assert c.bytes == (8192 * 4096 + 8 * 4096 * 1024 + 8192 * 1024) * 2
    c = op_cost("aten::_grouped_mm", [[8, 512, 4096], [8, 4096, 1024]], [bf, bf], [])
    assert c is not None and c.flops == 2.0 * 8 * 512 * 4096 * 1024
    c = op_cost("aten::_grouped_mm", [[4096, 8192], [8192, 1024], [8]], [bf, bf, "int"], [])
    assert c is not None and c.flops == 2.0 * 4096 * 8192 * 1024
    assert c.bytes == (4096 * 8192 + 8192 * 1024 + 8 * 4096 * 1024) * 2
    # K disagrees, or a layout with no rule: unknown, not guessed
    assert op_cost("aten::_grouped_mm", [[8192, 4096], [8, 2048, 1024]], [bf, bf], []) is None
    assert op_cost("aten::_grouped_mm", [[8, 512, 4096], [4096, 1024]], [bf, bf], []) is None
    # FP8: the output dtype only from out_dtype (ScalarType 15 = bf16), else bytes unknown
    f8 = "c10::Float8_e4m3fn"
    dims = [[8192, 4096], [8, 4096, 1024], [8192], [8, 1024], [8]]
    c = op_cost("aten::_scaled_grouped_mm", dims, [f8, f8, "float", "float", "int"],
                ["", "", "", "", "", "", "", "15"])
    assert c is not None and c.dtype == "fp8" and c.flops == 2.0 * 8192 * 4096 * 1024
    assert c.bytes == 8192 * 4096 + 8 * 4096 * 1024 + 8192 * 1024 * 2
    c = op_cost("aten::_scaled_grouped_mm", dims, [f8, f8, "float", "float", "int"], [])
    assert c is not None and c.bytes is None


def test_grouped_mm_kernel_gets_its_flops_through_kineto(tmp_path) -> None:
    """A kernel launched inside ``aten::_grouped_mm`` carries the op's FLOPs (shapes)."""
    import polars as pl

    import tracelens
    from tests.synth_helpers import writer_device, writer_events
    from tracelens_dev.writers.kineto import write

    rows = [("kernel", "void cutlass::Kernel2<grouped_gemm>", 0, 100_000, "aten::_grouped_mm")]
    trace = tracelens.Trace(
        events=writer_events(rows), host_events=pl.DataFrame(),
        steps=pl.DataFrame({"rank": [0], "step": [0], "start_ns": [0], "end_ns": [100_000],
                            "source": ["x"]}),
        devices=pl.DataFrame([writer_device("nvidia", "sm_90", "NVIDIA H100 80GB HBM3", 132,
                                            80 << 30)]))
    args = {"Input Dims": [[8192, 4096], [8, 4096, 1024], [8]],
            "Input type": ["c10::BFloat16", "c10::BFloat16", "int"],
            "Concrete Inputs": ["", "", "", "", ""]}
    path = write(trace, tmp_path, op_args={"aten::_grouped_mm": args})[0]
    ev = tracelens.load(path).events
    row = ev.filter(pl.col("kind") == "kernel").row(0, named=True)
    assert (row["flops"], row["cost_source"], row["dtype"]) == (
        2.0 * 8192 * 4096 * 1024, "shapes", "bf16")
