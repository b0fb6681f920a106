"""The critical path stitched from the hosts' own graphs: the job-wide graph
of :mod:`tracelens.analyze.critical.path` never built in one process.

Ranks depend on each other only at their collective instances: a member's own work waits for
the instance's last arrival (the latest start of its members across the job), and a walk that
meets that wait goes on in the last arriver's history. So the job's graph is each host's
graph with, per instance it joins, the job's last arrival and who arrived last:

1. :func:`arrivals` (per host): the host's clipped time origin and its instance members
   (key, node, start) — a few rows per collective;
2. :func:`instance_table` (the job): per instance its members' count, last arrival and last
   arriver (the latest start, ties to the first node in the job's order: host, then node),
   and the job's time origin;
3. :class:`HostGraph` (per host): the host's nodes as :func:`critical_paths` builds them, its
   instances' arrivals given by the table. An instance whose last arrival is another host's
   is stood for by an anchored node (a *sentinel*) at that arrival, so the host's forward
   pass reproduces its observed times exactly when the job's does; a walk that waits for it
   stops there (:func:`critical_walk.walk_on` returns the exit);
4. :func:`stitched_paths`: each device's walk from its window's end, segment by segment
   across the hosts (a walk's states visited per host kept, so a revisit is cut where the
   job's walk cuts it).

Exactness: every array of a host's graph equals its slice of the job's graph (the same
clipping, time origin, launch latencies, binding sources, groups and last arrivers), so the
walk is the job's walk, piece for piece. Two steps of the job's graph build are global
solves; where they could act, this module says so (:class:`NotStitchable`) and the caller
keeps the job's graph: a host with a held-back launch that waits back in time (the job's
build may drop such edges after a cycle check over every host), and a host whose pass does
not reproduce its times with the job's arrivals (the job's build would anchor nodes).

What is left to the job's graph: the what-ifs (each a forward pass of the job with changed
durations; see docs/critical-path.md, "At scale").
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np
import polars as pl

from tracelens.analyze.critical.path import (_ACTIVITY, P2P, CriticalPart, CriticalPathOptions,
                                             _clipped, _labels, _linked_threads, lengths_cand,
                                             _shared_text_rows, path_notes)
from tracelens.analyze.critical.solve import (Change, Graph, build_graph, solve,
                                              solves_in_one_pass)
from tracelens.analyze.critical.walk import (Walk, Walkable, composition, idle_after,
                                             tail_component,
                                             step_path_key, walk_on, walkable,
                                             window_lengths)
from tracelens.engine.protocol import JobPlan
from tracelens.results.critical_path import (Component, DevicePath,
                                             PathActivity, Window)


class NotStitchable(Exception):
    """The job's graph build could act globally here (module doc): keep the job's graph."""


def _key(nodes: pl.DataFrame) -> pl.Series:
    """Each node's instance key (``instance#occurrence``; null: not a collective member), as
    :func:`critical_solve._groups` forms it."""
    key = pl.concat_str(pl.col("instance"), pl.lit("#"),
                        pl.col("occurrence").cast(pl.String))
    return nodes.select(_g=pl.when(pl.col("instance").is_not_null()).then(key))["_g"]


def _host_nodes(part: CriticalPart) -> pl.DataFrame:
    nodes = part.unpacked().nodes
    assert isinstance(nodes, pl.DataFrame)
    return _clipped(nodes if nodes["id"].is_sorted() else nodes.sort("id"), part.windows)


@dataclass(frozen=True)
class Arrivals:
    """One host's round-one record: its clipped earliest start (None: no nodes) and its
    instance members (``key``, ``id``: the node, ``start_ns``: clipped, ``who``)."""

    t_min: int | None
    members: pl.DataFrame


def arrivals(part: CriticalPart) -> Arrivals:
    nodes = _host_nodes(part)
    if not nodes.height:
        return Arrivals(None, pl.DataFrame({"key": [], "id": [], "start_ns": [], "who": []},
                                           schema={"key": pl.String, "id": pl.Int64,
                                                   "start_ns": pl.Int64, "who": pl.String}))
    who = pl.concat_str(pl.col("host"), pl.lit("/GPU"), pl.col("device").cast(pl.String))
    members = nodes.select(key=_key(nodes), id=pl.int_range(pl.len(), dtype=pl.Int64),
                           start_ns="start_ns", who=who.fill_null("host").cast(pl.String)
                           ).filter(pl.col("key").is_not_null())
    return Arrivals(int(nodes["start_ns"].min()), members)  # type: ignore[arg-type]


@dataclass(frozen=True)
class InstanceTable:
    """The job's instances (:func:`instance_table`): ``t0``: the job's time origin; per
    ``key`` (instances of two or more members only): ``a_obs_ns`` (the last arrival,
    absolute), ``last_host`` (index into the hosts), ``last_id`` (its node there), ``who``."""

    t0: int
    table: pl.DataFrame


def instance_table(hosts: Sequence[Arrivals]) -> InstanceTable:
    acc = None
    for i, h in enumerate(hosts):
        acc = fold_arrivals(acc, key_arrivals(h, i))
    return table_of(min((h.t_min for h in hosts if h.t_min is not None), default=0), acc)


_LATEST = ("start_ns", "host", "id")  # the last arrival: the latest start, then the first
_FIRST = [True, False, False]  # host, then its first node (as the job's graph takes it)


def key_arrivals(h: Arrivals, index: int) -> pl.DataFrame:
    """Host ``index``'s members folded per instance key (a host's record in the job's
    table): how many, and its latest one (``start_ns``, ``host``, ``id``, ``who``)."""
    return fold_arrivals(None, h.members.with_columns(n=pl.lit(1, pl.Int64),
                                                      host=pl.lit(index, pl.Int64)))


def fold_arrivals(acc: pl.DataFrame | None, more: pl.DataFrame) -> pl.DataFrame:
    """Two hosts' (or groups of hosts') records per key as one: counts summed, the latest
    member kept (ties: the first host, then its first node). Associative, so the job's
    table is folded one host at a time and holds one row per instance, not per member."""
    rows = more if acc is None else pl.concat([acc, more])
    return rows.sort(*_LATEST, descending=_FIRST).group_by("key", maintain_order=True).agg(
        n=pl.col("n").sum(), start_ns=pl.col("start_ns").first(),
        host=pl.col("host").first(), id=pl.col("id").first(), who=pl.col("who").first())


def table_of(t0: int, folded: pl.DataFrame | None) -> InstanceTable:
    """The job's :class:`InstanceTable` from every host's records folded (instances of two
    or more members, by their last arrival)."""
    if folded is None:
        folded = pl.DataFrame(schema={"key": pl.String, "n": pl.Int64, "start_ns": pl.Int64,
                                      "host": pl.Int64, "id": pl.Int64, "who": pl.String})
    table = folded.filter(pl.col("n") >= 2).sort(*_LATEST, descending=_FIRST).select(
        "key", a_obs_ns="start_ns", last_host="host", last_id="id", who="who")
    return InstanceTable(t0, table)


@dataclass(frozen=True)
class DeviceWindow:
    """A device's walk to make: its window and the node its end rests on (host-local)."""

    rank: int
    host: str
    device: int
    step: int | None
    w0: int
    w1: int
    sink: int
    cand: np.ndarray  # the nodes its end may rest on (host-local)


