"""The MLIR attribute dictionary of typed-FFI custom calls (``parsers.hlo.attrs``), exposed on
every instruction, and the cost rules of custom calls, ragged-dot and attention paths that the
HLO cannot describe: null FLOPs with the reason (docs/cost-model.md §3, §11)."""

from __future__ import annotations

import pytest

from tests.hlo_build import ModuleBuilder
from parsers.hlo.attrs import parse_attribute_dict
from tracelens.core.hlo_model import Instruction, Shape
from tracelens.cost.opcost import instruction_cost
from parsers.hlo.proto import module_from_proto
from parsers.hlo.text import parse_module


def test_attribute_dictionary_values() -> None:
    text = ('{attn_heads = 16 : i64, dropout_probability = 0.000000e+00 : f32, '
            'scale = -1.5E-2 : f32, is_training = true, deterministic = false, '
            'name = "fmha \\"fwd\\"\\0A", dims = [1, -2, 3.5, "x"], dense = array<i64: 4, 5>, '
            'none = array<i32>, nested = {a = 0x10 : i32, b = {}}, unit_flag, '
            '"quoted key" = -7 : i64, inf_val = inf : f32}')
    assert parse_attribute_dict(text) == {
        "attn_heads": 16, "dropout_probability": 0.0, "scale": -0.015, "is_training": True,
        "deterministic": False, "name": 'fmha "fwd"\n', "dims": [1, -2, 3.5, "x"],
        "dense": [4, 5], "none": [], "nested": {"a": 16, "b": {}}, "unit_flag": True,
        "quoted key": -7, "inf_val": float("inf")}
    assert isinstance(parse_attribute_dict("{a = 3 : i64}")["a"], int)
    assert parse_attribute_dict("{}") == {}


@pytest.mark.parametrize("text", [
    "", "   ", '{"gemm_backend_config": {"alpha_real": 1}}',  # JSON is not MLIR
    "{a = }", "{a = 1", "{a = 1} trailing", '{a = "open}', "{a = [1, 2}", "not a dict",
    "{" * 100 + "}" * 100,  # hostile nesting: refused, not a RecursionError
])
def test_malformed_or_other_configs_are_none(text: str) -> None:
    assert parse_attribute_dict(text) is None


def _te_module() -> bytes:
    b = ModuleBuilder("jit_f", 3)
    main = b.computation("main.1")
    b.inst(main, "q", "parameter", "bf16[1,128,4,64]")
    i = b.inst(main, "custom-call.1", "custom-call", ("bf16[1,128,4,64]", "f32[1,4,128,1]"),
               ("q", "q", "q"), root=True, custom_call_target="te_fused_attn_forward_ffi",
               custom_call_api_version=4)
    i.backend_config = (b"{attn_heads = 4 : i64, input_batch = 1 : i64, q_max_seqlen = 128 : "
                        b"i64, kv_max_seqlen = 128 : i64, qk_head_dim = 64 : i64, "
                        b"mask_type = 0 : i64}")
    b.entry(main)
    return b.bytes()


def test_ffi_attributes_on_instructions_from_proto_and_text() -> None:
    m = module_from_proto(_te_module())
    inst = m.instruction("custom-call.1")
    assert inst.ffi_attributes["attn_heads"] == 4 and inst.backend_config == {}
    c = instruction_cost(m, m.entry_computation, inst)
    assert (c.kind, c.flops, c.note) == ("attention", 2.0 * 1 * 4 * 128 * 128 * (64 + 64), "")
    text = ('HloModule jit_f\n\nENTRY %main.1 (q: bf16[1,128,4,64]) -> bf16[1,128,4,64] {\n'
            '  %q = bf16[1,128,4,64]{3,2,1,0} parameter(0)\n'
            '  ROOT %custom-call.1 = (bf16[1,128,4,64]{3,2,1,0}, f32[1,4,128,1]{3,2,1,0}) '
            'custom-call(%q, %q, %q), custom_call_target="te_fused_attn_backward_ffi", '
            'api_version=API_VERSION_TYPED_FFI, backend_config={attn_heads = 4 : i64, '
            'input_batch = 1 : i64, q_max_seqlen = 128 : i64, kv_max_seqlen = 128 : i64, '
            'qk_head_dim = 64 : i64, mask_type = 3 : i64}\n}\n')
    mt = parse_module(text, program_id=3)
    it = mt.instruction("custom-call.1")
    assert it.ffi_attributes is not None and it.ffi_attributes["mask_type"] == 3
    ct = instruction_cost(mt, mt.entry_computation, it)
    # backward ×2.5, padding+causal (3) halves
    assert ct.flops == 2.0 * 4 * 128 * 128 * 128 * 2.5 / 2


