"""Regenerate the bundled sample traces and their ground truth.

    python sample_traces/make_samples.py

Writes ``mi300x_8gpu_llama_step.xplane.pb`` and ``mi300x_8gpu_llama_step.truth.json`` next to
this file. The scenario is a small FSDP-style training job on one 8×MI300X node: three steps,
each of four transformer layers (hipBLASLt GEMMs, CK flash-attention forward, XLA elementwise
and reduction fusions) on the compute stream, an RCCL all-gather per layer on a second stream
that compute partly hides, an exposed reduce-scatter at the end of each step, and a host-to-
device copy at the start. GPU 5 runs its compute 8% slower. Every number in the truth file is
computed here from the construction, with plain interval sweeps, not by tracelens.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from parsers.xprof_write import AMD_MI300X_STATS, Activity, build_xspace  # noqa: E402

NAME = "mi300x_8gpu_llama_step"
GEMM_QKV = ("Cijk_Ailk_Bljk_BBS_BH_MT256x224x64_MI16x16x16x1_SN_1LDSB0_AFC1_AFEM1_ASEM1_CLR1_"
            "CADS0_EPS1_GRVW8_GSU1_ISA942_IU1_K1_KLA_LBSPP128_LPA0_LPB8_LRVW16_MIAV0_MMFGLC_"
            "NTn1_NTA0_NTB0_NTC0_NTD0_NEPBS0_ONLL1_PGR2_PLR1_SIA3_SS1_SU32_SUM0_SUS128_SPO0_"
            "SRVW0_SSO0_SVW4_TLDS1_VSn1_VWA2_VWB2_WSGRA0_WSGRB0_WG32_8_1_WGM1.kd")
GEMM_OUT = ("Cijk_Ailk_Bljk_BBS_BH_MT128x128x64_MI16x16x16x1_SN_1LDSB0_AFC1_AFEM1_ASEM1_CLR1_"
            "CADS0_EPS1_GRVW8_GSU1_ISA942_IU1_K1_KLA_LBSPP128_WGM16.kd")
FMHA_FWD = ("void ck_tile::kentry<ck_tile::gfx942_t, 2, ck_tile::FmhaFwdKernel<ck_tile::"
            "BlockFmhaPipelineQRKSVSAsync<ck_tile::BlockFmhaPipelineProblem<ck_tile::bf16_t>>>>")
RCCL = "ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)"
US = 1000
STEP_NS = 6_000 * US
LAYER_KERNELS = [  # (name, hlo_op, duration µs)
    (GEMM_QKV, "custom-call.{l}", 420),
    (FMHA_FWD, "custom-call.{l}1", 310),
    (GEMM_OUT, "custom-call.{l}2", 190),
    ("loop_add_fusion.kd", "loop_add_fusion.{l}", 45),
    ("input_reduce_fusion.kd", "input_reduce_fusion.{l}", 38),
]
GAP_NS = 12 * US


def build() -> tuple[list[Activity], list[tuple[int, int, int]]]:
    acts: list[Activity] = []
    steps = []
    corr = 0
    for s in range(3):
        s0 = 1_000 * US + s * (STEP_NS + 400 * US)
        steps.append((s, s0, s0 + STEP_NS))
        for dev in range(8):
            slow = 1.08 if dev == 5 else 1.0
            t = s0 + 20 * US
            acts.append(Activity(dev, 3, "__amd_rocclr_copyBuffer.kd", t, 60 * US,
                                 {"hlo_op": "copy.1"}))
            t += 80 * US
            for layer in range(4):
                ag = int(500 * US)
                acts.append(Activity(dev, 2, RCCL, t + 30 * US, ag,
                                     {"hlo_op": f"all-gather-start.{layer}",
                                      "hlo_module": "jit_train_step", "program_id": 42}))
                for name, op, dur_us in LAYER_KERNELS:
                    corr += 1
                    dur = int(dur_us * US * slow)
                    acts.append(Activity(dev, 1, name, t, dur,
                                         {"hlo_op": op.format(l=layer),
                                          "hlo_module": "jit_train_step", "program_id": 42,
                                          "correlation_id": corr}))
                    t += dur + GAP_NS
            acts.append(Activity(dev, 2, RCCL, t, 900 * US,
                                 {"hlo_op": "reduce-scatter-start.9",
                                  "hlo_module": "jit_train_step", "program_id": 42}))
    return acts, steps


def _union(ivs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(ivs):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _length(ivs: list[tuple[int, int]]) -> int:
    return sum(b - a for a, b in _union(ivs))


def _clip(ivs: list[tuple[int, int]], lo: int, hi: int) -> list[tuple[int, int]]:
    return [(max(a, lo), min(b, hi)) for a, b in ivs if min(b, hi) > max(a, lo)]


def truth(acts: list[Activity], steps: list[tuple[int, int, int]]) -> dict:
    """Timeline numbers of DESIGN §6.1 from the construction, per device and per step."""
    def classes(dev: int) -> tuple[list, list, list]:
        mine = [a for a in acts if a.device == dev]
        comm = [(a.start_ns, a.start_ns + a.dur_ns) for a in mine if a.name == RCCL]
        mem = [(a.start_ns, a.start_ns + a.dur_ns) for a in mine
               if a.name.startswith("__amd_rocclr")]
        comp = [(a.start_ns, a.start_ns + a.dur_ns) for a in mine
                if a.name != RCCL and not a.name.startswith("__amd_rocclr")]
        return comp, comm, mem

    def numbers(comp: list, comm: list, mem: list, span: int) -> dict:
        c, cc, all_ = _length(comp), _length(comp + comm), _length(comp + comm + mem)
        return {"span_ns": span, "busy_ns": all_, "compute_ns": c, "comm_ns": _length(comm),
                "exposed_comm_ns": cc - c, "memory_ns": _length(mem),
                "exposed_memory_ns": all_ - cc, "idle_ns": span - all_}

    devices = []
    for dev in range(8):
        comp, comm, mem = classes(dev)
        every = comp + comm + mem
        lo, hi = min(a for a, _ in every), max(b for _, b in every)
        per_step = [{"step": s, "start_ns": a, "end_ns": b,
                     "timeline": numbers(_clip(comp, a, b), _clip(comm, a, b),
                                         _clip(mem, a, b), b - a)} for s, a, b in steps]
        devices.append({"device": dev, "timeline": numbers(comp, comm, mem, hi - lo),
                        "steps": per_step})
    return {"trace": f"{NAME}.xplane.pb", "host": "mi300x-node0", "devices": devices}


def main() -> None:
    acts, steps = build()
    stats = {k: AMD_MI300X_STATS for k in range(8)}
    data = build_xspace(acts, host="mi300x-node0", device_stats=stats, steps=steps,
                        profile_start_ns=1_795_000_000_000_000_000)
    (HERE / f"{NAME}.xplane.pb").write_bytes(data)
    (HERE / f"{NAME}.truth.json").write_text(json.dumps(truth(acts, steps), indent=1) + "\n")
    print(f"wrote {NAME}.xplane.pb ({len(data):,} bytes, {len(acts)} device events)")


if __name__ == "__main__":
    main()