def _backward(g: Graph, a_obs: np.ndarray) -> bool:
    """Whether an edge of the graph's points goes back in observed time: a chain's previous
    end after its next start, a source after the start it gates, a sync source's end after
    its waiter's, an instance's last arrival after a member's end. Without one anywhere,
    every cycle of the job's points is at one time."""
    n = len(g.s)
    prev_e = np.r_[-np.inf, g.e[:-1]] if n else g.e
    s_t = np.where(g.s_at_start, g.s[g.s_src], g.e[g.s_src])
    member = g.group >= 0
    return bool((~g.first & (prev_e > g.s)).any() or (s_t > g.s[g.s_dst]).any()
                or (g.e[g.b_src] > g.e[g.b_dst]).any()
                or (member.any() and (a_obs[g.group[member]] > g.e[member]).any()))


class HostGraph:
    """One host's piece of the job's graph with the job's instance arrivals (module doc)."""

    def __init__(self, part: CriticalPart, inst: InstanceTable, index: int) -> None:
        nodes = _host_nodes(part)
        n = nodes.height
        self.n = n
        key = _key(nodes)
        mine = inst.table.join(pl.DataFrame({"key": key.drop_nulls().unique()}), on="key") \
            .sort("key")
        k = mine.height
        code = dict(zip(mine["key"].to_list(), range(k)))
        group = np.full(n + k, -1, np.int64)
        if n:
            group[:n] = key.replace_strict(code, default=-1, return_dtype=pl.Int64).to_numpy()
        group[n:] = np.arange(k)
        a_obs = (mine["a_obs_ns"].to_numpy().astype(np.int64) - inst.t0).astype(np.float64)
        local = (mine["last_host"] == index).to_numpy()
        foreign = np.cumsum(~local) - 1
        a_last = np.where(local, mine["last_id"].to_numpy(), -2 - foreign).astype(np.int64)
        self.keys: list[str] = mine["key"].to_list()
        self.foreign: list[str] = mine.filter(~pl.Series(local))["who"].to_list()
        self.foreign_at: list[tuple[int, int]] = list(zip(
            mine.filter(~pl.Series(local))["last_host"].to_list(),
            mine.filter(~pl.Series(local))["last_id"].to_list()))
        # the sentinels: one anchored node per instance at its last arrival, each its own
        # chain, so that the host's pass sees the job's arrival
        chain0 = int(nodes["chain"].max()) + 1 if n else 0  # type: ignore[arg-type]
        sentinels = pl.DataFrame({
            "start_ns": mine["a_obs_ns"], "end_ns": mine["a_obs_ns"],
            "device_node": pl.Series([True] * k, dtype=pl.Boolean),
            "chain": pl.Series(range(chain0, chain0 + k), dtype=nodes.schema.get(
                "chain", pl.Int64)),
            "id": pl.Series(range(n, n + k), dtype=nodes.schema.get("id", pl.Int64))})
        full = pl.concat([nodes, sentinels], how="diagonal_relaxed") if k else nodes
        g = build_graph(full, part.edges, t0=inst.t0, groups=(group, a_obs, a_last, k))
        if g.anchored:
            raise NotStitchable("the host's pass does not reproduce its times")
        one_pass = solves_in_one_pass(g)
        if one_pass is None:
            raise NotStitchable("no C pass to look for cycles")
        if not one_pass:
            raise NotStitchable("the host's graph has a cycle")
        self.backward = _backward(g, a_obs)
        self.g: Graph = g
        self.nodes = nodes
        self.edges = part.edges
        self.windows = part.windows
        self.labels = _labels(full)
        self.lists: Walkable | None = walkable(g, self.labels)  # (None: made per walk call)

    def instance_edges(self) -> list[tuple[str, str]]:
        """(a, b) for each instance a of this host whose last arrival reaches the start of a
        member of instance b here without passing another instance's arrival (a forward
        pass per instance, from its sentinel alone, every other wait for an arrival
        dropped; a start is reached where its chain's previous end or a source point is)."""
        g, k = self.g, len(self.keys)
        n = len(g.s)
        out: list[tuple[str, str]] = []
        if not k:
            return out
        zero, none = np.zeros(n), np.full(n, -np.inf)
        flat = replace(g, s=none, prev_lag=zero, s_lag=np.zeros(len(g.s_lag)),
                       b_lag=np.zeros(len(g.b_lag)), a_lag=zero)
        member = np.flatnonzero(g.group[:self.n] >= 0)
        for j in range(k):
            anchor = none.copy()
            anchor[self.n + j] = 0.0
            others = np.ones(k, bool)
            others[j] = False
            e = solve(replace(flat, anchor=anchor), Change(w=zero, no_wait=others))
            # a start is reached where its chain's previous end is, or a source's end (or,
            # from a blocking call, its start: settled over those edges)
            reached = np.zeros(n, bool)
            reached[1:] = ~g.first[1:] & (e[:-1] >= 0)
            by_end = ~g.s_at_start
            reached[g.s_dst[by_end & (e[g.s_src] >= 0)]] = True
            while True:
                more = g.s_dst[g.s_at_start & reached[g.s_src] & ~reached[g.s_dst]]
                if not len(more):
                    break
                reached[more] = True
            out += [(self.keys[j], self.keys[b])
                    for b in np.unique(g.group[member[reached[member]]]).tolist()]
        return out

    def devices(self, win: pl.DataFrame) -> list[DeviceWindow]:
        """The walks to make for this host's devices with activity in ``win`` (the windows
        kept, :func:`critical_path._walk_all`'s choice of the node each end rests on)."""
        nodes, g = self.nodes, self.g
        devices = nodes.lazy().filter(pl.col("device_node")).group_by(
            "host", "rank", "device").agg(ids=pl.col("id")).collect().join(
            win, on=["host", "rank"]).sort("rank", "host", "device")
        by_chain = dict(nodes.lazy().filter(~pl.col("device_node")).group_by("chain").agg(
            ids=pl.col("id")).collect().iter_rows())
        linked = _linked_threads(nodes, self.edges)
        end = nodes["end_ns"].to_numpy()
        dev = np.asarray(self.labels.device_node, bool)
        out = []
        for host, rank, device, dev_ids, step, lo, hi in devices.select(
                "host", "rank", "device", "ids", "step", "start_ns", "end_ns").iter_rows():
            own = np.asarray(dev_ids, np.int64)
            threads = [np.asarray(by_chain[c], np.int64)
                       for c in linked.get((host, rank, device), [])]
            cand = np.sort(np.concatenate([own, *threads]))
            clipped = np.minimum(end[cand], hi)
            top = cand[clipped == clipped.max()]
            dev_top = top[dev[top]]
            last = int(dev_top[0] if len(dev_top) else top[0])
            out.append(DeviceWindow(rank, host, device, step, lo - g.t0, hi - g.t0, last,
                                    lengths_cand(cand, end, hi, self.labels)))
        return out


