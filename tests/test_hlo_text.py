"""The HLO text parser (``*.after_optimizations.txt``) on text written like real XLA dumps,
checked against the HloProto decoder on the same program."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import GPU_TRACES, oracle, real_trace
from tests.test_hlo import build_module
from tracelens.hlo.index import HloIndex
from tracelens.cost.opcost import instruction_cost
from parsers.hlo.proto import module_from_proto
from parsers.hlo.text import (_match_close, _split_top, load_text_dump, parse_instruction,
                                parse_module, parse_shape)

GEMM_CFG = json.dumps({"operation_queue_id": "0", "wait_on_operation_queues": [],
                       "gemm_backend_config": {"selected_algorithm": "-621293739",
                                               "alpha_real": 1, "beta": 0,
                                               "dot_dimension_numbers": {
                                                   "lhs_contracting_dimensions": ["1"],
                                                   "rhs_contracting_dimensions": ["0"],
                                                   "lhs_batch_dimensions": [],
                                                   "rhs_batch_dimensions": []}}})

# Written the way XLA prints an optimized module (operands with their shapes, layouts,
# metadata, JSON backend configs, the iota replica-group form), equivalent to build_module().
DUMP = f"""HloModule jit_handbuilt, is_scheduled=true, entry_computation_layout={{(bf16[4,128,64]{{2,1,0}})->bf16[4,128,256]{{2,1,0}}}}

%add_f32 (x: f32[], y: f32[]) -> f32[] {{
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %sum = f32[] add(f32[] %x, f32[] %y)
}}

%fused_gemm (param_0: bf16[64,32], param_1: bf16[32,16], param_2: f32[64,16]) -> f32[64,16] {{
  %param_0 = bf16[64,32]{{1,0}} parameter(0)
  %param_1 = bf16[32,16]{{1,0}} parameter(1)
  %param_2 = f32[64,16]{{1,0}} parameter(2)
  %dot.0 = f32[64,16]{{1,0}} dot(bf16[64,32]{{1,0}} %param_0, bf16[32,16]{{1,0}} %param_1), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}, metadata={{op_name="jit(f)/dot_general" source_file="model.py" source_line=12}}
  ROOT %add.0 = f32[64,16]{{1,0}} add(f32[64,16]{{1,0}} %dot.0, f32[64,16]{{1,0}} %param_2)
}}

%fused_elem (param_0.1: f32[1000], param_1.1: f32[1000]) -> bf16[1000] {{
  %param_0.1 = f32[1000]{{0}} parameter(0)
  %param_1.1 = f32[1000]{{0}} parameter(1)
  %mul = f32[1000]{{0}} multiply(f32[1000]{{0}} %param_0.1, f32[1000]{{0}} %param_1.1)
  %add.1 = f32[1000]{{0}} add(f32[1000]{{0}} %mul, f32[1000]{{0}} %param_0.1)
  ROOT %convert.1 = bf16[1000]{{0}} convert(f32[1000]{{0}} %add.1)
}}

%fused_reduce (param_0.2: f32[8,100]) -> f32[8] {{
  %param_0.2 = f32[8,100]{{1,0}} parameter(0)
  %zero = f32[] constant(0)
  ROOT %reduce.1 = f32[8]{{0}} reduce(f32[8,100]{{1,0}} %param_0.2, f32[] %zero), dimensions={{1}}, to_apply=%add_f32
}}

