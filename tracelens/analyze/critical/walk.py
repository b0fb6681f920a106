"""The walk back along binding sources from a window's end: the critical path and the
attribution of every ns of the window to one component.

From the window's end the walk stands on the node that ends last (a device activity of the
device or a host event of its rank); at each node it attributes the node's own work (begin
to the cursor), then what the node waited for inside it (a collective: the wait for its
instance's last arrival, named, and below its own arrival the walk goes on in the last
arriver's history, the chain that set the step; a sync call: it moves to the device activity
it waited for),
then the gap to its binding start source (launch latency, idle on a stream, untraced host
time on a thread, an event wait), and moves to that source. The cursor only moves back, so
the pieces are disjoint and cover the window: they add up to it exactly.

The walk is a pointer chase, one node at a time: :func:`walk` here (over Python lists,
:class:`Walkable`) is the reference, and the optional C extension ``_tracelens_sweep``
(``tracelens/_sweep.c``, ``walk``) does the same on the graph's arrays, about a hundred
times faster: a window with no step structure to cut it walks every node of every device
(the 8 walks of a 300,000-kernel window: 0.45 s of CPU for the lists and the Python walks,
5 ms in C, arrays included). :class:`Walker` runs one or the other: the C
walk when it is built (``WALK_ABI`` 2) and ``TRACELENS_SWEEP`` is not ``numpy``
(:data:`tracelens.core.sweep.SWEEP_ENV`, the one switch to the reference
implementations). Their results are identical, bit for bit: the C walk makes the same float
operations in the same order, and reports the nodes on the path in the order of
:func:`walk`'s ``on`` dict. The components travel as small integer codes into one table of
names (:class:`Walk`), and what the callers sum from them is summed in the pieces' order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from tracelens.analyze.critical.solve import Graph
from tracelens.core.sweep import extension, references_forced

_SWEEP = extension("WALK_ABI")  # the walk in C; optional: walk() gives the same result


@dataclass(frozen=True)
class Labels:
    """Per node: its component when on the path, and its participant label, as codes into
    small tables of names (a few distinct values for any number of nodes)."""

    component: np.ndarray  # int, into component_names
    component_names: tuple[str, ...]
    who: np.ndarray  # int, into who_names: "<host>/GPU<d>" for device nodes, "host"
    who_names: tuple[str, ...]
    device_node: np.ndarray
    host_tail: np.ndarray | None = None
    """bool per node: a window's tail after it is the host's (:func:`tail_component`);
    None: no node's."""


EDGE_COMPONENT = {"launch": "launch_latency", "event": "sync", "host": "host",
                  "blocked": "sync"}


@dataclass(frozen=True)
class Walkable:
    """The per-node arrays :func:`walk` reads, as Python lists: the walk is a pointer chase,
    one node at a time, and reading a list is several times cheaper than a numpy scalar."""

    s: list[float]
    e: list[float]
    b: list[float]
    b_bind: list[int]
    b_src: list[int]
    s_bind: list[int]
    s_src: list[int]
    s_kind: list[str]
    s_at_start: list[bool]
    prev_binds: list[bool]
    group: list[int]
    a_last: list[int]
    component: list[str]
    who: list[str]
    device_node: list[bool]
    host_tail: list[bool]


def walkable(g: Graph, lab: Labels) -> Walkable:
    """The lists of ``g`` and ``lab`` a walk reads (made once for all of a graph's walks)."""
    comp = np.array(lab.component_names, object)[lab.component] if len(lab.component) else []
    who = np.array(lab.who_names, object)[lab.who] if len(lab.who) else []
    return Walkable(g.s.tolist(), g.e.tolist(), g.b.tolist(), g.b_bind.tolist(),
                    g.b_src.tolist(), g.s_bind.tolist(), g.s_src.tolist(),
                    [str(k) for k in g.s_kind.tolist()], g.s_at_start.tolist(),
                    g.prev_binds.tolist(), g.group.tolist(), g.a_last.tolist(),
                    list(comp), list(who), lab.device_node.tolist(),
                    lab.host_tail.tolist() if lab.host_tail is not None
                    else [False] * len(g.s))


