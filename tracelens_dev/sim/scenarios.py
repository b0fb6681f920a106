"""Seeded random jobs spanning the regimes the critical path must get right (issue 45's
campaign; docs/simulator.md). ``generate(seed)`` is a pure function of the seed."""

from __future__ import annotations

import random

from tracelens_dev.sim.model import (Collective, CopyD2H, GraphLaunch, HostOp, Instr, Job, Kernel,
                                     Launch, RecordEvent, Sync, WaitEvent)

REGIMES = ("device_bound", "host_bound", "comm_bound", "straggler", "pipeline", "overlap",
           "graph", "queue_bound", "sync")
"""device_bound: the host runs ahead of long kernels; host_bound: tiny kernels, host gaps
longer than them; comm_bound: synchronous collectives longer than the compute; straggler:
one rank's kernels carry a planted delay; pipeline: stages passing microbatches by
send/recv; overlap: collectives on the comm stream under compute, joined by events; graph:
launches in graph launches; queue_bound: a small launch queue; sync: blocking syncs and
device-to-host copies inside the step."""

_LAYER = ("reduction", "gemm", "elementwise", "attention", "gemm", "elementwise", "reduction",
          "gemm", "elementwise", "gemm", "elementwise")


def _gap(rng: random.Random, lo: int, hi: int) -> list[Instr]:
    ns = rng.randint(lo, hi)
    return [HostOp(ns)] if ns > 0 else []


def _data_parallel(seed: int, regime: str, rng: random.Random) -> Job:
    n = rng.choice((2, 2, 4, 4, 8, 8, 16) if regime != "straggler" else (2, 4, 8, 16))
    layers = rng.randint(2, 5)
    group = tuple(range(n))
    kern = {"device_bound": (20_000, 200_000), "host_bound": (1_000, 6_000),
            "comm_bound": (5_000, 30_000), "straggler": (20_000, 120_000),
            "overlap": (20_000, 150_000), "graph": (3_000, 30_000),
            "queue_bound": (30_000, 150_000), "sync": (10_000, 80_000)}[regime]
    gap = {"host_bound": (8_000, 40_000), "graph": (5_000, 25_000)}.get(regime, (0, 4_000))
    transfer = {"comm_bound": (100_000, 400_000), "overlap": (50_000, 300_000)}.get(
        regime, (10_000, 80_000))
    straggler = rng.randrange(n) if regime == "straggler" else None
    late = {r: 0 for r in range(n)}
    if straggler is not None:
        late[straggler] = rng.randint(20_000, 200_000)
    ctype = rng.choice(("all-reduce", "all-gather", "reduce-scatter"))
    # one shape for every rank (the same program, as data parallelism runs), per-rank jitter
    shapes = [[rng.randint(*kern) for _ in _LAYER] for _ in range(layers)]
    transfers = [rng.randint(*transfer) for _ in range(layers)]
    hosts = [[rng.randint(*gap) for _ in _LAYER] for _ in range(layers)]
    delayed = (rng.randrange(layers), rng.randrange(len(_LAYER)))
    programs = []
    for r in range(n):
        jr = random.Random(seed * 1009 + r)
        prog: list[Instr] = [HostOp(jr.randint(5_000, 30_000), "train_step")]
        if regime in ("overlap", "sync", "device_bound"):
            prog += [Launch(Kernel("memory", 20_000, stream="copy", copy="h2d", label="input")),
                     RecordEvent("copy", "input"), WaitEvent("compute", "input")]
        for layer in range(layers):
            ops: list[Instr] = []
            for k, cat in enumerate(_LAYER):
                ns = int(shapes[layer][k] * jr.uniform(0.97, 1.03))
                if cat == "attention":
                    ns *= 2
                d = late[r] if (layer, k) == delayed else 0
                att = int(ns * 0.6) if cat in ("gemm", "attention") else None
                ops += [HostOp(hosts[layer][k])] if hosts[layer][k] else []
                ops.append(Launch(Kernel(cat, ns + d, delay_ns=d, attainable_ns=att,
                                         label=f"L{layer}.{k}")))
            if regime == "graph":
                ops = [GraphLaunch(tuple(i.item for i in ops if isinstance(i, Launch)))]
            prog += ops
            coll = Collective(ctype, group, transfers[layer], f"{ctype}.{layer}")
            ev = f"grad{layer}"
            if regime in ("overlap", "straggler", "device_bound", "graph", "queue_bound"):
                # asynchronous: on the comm stream after the layer's compute; the next layer
                # does not wait for it; the step's end does (the sync)
                prog += [RecordEvent("compute", ev), WaitEvent("comm", ev), Launch(coll)]
            else:
                # synchronous: the next layer's compute waits for the collective
                prog += [RecordEvent("compute", ev), WaitEvent("comm", ev), Launch(coll),
                         RecordEvent("comm", ev + "c"), WaitEvent("compute", ev + "c")]
            if regime == "sync" and layer == layers // 2:
                prog += [CopyD2H(jr.randint(2_000, 10_000))]
        if regime == "sync":
            prog += [Launch(Kernel("reduction", jr.randint(5_000, 20_000), label="loss")),
                     Sync("compute"), HostOp(jr.randint(10_000, 50_000), "optimizer_host")]
        prog += [Sync()]
        programs.append(tuple(prog))
    call = rng.randint(2_000, 5_000) if regime != "host_bound" else rng.randint(4_000, 9_000)
    q = rng.randint(2, 4) if regime == "queue_bound" else 1024
    return Job(tuple(programs), call_ns=call, launch_latency_ns=rng.randint(2_000, 8_000),
               queue_depth=q, name=f"sim-{regime}-{seed}",
               meta={"seed": seed, "regime": regime, "straggler": straggler,
                     "delay_ns": late.get(straggler, 0) if straggler is not None else 0})


