"""FLOPs, bytes and collective sizes of one HLO instruction (docs/definitions.md#cost-model,
#collectives).

Rules (shared/reference/hlo.md §8, XLA ``hlo_cost_analysis.cc``):

- dot: ``2 × elements(result) × prod(lhs contracting dims)`` (``GetDotFlops``).
- GEMM custom calls (``__cublas$gemm``, ``__cublas$lt$matmul*``; the same targets run hipBLASLt
  on ROCm): the dot rule on operands 0/1 and result tuple element 0, with the dimension numbers
  of ``backend_config.gemm_backend_config.dot_dimension_numbers``.
- convolution and ``__cudnn$conv*`` custom calls: XLA's ``GetConvolutionFlops``:
  ``2 × C_in/feature_groups × C_out × N/batch_groups × prod(valid positions per spatial dim)``,
  padding and dilation holes excluded.
- cuDNN fused attention (``__cudnn$fmha*``): the two batched matmuls Q·Kᵀ and P·V from the
  Q, K, V shapes and ``cudnn_fmha_backend_config`` bmm1/bmm2 dimension numbers; backward = 2.5×
  forward (five matmuls instead of two, the FlashAttention convention); halved when
  ``mask_type`` is causal.
- Transformer Engine fused attention (``te_fused_attn_*_ffi``): the same rule from its FFI
  attribute dictionary (:mod:`tracelens.cost.attention`).
- ragged-dot: the dot rule on the result without its group dimension (XLA
  ``HandleRaggedDot``).
- fusions: bytes = operands + result; flops = the dots (and convolutions) inside, else one flop
  per element per arithmetic instruction inside (reductions: one per reduced element per
  reducer instruction); data movement (convert, broadcast, transpose, copy, slice, ...) is 0.
- collectives: ``msg_bytes`` = operand bytes (all-reduce, reduce-scatter, all-to-all,
  permute, broadcast) or result bytes (all-gather); ``group_size`` from the replica groups.

Bytes never count a GEMM/conv custom call's scratch workspace (its last ``s8``/``u8`` tuple
element, hlo.md §9.4). Anything else (unknown custom calls, ...) gets no FLOPs: null, never a
guess, with the reason in ``OpCost.note``. ``OpCost.kind`` says what the instruction computes,
for fusions of any kind and name from their body (:func:`structure_kind`).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from tracelens.cost.attention import TE_ATTENTION_PREFIX, opaque_kind_and_note, te_attention
from tracelens.cost.dtypes import roofline_dtype, widest
from tracelens.cost.groups import group_mode, group_size
from tracelens.core.hlo_model import Computation, ConvDims, DotDims, Instruction, Module, Shape

GEMM_TARGETS = ("__cublas$gemm", "__cublas$lt$matmul")  # prefixes ($f8, $mx variants)
CONV_TARGET_PREFIX = "__cudnn$conv"
FMHA_TARGET_PREFIX = "__cudnn$fmha"
COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "ragged-all-to-all",
               "collective-permute", "collective-broadcast", "send", "recv")
ARITHMETIC = frozenset((
    "add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "power",
    "atan2", "abs", "negate", "sign", "exponential", "exponential-minus-one", "log",
    "log-plus-one", "logistic", "sqrt", "rsqrt", "cbrt", "tanh", "sine", "cosine", "tan", "erf",
    "floor", "ceil", "round-nearest-afz", "round-nearest-even", "compare", "select", "clamp",
    "and", "or", "xor", "not", "shift-left", "shift-right-logical", "shift-right-arithmetic",
    "popcnt", "count-leading-zeros", "is-finite", "real", "imag", "complex", "reduce-precision",
    "stochastic-convert",
))
# Precision-config algorithms that compute in TF32 (hlo.md §2.7: ALG_DOT_TF32_TF32_F32{,_X3}).
_TF32_ALGORITHMS = (9, 10)


@dataclass
class OpCost:
    # What the instruction computes (the classifier's ``hlo`` signal): gemm, conv, attention,
    # reduction, elementwise, copy (data movement only), sort, collective, opaque.
    kind: str
    flops: float | None = None
    bytes: float | None = None
    dtype: str | None = None
    msg_bytes: int | None = None
    group_size: int | None = None
    detail: str = ""  # human-readable shapes behind the numbers
    note: str = ""  # why ``flops`` is null (empty when it is known)
    collective: str | None = None  # a collective's base opcode (all-reduce, ...), else None
    groups: str | None = None  # a collective's groups as device ids (``model.EVENT_SCHEMA``)


def _data_leaves(shape: Shape, drop_workspace: bool) -> list[Shape]:
    leaves = shape.leaves()
    if drop_workspace and shape.is_tuple and len(leaves) > 1 and leaves[-1].dtype in ("s8", "u8"):
        leaves = leaves[:-1]
    return leaves


def io_bytes(module: Module, comp: Computation, inst: Instruction,
             drop_workspace: bool = False) -> int:
    """Operand bytes + result bytes (the result's workspace leaf left out when asked)."""
    ops = sum(s.bytes for s in module.operand_shapes(inst, comp))
    return ops + sum(s.bytes for s in _data_leaves(inst.shape, drop_workspace))


def dot_flops(lhs: Shape, result: Shape, dims: DotDims) -> int:
    return 2 * result.elements * prod(lhs.dims[c] for c in dims.lhs_contracting)


def gemm_detail(lhs: Shape, rhs: Shape, dims: DotDims) -> str:
    """``B×M×N×K`` of a dot: batch, lhs free, rhs free and contracting sizes."""
    b = prod(lhs.dims[d] for d in dims.lhs_batch)
    k = prod(lhs.dims[d] for d in dims.lhs_contracting)
    m = prod(s for i, s in enumerate(lhs.dims)
             if i not in dims.lhs_batch and i not in dims.lhs_contracting)
    n = prod(s for i, s in enumerate(rhs.dims)
             if i not in dims.rhs_batch and i not in dims.rhs_contracting)
    return f"M={m} N={n} K={k} batch={b} ({lhs} x {rhs})"


def _dims_from_json(d: dict) -> DotDims | None:
    if not isinstance(d, dict):
        return None

    def ints(key: str) -> tuple[int, ...]:
        return tuple(int(x) for x in d.get(key, []) or [])
    try:
        return DotDims(ints("lhs_contracting_dimensions"), ints("rhs_contracting_dimensions"),
                       ints("lhs_batch_dimensions"), ints("rhs_batch_dimensions"))
    except (TypeError, ValueError):
        return None


def _operand_dtype(shapes: list[Shape], algorithm: int = 0) -> str | None:
    if algorithm in _TF32_ALGORITHMS:
        return "tf32"
    return widest([roofline_dtype(s.dtype) for s in shapes])


def _valid_positions(out: int, inp: int, kernel: int, stride: int, pad_lo: int,
                     w_dil: int, b_dil: int) -> int:
    """Output × kernel taps that read a real (not padded, not dilation-hole) input element."""
    count = 0
    for k in range(kernel):
        offset = k * w_dil - pad_lo
        if b_dil == 1:  # closed form: outputs o with 0 <= o*stride + offset < inp
            lo = max(0, -(offset // stride))
            hi = min(out - 1, (inp - 1 - offset) // stride)
            count += max(0, hi - lo + 1)
        else:
            for o in range(out):
                u = o * stride + offset
                if u % b_dil == 0 and 0 <= u // b_dil < inp:
                    count += 1
    return count


def conv_flops(inst: Instruction, lhs: Shape, rhs: Shape, out: Shape) -> int | None:
    d: ConvDims | None = inst.conv
    if d is None:
        return None
    window = inst.window or ()
    positions = 1
    for k, wd in enumerate(window):
        positions *= _valid_positions(out.dims[d.output_spatial[k]], lhs.dims[d.input_spatial[k]],
                                      rhs.dims[d.kernel_spatial[k]], wd.stride, wd.padding_low,
                                      wd.window_dilation, wd.base_dilation)
    c_in = lhs.dims[d.input_feature] // max(1, inst.feature_group_count)
    c_out = out.dims[d.output_feature]
    batch = lhs.dims[d.input_batch] // max(1, inst.batch_group_count)
    return 2 * c_in * c_out * batch * positions


def _conv_cost(module: Module, comp: Computation, inst: Instruction) -> OpCost:
    ops = module.operand_shapes(inst, comp)
    result = _data_leaves(inst.shape, True)[0] if inst.shape.is_tuple else inst.shape
    target = inst.custom_call_target
    # cuDNN backward convolutions keep the forward conv's window and dimension numbers:
    # backward-input computes the forward input from (dy, w), backward-filter the filter from
    # (x, dy).
    if "BackwardInput" in target:
        lhs, rhs, out = result, ops[1], ops[0]
    elif "BackwardFilter" in target:
        lhs, rhs, out = ops[0], result, ops[1]
    else:
        lhs, rhs, out = ops[0], ops[1], result
    try:
        flops = conv_flops(inst, lhs, rhs, out)
    except (IndexError, ZeroDivisionError):
        flops = None
    return OpCost("conv", flops, io_bytes(module, comp, inst, drop_workspace=True),
                  _operand_dtype([lhs, rhs]),
                  detail=f"conv {lhs} * {rhs} -> {out}",
                  note="" if flops is not None else "convolution with unreadable window or "
                                                    "dimension numbers")


def _gemm_custom_call(module: Module, comp: Computation, inst: Instruction) -> OpCost:
    ops = module.operand_shapes(inst, comp)
    cfg = inst.backend_config.get("gemm_backend_config", {})
    dims = _dims_from_json(cfg.get("dot_dimension_numbers")) if isinstance(cfg, dict) else None
    nbytes = io_bytes(module, comp, inst, drop_workspace=True)
    if dims is None or len(ops) < 2:
        return OpCost("gemm", None, nbytes, _operand_dtype(ops[:2]),
                      note=f"{inst.custom_call_target}: backend config without dot dimension "
                           "numbers")
    result = inst.shape.tuple_shapes[0] if inst.shape.is_tuple else inst.shape
    algorithm = cfg.get("precision_config", {}).get("algorithm", "")
    dtype = "tf32" if isinstance(algorithm, str) and "TF32" in algorithm else \
        _operand_dtype(ops[:2])
    return OpCost("gemm", float(dot_flops(ops[0], result, dims)), nbytes, dtype,
                  detail=gemm_detail(ops[0], ops[1], dims))


def _fmha_dims(cfg: object, bmm: str) -> DotDims | None:
    """``<bmm>_dot_dimension_numbers`` of a fused-attention config; another spelling of that
    key only as a fallback, never a backward config's ``<bmm>_grad_gemm*`` dimensions (JSON
    key order means nothing, and a backward config carries both)."""
    if not isinstance(cfg, dict):
        return None
    if f"{bmm}_dot_dimension_numbers" in cfg:
        return _dims_from_json(cfg[f"{bmm}_dot_dimension_numbers"])
    for key, value in cfg.items():
        if key.startswith(bmm) and "dot_dimension" in key and "grad" not in key:
            return _dims_from_json(value)
    return None


def _fmha_cost(module: Module, comp: Computation, inst: Instruction) -> OpCost:
    """cuDNN fused attention: Q·Kᵀ then P·V (operands 0, 1, 2 are Q, K, V)."""
    ops = module.operand_shapes(inst, comp)
    cfg = inst.backend_config.get("cudnn_fmha_backend_config", {})
    nbytes = io_bytes(module, comp, inst, drop_workspace=True)
    bmm1 = _fmha_dims(cfg, "bmm1")
    bmm2 = _fmha_dims(cfg, "bmm2")
    if bmm1 is None or bmm2 is None or len(ops) < 3:
        return OpCost("attention", None, nbytes, _operand_dtype(ops[:3]),
                      note=f"{inst.custom_call_target}: backend config without bmm1/bmm2 "
                           "dimension numbers")
    q, k, v = ops[0], ops[1], ops[2]
    bn = prod(q.dims[d] for d in bmm1.lhs_batch)
    sq = prod(s for i, s in enumerate(q.dims) if i not in bmm1.lhs_batch
              and i not in bmm1.lhs_contracting)
    h = prod(q.dims[d] for d in bmm1.lhs_contracting)
    skv = prod(s for i, s in enumerate(k.dims) if i not in bmm1.rhs_batch
               and i not in bmm1.rhs_contracting)
    hv = prod(s for i, s in enumerate(v.dims) if i not in bmm2.rhs_batch
              and i not in bmm2.rhs_contracting)
    flops = 2.0 * bn * sq * skv * h + 2.0 * bn * sq * skv * hv
    backward = "Backward" in inst.custom_call_target
    if backward:
        flops *= 2.5
    mask = str(cfg.get("mask_type", "")).upper()
    causal = "CAUSAL" in mask
    if causal:
        flops *= 0.5
    return OpCost("attention", flops, nbytes, _operand_dtype([q, k, v]),
                  detail=f"{'bwd' if backward else 'fwd'} B·N={bn} Sq={sq} Skv={skv} H={h} "
                         f"Hv={hv}{' causal' if causal else ''}")


def _inst_flops(module: Module, comp: Computation, inst: Instruction,
                depth: int = 0) -> tuple[int, int, list[Shape], str]:
    """(dot/conv flops, elementwise flops, dot operand shapes, detail) of one instruction,
    recursing into fusions and calls."""
    ops = module.operand_shapes(inst, comp)
    if inst.opcode == "dot" and inst.dot is not None and ops:
        return (dot_flops(ops[0], inst.shape, inst.dot), 0, ops[:2],
                gemm_detail(ops[0], ops[1], inst.dot) if len(ops) > 1 else "")
    if inst.opcode == "ragged-dot" and ops:
        return ragged_dot_flops(inst, ops) or 0, 0, ops[:2], ""
    if inst.opcode == "convolution" and len(ops) >= 2:
        return conv_flops(inst, ops[0], ops[1], inst.shape) or 0, 0, ops[:2], ""
    if inst.opcode in ("fusion", "call") and depth < 16:
        mm = elem = 0
        shapes: list[Shape] = []
        detail = ""
        for callee in inst.called:
            c = module.computations.get(callee)
            if c is None:
                continue
            for sub in c.instructions.values():
                m2, e2, s2, d2 = _inst_flops(module, c, sub, depth + 1)
                mm, elem, shapes, detail = mm + m2, elem + e2, shapes + s2, detail or d2
        return mm, elem, shapes, detail
    if inst.opcode in ARITHMETIC:
        return 0, inst.shape.elements, [], ""
    if inst.opcode in ("reduce", "reduce-window") and inst.called and ops:
        reducer = module.computations.get(inst.called[0])
        per_call = sum(1 for i in reducer.instructions.values()
                       if i.opcode in ARITHMETIC) if reducer else 0
        out = inst.shape.leaves()[0].elements
        if inst.opcode == "reduce":
            return 0, max(0, ops[0].elements - out) * per_call, [], ""
        window = prod(w.size for w in (inst.window or ()))
        return 0, out * max(0, window - 1) * per_call, [], ""
    return 0, 0, [], ""


def _collective_cost(module: Module, comp: Computation, inst: Instruction) -> OpCost:
    opcode = inst.opcode
    base = inst
    if opcode.endswith("-done") and inst.operands:
        start = comp.instructions.get(inst.operands[0])
        if start is not None:
            return _collective_cost(module, comp, start)
    if opcode == "async-start" and inst.called:
        body = module.computations.get(inst.called[0])
        root = body.root_instruction if body else None
        if root is not None:
            base = root
            comp = body
    op = base.opcode.removesuffix("-start")
    ops = module.operand_shapes(base, comp)
    operand_bytes = sum(s.bytes for s in ops)
    if op == "all-gather":
        msg = base.shape.bytes - operand_bytes if base.opcode.endswith("-start") \
            else base.shape.bytes
    elif op in ("collective-permute", "ragged-all-to-all", "send"):
        msg = ops[0].bytes if ops else None
    elif op == "recv":
        msg = base.shape.leaves()[0].bytes
    else:
        msg = operand_bytes
    groups = None
    if op == "collective-permute":
        ids = {i for pair in base.source_target_pairs for i in pair}
        size = len(ids) or None
        groups = groups_text([list(p) for p in base.source_target_pairs]) if ids else None
    elif op in ("send", "recv"):
        size = 2
    else:
        mode = group_mode(base.channel_id, base.use_global_device_ids, base.opcode)
        size = group_size(base.replica_groups, mode, module.replica_count,
                          module.partition_count)
        groups = device_groups(base.replica_groups, mode, size, module.replica_count,
                               module.partition_count)
    dtype = widest([roofline_dtype(s.dtype) for s in ops])
    return OpCost("collective", None, None, dtype, msg_bytes=msg, group_size=size, collective=op,
                  detail=f"{op} {msg} B over {size} devices", groups=groups)


def groups_text(groups: list[list[int]]) -> str:
    """Groups as ``model.EVENT_SCHEMA`` ``groups`` text: ``"0,1;2,3"``."""
    return ";".join(",".join(map(str, g)) for g in groups)


def device_groups(groups: list[list[int]] | None, mode: str, size: int | None,
                  replica_count: int | None, partition_count: int | None) -> str | None:
    """The op's replica groups as logical device ids, where the mode makes them device ids
    (hlo.md §5): flattened ids always; partition ids with one replica; replica ids with one
    partition. An empty list is every device. None otherwise (replica ids standing for all
    partitions, or a count unknown): the axes analysis counts those as without a group."""
    one_replica, one_partition = replica_count == 1, partition_count == 1
    devices = (mode == "flattened-id" or (mode == "cross-partition" and one_replica)
               or (mode in ("cross-replica", "cross-replica-and-partition") and one_partition))
    if not devices:
        return None
    if groups:
        return groups_text(groups)
    return groups_text([list(range(size))]) if size else None


def _is_collective(inst: Instruction, module: Module) -> bool:
    op = inst.opcode.removesuffix("-start").removesuffix("-done")
    if op in COLLECTIVES:
        return True
    if inst.opcode in ("async-start", "async-done", "async-update") and inst.called:
        body = module.computations.get(inst.called[0])
        root = body.root_instruction if body else None
        return bool(root) and root.opcode.removesuffix("-start") in COLLECTIVES
    return False


def instruction_cost(module: Module, comp: Computation, inst: Instruction) -> OpCost:
    """The cost of one execution of ``inst`` (an instruction of computation ``comp``)."""
    ops = module.operand_shapes(inst, comp)
    if inst.opcode == "custom-call":
        target = inst.custom_call_target
        if target.startswith(GEMM_TARGETS) and "grouped" not in target.lower():
            return _gemm_custom_call(module, comp, inst)
        if target.startswith(CONV_TARGET_PREFIX):
            return _conv_cost(module, comp, inst)
        if target.startswith(FMHA_TARGET_PREFIX):
            return _fmha_cost(module, comp, inst)
        if target.startswith(TE_ATTENTION_PREFIX):
            flops, detail, note = te_attention(inst)
            return OpCost("attention", flops, io_bytes(module, comp, inst, drop_workspace=True),
                          _operand_dtype(ops[:3]), detail=detail, note=note)
        kind, note = opaque_kind_and_note(inst)
        return OpCost(kind, None, io_bytes(module, comp, inst), None,
                      detail=f"custom call {target!r}", note=note)
    if _is_collective(inst, module):
        return _collective_cost(module, comp, inst)
    if inst.opcode == "dot" and inst.dot is not None and len(ops) >= 2:
        return OpCost("gemm", float(dot_flops(ops[0], inst.shape, inst.dot)),
                      io_bytes(module, comp, inst),
                      _operand_dtype(ops[:2], inst.precision_algorithm),
                      detail=gemm_detail(ops[0], ops[1], inst.dot))
    if inst.opcode == "ragged-dot":
        flops = ragged_dot_flops(inst, ops)
        return OpCost("gemm", None if flops is None else float(flops),
                      io_bytes(module, comp, inst), _operand_dtype(ops[:2]),
                      detail=f"ragged-dot {' x '.join(str(o) for o in ops[:2])} -> {inst.shape} "
                             "(groups assumed to cover the ragged dimension)",
                      note="" if flops is not None else
                      "ragged-dot without dot or ragged dimension numbers")
    if inst.opcode == "convolution":
        return _conv_cost(module, comp, inst)
    if inst.opcode in ("fusion", "call"):
        mm, elem, shapes, detail = _inst_flops(module, comp, inst)
        nbytes = io_bytes(module, comp, inst)
        if mm:
            body = _opcodes(module, inst)
            kind = "conv" if "convolution" in body and not body & {"dot", "ragged-dot"} \
                else "gemm"
            return OpCost(kind, float(mm), nbytes, _operand_dtype(shapes), detail=detail)
        return OpCost(structure_kind(module, inst), float(elem), nbytes,
                      _elementwise_dtype(inst, ops),
                      detail=f"{inst.fusion_kind or inst.opcode} -> {inst.shape}")
    if inst.opcode in ("parameter", "constant", "get-tuple-element", "tuple", "bitcast",
                       "while", "conditional", "after-all", "partition-id", "replica-id"):
        return OpCost("opaque", None, None, None, detail=f"{inst.opcode} launches no kernel",
                      note=f"{inst.opcode} launches no kernel")
    # A single unfused instruction (copy, reduce, elementwise, ...).
    _, elem, _, _ = _inst_flops(module, comp, inst)
    return OpCost(structure_kind(module, inst), float(elem), io_bytes(module, comp, inst),
                  _elementwise_dtype(inst, ops), detail=f"{inst.opcode} -> {inst.shape}")


REDUCTIONS = frozenset(("reduce", "reduce-window", "select-and-scatter"))


def _opcodes(module: Module, inst: Instruction, depth: int = 0) -> set[str]:
    """Opcodes an instruction runs: its own, or for a fusion/call those of its body."""
    if inst.opcode not in ("fusion", "call") or depth >= 16:
        return {inst.opcode}
    out: set[str] = set()
    for callee in inst.called:
        c = module.computations.get(callee)
        for sub in (c.instructions.values() if c else ()):
            out |= _opcodes(module, sub, depth + 1)
    return out


def structure_kind(module: Module, inst: Instruction) -> str:
    """What a non-GEMM fusion (any fusion kind, any name) or unfused op computes, from its
    body: ``reduction`` when it reduces, ``sort``, ``elementwise`` when it does arithmetic,
    else ``copy`` (data movement only: copy, transpose, convert, slice, ...)."""
    ops = _opcodes(module, inst)
    if ops & REDUCTIONS:
        return "reduction"
    if "sort" in ops:
        return "sort"
    if ops & ARITHMETIC:
        return "elementwise"
    return "copy"


def ragged_dot_flops(inst: Instruction, ops: list[Shape]) -> int | None:
    """``2 × output elements × contracting size``, the output taken without its group dimension
    (XLA ``HandleRaggedDot``): exact when the runtime group sizes cover the ragged dimension,
    as in MoE expert GEMMs over the routed tokens."""
    if inst.dot is None or not ops or not inst.lhs_ragged_dims:
        return None
    k = prod(ops[0].dims[c] for c in inst.dot.lhs_contracting)
    out = inst.shape.leaves()[0]
    elements = out.elements
    if inst.lhs_ragged_dims[0] in inst.dot.lhs_contracting and out.dims:
        elements //= out.dims[0]  # ragged contracting: one [m, n] result per group
    return 2 * elements * k


def _elementwise_dtype(inst: Instruction, ops: list[Shape]) -> str | None:
    leaves = inst.shape.leaves()
    return roofline_dtype(leaves[0].dtype if leaves else None) or widest(
        [roofline_dtype(s.dtype) for s in ops])