def tail_component(host_tail: bool) -> str:
    """The component of a window's tail after the node its walk starts on: ``host`` where
    that node is an XLA sync (``Labels.host_tail``: the host had the device's result, and
    the window went on: the host's own untraced time, as a host pause or its work between
    steps), else ``idle``."""
    return "host" if host_tail else "idle"


def walk(g: Graph, lab: Labels, sink: int, w0: float, w1: float,
         lists: Walkable | None = None
         ) -> tuple[list[tuple[str, float]], dict[int, float], int]:
    """(the path's pieces [(component, ns)] from the end back, ns on the path per node,
    revisits cut short) for the window [w0, w1] ending at ``sink``; ``lists``: the graph's
    :func:`walkable` lists when the caller walks it more than once."""
    L = lists if lists is not None else walkable(g, lab)
    pieces: list[tuple[str, float]] = []
    on: dict[int, float] = {}
    c = w1
    n = sink
    if L.e[n] < c:
        pieces.append((tail_component(L.host_tail[n]), c - max(L.e[n], w0)))
        c = max(L.e[n], w0)
    cut, _ = walk_on(L, n, False, c, w0, pieces, on, set())
    return pieces, on, cut


def walk_on(L: Walkable, n: int, at_start: bool, c: float, w0: float,
            pieces: list[tuple[str, float]], on: dict[int, float],
            seen: set[tuple[int, bool]], foreign: Sequence[str] = ()
            ) -> tuple[int, tuple[int, float] | None]:
    """The walk from node ``n`` (at its start point when ``at_start``) with the cursor at
    ``c``, appending to ``pieces`` and ``on``; ``seen``: the states already visited. Returns
    (revisits cut short, exit): where an instance's last arriver is on another host
    (``a_last`` -2 - k, its participant ``foreign[k]``), the walk stops below the wait and
    returns (k, cursor) (:mod:`tracelens.analyze.critical.stitched` goes on there); None
    when the walk ended."""
    s_, e_, b_, b_bind_, b_src_ = L.s, L.e, L.b, L.b_bind, L.b_src
    s_bind_, s_src_, s_kind_, s_at_start_ = L.s_bind, L.s_src, L.s_kind, L.s_at_start
    prev_binds_, group_, a_last_ = L.prev_binds, L.group, L.a_last
    component_, who_, device_node_ = L.component, L.who, L.device_node
    cut = 0
    while c > w0:
        if (n, at_start) in seen:
            pieces.append(("idle", c - w0))
            cut += 1
            break
        seen.add((n, at_start))
        if not at_start:
            lo = max(b_[n], w0)
            if c > lo:
                pieces.append((component_[n], c - lo))
                on[n] = on.get(n, 0.0) + c - lo
                c = lo
            if c <= w0:
                break
            bind = b_bind_[n]
            if b_[n] > s_[n] and bind == -2:  # waited for the instance's last arrival
                lo = max(s_[n], w0)
                last = a_last_[group_[n]]
                name = who_[last] if last >= 0 else foreign[-2 - last]
                pieces.append((f"wait:{name}", c - lo))
                on[n] = on.get(n, 0.0) + c - lo
                c = lo
                if last < 0:  # the last arriver is on another host
                    return cut, (-2 - last, c)
                if last != n:  # below its own arrival: the last arriver's history
                    n, at_start = last, True
                    continue
            elif b_[n] > s_[n] and bind >= 0:  # a sync call: to what it waited for
                n, at_start = b_src_[bind], False
                c = min(c, e_[n])
                continue
        if c <= w0:
            break
        edge = s_bind_[n]
        if edge >= 0:
            src, kind = s_src_[edge], s_kind_[edge]
            t = s_[src] if s_at_start_[edge] else e_[src]
            comp, nxt_start = EDGE_COMPONENT.get(kind, "idle"), s_at_start_[edge]
        elif prev_binds_[n]:
            src, t = n - 1, e_[n - 1]
            comp, nxt_start = ("idle" if device_node_[n] else "host"), False
        else:  # no source: the time before it on its chain (a host thread's own untraced
            # time before its first node; idle on a stream)
            pieces.append(("idle" if device_node_[n] else "host", c - w0))
            break
        if t < c:
            lo = max(t, w0)
            pieces.append((comp, c - lo))
            c = lo
        n, at_start = src, nxt_start
    return cut, None