ENTRY %main.1 (a: bf16[4,128,64], bb: bf16[4,64,256]) -> (bf16[4,128,256], bf16[2,32,16,16]) {{
  %a = bf16[4,128,64]{{2,1,0}} parameter(0), metadata={{op_name="a"}}
  %bb = bf16[4,64,256]{{2,1,0}} parameter(1)
  %x = bf16[2,8,16,16]{{3,2,1,0}} parameter(2)
  %w = bf16[32,8,3,3]{{3,2,1,0}} parameter(3)
  %g0 = bf16[64,32]{{1,0}} parameter(4)
  %g1 = bf16[32,16]{{1,0}} parameter(5)
  %g2 = f32[64,16]{{1,0}} parameter(6)
  %e0 = f32[1000]{{0}} parameter(7)
  %e1 = f32[1000]{{0}} parameter(8)
  %r0 = f32[8,100]{{1,0}} parameter(9)
  %p = f32[1024]{{0}} parameter(10)
  %a2 = bf16[8192,4096]{{1,0}} parameter(12)
  %b2 = bf16[4096,8192]{{1,0}} parameter(13)
  %ci = bf16[1,16,32,60,104]{{4,3,2,1,0}} parameter(14)
  %cw = bf16[5120,16,1,2,2]{{4,3,2,1,0}} parameter(15)
  %dot.1 = bf16[4,128,256]{{2,1,0}} dot(bf16[4,128,64]{{2,1,0}} %a, bf16[4,64,256]{{2,1,0}} %bb), lhs_batch_dims={{0}}, lhs_contracting_dims={{2}}, rhs_batch_dims={{0}}, rhs_contracting_dims={{1}}, metadata={{op_name="jit(f)/dot_general"}}
  %convolution.1 = bf16[2,32,16,16]{{3,2,1,0}} convolution(bf16[2,8,16,16]{{3,2,1,0}} %x, bf16[32,8,3,3]{{3,2,1,0}} %w), window={{size=3x3 pad=1_1x1_1}}, dim_labels=bf01_oi01->bf01
  %gemm_fusion_dot.1 = f32[64,16]{{1,0}} fusion(bf16[64,32]{{1,0}} %g0, bf16[32,16]{{1,0}} %g1, f32[64,16]{{1,0}} %g2), kind=kCustom, calls=%fused_gemm, backend_config={{"operation_queue_id":"0","fusion_backend_config":{{"kind":"__triton_nested_gemm_fusion"}}}}
  %loop_fusion = bf16[1000]{{0}} fusion(f32[1000]{{0}} %e0, f32[1000]{{0}} %e1), kind=kLoop, calls=%fused_elem
  %input_reduce_fusion = f32[8]{{0}} fusion(f32[8,100]{{1,0}} %r0), kind=kInput, calls=%fused_reduce
  %all-reduce.1 = f32[1024]{{0}} all-reduce(f32[1024]{{0}} %p), channel_id=1, replica_groups=[2,4]<=[4,2]T(1,0), use_global_device_ids=true, to_apply=%add_f32
  %custom-call.1 = (bf16[8192,8192]{{1,0}}, s8[79691776]{{0}}) custom-call(bf16[8192,4096]{{1,0}} %a2, bf16[4096,8192]{{1,0}} %b2), custom_call_target="__cublas$gemm", metadata={{op_name="jit(dot)/dot_general" source_file="/workspace/traces/generate_gemm_trace.py" source_line=37}}, backend_config={GEMM_CFG}
  %cudnn-conv.1 = (bf16[1,5120,34,31,53]{{4,3,2,1,0}}, u8[7150336]{{0}}) custom-call(bf16[1,16,32,60,104]{{4,3,2,1,0}} %ci, bf16[5120,16,1,2,2]{{4,3,2,1,0}} %cw), window={{size=1x2x2 stride=1x2x2 pad=1_1x1_1x1_1}}, dim_labels=bf012_oi012->bf012, custom_call_target="__cudnn$convForward", backend_config={{"cudnn_conv_backend_config":{{"activation_mode":"kNone"}}}}
  ROOT %tuple.1 = (bf16[4,128,256]{{2,1,0}}, bf16[2,32,16,16]{{3,2,1,0}}) tuple(bf16[4,128,256]{{2,1,0}} %dot.1, bf16[2,32,16,16]{{3,2,1,0}} %convolution.1)
}}
"""

COMPARED = ["dot.1", "convolution.1", "gemm_fusion_dot.1", "loop_fusion", "input_reduce_fusion",
            "all-reduce.1", "custom-call.1", "cudnn-conv.1"]


def _costs(module) -> dict:
    idx = HloIndex()
    idx.add(module, host=None)
    out = {}
    for op in COMPARED:
        m, comp, inst = idx.lookup("any-host", module.program_id, op)
        c = instruction_cost(m, comp, inst)
        out[op] = (c.kind, c.flops, c.bytes, c.dtype, c.msg_bytes, c.group_size)
    return out


def test_text_dump_gives_the_same_costs_as_the_proto() -> None:
    text = parse_module(DUMP, program_id=7)
    proto = module_from_proto(build_module(7))
    assert text.name == "jit_handbuilt" and text.entry == "main.1"
    assert text.computations["fused_gemm"].is_fusion
    assert text.computations["main.1"].root == "tuple.1"
    ours, theirs = _costs(text), _costs(proto)
    for op in COMPARED:
        assert ours[op] == theirs[op], op
    assert text.instruction("all-reduce.1").replica_groups == [[0, 2, 4, 6], [1, 3, 5, 7]]


def test_bare_operand_syntax_and_explicit_groups() -> None:
    """Newer XLA prints operands without shapes; explicit replica groups; tiled layouts."""
    text = """HloModule jit_step