def _pipeline(seed: int, rng: random.Random) -> Job:
    stages = rng.choice((2, 3, 4, 4, 8))
    micro = rng.randint(2, 6)
    fwd = [rng.randint(30_000, 120_000) for _ in range(stages)]
    transfer = rng.randint(5_000, 40_000)
    programs = []
    for s in range(stages):
        jr = random.Random(seed * 1009 + s)
        prog: list[Instr] = [HostOp(jr.randint(5_000, 20_000), "train_step")]
        for m in range(micro):
            if s > 0:
                recv = Collective("send-recv", (s - 1, s), transfer, f"p2p.{s - 1}.{m}")
                prog += [Launch(recv), RecordEvent("comm", f"in{m}"),
                         WaitEvent("compute", f"in{m}")]
            for k, cat in enumerate(("gemm", "elementwise", "gemm", "reduction")):
                share = (0.4, 0.1, 0.4, 0.1)[k]
                prog += _gap(jr, 0, 3_000)
                prog.append(Launch(Kernel(cat, int(fwd[s] * share * jr.uniform(0.97, 1.03)),
                                          attainable_ns=None, label=f"mb{m}.{k}")))
            if s < stages - 1:
                send = Collective("send-recv", (s, s + 1), transfer, f"p2p.{s}.{m}")
                prog += [RecordEvent("compute", f"out{m}"), WaitEvent("comm", f"out{m}"),
                         Launch(send)]
        prog.append(Sync())
        programs.append(tuple(prog))
    return Job(tuple(programs), call_ns=rng.randint(2_000, 5_000),
               launch_latency_ns=rng.randint(2_000, 8_000), name=f"sim-pipeline-{seed}",
               meta={"seed": seed, "regime": "pipeline", "straggler": None, "delay_ns": 0})


def generate(seed: int, regime: str | None = None) -> Job:
    """The job of ``seed``; its regime is ``REGIMES[seed % len(REGIMES)]`` unless given."""
    regime = regime or REGIMES[seed % len(REGIMES)]
    if regime not in REGIMES:
        raise ValueError(f"unknown regime {regime!r}; known: {', '.join(REGIMES)}")
    rng = random.Random(seed)
    if regime == "pipeline":
        return _pipeline(seed, rng)
    return _data_parallel(seed, regime, rng)