@dataclass(frozen=True)
class Walk:
    """One walk's result, compact: the pieces from the end back (``code``: the component,
    into ``names``; ``ns``), the nodes with time on the path in the order the walk first
    reached them (``on_node``, ``on_ns``: :func:`walk`'s ``on`` dict) and the revisits cut
    short."""

    names: tuple[str, ...]
    code: np.ndarray  # int64
    ns: np.ndarray  # float64
    on_node: np.ndarray  # int64
    on_ns: np.ndarray  # float64
    cut: int

    def pieces(self) -> list[tuple[str, float]]:
        """The pieces as :func:`walk` gives them."""
        return [(self.names[k], v) for k, v in zip(self.code.tolist(), self.ns.tolist())]

    def on(self) -> dict[int, float]:
        """The ns on the path per node as :func:`walk` gives them (same order)."""
        return dict(zip(self.on_node.tolist(), self.on_ns.tolist()))

    def components(self) -> set[str]:
        """The components with a piece."""
        return {self.names[k] for k in np.unique(self.code).tolist()}

    def total(self, pred: Callable[[str], bool]) -> float:
        """The ns of the pieces whose component matches ``pred``, summed in the pieces'
        order (``sum(ns for comp, ns in pieces if pred(comp))``, bit for bit)."""
        keep = np.array([pred(k) for k in self.names], bool)
        return _ordered_sum(self.ns[keep[self.code]]) if len(self.code) else 0.0

    def on_total(self, mask: np.ndarray) -> float:
        """The ns on the path of the nodes in ``mask``, summed in the order of ``on``."""
        return _ordered_sum(self.on_ns[mask[self.on_node]]) if len(self.on_node) else 0.0


def _ordered_sum(x: np.ndarray) -> float:
    """0.0 + x[0] + x[1] + ..., left to right (as ``sum``; numpy's ``sum`` pairs terms)."""
    return float(np.add.accumulate(np.r_[0.0, x])[-1])


class Walker:
    """The walks of one graph: the component table and the arrays (or, on the reference
    path, the lists) made once, then :meth:`walk` per window (module doc)."""

    def __init__(self, g: Graph, lab: Labels, use_c: bool | None = None) -> None:
        self.g, self.lab = g, lab
        if use_c is None:
            use_c = _SWEEP is not None and not references_forced()
        if use_c and _SWEEP is None:
            raise RuntimeError("the C walk (_tracelens_sweep) is not built")
        self.use_c = use_c
        index: dict[str, int] = {}
        for name in ["idle", "host", *EDGE_COMPONENT.values(), *lab.component_names,
                     *(f"wait:{w}" for w in lab.who_names)]:
            index.setdefault(name, len(index))
        self.index = index
        self.names = tuple(index)
        self._lists: Walkable | None = None
        self._arrays: tuple[np.ndarray, ...] | None = None

    def _c_arrays(self) -> tuple[np.ndarray, ...]:
        g, lab, index = self.g, self.lab, self.index
        comp_of = np.array([index[k] for k in lab.component_names], np.int64)
        wait_of = np.array([index[f"wait:{w}"] for w in lab.who_names], np.int64)
        edge = np.full(len(g.s_kind), index["idle"], np.int64)
        for kind, comp in EDGE_COMPONENT.items():
            edge[g.s_kind == kind] = index[comp]
        i64, f64 = np.int64, np.float64

        def arr(x: np.ndarray, t: type) -> np.ndarray:
            return np.ascontiguousarray(x, t)

        return (arr(g.s, f64), arr(g.e, f64), arr(g.b, f64), arr(g.b_bind, i64),
                arr(g.b_src, i64), arr(g.s_bind, i64), arr(g.s_src, i64),
                arr(g.s_at_start, np.bool_), arr(g.prev_binds, np.bool_), arr(g.group, i64),
                arr(g.a_last, i64),
                comp_of[lab.component] if len(comp_of) else np.zeros(0, i64),
                wait_of[lab.who] if len(wait_of) else np.zeros(0, i64), edge,
                np.where(arr(lab.device_node, np.bool_), index["idle"], index["host"]
                         ).astype(i64))

    def walk(self, sink: int, w0: float, w1: float) -> Walk:
        """The walk of the window [w0, w1] ending at ``sink`` (:func:`walk`)."""
        if self.use_c:
            if self._arrays is None:
                self._arrays = self._c_arrays()
            code, ns, on_node, on_ns, cut = _SWEEP.walk(  # type: ignore[union-attr]
                *self._arrays, self.index["idle"], int(sink), float(w0), float(w1))
            code = np.frombuffer(code, np.int64)
            tail = tail_component(self.lab.host_tail is not None
                                  and bool(self.lab.host_tail[sink]))
            if tail != "idle" and self.g.e[sink] < w1 and len(code):  # the C walk's tail
                code = code.copy()
                code[0] = self.index[tail]
            return Walk(self.names, code, np.frombuffer(ns),
                        np.frombuffer(on_node, np.int64), np.frombuffer(on_ns), cut)
        if self._lists is None:
            self._lists = walkable(self.g, self.lab)
        pieces, on, cut = walk(self.g, self.lab, sink, w0, w1, self._lists)
        return Walk(self.names, np.array([self.index[k] for k, _ in pieces], np.int64),
                    np.array([v for _, v in pieces], np.float64),
                    np.fromiter(on.keys(), np.int64, len(on)),
                    np.fromiter(on.values(), np.float64, len(on)), cut)


