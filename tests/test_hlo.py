"""HLO decoding and per-op cost on a hand-built HloProto (serialized with our runtime classes):
dot with batch dims, convolution, a fusion with a dot inside, elementwise and reduce fusions,
GEMM/conv/attention custom calls, and collectives in the iota, list and mesh encodings."""

from __future__ import annotations

import pytest

from tests.hlo_build import ModuleBuilder
from tracelens.hlo.index import HloIndex
from tracelens.cost.opcost import instruction_cost
from parsers.hlo.proto import module_from_proto
from parsers.hlo.replica_groups import iota_groups, mesh_axes_groups
from tracelens.cost.groups import group_mode, group_size
from parsers.hlo.schema import message_class

GEMM_CFG = {"operation_queue_id": "0", "gemm_backend_config": {
    "selected_algorithm": "-621293739", "alpha_real": 1, "beta": 0,
    "dot_dimension_numbers": {"lhs_contracting_dimensions": ["1"],
                              "rhs_contracting_dimensions": ["0"],
                              "lhs_batch_dimensions": [], "rhs_batch_dimensions": []},
    "precision_config": {"operand_precision": ["DEFAULT", "DEFAULT"], "algorithm": "ALG_UNSET"},
    "epilogue": "DEFAULT", "lhs_stride": "33554432", "mx_mode": False}}


def _fmha_cfg(mask: str) -> dict:
    bhsd = {"lhs_batch_dimensions": ["0", "1"], "rhs_batch_dimensions": ["0", "1"]}
    return {"cudnn_fmha_backend_config": {
        "bmm1_dot_dimension_numbers": {**bhsd, "lhs_contracting_dimensions": ["3"],
                                       "rhs_contracting_dimensions": ["3"]},
        "bmm2_dot_dimension_numbers": {**bhsd, "lhs_contracting_dimensions": ["3"],
                                       "rhs_contracting_dimensions": ["2"]},
        "mask_type": mask, "fmha_scale": 0.125}}