def placed_parts(parts: Sequence[CriticalPart], plan: JobPlan) -> list[CriticalPart]:
    """The hosts' parts (as the engine's maps made them) each placed in the job on its own
    (ranks, host names, clock shifts: :meth:`CriticalPath.merge`'s placement, ids and chains
    left the host's)."""
    out = []
    for i, packed in enumerate(parts):
        p = packed.unpacked()
        out.append(CriticalPart(plan.place(p.nodes, i), p.edges,  # type: ignore[arg-type]
                                plan.place(p.windows, i), plan.place(p.host_ranks, i),
                                plan.place(p.unwindowed, i)))
    return out


def stitched_paths(parts: Sequence[CriticalPart], options: CriticalPathOptions
                   ) -> tuple[tuple[DevicePath, ...], tuple[str, ...]]:
    """The job's paths and notes (as :func:`critical_path.critical_paths` gives them on the
    merged parts, ``parts`` placed in the job) from the hosts' own graphs. Raises
    :class:`NotStitchable` where the job's graph could differ (module doc)."""
    st = _stitch(parts, options)
    return st.paths, st.notes


@dataclass
class _Stitched:
    hosts: list[HostGraph]
    offset: np.ndarray
    walks: list[tuple[DeviceWindow, int, Walk]]
    paths: tuple[DevicePath, ...]
    notes: tuple[str, ...]


