"""FLOPs of attention and grouped-GEMM custom calls the HLO can describe, and the reason when it
cannot (docs/cost-model.md §3, §11).

Transformer Engine's typed-FFI calls ``te_fused_attn_forward_ffi`` /
``te_fused_attn_backward_ffi`` (CK ``FmhaFwd``/``FmhaBwd*`` kernels on ROCm, cuDNN on CUDA)
carry their configuration as an MLIR attribute dictionary (:mod:`parsers.hlo.attrs`):
``input_batch``, ``attn_heads``, ``num_gqa_groups``, ``q_max_seqlen``, ``kv_max_seqlen``,
``qk_head_dim`` (older TE: ``head_dim``), optionally ``v_head_dim``, ``mask_type`` (TE's
``NVTE_Mask_Type``: 0 none, 1 padding, 2 causal, 3 padding+causal, 4/5 the bottom-right causal
variants), ``max_segments_per_seq`` and ``window_size_left``. The FLOPs follow the cuDNN fMHA
rule of :mod:`tracelens.cost.opcost`: Q·Kᵀ + P·V = ``2·B·N·Sq·Skv·(Dqk + Dv)`` with N the query
heads (grouped-query attention shares K/V heads, not work), × 2.5 backward, × ½ causal.

Left null, with the reason: packed sequences (``max_segments_per_seq`` > 1: the work depends on
runtime segment lengths), sliding windows, unknown mask types, missing attributes; Pallas/
Triton kernels (the body is opaque IR); other attention libraries' custom calls (their
attributes are not documented in our references); grouped GEMMs (group sizes are runtime
values).
"""

from __future__ import annotations

import re
from typing import Any

from tracelens.core.hlo_model import Instruction

TE_ATTENTION_PREFIX = "te_fused_attn_"
CAUSAL_MASKS = frozenset((2, 3, 4, 5))
KNOWN_MASKS = frozenset(range(6))
TRITON_TARGETS = ("__gpu$xla.gpu.triton", "triton_kernel_call", "mosaic_gpu")
_ATTENTION_WORDS = re.compile(r"(?i)attn|attention|fmha|mha|flash|sdpa")
_GROUPED_WORDS = re.compile(r"(?i)grouped|ragged|moe")


def _int_attr(attrs: dict[str, Any], *keys: str) -> int | None:
    for k in keys:
        v = attrs.get(k)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    return None


def te_attention(inst: Instruction) -> tuple[float | None, str, str]:
    """(FLOPs or None, detail, reason when None) of one TE fused-attention call."""
    target = inst.custom_call_target
    attrs = inst.ffi_attributes
    if attrs is None:
        return None, "", (f"{target}: backend_config is not an MLIR attribute dictionary; "
                          "attention shape unknown")
    need = {"input_batch": _int_attr(attrs, "input_batch"),
            "attn_heads": _int_attr(attrs, "attn_heads"),
            "q_max_seqlen": _int_attr(attrs, "q_max_seqlen"),
            "kv_max_seqlen": _int_attr(attrs, "kv_max_seqlen"),
            "qk_head_dim": _int_attr(attrs, "qk_head_dim", "head_dim")}
    missing = [k for k, v in need.items() if v is None]
    if missing:
        return None, "", f"{target}: attributes lack {', '.join(missing)}"
    b, n, sq, skv, dqk = (int(v) for v in need.values())  # type: ignore[arg-type]
    dv = _int_attr(attrs, "v_head_dim")
    dv = dqk if dv is None else dv
    if min(b, n, sq, skv, dqk, dv) <= 0:
        return None, "", f"{target}: non-positive shape attribute"
    mask = _int_attr(attrs, "mask_type")
    mask = 0 if mask is None else mask
    if mask not in KNOWN_MASKS:
        return None, "", f"{target}: mask_type {mask} is not a known NVTE_Mask_Type"
    segments = _int_attr(attrs, "max_segments_per_seq") or 1
    if segments > 1:
        return None, "", (f"{target}: packed sequences (max_segments_per_seq = {segments}); "
                          "the work depends on runtime segment lengths")
    left = _int_attr(attrs, "window_size_left")
    if left is not None and 0 <= left < skv - 1:
        return None, "", (f"{target}: sliding window (window_size_left = {left}); "
                          "FLOPs not modelled")
    backward = "backward" in target
    flops = 2.0 * b * n * sq * skv * (dqk + dv)
    if backward:
        flops *= 2.5
    causal = mask in CAUSAL_MASKS
    if causal:
        flops *= 0.5
    gqa = _int_attr(attrs, "num_gqa_groups")
    detail = (f"TE {'bwd' if backward else 'fwd'} B={b} heads={n}"
              f"{f' kv_heads={gqa}' if gqa and gqa != n else ''} Sq={sq} Skv={skv} "
              f"Dqk={dqk} Dv={dv} mask_type={mask}{' causal' if causal else ''}")
    return flops, detail, ""


def opaque_kind_and_note(inst: Instruction) -> tuple[str, str]:
    """Kind (``attention``, ``gemm`` or ``opaque``) and the no-FLOPs reason of a custom call
    no cost rule covers."""
    target = inst.custom_call_target
    attrs = inst.ffi_attributes or {}
    label = " ".join(str(attrs.get(k, "")) for k in ("name", "kernel_name")) + " " + target
    if target.startswith(TRITON_TARGETS):
        kind = "attention" if _ATTENTION_WORDS.search(label + " " + inst.op_name) else "opaque"
        return kind, (f"Pallas/Triton custom call {target!r}: its kernel body is opaque IR, "
                      "FLOPs not derivable from the HLO")
    if _GROUPED_WORDS.search(target):
        return "gemm", (f"grouped GEMM custom call {target!r}: group sizes are runtime values "
                        "and its operand convention is not in our references; FLOPs unknown")
    if _ATTENTION_WORDS.search(target):
        return "attention", (f"attention custom call {target!r}: its attributes are not "
                             "documented in our references; FLOPs unknown")
    if "gemm" in target.lower() or "matmul" in target.lower():
        return "gemm", (f"GEMM custom call {target!r}: its attributes are not documented in "
                        "our references; FLOPs unknown")
    return "opaque", f"custom call {target!r}: no cost rule for this target; FLOPs unknown"