def build_module(program_id: int = 7) -> bytes:
    b = ModuleBuilder("jit_handbuilt", program_id, partitions=8)
    add = b.computation("add_f32")
    b.inst(add, "x", "parameter", "f32[]")
    b.inst(add, "y", "parameter", "f32[]", parameter_number=1)
    b.inst(add, "sum", "add", "f32[]", ("x", "y"), root=True)

    fg = b.computation("fused_gemm", fusion=True)
    b.inst(fg, "param_0", "parameter", "bf16[64,32]")
    b.inst(fg, "param_1", "parameter", "bf16[32,16]", parameter_number=1)
    b.inst(fg, "param_2", "parameter", "f32[64,16]", parameter_number=2)
    b.inst(fg, "dot.0", "dot", "f32[64,16]", ("param_0", "param_1"),
           dot_dimension_numbers=lambda d: (d.lhs_contracting_dimensions.append(1),
                                            d.rhs_contracting_dimensions.append(0)))
    b.inst(fg, "add.0", "add", "f32[64,16]", ("dot.0", "param_2"), root=True)

    fe = b.computation("fused_elem", fusion=True)
    b.inst(fe, "param_0.1", "parameter", "f32[1000]")
    b.inst(fe, "param_1.1", "parameter", "f32[1000]", parameter_number=1)
    b.inst(fe, "mul", "multiply", "f32[1000]", ("param_0.1", "param_1.1"))
    b.inst(fe, "add.1", "add", "f32[1000]", ("mul", "param_0.1"))
    b.inst(fe, "convert.1", "convert", "bf16[1000]", ("add.1",), root=True)

    fr = b.computation("fused_reduce", fusion=True)
    b.inst(fr, "param_0.2", "parameter", "f32[8,100]")
    b.inst(fr, "zero", "constant", "f32[]")
    b.inst(fr, "reduce.1", "reduce", "f32[8]", ("param_0.2", "zero"), calls=("add_f32",),
           root=True, dimensions=[1])

    main = b.computation("main.1")
    for name, spec, n in (("a", "bf16[4,128,64]", 0), ("bb", "bf16[4,64,256]", 1),
                          ("x", "bf16[2,8,16,16]", 2), ("w", "bf16[32,8,3,3]", 3),
                          ("g0", "bf16[64,32]", 4), ("g1", "bf16[32,16]", 5),
                          ("g2", "f32[64,16]", 6), ("e0", "f32[1000]", 7),
                          ("e1", "f32[1000]", 8), ("r0", "f32[8,100]", 9),
                          ("p", "f32[1024]", 10), ("q0", "f32[256]", 11),
                          ("a2", "bf16[8192,4096]", 12), ("b2", "bf16[4096,8192]", 13),
                          ("ci", "bf16[1,16,32,60,104]", 14), ("cw", "bf16[5120,16,1,2,2]", 15),
                          ("q", "bf16[2,8,1024,64]", 16), ("k", "bf16[2,8,1024,64]", 17),
                          ("v", "bf16[2,8,1024,64]", 18), ("do", "bf16[2,8,1024,64]", 19),
                          ("t0", "f32[512]", 20)):
        b.inst(main, name, "parameter", spec, parameter_number=n)
    b.inst(main, "dot.1", "dot", "bf16[4,128,256]", ("a", "bb"),
           dot_dimension_numbers=lambda d: (d.lhs_batch_dimensions.append(0),
                                            d.rhs_batch_dimensions.append(0),
                                            d.lhs_contracting_dimensions.append(2),
                                            d.rhs_contracting_dimensions.append(1)))

    def window_3x3(w) -> None:
        for _ in range(2):
            w.dimensions.add(size=3, stride=1, padding_low=1, padding_high=1,
                             window_dilation=1, base_dilation=1)

    def dnums_2d(d) -> None:
        d.input_feature_dimension = d.kernel_input_feature_dimension = 1
        d.output_feature_dimension = 1
        d.input_spatial_dimensions.extend([2, 3])
        d.kernel_spatial_dimensions.extend([2, 3])
        d.output_spatial_dimensions.extend([2, 3])

    b.inst(main, "convolution.1", "convolution", "bf16[2,32,16,16]", ("x", "w"),
           window=window_3x3, convolution_dimension_numbers=dnums_2d, feature_group_count=1,
           batch_group_count=1)
    b.inst(main, "gemm_fusion_dot.1", "fusion", "f32[64,16]", ("g0", "g1", "g2"),
           calls=("fused_gemm",), fusion_kind="kCustom",
           backend_config={"fusion_backend_config": {"kind": "__triton_nested_gemm_fusion"}})
    b.inst(main, "loop_fusion", "fusion", "bf16[1000]", ("e0", "e1"), calls=("fused_elem",),
           fusion_kind="kLoop")
    b.inst(main, "input_reduce_fusion", "fusion", "f32[8]", ("r0",), calls=("fused_reduce",),
           fusion_kind="kInput")

    def iota_2x4(il) -> None:  # [2,4]<=[4,2]T(1,0) = {0,2,4,6},{1,3,5,7}
        il.num_replica_groups, il.num_devices_per_group = 2, 4
        il.iota_reshape_dims.extend([4, 2])
        il.iota_transpose_perm.extend([1, 0])

    b.inst(main, "all-reduce.1", "all-reduce", "f32[1024]", ("p",), calls=("add_f32",),
           channel_id=1, use_global_device_ids=True, iota_collective_device_list=iota_2x4)

    def list_groups(cl) -> None:
        cl.replica_groups.add().replica_ids.extend([0, 1, 2, 3])
        cl.replica_groups.add().replica_ids.extend([4, 5, 6, 7])

    b.inst(main, "all-gather-start.1", "all-gather-start", ("f32[256]", "f32[1024]"), ("q0",),
           channel_id=2, use_global_device_ids=True, collective_device_list=list_groups,
           dimensions=[0])
    b.inst(main, "all-gather-done.1", "all-gather-done", "f32[1024]", ("all-gather-start.1",))

    def mesh_2x4_axis0(ml) -> None:  # mesh [2,4], group along axis 0 -> 4 groups of 2
        ml.mesh.axes.add(name="x", size=2)
        ml.mesh.axes.add(name="y", size=4)
        ml.axes.add()  # mesh_axis_index 0: an empty message on the wire

    b.inst(main, "all-to-all.1", "all-to-all", "f32[512]", ("t0",), channel_id=3,
           mesh_axes_replica_group_list=mesh_2x4_axis0, dimensions=[0])
    b.inst(main, "custom-call.1", "custom-call", ("bf16[8192,8192]", "s8[79691776]"),
           ("a2", "b2"), custom_call_target="__cublas$gemm", backend_config=GEMM_CFG,
           custom_call_api_version=1)

    def window_conv3d(w) -> None:
        for size, stride in ((1, 1), (2, 2), (2, 2)):
            w.dimensions.add(size=size, stride=stride, padding_low=1, padding_high=1,
                             window_dilation=1, base_dilation=1)

    def dnums_3d(d) -> None:
        d.input_feature_dimension = d.kernel_input_feature_dimension = 1
        d.output_feature_dimension = 1
        d.input_spatial_dimensions.extend([2, 3, 4])
        d.kernel_spatial_dimensions.extend([2, 3, 4])
        d.output_spatial_dimensions.extend([2, 3, 4])

    b.inst(main, "cudnn-conv.1", "custom-call", ("bf16[1,5120,34,31,53]", "u8[7150336]"),
           ("ci", "cw"), custom_call_target="__cudnn$convForward", window=window_conv3d,
           convolution_dimension_numbers=dnums_3d, feature_group_count=1, batch_group_count=1,
           backend_config={"cudnn_conv_backend_config": {"activation_mode": "kNone"}})
    b.inst(main, "fmha.fwd", "custom-call", ("bf16[2,8,1024,64]", "u8[16]"), ("q", "k", "v"),
           custom_call_target="__cudnn$fmhaSoftmax", backend_config=_fmha_cfg("CAUSAL"))
    b.inst(main, "fmha.bwd", "custom-call",
           ("bf16[2,8,1024,64]", "bf16[2,8,1024,64]", "bf16[2,8,1024,64]", "u8[16]"),
           ("q", "k", "v", "do"), custom_call_target="__cudnn$fmhaSoftmaxBackward",
           backend_config=_fmha_cfg("NO_MASK"))
    b.inst(main, "opaque.1", "custom-call", "f32[1024]", ("p",),
           custom_call_target="my_library_kernel")
    b.inst(main, "tuple.1", "tuple", ("bf16[4,128,256]", "bf16[2,32,16,16]"),
           ("dot.1", "convolution.1"), root=True)
    b.entry(main)
    return b.bytes()