def _stitch(parts: Sequence[CriticalPart], options: CriticalPathOptions) -> _Stitched:
    inst = instance_table([arrivals(p) for p in parts])
    hosts = [HostGraph(p, inst, i) for i, p in enumerate(parts)]
    # a cycle across hosts passes through two or more instances; without an edge back in time
    # its points are all at one time, so two instances arrive at once
    if any(h.backward for h in hosts) or inst.table["a_obs_ns"].is_duplicated().any():
        if _has_cycle([e for h in hosts for e in h.instance_edges()]):
            raise NotStitchable("the job's graph has a cycle across hosts")
    offset = np.cumsum([0] + [h.n for h in hosts])
    win_all = pl.concat([p.windows for p in parts])
    win = win_all if options.rank is None else win_all.filter(pl.col("rank") == options.rank)
    todo = sorted(((d, i) for i, h in enumerate(hosts) for d in h.devices(
        win.filter(pl.col("host").is_in(h.nodes["host"].unique().implode())))),
        key=lambda x: (x[0].rank, x[0].host, x[0].device))
    walks = [(d, i, _walk(hosts, i, d, offset)) for d, i in todo]
    after = [_idle_after(hosts[i], d) for d, i, _ in walks]
    longest = max(range(len(walks)), default=-1, key=lambda k: step_path_key(
        walks[k][0].w1 - walks[k][0].w0, after[k], walks[k][0].rank, walks[k][0].device))
    with_host = {(h, r) for p in parts for h, r in p.host_ranks.iter_rows()}
    out = []
    for k, (d, _, w) in enumerate(walks):
        listed = options.activities == "all" or (options.activities == "longest"
                                                 and k == longest)
        out.append(_device_path(d, w, hosts, offset, (d.host, d.rank) in with_host, listed,
                                after[k]))
    unwindowed = pl.concat([p.unwindowed for p in parts])
    notes = path_notes(win, unwindowed, {(p.host, p.rank) for p in out}, options)
    return _Stitched(hosts, offset, walks, tuple(out), tuple(notes))


