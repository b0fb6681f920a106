"""Changes and their counterfactuals: the job with one change made, simulated again
(docs/simulator.md). Every change is a pure ``Job -> Job`` transform."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from tracelens_dev.sim.engine import simulate
from tracelens_dev.sim.model import (Collective, GraphLaunch, HostOp, Instr, Item, Job, Kernel,
                                     Launch)


@dataclass(frozen=True)
class Change:
    """``kind``: ``faster`` (``target`` a category, ``pct`` % less time), ``hide`` (a
    collective type), ``on_time`` (a rank, as an int), ``graph_launch`` (``target`` a rank or
    None for every rank; ``lo``/``hi`` the program's instruction range), ``host_faster``
    (``pct``), ``roofline`` (a category at its kernels' ``attainable_ns``)."""

    kind: str
    target: str | int | None = None
    pct: float = 0.0
    lo: int = 0
    hi: int | None = None

    def label(self, job: Job) -> str:
        """The change as the analyzer's what-if rows name it (``change target``)."""
        if self.kind == "on_time":
            return f"on_time {job.device_label(int(self.target or 0))}"
        if self.kind == "graph_launch":
            return "graph_launch"
        return f"{self.kind} {self.target}" + (f" {self.pct:g}%" if self.pct else "")


def _scaled(ns: int, pct: float) -> int:
    return int(ns * (100.0 - pct) // 100)


def map_items(job: Job, item: Callable[[int, Item], Item],
              host: Callable[[int, HostOp], HostOp] | None = None) -> Job:
    def one(r: int, ins: Instr) -> Instr:
        if isinstance(ins, Launch):
            return Launch(item(r, ins.item))
        if isinstance(ins, GraphLaunch):
            return GraphLaunch(tuple(item(r, i) for i in ins.items))
        if isinstance(ins, HostOp) and host is not None:
            return host(r, ins)
        return ins
    return replace(job, programs=tuple(tuple(one(r, i) for i in prog)
                                       for r, prog in enumerate(job.programs)))


def faster(job: Job, category: str, pct: float) -> Job:
    def f(_r: int, it: Item) -> Item:
        if isinstance(it, Kernel) and it.category == category:
            ns = _scaled(it.ns, pct)
            return replace(it, ns=ns, delay_ns=min(it.delay_ns, ns))
        return it
    return map_items(job, f)


def hide(job: Job, ctype: str) -> Job:
    def f(_r: int, it: Item) -> Item:
        if isinstance(it, Collective) and it.ctype == ctype:
            return replace(it, hidden=True, transfer_ns=0)
        return it
    return map_items(job, f)


def on_time(job: Job, rank: int) -> Job:
    def f(r: int, it: Item) -> Item:
        if r == rank and isinstance(it, Kernel) and it.delay_ns:
            return replace(it, ns=it.ns - it.delay_ns, delay_ns=0)
        return it

    def h(r: int, op: HostOp) -> HostOp:
        if r == rank and op.delay_ns:
            return replace(op, ns=op.ns - op.delay_ns, delay_ns=0)
        return op
    return map_items(job, f, h)


def host_faster(job: Job, pct: float) -> Job:
    def h(_r: int, op: HostOp) -> HostOp:
        ns = _scaled(op.ns, pct)
        return replace(op, ns=ns, delay_ns=min(op.delay_ns, ns))
    out = map_items(job, lambda _r, it: it, h)
    return replace(out, call_ns=_scaled(job.call_ns, pct))


def roofline(job: Job, category: str) -> Job:
    def f(_r: int, it: Item) -> Item:
        if isinstance(it, Kernel) and it.category == category and it.attainable_ns is not None:
            ns = min(it.ns, it.attainable_ns)
            return replace(it, ns=ns, delay_ns=min(it.delay_ns, ns))
        return it
    return map_items(job, f)


def _graph_run(run: list[Instr], out: list[Instr]) -> None:
    """Append ``run`` (launches and host ops) to ``out``, as one graph launch when it holds
    two launches or more: host ops before its first launch and after its last stay, those
    between go."""
    at = [k for k, i in enumerate(run) if isinstance(i, Launch)]
    if len(at) < 2:
        out.extend(run)
        return
    out.extend(run[:at[0]])
    out.append(GraphLaunch(tuple(i.item for i in run if isinstance(i, Launch))))
    out.extend(run[at[-1] + 1:])


def graph_launch(job: Job, rank: int | None = None, lo: int = 0, hi: int | None = None) -> Job:
    """Each maximal run of launches and host ops in ``[lo, hi)`` of the rank's program (every
    rank's when None) holding at least two launches becomes one graph launch at the run's
    first launch: the launch calls and the host time between them are gone (a replayed
    graph runs no Python); other instructions (events, syncs, copies) end a run."""
    progs = []
    for r, prog in enumerate(job.programs):
        if rank is not None and r != rank:
            progs.append(prog)
            continue
        end = len(prog) if hi is None else min(hi, len(prog))
        out: list[Instr] = list(prog[:lo])
        run: list[Instr] = []
        for ins in prog[lo:end]:
            if isinstance(ins, (Launch, HostOp)):
                run.append(ins)
            else:
                _graph_run(run, out)
                run = []
                out.append(ins)
        _graph_run(run, out)
        out.extend(prog[end:])
        progs.append(tuple(out))
    return replace(job, programs=tuple(progs))


def apply(job: Job, change: Change) -> Job:
    k = change.kind
    if k == "faster":
        return faster(job, str(change.target), change.pct)
    if k == "hide":
        return hide(job, str(change.target))
    if k == "on_time":
        return on_time(job, int(change.target or 0))
    if k == "graph_launch":
        t = None if change.target is None else int(change.target)
        return graph_launch(job, t, change.lo, change.hi)
    if k == "host_faster":
        return host_faster(job, change.pct)
    if k == "roofline":
        return roofline(job, str(change.target))
    raise ValueError(f"unknown change {k!r}")


def counterfactual(job: Job, change: Change) -> int:
    """The step time of ``job`` with ``change`` made, simulated again."""
    return simulate(apply(job, change)).step_ns