@pytest.fixture(scope="module")
def index() -> HloIndex:
    idx = HloIndex()
    idx.add(module_from_proto(build_module()), host="h0")
    return idx


def cost(index: HloIndex, op: str):
    module, comp, inst = index.lookup("h0", 7, op)
    return instruction_cost(module, comp, inst)


def test_decodes_module_structure(index: HloIndex) -> None:
    m = index.module("h0", 7)
    assert (m.name, m.program_id, m.entry, m.partition_count) == ("jit_handbuilt", 7, "main.1", 8)
    assert m.computations["fused_gemm"].is_fusion and not m.computations["main.1"].is_fusion
    inst = m.instruction("custom-call.1")
    assert str(inst.shape) == "(bf16[8192,8192], s8[79691776])"
    assert inst.operands == ("a2", "b2") and inst.custom_call_target == "__cublas$gemm"
    assert inst.backend_config["gemm_backend_config"]["lhs_stride"] == "33554432"
    assert m.instruction("gemm_fusion_dot.1").called == ("fused_gemm",)
    # proto3 leaves zeros off the wire: batch dimension 0 decodes as 0
    assert m.instruction("convolution.1").conv.input_batch == 0
    assert index.lookup("h0", 7, "dot.0") is None  # fusion bodies never name kernels
    assert index.lookup("h0", 8, "dot.1") is None and index.lookup("h1", 7, "dot.1") is None


