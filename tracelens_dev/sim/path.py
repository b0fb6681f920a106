"""The simulator's own critical path (docs/simulator.md): from the step's end, walk back
through the binding constraint of every activity (the one satisfied last)."""

from __future__ import annotations

from dataclasses import dataclass

from tracelens_dev.sim.engine import DevItem, HostSeg, Sim
from tracelens_dev.sim.model import STREAMS, Collective


@dataclass(frozen=True)
class Piece:
    component: str
    ns: int
    activity: str  # what the piece is on, e.g. "r0 compute#3 gemm", "r1 host cudaLaunchKernel"


@dataclass(frozen=True)
class Path:
    step_ns: int
    pieces: tuple[Piece, ...]

    @property
    def composition(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for p in self.pieces:
            out[p.component] = out.get(p.component, 0) + p.ns
        return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))


def _item_name(it: DevItem) -> str:
    spec = it.spec
    what = spec.ctype if isinstance(spec, Collective) else spec.category
    return f"r{it.rank} {it.stream}#{it.seq} {what}{' ' + spec.label if spec.label else ''}"


def _seg_name(s: HostSeg) -> str:
    return f"r{s.rank} host#{s.instr} {s.kind}{' ' + s.name if s.name else ''}"


def _first_seg_of(sim: Sim) -> dict[int, int]:
    first: dict[int, int] = {}
    for s in sim.segs:
        first.setdefault(s.rank, s.id)
    return first


def critical_path(sim: Sim, after_wait: str = "last") -> Path:
    """The path from the step's end back to 0; its pieces add up to the step time.

    At a collective the walk stands on, the time from its own arrival to the last arrival
    is ``wait:<the last arriver>``; below its own arrival the walk continues in the last
    arriver's history (``after_wait="last"``, the definition: what the step waited for),
    or in its own device's (``"own"``: the per-device reading, for comparison)."""
    if after_wait not in ("last", "own"):
        raise ValueError(f"after_wait must be 'last' or 'own', not {after_wait!r}")
    job, items, segs = sim.job, sim.items, sim.segs
    T = sim.step_ns
    # each rank's host segments in order (they tile [0, the rank's host end])
    prev_seg: dict[int, int | None] = {}
    last: dict[int, int] = {}
    for s in segs:
        prev_seg[s.id] = last.get(s.rank)
        last[s.rank] = s.id
    pieces: list[Piece] = []
    ceiling = [T]

    def emit(comp: str, lo: int, hi: int, what: str) -> None:
        v = min(hi, ceiling[0]) - lo
        if v > 0:
            pieces.append(Piece(comp, v, what))

    ends = [i for i in items if i.end == T]
    node: tuple[str, int, int]  # ("dev", item, _) or ("host", seg, cursor)
    if ends:
        first = min(ends, key=lambda i: (i.rank, STREAMS.index(i.stream), -i.seq))
        node = ("dev", first.id, 0)
    else:
        hs = [s for s in segs if s.end == T]
        if not hs:
            return Path(T, ())
        first_s = min(hs, key=lambda s: (s.rank, -s.id))
        node = ("host", first_s.id, first_s.end)
    guard = 0
    while True:
        guard += 1
        if guard > 10 * (len(items) + len(segs)) + 10:  # pragma: no cover
            raise RuntimeError("critical path walk does not terminate")
        kind, idx, cursor = node
        if kind == "dev":
            it = items[idx]
            spec = it.spec
            if isinstance(spec, Collective) and not spec.hidden:
                members = [items[i] for i in sim.arrivals[spec.key].values()]
                L = max(m.start for m in members)
                emit("communication", L, it.end, _item_name(it))
                if it.start < L:
                    lastm = min((m for m in members if m.start == L), key=lambda m: m.rank)
                    emit(f"wait:{job.device_label(lastm.rank)}", it.start, L, _item_name(it))
                    if after_wait == "last":
                        ceiling[0] = min(ceiling[0], it.start)
                        it = lastm
            else:
                emit(spec.category, it.start, it.end, _item_name(it))
            # the binding constraint at it.start: stream order, then event wait, then launch
            cands: list[tuple[int, int, str, int]] = []
            if it.prev is not None:
                cands.append((items[it.prev].end, 0, "prev", it.prev))
            ev = [(items[t].end, t) for _, t in it.waits if t is not None]
            if ev:
                e, t = max(ev, key=lambda x: (x[0], -x[1]))
                cands.append((e, 1, "event", t))
            cands.append((it.ready, 2, "launch", it.seg))
            when, _, why, src = max(cands, key=lambda c: (c[0], -c[1]))
            emit("idle", when, it.start, _item_name(it))
            if why == "prev":
                node = ("dev", src, 0)
            elif why == "event":
                emit("sync", items[src].end, when, _item_name(it))
                node = ("dev", src, 0)
            else:
                emit("launch_latency", it.enq, it.ready, _item_name(it))
                node = ("launch", src, it.enq)
        else:  # a host segment, entered at ``cursor`` (its end, or a launch point inside it)
            s = segs[idx]
            if s.block is not None and not (kind == "launch" and s.block in s.launched):
                b = items[s.block]
                if b.end >= s.start + job.call_ns and b.end > s.start:
                    # the device work it waited for ended inside the call: that binds
                    emit("sync", b.end, s.end, _seg_name(s))
                    node = ("dev", b.id, 0)
                    continue
            emit("host", s.start, cursor, _seg_name(s))
            p = prev_seg[s.id]
            if p is None:
                break
            node = ("host", p, segs[p].end)
        if ceiling[0] <= 0:
            break
    total = sum(p.ns for p in pieces)
    if total != T:
        raise AssertionError(f"critical path adds up to {total}, not the step's {T}")
    return Path(T, tuple(pieces))
