"""The planted 8 -> 64 GPU scaling pair (issue 45): what ``scaling`` must split exactly.

Per device and step (µs from the step's start): a GEMM on stream 1 for 8,000 µs, and an
all-reduce on stream 2 launched at 7,200 µs, under the last 800 µs of the GEMM.

- 8 GPUs (1 host): the all-reduce takes 1,000 µs, so 200 µs of it is exposed; step 8,200 µs.
- 64 GPUs (8 hosts): the all-reduce's transfer takes 4,000 µs, 3,200 µs exposed; and one GPU
  (``STRAGGLER``: node5/GPU3) computes 1,500 µs longer, so it launches its all-reduce at
  8,700 µs and every other GPU's all-reduce waits for it: the transfer runs 8,700-12,700 µs
  on every GPU; step 12,700 µs.

The step grows by 4,500 µs: 3,000 µs more exposed all-reduce (3,200 - 200) and 1,500 µs of
waiting for the late GPU, on every GPU (the straggler itself is the 1,500 µs the others wait
for). :func:`truth` is that answer, written from these constants, not computed by tracelens.
Steps are marked by the step windows ``[start, end of the all-reduce)``.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from tracelens.core.model import (DEVICE_SCHEMA, EVENT_SCHEMA, HOST_EVENT_SCHEMA, STEP_SCHEMA,
                             HostInfo, Trace, TraceMeta, conform)
from tracelens_dev.synth.devices import device_model

GPUS, STEPS = 8, 3
COMPUTE_NS = 8_000_000
LAUNCH_NS = 7_200_000  # the all-reduce's launch: 800 µs before the GEMM ends
SMALL_AR_NS, LARGE_AR_NS = 1_000_000, 4_000_000
LATE_NS = 1_500_000
STRAGGLER = (5, 3)  # (host, GPU) of the 64-GPU run
GAP_NS = 100_000  # between steps, outside every step window
T0 = 1_796_000_000_000_000_000
GEMM = "Cijk_Alik_Bljk_BBS_BH_MT256x256x64_MI16x16x1"
NCCL = "ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)"


def pair_trace(hosts: int, ar_ns: int, late_ns: int = 0,
               straggler: tuple[int, int] | None = None, per_rank: bool = False) -> Trace:
    """One run of the pair: ``hosts`` × 8 GPUs; the all-reduce's transfer ``ar_ns``; the
    ``straggler`` (host, GPU) computing ``late_ns`` longer. ``per_rank``: one rank per GPU
    (as PyTorch records a job: Kineto), else one rank per host (XSpace, rocprof)."""
    rows: list[dict[str, Any]] = []
    step_rows: list[dict[str, Any]] = []
    step_ns = LAUNCH_NS + late_ns + ar_ns if straggler else LAUNCH_NS + ar_ns
    for s in range(STEPS):
        b = s * (step_ns + GAP_NS)
        for h in range(hosts):
            for g in range(GPUS):
                i = h * GPUS + g
                rank, dev = (i, g) if per_rank else (h, g)
                late = late_ns if (h, g) == straggler else 0
                base = dict(host=f"node{h}", rank=rank, device=dev, kind="kernel",
                            launch="grid=256,1,1 block=256,1,1 regs=32 shared=0")
                rows += [
                    dict(base, stream=1, name=GEMM, start_ns=b, end_ns=b + COMPUTE_NS + late,
                         op="custom-call.1"),
                    dict(base, stream=2, name=NCCL, start_ns=b + LAUNCH_NS + late,
                         end_ns=b + step_ns, op="all-reduce-start.1", category="collective",
                         subcategory="all-reduce", msg_bytes=64 << 20, dtype="bf16",
                         group_size=hosts * GPUS, group_name="world"),
                ]
        step_rows += [dict(rank=r, step=s, start_ns=b, end_ns=b + step_ns, source="step_num")
                      for r in sorted({x["rank"] for x in rows})]
    events = conform(pl.DataFrame(rows, infer_schema_length=None), EVENT_SCHEMA)
    steps = conform(pl.DataFrame(step_rows), STEP_SCHEMA)
    row = device_model("mi300x").devices_row()
    devices = conform(pl.DataFrame(
        [{**row, "host": r["host"], "rank": r["rank"], "device": r["device"]}
         for r in {(x["host"], x["rank"], x["device"]): x for x in rows}.values()],
        schema_overrides=dict(DEVICE_SCHEMA)), DEVICE_SCHEMA)
    ranks_of: dict[str, list[int]] = {}
    for r in rows:
        if r["rank"] not in ranks_of.setdefault(r["host"], []):
            ranks_of[r["host"]].append(r["rank"])
    meta = TraceMeta(sources=[{"path": "<synthetic:scaling-pair>", "format": "synthetic"}],
                     alignment="synthetic (one clock)",
                     hosts={h: HostInfo(profile_start_ns=T0, ranks=rs)
                            for h, rs in ranks_of.items()})
    return Trace(events=events, host_events=pl.DataFrame(schema=HOST_EVENT_SCHEMA),
                 steps=steps, devices=devices, meta=meta)


def small_trace(per_rank: bool = False) -> Trace:
    """The 8-GPU run."""
    return pair_trace(1, SMALL_AR_NS, per_rank=per_rank)


def large_trace(per_rank: bool = False) -> Trace:
    """The 64-GPU run, with its late GPU."""
    return pair_trace(8, LARGE_AR_NS, LATE_NS, STRAGGLER, per_rank=per_rank)


def truth() -> dict[str, Any]:
    """The split of the 8 -> 64 step-time change per device and step, from the constants."""
    small_exposed = SMALL_AR_NS - (COMPUTE_NS - LAUNCH_NS)
    large_exposed = LARGE_AR_NS - (COMPUTE_NS - LAUNCH_NS)
    small_step = LAUNCH_NS + SMALL_AR_NS
    large_step = LAUNCH_NS + LATE_NS + LARGE_AR_NS
    return dict(
        step_ns=(small_step, large_step), delta_ns=large_step - small_step,
        causes={"exposed_comm:all-reduce": large_exposed - small_exposed,
                "straggler_wait:all-reduce": LATE_NS, "compute:gemm": 0, "idle": 0},
        straggler=(f"node{STRAGGLER[0]}", STRAGGLER[1]))