def test_dot_with_batch_dims(index: HloIndex) -> None:
    c = cost(index, "dot.1")
    assert c.kind == "gemm" and c.dtype == "bf16"
    assert c.flops == 2 * 4 * 128 * 256 * 64
    assert c.bytes == 2 * (4 * 128 * 64 + 4 * 64 * 256 + 4 * 128 * 256)
    assert "M=128 N=256 K=64 batch=4" in c.detail


def test_convolution_counts_valid_positions(index: HloIndex) -> None:
    c = cost(index, "convolution.1")
    # 3x3, stride 1, pad 1 over 16: 16*3 - 2 taps fall on padding per spatial dim -> 46
    assert c.kind == "conv" and c.flops == 2 * 8 * 32 * 2 * 46 * 46
    assert c.bytes == 2 * (2 * 8 * 16 * 16 + 32 * 8 * 9 + 2 * 32 * 16 * 16)


def test_fusion_with_dot_inside_counts_only_the_dot(index: HloIndex) -> None:
    c = cost(index, "gemm_fusion_dot.1")
    assert c.kind == "gemm" and c.dtype == "bf16" and c.flops == 2 * 64 * 16 * 32
    assert c.bytes == 64 * 32 * 2 + 32 * 16 * 2 + 64 * 16 * 4 + 64 * 16 * 4


def test_elementwise_and_reduce_fusions(index: HloIndex) -> None:
    e = cost(index, "loop_fusion")
    assert e.kind == "elementwise" and e.flops == 2 * 1000  # multiply + add; convert: 0
    assert e.bytes == 4000 + 4000 + 2000 and e.dtype == "bf16"
    r = cost(index, "input_reduce_fusion")
    assert r.kind == "reduction" and r.flops == 800 - 8 and r.bytes == 3200 + 32


def test_collectives_iota_list_and_mesh_groups(index: HloIndex) -> None:
    ar = cost(index, "all-reduce.1")
    assert (ar.kind, ar.msg_bytes, ar.group_size, ar.flops, ar.bytes) == (
        "collective", 4096, 4, None, None)
    ag = cost(index, "all-gather-start.1")
    assert (ag.msg_bytes, ag.group_size) == (4096, 4)  # the gathered result, not the input
    assert cost(index, "all-gather-done.1").msg_bytes == 4096
    a2a = cost(index, "all-to-all.1")
    assert (a2a.msg_bytes, a2a.group_size) == (2048, 2)
    m = index.module("h0", 7)
    assert m.instruction("all-reduce.1").replica_groups == [[0, 2, 4, 6], [1, 3, 5, 7]]
    assert m.instruction("all-to-all.1").replica_groups == [[0, 4], [1, 5], [2, 6], [3, 7]]


def test_gemm_custom_call_from_backend_config(index: HloIndex) -> None:
    c = cost(index, "custom-call.1")
    assert c.kind == "gemm" and c.flops == 2 * 8192 * 8192 * 4096 == 549_755_813_888
    assert c.bytes == 2 * (8192 * 4096 * 2 + 8192 * 8192)  # the s8 workspace is left out
    assert "M=8192 N=8192 K=4096 batch=1" in c.detail


def test_cudnn_conv_custom_call_matches_xla(index: HloIndex) -> None:
    c = cost(index, "cudnn-conv.1")
    assert c.flops == 2 * 5120 * 16 * (32 * 60 * 104) == 32_715_571_200  # XProf: 32.716 G
    assert c.bytes == 2 * (16 * 32 * 60 * 104 + 5120 * 16 * 4 + 5120 * 34 * 31 * 53)


