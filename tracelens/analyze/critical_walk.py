"""The walk back along binding sources from a window's end: the critical path and the
attribution of every ns of the window to one component (issue 27).

From the window's end the walk stands on the node that ends last (a device activity of the
device or a host event of its rank); at each node it attributes the node's own work (begin
to the cursor), then what the node waited for inside it (a collective: the wait for its
instance's last arrival, named; a sync call: it moves to the device activity it waited for),
then the gap to its binding start source (launch latency, idle on a stream, untraced host
time on a thread, an event wait), and moves to that source. The cursor only moves back, so
the pieces are disjoint and cover the window: they add up to it exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracelens.analyze.critical_solve import Graph


@dataclass(frozen=True)
class Labels:
    """Per node: its component when on the path, and its participant label."""

    component: np.ndarray  # object
    who: np.ndarray  # object: "<host>/GPU<d>" for device nodes
    device_node: np.ndarray


EDGE_COMPONENT = {"launch": "launch_latency", "event": "sync"}


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


def walkable(g: Graph, lab: Labels) -> Walkable:
    """The lists of ``g`` and ``lab`` a walk reads (made once for all of a graph's walks)."""
    return Walkable(g.s.tolist(), g.e.tolist(), g.b.tolist(), g.b_bind.tolist(),
                    g.b_src.tolist(), g.s_bind.tolist(), g.s_src.tolist(),
                    [str(k) for k in g.s_kind.tolist()], g.s_at_start.tolist(),
                    g.prev_binds.tolist(), g.group.tolist(), g.a_last.tolist(),
                    lab.component.tolist(), lab.who.tolist(), lab.device_node.tolist())


def walk(g: Graph, lab: Labels, sink: int, w0: float, w1: float,
         lists: Walkable | None = None
         ) -> tuple[list[tuple[str, float]], dict[int, float], int]:
    """(the path's pieces [(component, ns)] from the end back, ns on the path per node,
    revisits cut short) for the window [w0, w1] ending at ``sink``; ``lists``: the graph's
    :func:`walkable` lists when the caller walks it more than once."""
    L = lists if lists is not None else walkable(g, lab)
    s_, e_, b_, b_bind_, b_src_ = L.s, L.e, L.b, L.b_bind, L.b_src
    s_bind_, s_src_, s_kind_, s_at_start_ = L.s_bind, L.s_src, L.s_kind, L.s_at_start
    prev_binds_, group_, a_last_ = L.prev_binds, L.group, L.a_last
    component_, who_, device_node_ = L.component, L.who, L.device_node
    pieces: list[tuple[str, float]] = []
    on: dict[int, float] = {}
    c = w1
    n = sink
    if e_[n] < c:
        pieces.append(("idle", c - max(e_[n], w0)))
        c = max(e_[n], w0)
    at_start = False
    seen: set[tuple[int, bool]] = set()
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
                pieces.append((f"wait:{who_[last]}", c - lo))
                on[n] = on.get(n, 0.0) + c - lo
                c = lo
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
        else:  # no source: nothing known before it
            pieces.append(("idle", c - w0))
            break
        if t < c:
            lo = max(t, w0)
            pieces.append((comp, c - lo))
            c = lo
        n, at_start = src, nxt_start
    return pieces, on, cut


def composition(pieces: list[tuple[str, float]]) -> list[tuple[str, int]]:
    """The pieces summed per component (integer ns), largest first, ties by name."""
    total: dict[str, float] = {}
    for comp, ns in pieces:
        total[comp] = total.get(comp, 0.0) + ns
    rows = [(k, int(v)) for k, v in total.items() if v > 0]
    return sorted(rows, key=lambda r: (-r[1], r[0]))