def _custom_call(target: str, attrs: str = "", op_name: str = "") -> tuple:
    b = ModuleBuilder("jit_g", 4)
    main = b.computation("main.1")
    b.inst(main, "a", "parameter", "bf16[256,64]")
    b.inst(main, "w", "parameter", "bf16[8,64,32]", parameter_number=1)
    i = b.inst(main, "custom-call.2", "custom-call", "bf16[256,32]", ("a", "w"), root=True,
               custom_call_target=target, custom_call_api_version=4)
    if attrs:
        i.backend_config = attrs.encode()
    if op_name:
        i.metadata.op_name = op_name
    b.entry(main)
    m = module_from_proto(b.bytes())
    inst = m.instruction("custom-call.2")
    return instruction_cost(m, m.entry_computation, inst)


@pytest.mark.parametrize("target,attrs,op_name,kind,reason", [
    ("te_fused_attn_forward_ffi", "{attn_heads = 4 : i64}", "", "attention",
     "te_fused_attn_forward_ffi: attributes lack input_batch, q_max_seqlen, kv_max_seqlen, "
     "qk_head_dim"),
    ("te_fused_attn_forward_ffi", '{"not": "mlir"}', "", "attention",
     "te_fused_attn_forward_ffi: backend_config is not an MLIR attribute dictionary; "
     "attention shape unknown"),
    ("te_fused_attn_forward_ffi", "{attn_heads = 4 : i64, input_batch = 1 : i64, "
     "q_max_seqlen = 128 : i64, kv_max_seqlen = 128 : i64, qk_head_dim = 64 : i64, "
     "window_size_left = 16 : i64}", "", "attention",
     "te_fused_attn_forward_ffi: sliding window (window_size_left = 16); FLOPs not modelled"),
    ("te_fused_attn_forward_ffi", "{attn_heads = 4 : i64, input_batch = 1 : i64, "
     "q_max_seqlen = 128 : i64, kv_max_seqlen = 128 : i64, qk_head_dim = 64 : i64, "
     "mask_type = 9 : i64}", "", "attention",
     "te_fused_attn_forward_ffi: mask_type 9 is not a known NVTE_Mask_Type"),
    ("__gpu$xla.gpu.triton", '{name = "mha_forward", num_warps = 4 : i32}', "", "attention",
     "Pallas/Triton custom call '__gpu$xla.gpu.triton': its kernel body is opaque IR, FLOPs "
     "not derivable from the HLO"),
    ("__gpu$xla.gpu.triton", '{name = "add_one"}', "jit(f)/pallas_call", "opaque",
     "Pallas/Triton custom call '__gpu$xla.gpu.triton': its kernel body is opaque IR, FLOPs "
     "not derivable from the HLO"),
    ("__cublas$lt$groupedMatmul", "", "", "gemm",
     "grouped GEMM custom call '__cublas$lt$groupedMatmul': group sizes are runtime values "
     "and its operand convention is not in our references; FLOPs unknown"),
    ("te_grouped_gemm_ffi", "{}", "", "gemm",
     "grouped GEMM custom call 'te_grouped_gemm_ffi': group sizes are runtime values and its "
     "operand convention is not in our references; FLOPs unknown"),
    ("te_gemm_ffi", "{}", "", "gemm",
     "GEMM custom call 'te_gemm_ffi': its attributes are not documented in our references; "
     "FLOPs unknown"),
    ("aiter_mha_fwd", "{}", "", "attention",
     "attention custom call 'aiter_mha_fwd': its attributes are not documented in our "
     "references; FLOPs unknown"),
    ("my_library_op", "", "", "opaque",
     "custom call 'my_library_op': no cost rule for this target; FLOPs unknown"),
])
def test_uncostable_custom_calls_say_why(target: str, attrs: str, op_name: str, kind: str,
                                         reason: str) -> None:
    c = _custom_call(target, attrs, op_name)
    assert (c.kind, c.flops, c.note) == (kind, None, reason)
    assert c.bytes == 256 * 64 * 2 + 8 * 64 * 32 * 2 + 256 * 32 * 2  # still known


def _ragged(lhs: str, rhs: str, out: str, lhs_c: int, rhs_c: int, ragged: int,
            rhs_group: tuple[int, ...]) -> tuple:
    b = ModuleBuilder("jit_moe", 6)
    main = b.computation("main.1")
    b.inst(main, "x", "parameter", lhs)
    b.inst(main, "w", "parameter", rhs, parameter_number=1)
    b.inst(main, "g", "parameter", "s32[8]", parameter_number=2)

    def dims(r) -> None:
        r.dot_dimension_numbers.lhs_contracting_dimensions.append(lhs_c)
        r.dot_dimension_numbers.rhs_contracting_dimensions.append(rhs_c)
        r.lhs_ragged_dimensions.append(ragged)
        r.rhs_group_dimensions.extend(rhs_group)

    b.inst(main, "ragged-dot.1", "ragged-dot", out, ("x", "w", "g"), root=True,
           ragged_dot_dimension_numbers=dims)
    b.entry(main)
    m = module_from_proto(b.bytes())
    return instruction_cost(m, m.entry_computation, m.instruction("ragged-dot.1"))


