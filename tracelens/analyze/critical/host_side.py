"""One host's side of the stitched critical path's rounds: its part, then
its graph, the states of its walks and the answers the job asks of it in each round
(:mod:`tracelens.analyze.critical.rounds` asks; this runs where the part stays, on its Dask
worker or in this process)."""

from __future__ import annotations


import numpy as np
import polars as pl

from tracelens.analyze.critical import xla_changes as xc
from tracelens.analyze.timeline.blocked import replays_graphs
from tracelens.analyze.critical.path import _ACTIVITY, CriticalPart, copies_mask
from tracelens.analyze.critical.stitched import (DeviceWindow, HostGraph, InstanceTable,
                                                 NotStitchable, _local, _starts, arrivals,
                                                 key_arrivals)
from tracelens.analyze.critical.solve import Change, solve
from tracelens.analyze.critical.walk import idle_after, tail_component, walk_on, walkable
from tracelens.engine.protocol import JobPlan


# on_time's peer time: each host answers counts per key of its own devices' work

def device_work(h: HostGraph) -> pl.DataFrame:
    """The host's device nodes as :func:`critical_path._peer_work` numbers them: ``who``
    (``<host>/GPU<d>``), ``name``, ``k`` (the occurrence of the name on the device, in node
    order), own work ``w`` and the node ``_i``."""
    nodes = h.nodes
    who = nodes.select(pl.concat_str(pl.col("host"), pl.lit("/GPU"),
                                     pl.col("device").cast(pl.String))).to_series()
    frame = pl.DataFrame({"who": who.fill_null(""), "name": nodes["name"].cast(pl.String),
                          "dev": nodes["device_node"], "w": h.g.w[:h.n]}).with_row_index("_i")
    return frame.filter(pl.col("dev")).with_columns(
        k=pl.int_range(pl.len()).over("who", "name")).drop("dev")


def _counts(work: pl.DataFrame, name: str, keys: pl.DataFrame) -> tuple[np.ndarray, ...]:
    """One host's first answer for the devices other than ``name``, per key (``keys``: name,
    k, row ``_q``): how many of their w it holds, the least and the largest."""
    q = keys.height
    got = work.filter(pl.col("who") != name).join(keys, on=["name", "k"])
    row = got["_q"].to_numpy()
    w = got["w"].to_numpy()
    lo, hi = np.full(q, np.inf), np.full(q, -np.inf)
    np.minimum.at(lo, row, w)
    np.maximum.at(hi, row, w)
    return np.bincount(row, minlength=q), lo, hi


class _Seen:
    """A walk's visited states on one host, (node, at its start), as two bits a node (a set
    of tuples cost ~100 bytes a state: a walk of a whole trace visits every node)."""

    def __init__(self, n: int) -> None:
        self.bits = bytearray(2 * n)

    def __contains__(self, state: tuple[int, bool]) -> bool:
        return bool(self.bits[2 * state[0] + state[1]])

    def add(self, state: tuple[int, bool]) -> None:
        self.bits[2 * state[0] + state[1]] = 1