def test_attention_forward_causal_and_backward(index: HloIndex) -> None:
    fwd = cost(index, "fmha.fwd")
    full = 2 * (2 * 16 * 1024 * 1024 * 64)  # Q·Kᵀ and P·V
    assert fwd.kind == "attention" and fwd.flops == full / 2 and "causal" in fwd.detail
    bwd = cost(index, "fmha.bwd")
    assert bwd.flops == 2.5 * full and "bwd" in bwd.detail


def test_unknown_custom_call_has_no_flops(index: HloIndex) -> None:
    c = cost(index, "opaque.1")
    assert c.flops is None and c.bytes == 8192 and c.kind == "opaque"


def test_iota_and_mesh_expansions_match_xla_tests() -> None:
    # expected values from xla/hlo/ir/replica_group_test.cc (shared/reference/hlo.md §5)
    assert iota_groups(4, 2, [2, 4], [1, 0]) == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert iota_groups(2, 4) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert mesh_axes_groups([2, 2], [(0, None, None)]) == [[0, 2], [1, 3]]
    assert mesh_axes_groups([8], [(0, 1, 2)]) == [[0, 4], [1, 5], [2, 6], [3, 7]]
    g = mesh_axes_groups([6, 6], [(0, 1, 2)])
    assert g[:2] == [[0, 18], [1, 19]] and len(g) == 18
    # the CPU trace's all-reduce: mesh [axis_0=4, axis_1=1] over axis 0
    assert mesh_axes_groups([4, 1], [(0, None, None)]) == [[0, 1, 2, 3]]
    assert mesh_axes_groups([2, 2], [(0, None, None)], device_ids=[3, 2, 1, 0]) == [[3, 1],
                                                                                    [2, 0]]


def test_group_modes_and_sizes() -> None:
    assert group_mode(0, False, "all-reduce") == "cross-replica"
    assert group_mode(1, True, "all-reduce") == "flattened-id"
    assert group_mode(1, False, "all-reduce") == "cross-replica-and-partition"
    assert group_mode(1, False, "all-to-all") == "cross-partition"
    assert group_size([[0, 1]], "flattened-id", 1, 8) == 2
    assert group_size([[0]], "cross-replica-and-partition", 1, 8) == 8
    assert group_size([], "cross-partition", 1, 8) == 8
    assert group_size(None, "cross-replica", 2, 4) == 2
    assert group_size([], "flattened-id", None, 4) is None


def test_schema_field_numbers_are_the_verified_ones() -> None:
    """A guard against edits: numbers from shared/reference/hlo.md §2."""
    ins = message_class("HloInstructionProto").DESCRIPTOR.fields_by_name
    want = {"name": 1, "opcode": 2, "shape": 3, "metadata": 7, "fusion_kind": 11,
            "dimensions": 14, "window": 15, "convolution_dimension_numbers": 16,
            "custom_call_target": 28, "dot_dimension_numbers": 30, "id": 35, "operand_ids": 36,
            "called_computation_ids": 38, "backend_config": 43, "replica_groups": 49,
            "feature_group_count": 50, "batch_group_count": 58, "channel_id": 26,
            "use_global_device_ids": 71, "collective_device_list": 87,
            "iota_collective_device_list": 92, "mesh_axes_replica_group_list": 93,
            "backend_config_payload": 99}
    assert {k: ins[k].number for k in want} == want
    conv = message_class("ConvolutionDimensionNumbers").DESCRIPTOR.fields_by_name
    assert (conv["input_batch_dimension"].number, conv["kernel_input_feature_dimension"].number,
            conv["output_spatial_dimensions"].number) == (7, 3, 12)


