"""The synthetic program's HLO: what the scenario model puts in each program's ``xla.HloProto``,
and its ground-truth costs checked against numbers worked out by hand from the model config.
(The exact agreement of ``tracelens.load`` with the truth on every activity, for every sample
and random scenarios, is in tests/test_synth.py; XProf's reading of the same HLO is in
tests/test_synth_xspace.py.)"""

from __future__ import annotations

import json

import polars as pl
import pytest

import tracelens
from tests.conftest import SAMPLES
from tests.synth_helpers import hlo_warnings, synthetic
from parsers.hlo.proto import module_from_proto
from tracelens_dev.synth.samples import SAMPLES as SAMPLE_DEFS


def _module(syn):
    return module_from_proto(syn.trace.modules["hlo_proto"][0])


def _op(truth: dict, op: str) -> dict:
    return next(o for o in truth["ops"] if o["op"] == op)


def test_every_kernel_op_is_an_instruction_of_its_program() -> None:
    syn = synthetic(device="mi355x", hosts=2, gpus=2, steps=1, layers=2, moe=True, seed=3)
    module = _module(syn)
    assert (module.name, module.program_id, module.partition_count) == ("jit_train_step", 17, 4)
    entry = module.entry_computation
    assert module.entry == "main.17" and list(module.computations)[-1] == "main.17"
    ops = set(syn.trace.events["op"].drop_nulls())
    found = {}
    for comp in module.computations.values():
        for name, inst in comp.instructions.items():
            assert name not in found, f"{name} twice"  # names are unique per module
            found[name] = (comp, inst)
    assert ops <= set(found)
    # Kernels name entry instructions, except reduce-scatter: wrapped in an async computation
    # by an async-start/-done pair, as XLA:GPU does.
    for op in ops:
        comp, inst = found[op]
        assert (comp is entry) == (inst.opcode != "reduce-scatter"), op
    rs = [found[op] for op in ops if op.startswith("reduce-scatter")]
    assert rs and all(not c.is_fusion for c, _ in rs)
    starts = [i for i in entry.instructions.values() if i.opcode == "async-start"]
    assert sorted(c for i in starts for c in i.called) == sorted(c.name for c, _ in rs)
    # Every encoding of replica groups the readers support, each expanding to the plan.
    by_opcode = {found[op][1].opcode: found[op][1] for op in ops}
    assert by_opcode["all-gather-start"].replica_groups == [[0, 1, 2, 3]]  # iota (92)
    assert by_opcode["reduce-scatter"].replica_groups == [[0, 1, 2, 3]]  # list (87)
    assert by_opcode["all-to-all"].replica_groups == [[0, 1], [2, 3]]  # mesh axes (93)
    assert by_opcode["all-reduce"].replica_groups == [[0, 2, 1, 3]]  # iota [1,4]<=[2,2]T(1,0)
    ddp = synthetic(device="h100", gpus=2, steps=1, layers=2, fsdp=False, seed=3)
    ar = [i for i in _module(ddp).entry_computation.instructions.values()
          if i.opcode == "all-reduce-start"]
    assert ar and ar[0].replica_groups == [[0, 1]]  # explicit (49)


def test_gemm_and_attention_custom_calls_carry_what_the_cost_model_reads() -> None:
    amd = _module(synthetic(device="mi300x", gpus=2, steps=1, layers=1, moe=True, seed=1))
    nv = _module(synthetic(device="h100", gpus=2, steps=1, layers=1, moe=True, seed=1))
    targets = {}
    for m in (amd, nv):
        for inst in m.entry_computation.instructions.values():
            if inst.opcode == "custom-call":
                targets.setdefault(inst.custom_call_target, inst)
    assert set(targets) == {"__cublas$gemm", "__cublas$lt$matmul", "te_fused_attn_forward_ffi",
                            "te_fused_attn_backward_ffi", "__cudnn$fmhaSoftmax",
                            "__cudnn$fmhaSoftmaxBackward"}
    gemm = targets["__cublas$lt$matmul"]
    assert gemm.shape.is_tuple and gemm.shape.tuple_shapes[-1].dtype == "s8"  # workspace
    dims = gemm.backend_config["gemm_backend_config"]["dot_dimension_numbers"]
    assert dims["lhs_contracting_dimensions"] == ["1"]  # proto3 JSON: int64 as strings
    fmha = targets["__cudnn$fmhaSoftmax"].backend_config["cudnn_fmha_backend_config"]
    assert fmha["mask_type"] == "CAUSAL" and "bmm2_dot_dimension_numbers" in fmha
    # Triton GEMMs: kCustom fusions with the dot inside; the MoE expert GEMMs are batched.
    for m in (amd, nv):
        triton = [i for i in m.entry_computation.instructions.values()
                  if i.name.startswith("gemm_fusion_dot")]
        assert triton and all(i.fusion_kind == "kCustom" for i in triton)
        body = m.computations[triton[0].called[0]]
        assert [i.opcode for i in body.instructions.values()].count("dot") == 1
    batched = [i for i in nv.entry_computation.instructions.values()
               if i.opcode == "custom-call" and i.shape.tuple_shapes[0].dims[0] == 8]
    assert batched and all(len(i.shape.tuple_shapes[0].dims) == 3 for i in batched)