def _idle_after(h: HostGraph, d: DeviceWindow) -> int:
    """:func:`~tracelens.analyze.critical.walk.idle_after` of ``d``'s walk on its host."""
    assert h.lists is not None
    return idle_after(float(h.lists.e[d.sink]), float(d.w0), float(d.w1))


def _walk(hosts: list[HostGraph], i: int, d: DeviceWindow, offset: np.ndarray) -> Walk:
    """The job's walk of ``d`` (on host ``i``), segment by segment (module doc)."""
    L = hosts[i].lists
    assert L is not None
    pieces: list[tuple[str, float]] = []
    on: dict[int, float] = {}
    w0, c, n = float(d.w0), float(d.w1), d.sink
    if L.e[n] < c:
        pieces.append((tail_component(L.host_tail[n]), c - max(L.e[n], w0)))
        c = max(L.e[n], w0)
    seen: dict[int, set[tuple[int, bool]]] = {}
    at_start, cut = False, 0
    while True:
        h = hosts[i]
        mine: dict[int, float] = {}
        assert h.lists is not None
        got, exit_ = walk_on(h.lists, n, at_start, c, w0, pieces, mine,
                             seen.setdefault(i, set()), h.foreign)
        cut += got
        for node, ns in mine.items():
            at = int(offset[i]) + node
            on[at] = on.get(at, 0.0) + ns
        if exit_ is None:
            break
        k, c = exit_
        i, n = h.foreign_at[k]
        at_start = True
    names = tuple(dict.fromkeys(name for name, _ in pieces))
    index = {name: j for j, name in enumerate(names)}
    return Walk(names, np.array([index[name] for name, _ in pieces], np.int64),
                np.array([v for _, v in pieces], np.float64),
                np.fromiter(on.keys(), np.int64, len(on)),
                np.fromiter(on.values(), np.float64, len(on)), cut)


def _has_cycle(edges: list[tuple[str, str]]) -> bool:
    """Whether the directed graph of ``edges`` has a cycle (a self-loop included)."""
    succ: dict[str, list[str]] = {}
    indeg: dict[str, int] = {}
    for a, b in set(edges):
        succ.setdefault(a, []).append(b)
        indeg[b] = indeg.get(b, 0) + 1
        indeg.setdefault(a, 0)
    todo = [v for v, d in indeg.items() if d == 0]
    done = 0
    while todo:
        v = todo.pop()
        done += 1
        for w in succ.get(v, []):
            indeg[w] -= 1
            if not indeg[w]:
                todo.append(w)
    return done < len(indeg)


