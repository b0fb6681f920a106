"""A 2-host job on a known device mesh (issue 28): every collective's axis, bytes, time and
exposure known by construction, for the axes analysis in every writer's format.

``fsdp=4 × tp=4`` on 2 hosts × 8 GPUs (device id = host × 8 + GPU, tp innermost): per device
and step (µs) a GEMM [0, 1000), the tensor-parallel all-reduce [1000, 1300) (nothing hides
it: 300 µs exposed), a GEMM [1300, 2300) and the FSDP all-gather [1500, 2500) (800 µs under
the GEMM, 200 µs exposed). tp groups are contiguous within a host; fsdp groups stride 4 and
cross hosts. :func:`mesh_truth` is the answer written from these constants, not computed by
tracelens.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from tracelens.core.model import (DEVICE_SCHEMA, EVENT_SCHEMA, HOST_EVENT_SCHEMA, MODULE_SCHEMA,
                             STEP_SCHEMA, HostInfo, Trace, TraceMeta, conform)
from tracelens_dev.synth.devices import device_model
from tracelens_dev.synth.hlo import program_proto
from tracelens_dev.synth.recipes import Collective, bf16

HOSTS, GPUS, FSDP, TP, STEPS = 2, 8, 4, 4, 2
STEP_NS = 10_000_000
AR_BYTES, AG_BYTES = 4 << 20, 8 << 20
Groups = tuple[tuple[int, ...], ...]


def tp_groups(n: int) -> Groups:
    return tuple(tuple(range(g * TP, (g + 1) * TP)) for g in range(n // TP))


def fsdp_groups(n: int) -> Groups:
    return tuple(tuple(range(t, n, TP)) for t in range(TP))


TP_GROUPS, FSDP_GROUPS = tp_groups(HOSTS * GPUS), fsdp_groups(HOSTS * GPUS)
GEMM = "Cijk_Alik_Bljk_BBS_BH_MT128x128x64_MI16x16x1"
NCCL = "ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)"
PROGRAM, MODULE = 5, "jit_mesh_step"


def _recipes(hosts: int) -> list[Collective]:
    n = hosts * GPUS
    return [Collective("all-reduce.1", "all-reduce", bf16(AR_BYTES // 2), bf16(AR_BYTES // 2),
                       sync=True, hosts=hosts, gpus=GPUS, encoding="explicit",
                       groups=tp_groups(n)),
            Collective("all-gather-start.2", "all-gather", bf16(AG_BYTES // 2 // (n // TP)),
                       bf16(AG_BYTES // 2), hosts=hosts, gpus=GPUS, encoding="list",
                       groups=fsdp_groups(n))]


def _group_of(i: int, groups: tuple[tuple[int, ...], ...]) -> str:
    return ",".join(map(str, next(g for g in groups if i in g)))


def mesh_trace(per_rank: bool = False, job: str = "fsdp_tp", hosts: int = HOSTS,
               ag_ns: int = 1_000_000) -> Trace:
    """The job as one Trace: hosts ``node0``/``node1`` with 8 GPUs each (XSpace, rocprof), or
    (``per_rank``) one rank per GPU, ranks 0..15, with each collective's own process group
    and its name (``mesh_tp``/``mesh_fsdp``), as PyTorch records them (Kineto).
    ``job``: ``fsdp_tp`` (module doc) or ``ep`` (:func:`ep_rows`). ``hosts``: of 8 GPUs
    (fsdp = 2 × hosts); ``ag_ns``: the FSDP all-gather's duration (the scaling pair: it
    grows with the job, :func:`scaling_truth`)."""
    model = device_model("mi300x")
    rows: list[dict[str, Any]] = []
    n = hosts * GPUS
    tp_g, fsdp_g = tp_groups(n), fsdp_groups(n)
    for h in range(hosts):
        for g in range(GPUS):
            i = h * GPUS + g
            rank, dev = (i, g) if per_rank else (h, g)
            for s in range(STEPS):
                b = s * STEP_NS
                # (a launch shape: rocprofv3 CSV rows always carry one)
                base = dict(host=f"node{h}", rank=rank, device=dev, kind="kernel",
                            program_id=PROGRAM, module=MODULE,
                            launch="grid=256,1,1 block=256,1,1 regs=32 shared=0")
                if job == "ep":
                    rows += ep_rows(base, b, i)
                    continue
                if job == "pp":
                    rows += pp_rows(base, b, i, per_rank)
                    continue
                rows += [
                    dict(base, stream=1, name=GEMM, start_ns=b, end_ns=b + 1_000_000),
                    dict(base, stream=2, name=NCCL, start_ns=b + 1_000_000, end_ns=b + 1_300_000,
                         op="all-reduce.1", category="collective", subcategory="all-reduce",
                         msg_bytes=AR_BYTES, group_size=TP, dtype="bf16",
                         groups=_group_of(i, tp_g), group_name="mesh_tp"),
                    dict(base, stream=1, name=GEMM, start_ns=b + 1_300_000, end_ns=b + 2_300_000),
                    dict(base, stream=2, name=NCCL, start_ns=b + 1_500_000,
                         end_ns=b + 1_500_000 + ag_ns, op="all-gather-start.2",
                         category="collective", subcategory="all-gather", msg_bytes=AG_BYTES,
                         group_size=n // TP, dtype="bf16", groups=_group_of(i, fsdp_g),
                         group_name="mesh_fsdp")]
    events = conform(pl.DataFrame(rows, infer_schema_length=None), EVENT_SCHEMA)
    ranks = sorted({(r["host"], r["rank"]) for r in rows})
    steps = conform(pl.DataFrame([dict(rank=r, step=s, start_ns=s * STEP_NS,
                                       end_ns=s * STEP_NS + (PP_SPAN if job == "pp"
                                                             else 1_600_000 + ag_ns),
                                       source="step_num")
                                  for _, r in ranks for s in range(STEPS)]), STEP_SCHEMA)
    row = model.devices_row()
    devices = conform(pl.DataFrame(
        [{**row, "host": r["host"], "rank": r["rank"], "device": r["device"]}
         for r in {(x["host"], x["rank"], x["device"]): x for x in rows}.values()],
        schema_overrides=dict(DEVICE_SCHEMA)), DEVICE_SCHEMA)
    recipes = {"ep": _ep_recipes, "pp": _pp_recipes}.get(job, lambda: _recipes(hosts))()
    proto = program_proto(MODULE, PROGRAM, n, recipes)
    modules = conform(pl.DataFrame([{"host": f"node{h}", "rank": h, "program_id": PROGRAM,
                                     "module": MODULE, "hlo_proto": proto}
                                    for h in range(hosts)],
                                   schema_overrides=dict(MODULE_SCHEMA)), MODULE_SCHEMA)
    meta = TraceMeta(sources=[{"path": "<synthetic:mesh>", "format": "synthetic"}],
                     alignment="synthetic (one clock)",
                     hosts={f"node{h}": HostInfo(profile_start_ns=1_795_000_000_000_000_000,
                                                 ranks=[h]) for h in range(hosts)})
    return Trace(events=events, host_events=pl.DataFrame(schema=HOST_EVENT_SCHEMA),
                 steps=steps, devices=devices, meta=meta, modules=modules)


EP, DP = 8, 2
EP_GROUPS = tuple(tuple(range(h * EP, (h + 1) * EP)) for h in range(DP))
A2A_NS, A2A_BYTES, HEAVY = 100_000, 1 << 20, 3  # local GPU 3 gets twice the tokens


def _ep_recipes() -> list[Collective]:
    return [Collective(op, "all-to-all", bf16(A2A_BYTES // 2), bf16(A2A_BYTES // 2), sync=True,
                       hosts=HOSTS, gpus=GPUS, encoding="explicit", groups=EP_GROUPS)
            for op in ("all-to-all.1", "all-to-all.2")]


def ep_rows(base: dict[str, Any], b: int, i: int) -> list[dict[str, Any]]:
    """``dp=2 × ep=8``: per device and step the MoE dispatch all-to-all at 500 µs and the
    combine at 1500 µs, each 100 µs, with an expert GEMM [700, 1400) between; GPU 3 of each
    host (its experts got twice the tokens) takes 200 µs and moves 2 MiB instead of 1 MiB
    (Kineto's split sizes say so; XLA's static shapes give every device the same bytes)."""
    heavy = i % EP == HEAVY
    dur, nbytes = A2A_NS * (2 if heavy else 1), A2A_BYTES * (2 if heavy else 1)
    grp = ",".join(map(str, EP_GROUPS[i // EP]))
    coll = dict(base, stream=2, name=NCCL, category="collective", subcategory="all-to-all",
                msg_bytes=nbytes, group_size=EP, dtype="bf16", groups=grp, group_name="mesh_ep")
    return [dict(coll, op="all-to-all.1", start_ns=b + 500_000, end_ns=b + 500_000 + dur),
            dict(base, stream=1, name=GEMM, start_ns=b + 700_000, end_ns=b + 1_400_000),
            dict(coll, op="all-to-all.2", start_ns=b + 1_500_000, end_ns=b + 1_500_000 + dur)]


def ep_truth(bytes_known: bool) -> dict[str, Any]:
    """The all-to-all balance the construction planted: every instance's time max/mean is
    200 / ((7 × 100 + 200) / 8); bytes the same ratio where per-rank sizes are recorded
    (``bytes_known``), else 1 (XLA: one static size); GPU 3 of each host is the slowest in
    every instance."""
    ratio = 2 * EP / (EP + 1)
    return dict(instances=2 * STEPS * DP, time_imbalance=ratio,
                bytes_imbalance=ratio if bytes_known else 1.0, steps=STEPS,
                slowest={(h, HEAVY): 2 * STEPS for h in range(DP)})


def mesh_truth() -> dict[str, dict[str, Any]]:
    """Per axis: what the construction put on it (module doc)."""
    acts = HOSTS * GPUS * STEPS
    tp_exposed, fsdp_exposed = acts * 300_000, acts * 200_000
    total = tp_exposed + fsdp_exposed
    return {
        "tp": dict(size=TP, crosses_hosts=False, types=("all-reduce",), count=acts,
                   bytes=acts * AR_BYTES, time_ns=acts * 300_000, exposed_ns=tp_exposed,
                   exposed_share=tp_exposed / total,
                   busbw=AR_BYTES / 300_000 * 2 * (TP - 1) / TP),
        "fsdp": dict(size=FSDP, crosses_hosts=True, types=("all-gather",), count=acts,
                     bytes=acts * AG_BYTES, time_ns=acts * 1_000_000, exposed_ns=fsdp_exposed,
                     exposed_share=fsdp_exposed / total,
                     busbw=AG_BYTES / 1_000_000 * (FSDP - 1) / FSDP),
    }


def scaling_truth() -> dict[str, Any]:
    """The 8 -> 64 GPU pair (1 host, fsdp=2, then 8 hosts, fsdp=16; tp=4 both): the FSDP
    all-gather grows from 1000 to 2000 µs, so its exposed part from 200 to 1200 µs, and the
    step (a window ending 100 µs after it) by the same 1000 µs; tp is unchanged."""
    return dict(small=dict(hosts=1, ag_ns=1_000_000), large=dict(hosts=8, ag_ns=2_000_000),
                cause="exposed_comm:fsdp:all-gather", delta_ns=1_000_000.0, share=1.0)


PP, MICRO, FWD, BWD = 4, 4, 100_000, 200_000  # GPipe: 4 stages of 4 GPUs (pp=4 × tp=4)
PP_SPAN = (PP - 1 + MICRO) * (FWD + BWD)
P2P = 10_000  # each send: the last 10 µs of the forward/backward it follows (hidden)


def _pp_recipes() -> list[Collective]:
    n = HOSTS * GPUS
    fwd = tuple((i, i + TP) for i in range(n - TP))
    bwd = tuple((i, i - TP) for i in range(TP, n))
    return [Collective("collective-permute.1", "collective-permute", bf16(1024), bf16(1024),
                       sync=True, hosts=HOSTS, gpus=GPUS, groups=fwd),
            Collective("collective-permute.2", "collective-permute", bf16(1024), bf16(1024),
                       sync=True, hosts=HOSTS, gpus=GPUS, groups=bwd)]


def pp_rows(base: dict[str, Any], b: int, i: int, per_rank: bool) -> list[dict[str, Any]]:
    """GPipe on ``pp=4 × tp=4`` (stage s: devices 4s..4s+3, s = 0, 1 on node0): microbatch m's
    forward on stage s at (s + m)·F, its backward at (P−1+M)·F + (P−1−s+m)·B; a stage sends
    activations after each forward (not the last stage) and gradients after each backward
    (not the first), as XLA collective-permutes (Kineto: sends in the stage's pp group)."""
    s = i // TP
    grp = ",".join(map(str, range(i % TP, HOSTS * GPUS, TP)))
    kind = "send" if per_rank else "collective-permute"
    send = dict(base, stream=2, name=NCCL, category="collective", subcategory=kind,
                msg_bytes=2048, group_size=PP, dtype="bf16", groups=grp, group_name="mesh_pp")
    rows: list[dict[str, Any]] = []
    t_bwd = (PP - 1 + MICRO) * FWD
    for m in range(MICRO):
        f0 = b + (s + m) * FWD
        rows.append(dict(base, stream=1, name=GEMM, start_ns=f0, end_ns=f0 + FWD))
        if s < PP - 1:
            rows.append(dict(send, op="collective-permute.1", start_ns=f0 + FWD - P2P,
                             end_ns=f0 + FWD))
        b0 = b + t_bwd + (PP - 1 - s + m) * BWD
        rows.append(dict(base, stream=1, name=GEMM, start_ns=b0, end_ns=b0 + BWD))
        if s > 0:
            rows.append(dict(send, op="collective-permute.2", start_ns=b0 + BWD - P2P,
                             end_ns=b0 + BWD))
    return rows


def pp_truth() -> dict[int, dict[str, float]]:
    """Per stage: GPipe's bubble (P−1)(F+B) of the step (P−1+M)(F+B) on every stage, its
    warm-up (before the first forward) s·F and cool-down (after the last backward) s·B."""
    bubble = (PP - 1) * (FWD + BWD)
    return {s: dict(devices=TP, step_ns=PP_SPAN, bubble_ns=bubble,
                    bubble_fraction=bubble / PP_SPAN, warmup_share=s * FWD / bubble,
                    cooldown_share=s * BWD / bubble) for s in range(PP)}