def test_shapes_keep_packed_widths_tuples_and_unknown_types() -> None:
    """Each instruction's shape as its proto says: a packed ``element_size_in_bits`` only
    where set, tuples of their parts, unknown type numbers by number; equal shapes give
    equal Shapes whether or not the decoder shares one object between them."""
    b = ModuleBuilder("shapes", 7)
    c = b.computation("main")
    b.inst(c, "p0", "parameter", "s4[8,3]", parameter_number=0)
    b.inst(c, "p1", "parameter", "s4[8,3]", parameter_number=1,
           shape=lambda s: setattr(s.layout, "element_size_in_bits", 4))
    b.inst(c, "p2", "parameter", "s4[8,3]", parameter_number=2)
    b.inst(c, "f", "parameter", "f32[8,3]", parameter_number=4)
    b.inst(c, "t", "tuple", ("s4[8,3]", "f32[2]"), operands=("p0", "p1"),
           shape=lambda s: setattr(s.tuple_shapes[0].layout, "element_size_in_bits", 4))
    b.inst(c, "odd", "parameter", "f32[5]", parameter_number=3,
           shape=lambda s: setattr(s, "element_type", 99), root=True)
    b.entry(c)
    insts = module_from_proto(b.bytes()).computations["main"].instructions
    p0, p1, p2, t = (insts[n].shape for n in ("p0", "p1", "p2", "t"))
    assert (p0.dtype, p0.dims, p0.element_bits, p0.bytes) == ("s4", (8, 3), 0, 24)
    assert (p1.dtype, p1.dims, p1.element_bits, p1.bytes) == ("s4", (8, 3), 4, 12)
    assert p2 == p0 != p1
    assert (insts["f"].shape.dtype, insts["f"].shape.bytes) == ("f32", 96)
    assert t.is_tuple and [(s.dtype, s.dims, s.element_bits) for s in t.tuple_shapes] == [
        ("s4", (8, 3), 4), ("f32", (2,), 0)]
    assert (insts["odd"].shape.dtype, insts["odd"].shape.dims) == ("type99", (5,))


def test_instruction_fields_read_from_the_proto() -> None:
    """The decoder reads only the fields an instruction sets (``ListFields``); each of these
    is read into its own field, and an unset one keeps XLA's reading of proto3's zero (group
    counts 1, no channel, no groups). ``all_reduce_id`` (the old channel field) counts
    when ``channel_id`` is unset."""
    b = ModuleBuilder("fields", 11)
    c = b.computation("main")
    b.inst(c, "p", "parameter", "f32[8]", parameter_number=2,
           metadata=lambda m: setattr(m, "op_name", "jit(f)/dot_general"))
    b.inst(c, "cp", "collective-permute", "f32[8]", ("p",), channel_id=5,
           source_target_pairs=lambda s: [s.add(source=a, target=z) for a, z in
                                          ((0, 1), (1, 2), (2, 0))])
    b.inst(c, "ar", "all-reduce", "f32[8]", ("p",), all_reduce_id=9,
           use_global_device_ids=True)
    b.inst(c, "cmp", "compare", "pred[8]", ("p", "p"), comparison_direction="LT",
           comparison_type="TOTALORDER")
    b.inst(c, "gte", "get-tuple-element", "f32[8]", ("p",), tuple_index=3,
           feature_group_count=4, root=True)
    b.entry(c)
    insts = module_from_proto(b.bytes()).computations["main"].instructions
    p, cp, ar, cmp, gte = (insts[n] for n in ("p", "cp", "ar", "cmp", "gte"))
    assert (p.op_name, p.parameter_number, p.channel_id, p.replica_groups) == (
        "jit(f)/dot_general", 2, 0, None)
    assert (cp.channel_id, cp.source_target_pairs) == (5, ((0, 1), (1, 2), (2, 0)))
    assert (ar.channel_id, ar.use_global_device_ids, ar.operands) == (9, True, ("p",))
    assert (cmp.comparison_direction, cmp.comparison_type) == ("LT", "TOTALORDER")
    assert (gte.tuple_index, gte.feature_group_count, gte.batch_group_count) == (3, 4, 1)
    assert (p.op_name, cp.op_name, p.custom_call_target, p.fusion_kind) == (
        "jit(f)/dot_general", "", "", "")