def test_ragged_dot_flops_from_shapes() -> None:
    # MoE: tokens [m=1024, k=512] split into 8 expert groups, each against w[g, 512, 256]
    c = _ragged("bf16[1024,512]", "bf16[8,512,256]", "bf16[1024,256]", 1, 1, 0, (0,))
    assert (c.kind, c.flops, c.dtype) == ("gemm", 2.0 * 1024 * 256 * 512, "bf16")
    # ragged contracting dimension: one [m, n] result per group, k split between them
    c = _ragged("bf16[64,1024]", "bf16[1024,32]", "bf16[8,64,32]", 1, 0, 1, ())
    assert c.flops == 2.0 * 64 * 32 * 1024


def test_ragged_dot_text_dims() -> None:
    text = ('HloModule m\n\nENTRY %main (x: bf16[16,8], w: bf16[2,8,4], g: s32[2]) -> '
            'bf16[16,4] {\n  %x = bf16[16,8]{1,0} parameter(0)\n'
            '  %w = bf16[2,8,4]{2,1,0} parameter(1)\n  %g = s32[2]{0} parameter(2)\n'
            '  ROOT %ragged-dot.1 = bf16[16,4]{1,0} ragged-dot(%x, %w, %g), '
            'lhs_contracting_dims={1}, rhs_contracting_dims={1}, lhs_ragged_dims={0}, '
            'rhs_group_dims={0}\n}\n')
    m = parse_module(text, program_id=1)
    c = instruction_cost(m, m.entry_computation, m.instruction("ragged-dot.1"))
    assert c.flops == 2.0 * 16 * 4 * 8


def test_instruction_without_backend_config_has_no_attributes() -> None:
    inst = Instruction(name="x", opcode="custom-call", shape=Shape("f32", (1,)))
    assert inst.ffi_attributes is None


def test_fusion_kind_says_what_its_body_computes() -> None:
    """A fusion's kind comes from its fused computation, whatever its name or fusion kind:
    a convolution inside is conv (not gemm), a reduce is reduction, a sort is sort, pure data
    movement is copy."""
    b = ModuleBuilder("jit_k", 8)
    add = b.computation("add")
    b.inst(add, "a0", "parameter", "f32[]")
    b.inst(add, "a1", "parameter", "f32[]", parameter_number=1)
    b.inst(add, "s", "add", "f32[]", ("a0", "a1"), root=True)
    conv = b.computation("fused_conv", fusion=True)
    b.inst(conv, "p0", "parameter", "bf16[1,8,8,4]")
    b.inst(conv, "p1", "parameter", "bf16[3,3,4,4]", parameter_number=1)

    def dims(d) -> None:  # NHWC input, HWIO kernel, NHWC output
        d.input_batch_dimension, d.input_feature_dimension = 0, 3
        d.input_spatial_dimensions.extend([1, 2])
        d.kernel_input_feature_dimension, d.kernel_output_feature_dimension = 2, 3
        d.kernel_spatial_dimensions.extend([0, 1])
        d.output_batch_dimension, d.output_feature_dimension = 0, 3
        d.output_spatial_dimensions.extend([1, 2])

    def window(w) -> None:
        for _ in range(2):
            w.dimensions.add(size=3, stride=1)

    b.inst(conv, "c", "convolution", "bf16[1,6,6,4]", ("p0", "p1"), root=True,
           window=window, convolution_dimension_numbers=dims)
    red = b.computation("fused_reduce", fusion=True)
    b.inst(red, "r0", "parameter", "f32[16,32]")
    b.inst(red, "z", "constant", "f32[]")
    b.inst(red, "r", "reduce", "f32[16]", ("r0", "z"), calls=("add",), root=True,
           dimensions=[1])
    mov = b.computation("fused_move", fusion=True)
    b.inst(mov, "m0", "parameter", "f32[16,32]")
    b.inst(mov, "t", "transpose", "f32[32,16]", ("m0",), dimensions=[1, 0])
    b.inst(mov, "cv", "convert", "bf16[32,16]", ("t",), root=True)
    main = b.computation("main.1")
    b.inst(main, "x", "parameter", "bf16[1,8,8,4]")
    b.inst(main, "w", "parameter", "bf16[3,3,4,4]", parameter_number=1)
    b.inst(main, "y", "parameter", "f32[16,32]", parameter_number=2)
    b.inst(main, "fusion.1", "fusion", "bf16[1,6,6,4]", ("x", "w"), calls=("fused_conv",),
           fusion_kind="kOutput")
    b.inst(main, "fusion.2", "fusion", "f32[16]", ("y",), calls=("fused_reduce",),
           fusion_kind="kLoop")
    b.inst(main, "fusion.3", "fusion", "bf16[32,16]", ("y",), calls=("fused_move",),
           fusion_kind="kCustom", root=True)
    b.entry(main)
    m = module_from_proto(b.bytes())
    costs = {n: instruction_cost(m, m.entry_computation, m.instruction(n))
             for n in ("fusion.1", "fusion.2", "fusion.3")}
    assert {n: c.kind for n, c in costs.items()} == {
        "fusion.1": "conv", "fusion.2": "reduction", "fusion.3": "copy"}
    assert costs["fusion.1"].flops == 2 * 4 * 4 * 1 * 6 * 6 * 3 * 3  # C_in·C_out·N·positions
