"""Runs the step program on every device of the job: start and end of every activity.

All devices advance together, block by block, with numpy across devices. Per device: kernels of
a block run back to back on the compute stream with launch gaps; durations are the spec's base
duration × the device's slowdown (the straggler's) × (1 ± jitter). A collective synchronises its
group: each member's kernel starts when that member issues it and ends for all members together,
``transfer`` after the last member arrived, so early arrivers wait inside the kernel (that wait
is what a straggler plants in its peers' collectives). Copies and transfers are not slowed.

Step markers are per host: a step starts on the host, its kernels start a dispatch lag later
(or when the device is free), and the marker ends after the host's devices finish (``sync``),
after a fixed length, or before the devices finish (``async_markers``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracelens_dev.synth.program import Block, Program
from tracelens_dev.synth.scenario import Scenario

MIN_NS = 1_000
FIRST_STEP_NS = 100_000


@dataclass
class Records:
    """The construction: one row per device activity, per collective instance, per step."""

    dev: np.ndarray  # job-wide device index (host * gpus + ordinal)
    spec: np.ndarray  # index into Program.specs
    start: np.ndarray
    end: np.ndarray
    inst: np.ndarray  # collective instance index, -1 for other activities
    launch_step: np.ndarray  # the step whose program launched the activity
    inst_spec: np.ndarray  # per collective instance: spec, step, transfer, end, group id
    inst_step: np.ndarray
    inst_transfer: np.ndarray
    inst_end: np.ndarray
    inst_members: list[np.ndarray]
    step_host: np.ndarray  # per (host, step) marker
    step_num: np.ndarray
    step_start: np.ndarray
    step_end: np.ndarray


class _Engine:
    def __init__(self, prog: Program, sc: Scenario) -> None:
        self.prog, self.sc = prog, sc
        self.rng = np.random.default_rng(sc.seed)
        self.n = n = sc.hosts * sc.gpus
        self.host_of = np.repeat(np.arange(sc.hosts), sc.gpus)
        self.slow = np.ones(n)
        if sc.straggler is not None:
            self.slow[sc.straggler.host * sc.gpus + sc.straggler.device] = sc.straggler.slowdown
        self.base = np.array([s.base_ns for s in prog.specs], dtype=np.float64)
        self.groups = {"job": [np.arange(n)],
                       "host": [np.arange(h * sc.gpus, (h + 1) * sc.gpus)
                                for h in range(sc.hosts)]}
        self.comp = np.zeros(n, np.int64)
        self.coll = np.zeros(n, np.int64)
        self.copy = np.zeros(n, np.int64)
        self.dep = np.zeros(n, np.int64)
        self.parts: list[tuple[np.ndarray, ...]] = []
        self.inst: list[tuple[int, int, int, int]] = []
        self.members: list[np.ndarray] = []
        self.step = 0

    # -- primitives ---------------------------------------------------------------------------
    def gaps(self, *shape: int) -> np.ndarray:
        lo, hi = self.sc.launch_gap_ns
        return self.rng.integers(lo, hi + 1, size=shape, dtype=np.int64)

    def durations(self, ids: np.ndarray, slowed: bool) -> np.ndarray:
        u = self.rng.uniform(-1.0, 1.0, size=(self.n, len(ids)))
        scale = self.slow[:, None] if slowed else 1.0
        d = np.rint(self.base[ids][None, :] * scale * (1.0 + self.sc.jitter * u))
        return np.maximum(MIN_NS, d).astype(np.int64)

    def emit(self, dev: np.ndarray, spec: np.ndarray | int, start: np.ndarray,
             end: np.ndarray, inst: int = -1) -> None:
        m = len(dev)
        spec_arr = np.full(m, spec, np.int32) if np.isscalar(spec) else spec.astype(np.int32)
        self.parts.append((dev.astype(np.int32), spec_arr, start.astype(np.int64),
                           end.astype(np.int64), np.full(m, inst, np.int32),
                           np.full(m, self.step, np.int32)))

    def kernels(self, chunk: list[int], cur: np.ndarray) -> np.ndarray:
        ids = np.asarray(chunk)
        dur = self.durations(ids, slowed=True)
        ends = cur[:, None] + np.cumsum(self.gaps(self.n, len(ids)) + dur, axis=1)
        self.emit(np.repeat(np.arange(self.n), len(ids)), np.tile(ids, self.n),
                  (ends - dur).ravel(), ends.ravel())
        return ends[:, -1]

    def collective(self, c: int, ready: np.ndarray) -> np.ndarray:
        """Every group of spec ``c`` meets: kernels run from each member's ``ready`` to the
        common end, ``transfer`` after the last arrival. Returns each device's end."""
        end = np.empty(self.n, np.int64)
        hidden = self.prog.specs[c].collective in self.sc.hidden_collectives
        for members in self.groups[self.prog.specs[c].group or "job"]:
            u = self.rng.uniform(-1.0, 1.0)  # (drawn also when hidden: the same draws follow)
            transfer = max(MIN_NS, int(round(self.base[c] * (1.0 + self.sc.jitter * u))))
            last = int(ready[members].max())
            e = last + transfer
            if hidden:  # perfectly overlapped: no time, no one waits (Scenario doc)
                transfer, e = 0, last
                end[members] = ready[members]
            else:
                end[members] = e
            self.emit(members, c, ready[members], end[members], inst=len(self.inst))
            self.inst.append((c, self.step, transfer, e))
            self.members.append(members)
        return end

    def copies(self, ids: list[int], at: np.ndarray) -> np.ndarray:
        end = self.copy
        for c in ids:
            start = np.maximum(self.copy, at) + self.gaps(self.n)
            end = start + self.durations(np.asarray([c]), slowed=False)[:, 0]
            self.emit(np.arange(self.n), c, start, end)
            self.copy = end
        return end

    # -- blocks and steps ---------------------------------------------------------------------
    def block(self, blk: Block) -> None:
        specs = self.prog.specs
        a_nom = np.maximum(self.comp, self.dep)
        a_comp = a_nom
        if blk.pre_copies:
            a_comp = np.maximum(a_nom, self.copies(blk.pre_copies, a_nom))
        cur, chunk = a_comp, []
        for item in [*blk.items, None]:
            if item is not None and specs[item].collective is None:
                chunk.append(item)
                continue
            if chunk:
                cur, chunk = self.kernels(chunk, cur), []
            if item is not None:  # a synchronous collective on the compute stream
                cur = self.collective(item, cur + self.gaps(self.n))
        b = cur
        if blk.side_copies:
            self.copies(blk.side_copies, a_comp + (b - a_comp) // 4)
        self.dep = b
        if blk.colls:
            if blk.issue == "start":
                want = a_nom
            else:
                total = float(self.base[blk.colls].sum())
                want = np.maximum(b - int(round(self.sc.overlap * total)), a_comp)
            ready = np.maximum(want, self.coll) + self.gaps(self.n)
            end = ready
            for k, c in enumerate(blk.colls):
                if k:
                    ready = end + int(self.gaps(1)[0])
                end = self.collective(c, ready)
            self.coll = end
            if blk.wait:
                self.dep = end + self.gaps(self.n)
        self.comp = b

    def run(self) -> Records:
        sc, hosts = self.sc, self.sc.hosts
        offsets = sc.host_offsets_ns or (0,) * hosts
        mstart = FIRST_STEP_NS + max(offsets) + self.rng.integers(0, 20_000, hosts)
        steps: list[tuple[np.ndarray, ...]] = []
        for s in range(sc.steps):
            self.step = s
            lag = self.rng.integers(30_000, 60_000, self.n)
            self.dep = np.maximum(self.dep, mstart[self.host_of] + lag)
            for blk in self.prog.blocks:
                self.block(blk)
            dev_end = np.maximum(np.maximum(self.comp, self.coll), self.copy)
            work_end = np.array([dev_end[self.host_of == h].max() for h in range(hosts)])
            if sc.step_marker_ns is not None:
                mend = mstart + sc.step_marker_ns
            elif sc.async_markers:
                frac = self.rng.uniform(0.55, 0.95, hosts)
                mend = mstart + np.maximum(1, np.rint(frac * (work_end - mstart))).astype(
                    np.int64)
            else:
                mend = work_end + self.rng.integers(5_000, 20_000, hosts)
            steps.append((np.arange(hosts), np.full(hosts, s), mstart.copy(), mend.copy()))
            gap = np.rint(sc.step_gap_ns * (1.0 + 0.2 * self.rng.uniform(-1, 1, hosts)))
            mstart = mend + np.maximum(1, gap).astype(np.int64)
        cols = [np.concatenate(c) for c in zip(*self.parts)]
        inst = np.array(self.inst, dtype=np.int64).reshape(-1, 4)
        st = [np.concatenate(c) for c in zip(*steps)]
        return Records(dev=cols[0], spec=cols[1], start=cols[2], end=cols[3], inst=cols[4],
                       launch_step=cols[5], inst_spec=inst[:, 0], inst_step=inst[:, 1],
                       inst_transfer=inst[:, 2], inst_end=inst[:, 3],
                       inst_members=self.members, step_host=st[0], step_num=st[1],
                       step_start=st[2], step_end=st[3])


def schedule(prog: Program, sc: Scenario) -> Records:
    """Start and end of every activity of ``sc.steps`` steps on every device (deterministic)."""
    return _Engine(prog, sc).run()