def composition(w: Walk) -> list[tuple[str, int]]:
    """The pieces summed per component (integer ns), largest first, ties by name: each
    component's ns summed in the pieces' order, from 0.0 (``np.bincount`` adds its weights
    one by one, in order)."""
    total = np.bincount(w.code, weights=w.ns, minlength=len(w.names))
    rows = [(w.names[k], int(v)) for k, v in enumerate(total.tolist()) if v > 0]
    return sorted(rows, key=lambda r: (-r[1], r[0]))


def idle_after(e_sink: float, w0: float, w1: float) -> int:
    """The window's ns after the node its walk starts on (the walk's first piece, ``idle``):
    the device's own work on the path ended that much before the window's end."""
    return int(w1 - max(e_sink, w0)) if e_sink < w1 else 0


def host_tail(w: Walk, idle_after_ns: int) -> bool:
    """Whether the walk's window ends with a host tail (:func:`tail_component`): its first
    piece, the ``idle_after_ns`` after its start node, is the host's."""
    return idle_after_ns > 0 and len(w.code) > 0 and w.names[int(w.code[0])] == "host"


def window_lengths(rows: Sequence[tuple[float, float, float, float]],
                   no_tail: Sequence[bool] | None = None) -> list[float]:
    """Each device window's length after a change, from its (w0, w1, base, now): its nodes'
    latest end as observed (``base``) and after the change (``now``). The window's end moves
    with the latest end of the nodes of every device sharing the window (a step is as long
    as its last device), keeping the idle tail after the latest of them (a host finishing
    the step after its devices), never past the window: work that runs past its end after
    the change (a step marker the devices lag) saves nothing in it. A device that finished
    early has no tail of its own: its window's end was another device's. ``no_tail``: the
    windows whose tail is taken away (the ``host`` what-if: the host's own time after the
    path's last sync; a window sharing its span with one of them loses its tail too)."""
    last: dict[tuple[float, float], float] = {}
    for w0, w1, base, _ in rows:
        last[(w0, w1)] = max(last.get((w0, w1), -np.inf), base)
    gone = {(r[0], r[1]) for r, cut in zip(rows, no_tail or ()) if cut}
    return [min(w1, now + (0.0 if (w0, w1) in gone else max(0.0, w1 - last[(w0, w1)])))
            - w0 for w0, w1, _, now in rows]


def step_path_key(length_ns: float, idle_after_ns: int, rank: int, device: int) -> tuple:
    """The order that picks the step's path among the devices' paths (the largest): the
    longest window, then the device whose own work ended last (every device of a synchronous
    job has the same window: a pipeline's first stage, done early, would otherwise be
    shown, its path walking back through the time it had finished), then the lowest rank
    and device."""
    return (length_ns, -idle_after_ns, -rank, -device)


def composition_of(pieces: list[tuple[str, float]]) -> list[tuple[str, int]]:
    """:func:`composition` of :func:`walk`'s pieces (the reference)."""
    total: dict[str, float] = {}
    for comp, ns in pieces:
        total[comp] = total.get(comp, 0.0) + ns
    rows = [(k, int(v)) for k, v in total.items() if v > 0]
    return sorted(rows, key=lambda r: (-r[1], r[0]))