ENTRY main.0 {
  p0 = f32[256,512]{1,0:T(8,128)} parameter(0)
  p1 = f32[256,256]{1,0} parameter(1)
  dot.3 = f32[512,256]{1,0} dot(p0, p1), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  ROOT all-reduce.3 = (f32[512,256]{1,0}, f32[]) all-reduce(dot.3, p2), channel_id=1, replica_groups={{0,1,2,3}}, use_global_device_ids=true, to_apply=add
}
"""
    m = parse_module(text, program_id=12)
    idx = HloIndex()
    idx.add(m)
    mod, comp, inst = idx.lookup(None, 12, "dot.3")
    c = instruction_cost(mod, comp, inst)
    assert c.flops == 2 * 512 * 256 * 256 and c.bytes == 4 * (256 * 512 + 256 * 256 + 512 * 256)
    ar = instruction_cost(*idx.lookup(None, 12, "all-reduce.3"))
    assert ar.group_size == 4 and ar.msg_bytes == 512 * 256 * 4  # p2 is unknown: not counted


def test_dump_file_name_gives_the_program_id(tmp_path: Path) -> None:
    path = tmp_path / "module_0049.jit_handbuilt.gfx942_gpu_after_optimizations.txt"
    path.write_text(DUMP)
    assert load_text_dump(path).program_id == 49
    idx = HloIndex.from_frames(pl.DataFrame(schema={"host": pl.String, "program_id": pl.Int64,
                                                    "module": pl.String,
                                                    "hlo_proto": pl.Binary}),
                               text_dumps=[path, tmp_path / "missing.txt"])
    assert idx.lookup("any", 49, "custom-call.1") is not None
    assert any("missing.txt" in p.text for p in idx.problems)


@pytest.mark.parametrize("key", sorted(GPU_TRACES))
def test_xprof_hlo_text_agrees_with_our_decoded_shapes(key: str) -> None:
    """XProf's hlo_stats prints each op's HLO text: parse it and compare the result and operand
    shapes with the instruction we decoded from the trace's HloProto (by program id)."""
    import tracelens

    trace = tracelens.load(real_trace(GPU_TRACES[key]))
    table = json.loads(oracle(key, "xprof_hlo_stats.json").read_text())
    cols = [c["id"] for c in table["cols"]]
    idx = HloIndex.from_frames(trace.modules)
    host = trace.modules["host"][0]
    checked = 0
    for row in table["rows"]:
        r = dict(zip(cols, (c["v"] if c else None for c in row["c"])))
        inst_text, _ = parse_instruction(r["hlo_op_expression"])
        module, comp, inst = idx.lookup(host, int(r["program_id"]), r["hlo_op_name"])
        assert str(inst_text.shape) == str(inst.shape), r["hlo_op_name"]
        ours = [str(s) for s in module.operand_shapes(inst, comp)]
        expr = r["hlo_op_expression"]
        args = expr[expr.index(f" {inst.opcode}(") + len(inst.opcode) + 2:]
        args = args[:_match_close("(" + args, 0) - 2]
        theirs = [str(parse_shape(a)[0]) for a in _split_top(args)]
        assert theirs == ours, r["hlo_op_name"]
        checked += 1
    assert checked == len(table["rows"]) > 0