def _device_path(d: DeviceWindow, w: Walk, hosts: list[HostGraph], offset: np.ndarray,
                 host_graph: bool, activities: bool, after: int = 0) -> DevicePath:
    """:func:`critical_path._device_path` of a stitched walk: the path's activities gathered
    from the hosts they ran on."""
    comp = tuple(Component(k, v) for k, v in composition(w))
    graph = "host+device" if host_graph else "device-only"
    w0, w1 = d.w0 + hosts[0].g.t0, d.w1 + hosts[0].g.t0
    if not activities:
        return DevicePath(d.rank, d.host, d.device, d.step, Window(w0, w1), w1 - w0, graph,
                          comp, (), idle_after_ns=after)
    ns = w.on_ns.astype(np.int64)
    ids = w.on_node[ns > 0]
    host_of = np.searchsorted(offset, ids, side="right") - 1
    frames = []
    for i in np.unique(host_of).tolist():
        sel = host_of == i
        local = ids[sel] - offset[i]
        frames.append(hosts[i].nodes.select(_ACTIVITY)[local].with_columns(
            on_path_ns=pl.Series(ns[ns > 0][sel], dtype=pl.Int64), _id=pl.Series(ids[sel])))
    acts = pl.concat(frames).sort("start_ns", "_id") if frames else \
        hosts[0].nodes.select(_ACTIVITY).head(0).with_columns(
            on_path_ns=pl.lit(0, pl.Int64), _id=pl.lit(0, pl.Int64))
    rows = tuple(PathActivity(*r) for r in _shared_text_rows(acts.drop("_id")))
    return DevicePath(d.rank, d.host, d.device, d.step, Window(w0, w1), w1 - w0, graph, comp,
                      rows, idle_after_ns=after)


__all__ = ["NotStitchable", "arrivals", "instance_table", "HostGraph", "placed_parts",
           "stitched_paths"]


# ---------------------------------------------------------------------------------------------
# The forward pass of a change, host by host, in one process: the reference the tests check
# bit for bit against the job's graph (critical_rounds runs the same rounds on the workers)
# ---------------------------------------------------------------------------------------------

def _cut(x: np.ndarray | None, at: int, n: int, k: int, fill: object) -> np.ndarray | None:
    """A per-node array's slice of one host, its ``k`` sentinels' entries appended."""
    if x is None:
        return None
    return np.r_[x[at:at + n], np.full(k, fill, x.dtype)]


def host_changes(hosts: Sequence[HostGraph], ch: Change, keys: Sequence[str]
                 ) -> list[Change]:
    """``ch`` (over the job's graph of the hosts' nodes in order; ``keys``: the job's group
    codes' keys, :func:`job_keys`) cut into each host's change (sentinels unchanged)."""
    out = []
    node0, edge0 = 0, 0
    code = {k: i for i, k in enumerate(keys)}
    for h in hosts:
        n, k = h.n, len(h.keys)
        ne = len(h.g.s_src)
        no_wait = None if ch.no_wait is None else \
            np.array([ch.no_wait[code[key]] for key in h.keys], bool)
        out.append(Change(w=_cut(ch.w, node0, n, k, 0.0),
                          drop_s=None if ch.drop_s is None else ch.drop_s[edge0:edge0 + ne],
                          late_ok=_cut(ch.late_ok, node0, n, k, False), no_wait=no_wait,
                          prev_lag=_cut(ch.prev_lag, node0, n, k, 0.0)))
        node0 += n
        edge0 += ne
    return out


def job_keys(hosts: Sequence[HostGraph]) -> list[str]:
    """The job graph's group codes' keys: every instance key of the job (one member or
    more), sorted (:func:`critical_solve._groups`' dense rank)."""
    return sorted({k for h in hosts for k in _key(h.nodes).drop_nulls().unique().to_list()})


def _starts(g: Graph, ch: Change, e: np.ndarray, anchor: np.ndarray) -> np.ndarray:
    """Every node's start under ``ch`` given the pass's ends ``e`` (the pass's own rule:
    the chain's previous end and lag, the kept S-side sources, the anchor)."""
    keep = np.ones(len(g.s_src), bool) if ch.drop_s is None else ~ch.drop_s
    first = g.first if ch.late_ok is None else g.first | ch.late_ok
    if ch.late_ok is not None:
        keep &= ~ch.late_ok[g.s_dst]
    src, dst, lag, at = g.s_src[keep], g.s_dst[keep], g.s_lag[keep], g.s_at_start[keep]
    has = ~first.copy()
    has[dst] = True
    if ch.late_ok is not None:
        has |= ch.late_ok
    anchor = np.where(has, anchor, np.maximum(anchor, g.s))
    prev_lag = np.where(first, 0.0, g.prev_lag if ch.prev_lag is None else ch.prev_lag)
    prev = np.r_[-np.inf, e[:-1]]
    prev[first] = -np.inf
    s = np.full(len(e), -np.inf)
    for _ in range(len(e) + 1):
        xs = anchor.copy()
        np.maximum.at(xs, dst, np.where(at, s[src], e[src]) + lag)
        new = np.maximum(prev + prev_lag, xs)
        if np.array_equal(new, s):
            return s
        s = new
    raise RuntimeError("starts did not settle")