class HostSide:
    """One host's side of the rounds (module doc): its part, then its graph, the states of
    the walks that went through it, its what-ifs' changes and their passes."""

    def __init__(self, part: CriticalPart) -> None:
        self.part = part  # packed until placed (its frames then hold nothing of the trace's)
        self.walks: dict[int, tuple[_Seen, dict[int, float]]] = {}

    # -- round 1 and 2: placed, its instance members; its graph ------------------------------

    def place(self, plan: JobPlan | None, index: int) -> dict[str, object]:
        p = self.part.unpacked()
        if plan is not None:
            p = CriticalPart(plan.place(p.nodes, index), p.edges,  # type: ignore[arg-type]
                             plan.place(p.windows, index), plan.place(p.host_ranks, index),
                             plan.place(p.unwindowed, index))
        self.part, self.index = p, index
        got = arrivals(p)  # its members folded per instance here: one row a key travels
        return {"t_min": got.t_min, "instances": key_arrivals(got, index),
                "windows": p.windows, "host_ranks": p.host_ranks, "unwindowed": p.unwindowed}

    def placed(self) -> CriticalPart:
        return self.part

    def build(self, inst: InstanceTable, win: pl.DataFrame) -> dict[str, object]:
        h = self.h = HostGraph(self.part, inst, self.index)
        h.lists = None  # made for each round of walks, not kept (tens of MB a host)
        # its nodes, clipped (clipping again is a no-op), stand for the placed part's where
        # the job's graph is needed after all (:meth:`placed`): one copy kept, not two
        self.part = CriticalPart(h.nodes, self.part.edges, self.part.windows,
                                 self.part.host_ranks, self.part.unwindowed)
        self.devs: list[DeviceWindow] = h.devices(
            win.filter(pl.col("host").is_in(h.nodes["host"].unique().implode())))
        self.loc = loc = _local(h)
        group = h.g.group[:h.n]
        types: dict[str, list[str]] = {}
        for t in loc.sub.filter(pl.Series(loc.coll)).unique().to_list():
            m = loc.coll & (loc.sub == t).to_numpy()
            types[t] = [h.keys[j] for j in np.unique(group[m & (group >= 0)]).tolist()]
        sym = [h.keys[j] for j in np.unique(group[(group >= 0) & ~loc.p2p]).tolist()]
        attain = h.nodes["attain_ns"].to_numpy()
        cats = set(h.nodes["category"].fill_null("").filter(
            pl.Series(~np.isnan(attain))).unique().to_list())
        return {"n": h.n, "backward": h.backward, "sym": sym, "types": types,
                "cats": cats, "launch": bool((h.g.s_kind == "launch").any()),
                "host_edges": bool((h.g.s_kind == "host").any()),
                "xla": xc.has_dispatch(h.nodes),
                "transfer": xc.transfer(h.nodes, h.g.first, h.g.prev_lag, h.g.w) is not None,
                "replays": replays_graphs(h.nodes.filter(~pl.col("device_node"))),
                "devices": [(d.rank, d.host, d.device, d.step, d.w0, d.w1) for d in self.devs]}

    def instance_edges(self) -> list[tuple[str, str]]:
        return self.h.instance_edges()

    # -- the walks -------------------------------------------------------------------------

    def walk(self, reqs: list[tuple]) -> list[tuple]:
        """Per request (walk, device index or None, node, at start, cursor, w0): the walk on
        from there, to its end or to another host: (walk, ns per component in the pieces'
        order of first appearance, revisits cut, exit (host, node, cursor) or None, the
        window's ns after its start node: :func:`~tracelens.analyze.critical.walk.idle_after`,
        0 where the walk goes on)."""
        h, out = self.h, []
        L = walkable(h.g, h.labels)
        for wid, dev, node, at_start, c, w0 in reqs:
            pieces: list[tuple[str, float]] = []
            after = 0
            if dev is not None:  # the walk's start: the window's end on its node
                d = self.devs[dev]
                node, at_start, c, w0 = d.sink, False, float(d.w1), float(d.w0)
                after = idle_after(float(L.e[node]), w0, c)
                if L.e[node] < c:
                    pieces.append((tail_component(L.host_tail[node]),
                                   c - max(L.e[node], w0)))
                    c = max(L.e[node], w0)
            seen, on = self.walks.setdefault(wid, (_Seen(len(L.e)), {}))
            cut, exit_ = walk_on(L, node, at_start, c, w0, pieces, on, seen, h.foreign)
            totals: dict[str, float] = {}
            for name, ns in pieces:
                totals[name] = totals.get(name, 0.0) + ns
            where = None
            if exit_ is not None:
                host, at = h.foreign_at[exit_[0]]
                where = (host, at, exit_[1])
            out.append((wid, totals, cut, where, after))
        return out

    def walks_done(self) -> None:
        """The walks are over: their visited states and the walk's lists go."""
        self.walks = {wid: (_Seen(0), on) for wid, (_, on) in self.walks.items()}

    def _mask(self, spec: tuple[str, str]) -> np.ndarray:
        kind, what = spec
        loc = self.loc
        if kind == "type":
            return loc.coll & (loc.sub == what).to_numpy()
        if kind == "device":
            return (loc.who == what) & loc.dev
        if kind == "copies":
            return copies_mask(self.h.nodes)
        attain = self.h.nodes["attain_ns"].to_numpy()
        return ~np.isnan(attain) & (self.h.nodes["category"].fill_null("") == what).to_numpy()

    def on_totals(self, specs: list[tuple[str, str]]) -> list[list[float]]:
        """Per spec, per walk that went through this host: the ns on its path of the nodes
        the spec names (a collective type, a device, a category with a roofline)."""
        out = []
        for spec in specs:
            m = self._mask(spec)
            row = []
            for wid in sorted(self.walks):
                on = self.walks[wid][1]
                ids = np.fromiter(on.keys(), np.int64, len(on))
                ns = np.fromiter(on.values(), np.float64, len(on))
                row.append(float(ns[m[ids]].sum()) if len(ids) else 0.0)
            out.append(row)
        return out

    def xla_on_path(self) -> tuple[bool, bool]:
        """(whether a sync call that waited for the device, whether an XLA dispatch of an
        op-by-op window, is on a path that went through this host): the ``sync`` and
        ``dispatch`` what-ifs' conditions (:func:`critical_path.xla_what_ifs`)."""
        h = self.h
        on = np.zeros(h.n, bool)
        for _, got in self.walks.values():
            ids = np.array([k for k, v in got.items() if v > 0 and k < h.n], np.int64)
            on[ids] = True
        return (bool((xc.waited(h.nodes, h.g.b, h.g.s) & on).any()),
                bool((xc.dispatch_nodes(h.nodes) & on).any())
                and xc.dispatch(h.nodes, h.g.first, h.g.prev_lag, h.g.w) is not None)

    def walked(self) -> list[int]:
        return sorted(self.walks)

    def activities(self, wid: int, offset: int) -> pl.DataFrame:
        on = self.walks.get(wid, (set(), {}))[1]
        ids = np.fromiter(on.keys(), np.int64, len(on))
        ns = np.fromiter(on.values(), np.float64, len(on)).astype(np.int64)
        keep = ns > 0
        return self.h.nodes.select(_ACTIVITY)[ids[keep]].with_columns(
            on_path_ns=pl.Series(ns[keep], dtype=pl.Int64),
            _id=pl.Series(ids[keep] + offset, dtype=pl.Int64))

    # -- what-ifs --------------------------------------------------------------------------

    def peer_keys(self, names: list[str]) -> dict[str, pl.DataFrame]:
        """For each of ``names`` that is a device of this host: its keys (name, k, row
        ``_q``) and, kept here, its nodes."""
        self.work = device_work(self.h)
        w = self.work["w"].to_numpy()
        if not np.array_equal(w, np.floor(w)):
            raise NotStitchable("own work that is not whole ns: the bisection needs integers")
        out, self.peer_rows = {}, {}
        for name in names:
            mine = self.work.filter(pl.col("who") == name)
            if mine.height:
                out[name] = mine.select("name", "k").with_row_index("_q").with_columns(
                    pl.col("_q").cast(pl.Int64))
                self.peer_rows[name] = mine["_i"].to_numpy()
        return out

    def peer_setup(self, keys: dict[str, pl.DataFrame]) -> list[tuple[np.ndarray, ...]]:
        """Each late device's keys kept with this host's other devices' work on them; per
        device (count, least, largest) per key."""
        self.peer: dict[str, tuple[np.ndarray, np.ndarray, int]] = {}
        out = []
        for name, k in keys.items():
            got = self.work.filter(pl.col("who") != name).join(k, on=["name", "k"])
            row, w = got["_q"].to_numpy(), got["w"].to_numpy()
            self.peer[name] = (row, w, k.height)
            out.append(_counts(self.work, name, k))
        return out

    def peer_below(self, names: list[str], at: list[np.ndarray]) -> list[np.ndarray]:
        """Per late device, per key: how many of this host's other devices' work is at most
        ``at``."""
        out = []
        for name, bound in zip(names, at):
            row, w, q = self.peer[name]
            out.append(np.bincount(row[w <= bound[row]], minlength=q))
        return out

    def peer_row(self, name: str) -> np.ndarray:
        return self.peer_rows[name]

    def set_changes(self, specs: list[tuple]) -> None:
        """The what-ifs' changes on this host, in the job's order (``specs``, the same for
        every host: ("hide", type, the hidden instances), ("on_time", device, (its owner
        host, rows, peer time) or None: the owner keeps its rows and peer time, the others
        None), ("roofline", category), ("graph_launch",)): kept as specs, each made when
        its pass runs (a few arrays of every node each, for every change, would stay
        otherwise). The peer time's counts go."""
        self.specs = [("on_time", s[1], None if s[2] is None or s[2][0] != self.index
                       else (s[2][1], s[2][2])) if s[0] == "on_time" else s for s in specs]
        self.work = self.peer = None  # type: ignore[assignment]
        self.now: list[list[float] | None] = [None] * len(specs)

    def _change(self, spec: tuple) -> Change:
        h, loc = self.h, self.loc
        n, k = h.n, len(h.keys)
        w0, group = h.g.w[:n], h.g.group[:n]

        def make(w: np.ndarray | None = None, late: np.ndarray | None = None,
                 no_wait: set[str] | None = None, drop: np.ndarray | None = None,
                 lag: np.ndarray | None = None) -> Change:
            return Change(w=None if w is None else np.r_[w, np.zeros(k)],
                          late_ok=None if late is None else np.r_[late, np.zeros(k, bool)],
                          no_wait=None if no_wait is None else np.array(
                              [x in no_wait for x in h.keys], bool),
                          drop_s=drop, prev_lag=None if lag is None else np.r_[lag, np.zeros(k)])

        if spec[0] == "hide":
            m = self._mask(("type", spec[1]))
            return make(w=np.where(m, 0.0, w0), no_wait=set(spec[2]))
        if spec[0] == "on_time":
            mine = loc.who == spec[1]
            late = mine & (group >= 0) & ~loc.p2p
            w = w0
            if spec[2] is not None:
                rows, med = spec[2]
                p = np.full(n, np.nan)
                p[rows] = med
                w = np.where(mine & ~np.isnan(p), np.minimum(w0, p), w0)
            return make(w=w, late=late)
        if spec[0] == "hide_memory":
            return make(w=np.where(self._mask(("copies", "")), 0.0, w0))
        if spec[0] == "roofline":
            m = self._mask(("category", spec[1]))
            attain = h.nodes["attain_ns"].to_numpy()
            return make(w=np.where(m, np.minimum(w0, np.floor(np.nan_to_num(attain))), w0))
        if spec[0] in xc.XLA_CHANGES:
            return self._xla_change(spec[0], make)
        call = ~h.nodes["device_node"].to_numpy() \
            & h.nodes["correlation_id"].is_not_null().to_numpy() \
            & ~h.nodes["sync"].fill_null(False).to_numpy()
        after = np.r_[False, call[:-1]] & ~h.g.first[:n] & call
        lag = np.where(after, np.minimum(h.g.prev_lag[:n], 0.0), h.g.prev_lag[:n])
        return make(w=np.where(call, 0.0, w0), drop=h.g.s_kind == "launch", lag=lag)

    def _xla_change(self, kind: str, make: "object") -> Change:
        """The XLA what-if ``kind`` on this host (:mod:`~tracelens.analyze.critical.
        xla_changes`); no change where it has nothing to change here."""
        h, g = self.h, self.h.g
        lag = xc.host_lag(h.nodes, g.first, g.prev_lag)
        if kind == "host":
            return make(lag=lag)  # type: ignore[operator]
        if kind == "sync":
            return make(w=xc.sync_w(h.nodes, g.w), lag=lag)  # type: ignore[operator]
        got = (xc.transfer if kind == "transfer" else xc.dispatch)(h.nodes, g.first,
                                                                     g.prev_lag, g.w)
        if got is None:
            return make()  # type: ignore[operator]
        return make(w=got[0], lag=got[1])  # type: ignore[operator]

    def solve_round(self, arrivals: list[dict[str, float] | None]
                    ) -> list[dict[str, float] | None]:
        """Each change's pass with its sentinels at ``arrivals`` (None: settled, skipped):
        the latest start of this host's arriving members per instance."""
        from dataclasses import replace

        h, out = self.h, []
        for j, arr in enumerate(arrivals):
            if arr is None:
                out.append(None)
                continue
            ch = self._change(self.specs[j])
            T = np.array([arr[key] for key in h.keys])
            s, anchor = h.g.s.copy(), h.g.anchor.copy()
            s[h.n:], anchor[h.n:] = T, T
            g = replace(h.g, s=s, anchor=anchor)
            e = solve(g, ch)
            # what the windows' lengths read of the ends: the latest end of each window's nodes
            # (without syncs, the runtime's notices of results end no window)
            if self.specs[j][0] == "sync":
                e = np.where(np.r_[xc.completions(h.nodes), np.zeros(len(e) - h.n, bool)],
                             -np.inf, e)
            self.now[j] = [float(e[d.cand].max()) for d in self.devs]
            got: dict[str, float] = {}
            if len(h.keys):
                st = _starts(g, ch, e, anchor)
                arrives = h.g.group[:h.n] >= 0
                if ch.late_ok is not None:
                    arrives &= ~ch.late_ok[:h.n]
                latest = np.full(len(h.keys), -np.inf)
                np.maximum.at(latest, h.g.group[:h.n][arrives], st[:h.n][arrives])
                got = dict(zip(h.keys, latest.tolist()))
            out.append(got)
        return out

    def lengths(self) -> list[list[tuple[float, float, float, float]]]:
        """Per change, each of this host's windows' (w0, w1, base, now): what
        critical_walk.window_lengths reads of a pass, once the client has every host's."""
        out = []
        for now_j in self.now:
            assert now_j is not None
            out.append([(float(d.w0), float(d.w1), float(self.h.g.e[d.cand].max()), now)
                        for d, now in zip(self.devs, now_j)])
        return out
