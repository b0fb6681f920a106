"""The forward discrete-event simulation of one step (docs/simulator.md).

An event queue ordered by (time, insertion order) drives every rank's host thread and its
device's streams forward in time. Every start and end is the maximum of the times of the
constraints it waits for, so the result does not depend on how same-time events are
ordered; the queue's insertion order only makes the run deterministic.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any, Callable

from tracelens_dev.sim.model import (STREAMS, Collective, CopyD2H, GraphLaunch, HostOp, Item,
                                     Job, Kernel, Launch, RecordEvent, Sync, WaitEvent)


@dataclass
class DevItem:
    """One device item as simulated."""

    id: int
    rank: int
    stream: str
    seq: int  # position on its stream
    spec: Item
    enq: int  # when its launch call enqueued it
    ready: int  # enq + launch latency: the earliest start its launch allows
    seg: int  # the host segment (index into Sim.segs) that enqueued it
    prev: int | None  # the previous item on its stream
    waits: list[tuple[str, int | None]] = field(default_factory=list)  # (event, target item)
    start: int = -1
    end: int = -1

    @property
    def ns(self) -> int:
        return self.end - self.start


@dataclass
class HostSeg:
    """One stretch of a host thread: a named op (``op``), an untraced gap (``gap``), or an API
    call (``call``). ``block``: the device item a blocking call waited for (a sync's latest
    target, a D2H copy, the item a launch onto a full stream waited to finish)."""

    id: int
    rank: int
    kind: str
    name: str
    start: int
    end: int
    instr: int
    block: int | None = None
    launched: tuple[int, ...] = ()


@dataclass
class Sim:
    """The simulated step: every device item and host segment, and the step time."""

    job: Job
    items: list[DevItem]
    segs: list[HostSeg]
    rank_end: list[int]
    arrivals: dict[str, dict[int, int]]  # collective key -> {rank: item id}

    @property
    def step_ns(self) -> int:
        return max(self.rank_end) if self.rank_end else 0


API = {"launch": ("cudaLaunchKernel", "hipLaunchKernel"),
       "graph": ("cudaGraphLaunch", "hipGraphLaunch"),
       "record": ("cudaEventRecord", "hipEventRecord"),
       "wait": ("cudaStreamWaitEvent", "hipStreamWaitEvent"),
       "sync_stream": ("cudaStreamSynchronize", "hipStreamSynchronize"),
       "sync_device": ("cudaDeviceSynchronize", "hipDeviceSynchronize"),
       "d2h": ("cudaMemcpy", "hipMemcpy")}


def api_name(what: str, amd: bool) -> str:
    return API[what][1 if amd else 0]


class _Run:
    def __init__(self, job: Job) -> None:
        self.job = job
        self.amd = job.vendor.startswith("mi")
        self.heap: list[tuple[int, int, Callable[..., None], tuple[Any, ...]]] = []
        self.n = 0
        self.items: list[DevItem] = []
        self.segs: list[HostSeg] = []
        self.pc = [0] * job.ranks
        self.host_t = [0] * job.ranks
        # per (rank, stream): item ids in order, and how many have started / ended
        self.queue: dict[tuple[int, str], list[int]] = {}
        self.started: dict[tuple[int, str], int] = {}
        self.ended: dict[tuple[int, str], int] = {}
        self.pending_waits: dict[tuple[int, str], list[tuple[str, int | None]]] = {}
        self.events: dict[tuple[int, str], int | None] = {}
        self.waiters: dict[int, list[Callable[[int], None]]] = {}
        self.arrivals: dict[str, dict[int, int]] = {}
        self.groups: dict[str, tuple[int, ...]] = {}

    # -- the queue ---------------------------------------------------------------------------
    def at(self, t: int, fn: Callable[..., None], *args: Any) -> None:
        heapq.heappush(self.heap, (t, self.n, fn, args))
        self.n += 1

    def run(self) -> Sim:
        for r in range(self.job.ranks):
            self.at(0, self.host, r)
        while self.heap:
            t, _, fn, args = heapq.heappop(self.heap)
            fn(t, *args)
        stuck = [r for r in range(self.job.ranks) if self.pc[r] < len(self.job.programs[r])]
        unfinished = [i.id for i in self.items if i.end < 0]
        if stuck or unfinished:
            raise RuntimeError(f"deadlock: ranks {stuck} blocked, {len(unfinished)} device "
                               "items never ran (a collective some member never launches, or "
                               "members launching collectives in different orders)")
        ends = [0] * self.job.ranks
        for s in self.segs:
            ends[s.rank] = max(ends[s.rank], s.end)
        for i in self.items:
            ends[i.rank] = max(ends[i.rank], i.end)
        return Sim(self.job, self.items, self.segs, ends, self.arrivals)

    def on_end(self, item: int, fn: Callable[[int], None]) -> None:
        """Call ``fn(end)`` once ``item`` has ended (now, if it has)."""
        it = self.items[item]
        if it.end >= 0:
            fn(it.end)
        else:
            self.waiters.setdefault(item, []).append(fn)

    # -- the host ----------------------------------------------------------------------------
    def seg(self, r: int, kind: str, name: str, start: int, end: int, **kw: Any) -> HostSeg:
        s = HostSeg(len(self.segs), r, kind, name, start, end, self.pc[r], **kw)
        self.segs.append(s)
        return s

    def next_instr(self, r: int, t: int) -> None:
        self.pc[r] += 1
        self.at(t, self.host, r)

    def host(self, t: int, r: int) -> None:
        prog = self.job.programs[r]
        if self.pc[r] >= len(prog):
            return
        ins = prog[self.pc[r]]
        call = self.job.call_ns
        if isinstance(ins, HostOp):
            self.seg(r, "op" if ins.name else "gap", ins.name or "", t, t + ins.ns)
            self.next_instr(r, t + ins.ns)
        elif isinstance(ins, Launch):
            key = (r, ins.item.stream)
            q = self.queue.get(key, [])
            unfinished = len(q) - self.ended.get(key, 0)
            if unfinished >= self.job.queue_depth:
                oldest = q[self.ended.get(key, 0)]
                self.on_end(oldest, lambda e: self.at(max(t + call, e), self.launched, r, t,
                                                      ins, oldest))
            else:
                self.at(t + call, self.launched, r, t, ins, None)
        elif isinstance(ins, GraphLaunch):
            s = self.seg(r, "call", api_name("graph", self.amd), t, t + call)
            s.launched = tuple(self.enqueue(r, it, t + call, s.id) for it in ins.items)
            self.next_instr(r, t + call)
        elif isinstance(ins, RecordEvent):
            q = self.queue.get((r, ins.stream), [])
            self.events[(r, ins.ev)] = q[-1] if q else None
            self.seg(r, "call", api_name("record", self.amd), t, t + call)
            self.next_instr(r, t + call)
        elif isinstance(ins, WaitEvent):
            if (r, ins.ev) not in self.events:
                raise ValueError(f"rank {r}: wait for event {ins.ev!r} never recorded")
            self.pending_waits.setdefault((r, ins.stream), []).append(
                (ins.ev, self.events[(r, ins.ev)]))
            self.seg(r, "call", api_name("wait", self.amd), t, t + call)
            self.next_instr(r, t + call)
        elif isinstance(ins, Sync):
            streams = STREAMS if ins.stream is None else (ins.stream,)
            targets = [self.queue[(r, s)][-1] for s in streams if self.queue.get((r, s))]
            name = api_name("sync_device" if ins.stream is None else "sync_stream", self.amd)
            self.block(r, t, name, targets)
        elif isinstance(ins, CopyD2H):
            s = self.seg(r, "call", api_name("d2h", self.amd), t, -1)
            item = self.enqueue(r, Kernel("memory", ins.ns, ins.stream, copy="d2h"), t + call,
                                s.id)
            s.launched = (item,)
            s.block = item

            def done(e: int, s: HostSeg = s) -> None:
                s.end = max(t + call, e)
                self.next_instr(r, s.end)
            self.on_end(item, done)
        else:  # pragma: no cover
            raise TypeError(f"unknown instruction {ins!r}")

    def launched(self, t: int, r: int, start: int, ins: Launch, blocked: int | None) -> None:
        s = self.seg(r, "call", api_name("launch", self.amd), start, t, block=blocked)
        s.launched = (self.enqueue(r, ins.item, t, s.id),)
        self.next_instr(r, t)

    def block(self, r: int, t: int, name: str, targets: list[int]) -> None:
        """A blocking call: ends at max(t + call, every target's end)."""
        s = self.seg(r, "call", name, t, -1)
        left = [len(targets)]

        def one(_: int) -> None:
            left[0] -= 1
            if left[0] == 0:
                ends = [self.items[i].end for i in targets]
                s.end = max([t + self.job.call_ns] + ends)
                if targets:
                    s.block = max(targets, key=lambda i: (self.items[i].end, -i))
                self.next_instr(r, s.end)
        if not targets:
            left[0] = 1
            one(0)
        for i in targets:
            self.on_end(i, one)

    # -- the device --------------------------------------------------------------------------
    def enqueue(self, r: int, spec: Item, t: int, seg: int) -> int:
        key = (r, spec.stream)
        q = self.queue.setdefault(key, [])
        it = DevItem(len(self.items), r, spec.stream, len(q), spec, t,
                     t + self.job.launch_latency_ns, seg, q[-1] if q else None,
                     self.pending_waits.pop(key, []))
        self.items.append(it)
        q.append(it.id)
        if isinstance(spec, Collective):
            if r not in spec.group:
                raise ValueError(f"rank {r} launches collective {spec.key!r} of group "
                                 f"{spec.group}")
            if self.groups.setdefault(spec.key, spec.group) != spec.group:
                raise ValueError(f"collective {spec.key!r}: members disagree on its group")
        self.at(t, self.try_start, r, spec.stream)
        return it.id

    def try_start(self, t: int, r: int, stream: str) -> None:
        key = (r, stream)
        q = self.queue[key]
        k = self.started.get(key, 0)
        if k >= len(q):
            return
        it = self.items[q[k]]
        if it.prev is not None and self.items[it.prev].end < 0:
            return  # the previous item's end calls again
        times = [it.ready]
        if it.prev is not None:
            times.append(self.items[it.prev].end)
        for _, target in it.waits:
            if target is None:
                continue
            if self.items[target].end < 0:
                self.on_end(target, lambda _e: self.at(_e, self.try_start, r, stream))
                return
            times.append(self.items[target].end)
        start = max(times)
        if start > t:
            self.at(start, self.try_start, r, stream)
            return
        self.started[key] = k + 1
        it.start = start
        spec = it.spec
        if isinstance(spec, Collective):
            arr = self.arrivals.setdefault(spec.key, {})
            arr[r] = it.id
            if spec.hidden:
                self.at(start, self.item_end, it.id, start)
            elif len(arr) == len(spec.group):
                last = max(self.items[i].start for i in arr.values())
                for i in arr.values():
                    self.at(last + spec.transfer_ns, self.item_end, i, last + spec.transfer_ns)
        else:
            self.at(start + spec.ns, self.item_end, it.id, start + spec.ns)

    def item_end(self, t: int, item: int, end: int) -> None:
        it = self.items[item]
        it.end = end
        key = (it.rank, it.stream)
        self.ended[key] = self.ended.get(key, 0) + 1
        for fn in self.waiters.pop(item, []):
            fn(end)
        self.at(t, self.try_start, it.rank, it.stream)


def simulate(job: Job) -> Sim:
    """Run ``job``'s step forward in time; raises RuntimeError on a deadlock."""
    for r, prog in enumerate(job.programs):
        for ins in prog:
            ns = getattr(ins, "ns", 0)
            if ns < 0:
                raise ValueError(f"rank {r}: negative duration in {ins!r}")
    return _Run(job).run()