def stitched_solve(hosts: Sequence[HostGraph], changes: Sequence[Change],
                   max_rounds: int = 100_000) -> tuple[list[np.ndarray], int]:
    """(each host's node ends under its change, rounds): the job's forward pass of a change
    without the job's graph. The instances' arrivals start at the observed ones (a change
    only shortens work or drops waits, so the pass's arrivals are no later); each round,
    every host solves its own graph with its sentinels at the current arrivals and reports
    its members' latest start per instance; the job's arrival of an instance is the latest
    of those. Where a round leaves every arrival as it was, the arrivals are a fixed point
    of the job's pass, which on an acyclic graph is its one solution: each host's ends then
    are the job's, exactly."""
    arrival: dict[str, float] = {}
    for h in hosts:
        for j, key in enumerate(h.keys):
            arrival[key] = float(h.g.s[h.n + j])
    for rounds in range(1, max_rounds + 1):
        ends, got = [], {}
        for h, ch in zip(hosts, changes):
            k = len(h.keys)
            T = np.array([arrival[key] for key in h.keys])
            s = h.g.s.copy()
            s[h.n:] = T
            anchor = h.g.anchor.copy()
            anchor[h.n:] = T
            g = replace(h.g, s=s, anchor=anchor)
            e = solve(g, ch)
            ends.append(e[:h.n])
            if k:
                st = _starts(g, ch, e, anchor)
                arrives = (g.group[:h.n] >= 0)
                if ch.late_ok is not None:
                    arrives &= ~ch.late_ok[:h.n]
                latest = np.full(k, -np.inf)
                np.maximum.at(latest, g.group[:h.n][arrives], st[:h.n][arrives])
                for key, v in zip(h.keys, latest.tolist()):
                    got[key] = max(got.get(key, -np.inf), v)
        if all(got.get(key, -np.inf) == v for key, v in arrival.items()):
            return ends, rounds
        arrival = {key: got.get(key, -np.inf) for key in arrival}
    raise RuntimeError("the stitched pass did not settle")


def stitched_lengths(hosts: Sequence[HostGraph], win: pl.DataFrame,
                     ends: Sequence[np.ndarray]) -> list[int]:
    """Each device window's length (rank, host, device order) with the hosts' node ends
    ``ends`` (:func:`stitched_solve`), as :func:`critical_path._lengths` reads a pass
    (critical_walk.window_lengths): four numbers a host computes from its own ends."""
    rows = []
    for h, e in zip(hosts, ends):
        mine = win.filter(pl.col("host").is_in(h.nodes["host"].unique().implode()))
        for d in h.devices(mine):
            rows.append(((d.rank, d.host, d.device), (float(d.w0), float(d.w1),
                         float(h.g.e[d.cand].max()), float(e[d.cand].max()))))
    rows.sort(key=lambda r: r[0])
    return [int(v) for v in window_lengths([r for _, r in rows])]


# ---------------------------------------------------------------------------------------------
# What the what-ifs read of one host (critical_rounds solves them in rounds)
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Local:
    """The per-node arrays of one host the what-ifs read (its own nodes, no sentinels)."""

    sub: pl.Series
    coll: np.ndarray
    who: np.ndarray
    p2p: np.ndarray
    dev: np.ndarray


def _local(h: HostGraph) -> _Local:
    nodes = h.nodes
    sub = nodes["subcategory"].fill_null("unknown")
    coll = ((nodes["category"] == "collective").fill_null(False).to_numpy()
            & nodes["device_node"].to_numpy())
    who = nodes.select(pl.concat_str(pl.col("host"), pl.lit("/GPU"), pl.col("device").cast(
        pl.String))).to_series().fill_null("").to_numpy()
    return _Local(sub, coll, who, sub.is_in(list(P2P)).to_numpy(),
                  nodes["device_node"].to_numpy())
