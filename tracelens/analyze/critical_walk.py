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


def walk(g: Graph, lab: Labels, sink: int, w0: float, w1: float
         ) -> tuple[list[tuple[str, float]], dict[int, float], int]:
    """(the path's pieces [(component, ns)] from the end back, ns on the path per node,
    revisits cut short) for the window [w0, w1] ending at ``sink``."""
    pieces: list[tuple[str, float]] = []
    on: dict[int, float] = {}
    c = w1
    n = sink
    if g.e[n] < c:
        pieces.append(("idle", c - max(g.e[n], w0)))
        c = max(g.e[n], w0)
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
            lo = max(g.b[n], w0)
            if c > lo:
                pieces.append((lab.component[n], c - lo))
                on[n] = on.get(n, 0.0) + c - lo
                c = lo
            if c <= w0:
                break
            bind = g.b_bind[n]
            if g.b[n] > g.s[n] and bind == -2:  # waited for the instance's last arrival
                lo = max(g.s[n], w0)
                last = g.a_last[g.group[n]]
                pieces.append((f"wait:{lab.who[last]}", c - lo))
                on[n] = on.get(n, 0.0) + c - lo
                c = lo
            elif g.b[n] > g.s[n] and bind >= 0:  # a sync call: to what it waited for
                n, at_start = int(g.b_src[bind]), False
                c = min(c, g.e[n])
                continue
        if c <= w0:
            break
        edge = g.s_bind[n]
        if edge >= 0:
            src, kind = int(g.s_src[edge]), str(g.s_kind[edge])
            t = g.s[src] if g.s_at_start[edge] else g.e[src]
            comp, nxt_start = EDGE_COMPONENT.get(kind, "idle"), bool(g.s_at_start[edge])
        elif g.prev_binds[n]:
            src, t = n - 1, g.e[n - 1]
            comp, nxt_start = ("idle" if lab.device_node[n] else "host"), False
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