def test_truth_costs_by_hand() -> None:
    """The H100 sample (h=4096, ffn=14336, 32 heads of 128, 8 KV heads, 4096 tokens, 8
    experts of ffn 3584, top-2): costs worked out from the model config alone."""
    truth = json.loads((SAMPLES / "h100_8gpu_moe_ddp.truth.json").read_text())
    t, h, q, e, cap, fe = 4096, 4096, 4096 + 2 * 8 * 128, 8, 4096 * 2 // 8, 14336 // 4
    qkv = _op(truth, "cublas-lt-matmul.1")
    assert (qkv["flops"], qkv["bytes"]) == (2 * t * q * h, 2 * (t * h + h * q + t * q))
    experts = _op(truth, "cublas-lt-matmul.4")  # expert gate/up: batched over the experts
    assert experts["flops"] == 2 * e * cap * (2 * fe) * h
    attn = _op(truth, "custom-call.1")  # causal: half of Q·Kᵀ and P·V
    assert attn["flops"] == (2 * 32 * t * t * 128 * 2) // 2
    bwd = next(o for o in truth["ops"] if "fmhaSoftmaxBackward" in o["what"])
    assert bwd["flops"] == 5 * attn["flops"] // 2
    norm = _op(truth, "input_reduce_fusion")  # RMSNorm: x², Σ, rsqrt, two multiplies
    assert (norm["flops"], norm["bytes"]) == (4 * t * h, 2 * (2 * t * h + h))
    a2a = _op(truth, "all-to-all.1")  # [gpus, routed tokens per GPU, h] among the host's GPUs
    assert (a2a["msg_bytes"], a2a["group_size"]) == (8 * (2 * t // 8) * h * 2, 8)
    ar = _op(truth, "all-reduce-start.1")  # a layer's bf16 gradients
    params = h * q + h * h + h * e + e * 3 * h * fe
    assert (ar["msg_bytes"], ar["group_size"]) == (2 * params, 8)
    gn = _op(truth, "all-reduce.1")
    assert (gn["msg_bytes"], gn["group_size"]) == (4, 8)
    per_step = sum(o["flops"] for o in truth["ops"] if o["kind"] in ("gemm", "triton-gemm",
                                                                    "attention"))
    assert truth["model"]["model_flops_per_step"] == per_step
    assert truth["model"]["model_ops_without_flops"] == 0
    # FSDP on MI355X: all-gather of the padded per-device shard, reduce-scatter of the same.
    fsdp = json.loads((SAMPLES / "mi355x_8gpu_llama_fsdp.truth.json").read_text())
    p = 4096 * (4096 + 2 * 8 * 128) + 4096 * 4096 + 3 * 4096 * 14336
    assert _op(fsdp, "all-gather-start.1")["msg_bytes"] == 2 * -(-p // 8) * 8
    assert _op(fsdp, "reduce-scatter.1")["msg_bytes"] == 2 * -(-p // 8) * 8
    # CK attention through Transformer Engine, with the shape attributes TE writes: Q
    # bf16[1,4096,32,128], causal; forward Q·Kᵀ + P·V halved, backward 2.5× that.
    te = [o for o in fsdp["ops"] if o["kind"] == "attention"]
    fwd = [o for o in te if "forward" in o["what"]]
    bwd = [o for o in te if "backward" in o["what"]]
    causal_fwd = 2 * 1 * 32 * 4096 * 4096 * (128 + 128) // 2
    assert fwd and all(o["flops"] == causal_fwd and o["bytes"] > 0 for o in fwd)
    assert bwd and all(o["flops"] == 5 * causal_fwd // 2 for o in bwd)
    assert len(fwd) + len(bwd) == len(te)
    assert fsdp["model"]["model_ops_without_flops"] == 0


@pytest.mark.parametrize("name", [s.name for s in SAMPLE_DEFS])
def test_sample_costs_in_summarize(name: str) -> None:
    """summarize on each sample: no HLO warning, a roofline for every op group (none above its
    ceiling), MFU per device and step, and only the activities without an op (the H2D input
    copy) without cost data."""
    sample = next(s for s in SAMPLE_DEFS if s.name == name)
    truth = json.loads((SAMPLES / f"{name}.truth.json").read_text())
    trace = tracelens.load(SAMPLES / sample.trace_path)
    assert hlo_warnings(trace) == []
    summary = tracelens.summarize(trace, top=10_000)
    no_cost = [r for r in truth["activity_costs"]
               if r["kind"] == "kernel" and all(r[c] is None for c in
                                                ("flops", "bytes", "msg_bytes"))]
    assert [r["op"] for r in no_cost] == ([None] if sample.scenario.device != "h100" else [])
    # no cost data: the kernels without an op, and every compute kernel without FLOPs (the TE
    # attention kernels, whose synthetic attributes lack the shape), each with its reason
    kernels = trace.events.filter(pl.col("kind") == "kernel")
    no_op = kernels.filter(pl.col("op").is_null()).height
    te = kernels.filter(pl.col("cost_note").is_not_null())
    assert set(te["category"]) <= {"attention"} and te["flops"].null_count() == te.height
    assert set(te["cost_note"]) <= {f"te_fused_attn_{d}_ffi: attributes lack input_batch, "
                                    "attn_heads, q_max_seqlen, kv_max_seqlen, qk_head_dim"
                                    for d in ("forward", "backward")}
    assert summary["no_cost_data"] == no_op + te.height
    groups = [r for r in summary["roofline"] if r["category"] != "memory"]
    assert groups and all(r["bytes"] for r in groups)
    # CK attention (TE custom calls) has no FLOPs, so no bound; everything else has one.
    assert all((r["flops"] is None) == (r["bound"] is None) for r in groups)
    assert all(r["flops"] is not None for r in groups if r["category"] != "attention")
    # The construction runs every kernel below its roofline (GEMMs at 70% of the peak or 75%
    # of HBM, whichever is slower; fusions at 75% of HBM).
    assert all(r["efficiency"] < 0.76 for r in groups if r["efficiency"] is not None)
    gemm = [r for r in groups if r["category"] == "gemm"]
    assert gemm and all(r["flops"] and 0.2 < r["efficiency"] < 1.0 for r in gemm)
    for d in summary["devices"]:
        assert d["mfu_dtype"] == "bf16" and 0.1 < d["mfu"] < 1.0
        assert all(0.1 < s["mfu"] < 1.0 for s in d["steps"])


@pytest.mark.parametrize("grad_keys_first", [False, True])
def test_fmha_backward_dims_do_not_depend_on_json_key_order(grad_keys_first: bool) -> None:
    """Regression (tracelens.cost.opcost): a cuDNN backward config carries bmm1/bmm2 and
    bmm1_grad_*/bmm2_grad_* dimension numbers; the cost must use bmm1/bmm2 whatever order the
    JSON lists them in (it took the first key starting with "bmm1": 1.68 instead of 10.7
    GFLOP when the grad keys came first)."""
    from tests.hlo_build import ModuleBuilder
    from tracelens.cost.opcost import instruction_cost

    def dims(lc: str, rc: str, lb: list[str], rb: list[str]) -> dict:
        return {"lhs_contracting_dimensions": [lc], "rhs_contracting_dimensions": [rc],
                "lhs_batch_dimensions": lb, "rhs_batch_dimensions": rb}

    fwd = {"bmm1_dot_dimension_numbers": dims("3", "3", ["0", "2"], ["0", "2"]),
           "bmm2_dot_dimension_numbers": dims("3", "1", ["0", "1"], ["0", "2"])}
    grad = {f"bmm{i}_grad_gemm{j}_dot_dimension_numbers": dims("2", "1", ["0", "1"],
                                                               ["0", "2"])
            for i in (1, 2) for j in (1, 2)}
    cfg = {**grad, **fwd} if grad_keys_first else {**fwd, **grad}
    b = ModuleBuilder("jit_attn", 1)
    c = b.computation("main")
    bsnh = "bf16[2,1024,16,64]"
    for k, name in enumerate("qkv"):
        b.inst(c, name, "parameter", bsnh, parameter_number=k)
    b.inst(c, "fmha", "custom-call", (bsnh, bsnh, bsnh, "u8[0]"), operands=("q", "k", "v"),
           root=True, custom_call_target="__cudnn$fmhaSoftmaxBackward",
           backend_config={"cudnn_fmha_backend_config": {**cfg, "mask_type": "CAUSAL"}})
    b.entry(c)
    module = module_from_proto(b.bytes())
    cost = instruction_cost(module, module.entry_computation, module.instruction("fmha"))
    bmm = 2 * (2 * 16) * 1024 * 1024 * 64  # 2·B·N·Sq·Skv·H
    assert cost.flops == 2 * bmm * 5 / 2 / 2  # both bmms, backward × 2.5, causal × ½
