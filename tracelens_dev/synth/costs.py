"""Ground truth of the cost model on a synthetic job, from the construction's recipes
(:mod:`tracelens_dev.synth.recipes`), never from ``tracelens.hlo`` or the analyzers.

Per op: what it computes and its cost per execution. Per activity (op, kind, kernel name):
the ``flops``, ``bytes``, ``msg_bytes`` and ``group_size`` a reader must give it, following the
conventions of docs/cost-model.md: an op's *main* kernel carries its FLOPs and bytes, the other
kernels of the op carry 0 where the op's value is known (the construction keeps the main
kernel the longest, which is how the annotation finds it); memcpy records keep their copy size
(``memcpy_details``) and no FLOPs; activities without an op have no cost data; every kernel of
a collective op gets its message size and group size.

MFU (docs/cost-model.md §9): model FLOPs = the FLOPs of GEMM and attention activities (a kernel
split by a step boundary counts the fraction of its time inside the step), divided by the
window (the device's first start → last end, or the step) × the device model's dense bf16
peak; activities whose FLOPs are unknown (CK/TE attention) are counted, and make MFU a lower
bound.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tracelens_dev.synth.devices import DeviceModel
from tracelens_dev.synth.program import Program, Spec
from tracelens_dev.synth.recipes import Recipe
from tracelens_dev.synth.scenario import Scenario
from tracelens_dev.synth.schedule import Records

MODEL_CATEGORIES = ("gemm", "attention")  # no convolutions in these programs


def activity_cost(spec: Spec) -> dict[str, Any]:
    """What a reader's cost annotation must put on every activity of ``spec``."""
    out: dict[str, Any] = {"flops": None, "bytes": None, "msg_bytes": None, "group_size": None}
    if spec.kind != "kernel":  # memcpy records: the copy size, nothing from the HLO
        out["bytes"] = spec.copy_bytes
        return out
    if spec.recipe is None:
        return out
    c = spec.recipe.cost()
    if spec.main:
        out["flops"], out["bytes"] = c.flops, c.bytes
    else:
        out["flops"] = None if c.flops is None else 0
        out["bytes"] = None if c.bytes is None else 0
    out["msg_bytes"], out["group_size"] = c.msg_bytes, c.group_size
    return out


def ops_truth(prog: Program) -> list[dict[str, Any]]:
    """Every HLO op kernels name: its instruction, shapes and cost of one execution."""
    kernels: dict[str, list[str]] = {}
    for s in prog.specs:
        if s.recipe is not None:
            kernels.setdefault(s.recipe.op, []).append(s.name)
    out = []
    for r in prog.recipes():
        c = r.cost()
        out.append({"op": r.op, "kind": r.kind, "what": r.describe(),
                    "kernels": kernels[r.op], "flops": c.flops, "bytes": c.bytes,
                    "dtype": c.dtype, "msg_bytes": c.msg_bytes, "group_size": c.group_size})
    return out


def activity_costs_truth(prog: Program) -> list[dict[str, Any]]:
    """One row per distinct (op, kind, kernel name) of the program's activities."""
    rows = {}
    for s in prog.specs:
        key = (s.op, s.kind, s.name)
        if key not in rows:
            rows[key] = {"op": s.op, "kind": s.kind, "name": s.name, **activity_cost(s)}
    return list(rows.values())


def _model_flops(prog: Program) -> tuple[np.ndarray, np.ndarray]:
    """Per spec: model FLOPs (0 for non-model activities) and whether they are unknown."""
    flops = np.zeros(len(prog.specs))
    unknown = np.zeros(len(prog.specs), dtype=bool)
    for i, s in enumerate(prog.specs):
        if s.category in MODEL_CATEGORIES:
            f = activity_cost(s)["flops"]
            unknown[i] = f is None
            flops[i] = 0.0 if f is None else float(f)
    return flops, unknown


def mfu_truth(sc: Scenario, model: DeviceModel, prog: Program, rec: Records,
              dev_index: np.ndarray) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """MFU of one device (the activities ``dev_index`` of ``rec``): whole trace and per step."""
    flops_of, unknown_of = _model_flops(prog)
    spec = rec.spec[dev_index]
    s, e = rec.start[dev_index], rec.end[dev_index]
    f = flops_of[spec]
    peak = model.peak_tflops * 1e3  # FLOP per ns

    def mfu(total: float, window: int) -> float | None:
        return total / (window * peak) if window > 0 else None

    span = int(e.max() - s.min())
    whole_flops = int(f.sum())
    device = {"model_flops": whole_flops, "model_kernels_without_flops":
              int(unknown_of[spec].sum()), "peak_tflops": model.peak_tflops,
              "mfu": mfu(whole_flops, span)}
    steps = []
    host = int(rec.dev[dev_index[0]]) // sc.gpus
    dur = (e - s).astype(np.float64)
    for k in np.nonzero(rec.step_host == host)[0]:
        lo, hi = int(rec.step_start[k]), int(rec.step_end[k])
        inside = np.clip(np.minimum(e, hi) - np.maximum(s, lo), 0, None)
        frac = np.where(dur > 0, inside / np.where(dur > 0, dur, 1.0), 1.0)
        part = float(np.sum(f * frac))
        steps.append({"step": int(rec.step_num[k]), "model_flops": part,
                      "mfu": mfu(part, hi - lo)})
    return device, steps


def bus_factor(ctype: str, n: int) -> float:
    """nccl-tests busbw / algbw: 2(n−1)/n for all-reduce, (n−1)/n for the others."""
    return (2.0 if ctype == "all-reduce" else 1.0) * (n - 1) / n


def model_config(sc: Scenario, prog: Program, recipes: list[Recipe]) -> dict[str, Any]:
    """The model behind the shapes, and the per-device model FLOPs of one step."""
    flops = [r.cost().flops for r in recipes if r.kind in ("gemm", "triton-gemm", "attention")]
    known = [f for f in flops if f is not None]
    return {"hidden": sc.hidden, "ffn": sc.ffn, "heads": sc.heads, "kv_heads": sc.kv_heads,
            "head_dim": sc.hidden // sc.heads, "seq": sc.seq, "batch": sc.batch,
            "tokens_per_device": sc.batch * sc.seq, "layers": sc.layers,
            "experts": sc.experts if sc.moe else None, "top_k": sc.top_k if sc.moe else None,
            "dtype": "bf16",
            "model_flops_per_step": sum(known),
            "model_ops_without_flops": len(flops) - len(known)}
