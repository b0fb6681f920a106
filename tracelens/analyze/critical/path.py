"""``tracelens critical-path``: what sets the step time, across ranks, and what each fix
would save, on the Analysis protocol (:mod:`tracelens.engine.protocol`).

- ``partial`` (per host): the window of each rank and the graph pieces in it
  (:mod:`tracelens.analyze.critical.graph`): nodes and their launch, sync and event-wait
  edges, in the host's own time and ranks; collective nodes carry their instance key.
- ``merge``: the hosts' pieces placed in the job (ranks, host names, clock shifts), node ids
  and chains offset; the cross-rank links (instance arrivals) are made from the keys in
  ``finish`` (:mod:`tracelens.analyze.critical.solve`).
- ``finish``: the graph solved, one path per device (:mod:`tracelens.analyze.critical.walk`)
  and the what-if projections, each the same graph solved again with one change.

Node times are clipped to their rank's window start (what ran before the window is not the
window's), so every path and projection lies in the window.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Iterator, Literal, Sequence

import numpy as np
import polars as pl

from tracelens.analyze.critical import xla_changes as xc
from tracelens.analyze.critical.graph import (EDGE_SCHEMA, NODE_SCHEMA, WINDOW_SCHEMA,
                                              XLA_SYNC, XLA_TRANSFER,
                                              WindowChoice, chain_order, device_nodes,
                                              host_nodes, local_edges, windows)
from tracelens.analyze.timeline.blocked import replays_graphs
from tracelens.analyze.critical.solve import Change, Graph, build_graph, solve
from tracelens.analyze.summary.packed import PackedFrame, pack_frame
from tracelens.analyze.critical.walk import (Labels, Walk, Walker, composition, host_tail,
                                             idle_after,
                                             step_path_key, window_lengths)
from tracelens.core.frames import distinct
from tracelens.core.text import matches
from tracelens.core.model import Trace, device_kind
from tracelens.engine.protocol import JobPlan
from tracelens.loading.step_choice import hosts_disagree
from tracelens.results.critical_path import (Component, CriticalPathResult, DevicePath,
                                             PathActivity, WhatIf, Window)
from tracelens.analyze.consistency import WindowFacts, gate_result, merge_facts, window_facts


@dataclass(frozen=True)
class CriticalPathOptions:
    """``step``/``window``/``time``: which window (:class:`WindowChoice`; ``time`` from the
    job's zero, so the job is loaded whole); ``rank``: only that rank's paths (and the
    what-ifs on them); ``top``: what-ifs kept, best first."""

    step: int | None = None
    window: str | None = None
    rank: int | None = None
    top: int = 10
    time: tuple[int | None, int | None] | None = None
    # which paths list their activities: "all"; "longest" (``summarize`` shows no other's);
    # "none" (the terminal and Markdown tables show none: a window of a whole trace puts
    # every activity of every device on some path, millions of rows to build for nothing)
    activities: Literal["all", "longest", "none"] = "all"
    # take the window's measured facts and check the result against them
    # (:mod:`tracelens.analyze.consistency`; ``summarize`` takes its own)
    consistency: bool = False


@dataclass(frozen=True)
class CriticalPart:
    """One host's (or the job's) graph pieces: NODE_SCHEMA + ``chain``, ``id``;
    EDGE_SCHEMA; WINDOW_SCHEMA; ``host_ranks``: the (host, rank) pairs with host events;
    ``unwindowed``: the (host, rank) pairs with device activity but no window; ``kinds``:
    each device's kind (host, rank, device, kind: GPU, TPU, CPU; model.device_kind)."""

    nodes: pl.DataFrame | PackedFrame  # packed to travel (:meth:`CriticalPath.pack`)
    edges: pl.DataFrame
    windows: pl.DataFrame
    host_ranks: pl.DataFrame
    unwindowed: pl.DataFrame
    kinds: pl.DataFrame | None = None
    facts: WindowFacts | None = None  # the window's measured facts (options.consistency)

    def unpacked(self) -> "CriticalPart":
        """The part with its nodes as a frame again."""
        if isinstance(self.nodes, PackedFrame):
            return replace(self, nodes=self.nodes.frame())
        return self


class CriticalPath:
    """The analysis (module doc)."""

    def whole_job(self, options: CriticalPathOptions) -> bool:
        """``--time`` counts from the job's first activity: the job is loaded whole."""
        return options.time is not None

    def partial(self, trace: Trace, options: CriticalPathOptions) -> CriticalPart:
        win = windows(trace, WindowChoice(options.step, options.window, options.time))
        dev = device_nodes(trace, win)
        nodes = chain_order(pl.concat([dev, host_nodes(trace, win, dev)]))
        hr = trace.host_events.lazy().filter(pl.col("kind").is_in(["api", "cpu_op"])).select(
            "host", "rank").unique().collect()  # lazy: 2M launch calls' names not copied
        active = distinct(trace.events, ["host", "rank"])
        missing = active.join(win.select("host", "rank"), on=["host", "rank"], how="anti")
        kinds = trace.devices.select("host", "rank", "device", kind=device_kind(
            pl.col("vendor")))
        facts = window_facts(trace, WindowChoice(options.step, options.window, options.time)) \
            if options.consistency else None
        return CriticalPart(nodes, local_edges(nodes), win, hr, missing, kinds, facts)

    def pack(self, part: CriticalPart) -> CriticalPart:
        """The part to travel and wait small: its nodes (one row per activity of the window,
        thousands on a host) as compressed Arrow bytes (:mod:`tracelens.analyze.summary.packed`)."""
        return replace(part, nodes=pack_frame(part.nodes)) \
            if isinstance(part.nodes, pl.DataFrame) else part

    def merge(self, parts: Sequence[CriticalPart], plan: JobPlan) -> CriticalPart:
        nodes, edges = [], []
        offset, chains = 0, 0
        for i, packed in enumerate(parts):  # one host unpacked at a time (hundreds of hosts)
            p = packed.unpacked()
            nodes.append(plan.place(p.nodes, i).with_columns(
                id=pl.col("id") + offset, chain=pl.col("chain") + chains))
            edges.append(p.edges.with_columns(src=pl.col("src") + offset,
                                              dst=pl.col("dst") + offset))
            offset += p.nodes.height
            chains += int(p.nodes["chain"].max() + 1) if p.nodes.height else 0  # type: ignore
        return CriticalPart(pl.concat(nodes), pl.concat(edges),
                            plan.concat([p.windows for p in parts]),
                            plan.concat([p.host_ranks for p in parts]),
                            plan.concat([p.unwindowed for p in parts]),
                            plan.concat([p.kinds for p in parts if p.kinds is not None]),
                            merge_facts([p.facts for p in parts if p.facts is not None], plan)
                            if parts and all(p.facts is not None for p in parts) else None)

    def finish(self, part: CriticalPart, options: CriticalPathOptions) -> CriticalPathResult:
        return gate_result(critical_paths(part.unpacked(), options), part.facts)


class PathAndFacts(CriticalPath):
    """The critical path and the window's measured facts, ungated: what ``summarize`` needs
    when it solves the path again on the job's step (its gate checks the findings too, with
    those facts). ``options.consistency`` must be set, so that each host takes its facts."""

    def finish(self, part: CriticalPart, options: CriticalPathOptions
               ) -> "tuple[CriticalPathResult, WindowFacts | None]":
        return critical_paths(part.unpacked(), options), part.facts


def _clipped(nodes: pl.DataFrame, win: pl.DataFrame) -> pl.DataFrame:
    """Node times clipped to their rank's window start (module doc)."""
    # each node's window start by a streamed join of its keys (a million nodes: +34 MB, the
    # in-memory join +93 MB); only the two time columns are new (joining the whole frame
    # copied every column). The streamed result comes in its own chunks: made one, so that
    # the frame's columns are cut alike (else the next stages copied them all again)
    w0 = nodes.lazy().select("host", "rank").join(
        win.lazy().select("host", "rank", _w0="start_ns"), on=["host", "rank"], how="left",
        maintain_order="left").collect(engine="streaming")["_w0"].rechunk()
    return nodes.with_columns(start_ns=pl.max_horizontal(pl.col("start_ns"), w0),
                              end_ns=pl.max_horizontal(pl.col("end_ns"), w0))


def _who(nodes: pl.DataFrame, kinds: pl.DataFrame | None) -> pl.Series:
    """Each node's participant, ``<host>/<kind><device>`` (``runsc/TPU0``; the kind from the
    model's devices, GPU where unknown); null for host nodes."""
    kind = pl.lit("GPU")
    if kinds is not None and kinds.height:
        kind = nodes.select(pl.col("host").cast(pl.String), pl.col("device").cast(pl.Int64)) \
            .join(kinds.select(pl.col("host").cast(pl.String), pl.col("device")
                               .cast(pl.Int64), "kind").unique(["host", "device"]),
                  on=["host", "device"], how="left", maintain_order="left")["kind"] \
            .fill_null("GPU")
    return nodes.select(pl.concat_str(pl.col("host"), pl.lit("/"), kind,
                                      pl.col("device").cast(pl.String))).to_series()


def _labels(nodes: pl.DataFrame, kinds: pl.DataFrame | None = None) -> Labels:
    comp = nodes.select(pl.when(pl.col("device_node") & (pl.col("category") == "collective"))
                        .then(pl.lit("communication"))
                        .when(pl.col("device_node")).then(pl.col("category").fill_null("other"))
                        .when(pl.col("sync")).then(pl.lit("sync"))
                        .when(pl.lit(matches(nodes, "name", XLA_TRANSFER).fill_null(False)))
                        .then(pl.lit("transfer"))
                        .otherwise(pl.lit("host")))
    comp_code, comp_names = _coded(comp.to_series())
    who_code, who_names = _coded(_who(nodes, kinds).fill_null("host"))
    dev = nodes["device_node"].to_numpy()
    tail = ~dev & matches(nodes, "name", XLA_SYNC).fill_null(False).to_numpy()
    return Labels(comp_code, comp_names, who_code, who_names, dev, tail)


def _coded(col: pl.Series) -> tuple[np.ndarray, tuple[str, ...]]:
    """(code per row, the distinct values): a few labels for every node, as small integers
    instead of an object array of strings."""
    if not col.len():
        return np.zeros(0, np.int64), ()
    names = col.cast(pl.String).unique().sort().to_list()
    codes = col.cast(pl.String).cast(pl.Enum(names)).to_physical().to_numpy()
    return codes.astype(np.int64), tuple(names)


@dataclass(frozen=True)
class _Path:
    rank: int
    host: str
    device: int
    step: int | None
    w0: int
    w1: int
    cand: np.ndarray  # the nodes the window's end may rest on
    walk: Walk  # the pieces, and the ns on the path per node
    idle_after: int = 0  # the window's ns after the node the walk starts on


def critical_paths(part: CriticalPart, options: CriticalPathOptions) -> CriticalPathResult:
    """The result of the job's merged part (module doc)."""
    win = part.windows
    split = default_window(options) and hosts_disagree(win)
    if split:
        return CriticalPathResult((), (), (split,))
    if options.rank is not None:
        win = win.filter(pl.col("rank") == options.rank)
    # merged parts come in id order: sorting anyway gathered every column again (+325 MB on
    # a 128-host job's million nodes, while the merged nodes were still held)
    ids_sorted = part.nodes["id"].is_sorted()
    nodes = _clipped(part.nodes if ids_sorted else part.nodes.sort("id"), part.windows)
    g = build_graph(nodes, part.edges)
    lab = _labels(nodes, part.kinds)
    paths = _walk_all(g, nodes, part.edges, win, lab)
    notes = list(g.notes) + path_notes(win, part.unwindowed, {(p.host, p.rank) for p in paths},
                                       options)
    with_host = {(h, r) for h, r in part.host_ranks.iter_rows()}
    kind_of = {} if part.kinds is None else {
        (h, d): k for h, d, k in part.kinds.select("host", "device", "kind").iter_rows()}
    longest = max(range(len(paths)), default=-1, key=lambda i: step_path_key(
        paths[i].w1 - paths[i].w0, paths[i].idle_after, paths[i].rank, paths[i].device))
    out = tuple(_device_path(p, g, nodes, (p.host, p.rank) in with_host,
                             options.activities == "all"
                             or (options.activities == "longest" and i == longest),
                             kind_of.get((p.host, p.device), "GPU"))
                for i, p in enumerate(paths))
    return CriticalPathResult(out, tuple(_what_ifs(g, nodes, paths, options.top, part.kinds)),
                              tuple(notes))


def default_window(options: CriticalPathOptions) -> bool:
    """Whether the window is the default one (the headline's step each host picks)."""
    return options.step is None and options.window is None and options.time is None


def path_notes(win: pl.DataFrame, unwindowed: pl.DataFrame, shown: set[tuple[str, int]],
               options: CriticalPathOptions) -> list[str]:
    """The notes on ranks without a path: no window, or no device activity in it."""
    notes = []
    what = (f"no host annotation matching {options.window!r}" if options.window is not None
            else "no window")
    for host, rank in unwindowed.sort("rank", "host").iter_rows():
        if options.rank is None or rank == options.rank:
            notes.append(f"{host} rank {rank}: {what}, no path")
    for host, rank, step in win.select("host", "rank", "step").iter_rows():
        if (host, rank) not in shown:
            what = f"step {step}" if step is not None else "its window"
            notes.append(f"{host} rank {rank}: no device activity in {what}, no path")
    return notes


def _linked_threads(nodes: pl.DataFrame, edges: pl.DataFrame
                    ) -> dict[tuple[str, int, int], list[int]]:
    """Per device, the host threads (chains) linked to it: they launch its activities or
    wait for them. A path's window may end on them; a thread that never touches the device
    does not set its step."""
    dev = nodes.lazy().filter(pl.col("device_node")).select("id", "host", "rank", "device") \
        .collect()
    hst = nodes.lazy().filter(~pl.col("device_node")).select("id", "chain").collect()
    launch = edges.filter(pl.col("kind").is_in(["launch", "blocked"])).join(
        dev, left_on="dst", right_on="id").join(hst, left_on="src", right_on="id")
    sync = edges.filter(pl.col("kind") == "sync").join(
        dev, left_on="src", right_on="id").join(hst, left_on="dst", right_on="id")
    both = pl.concat([launch.select("host", "rank", "device", "chain"),
                      sync.select("host", "rank", "device", "chain")]).unique()
    out: dict[tuple[str, int, int], list[int]] = {}
    for host, rank, device, chain in both.sort("chain").iter_rows():
        out.setdefault((host, rank, device), []).append(chain)
    return out


def _walk_all(g: Graph, nodes: pl.DataFrame, edges: pl.DataFrame, win: pl.DataFrame,
              lab: Labels) -> list[_Path]:
    """One walk per device with activity in its rank's window (rank, host, device order)."""
    # lazy: the filters read the columns they need, not a copy of every column of a million
    devices = nodes.lazy().filter(pl.col("device_node")).group_by("host", "rank", "device") \
        .agg(ids=pl.col("id")).collect().join(win, on=["host", "rank"]) \
        .sort("rank", "host", "device")
    by_chain = dict(nodes.lazy().filter(~pl.col("device_node")).group_by("chain").agg(
        ids=pl.col("id")).collect().iter_rows())
    linked = _linked_threads(nodes, edges)
    end = nodes["end_ns"].to_numpy()
    walker = Walker(g, lab)
    out = []
    for host, rank, device, dev_ids, step, lo, hi in devices.select(
            "host", "rank", "device", "ids", "step", "start_ns", "end_ns").iter_rows():
        own = np.asarray(dev_ids, np.int64)
        threads = [np.asarray(by_chain[c], np.int64) for c in linked.get((host, rank, device),
                                                                          [])]
        cand = np.sort(np.concatenate([own, *threads]))
        # the window's end rests on the node ending last (device activities first on ties,
        # then the first node)
        clipped = np.minimum(end[cand], hi)
        top = cand[clipped == clipped.max()]
        dev_top = top[lab.device_node[top]]
        last = int(dev_top[0] if len(dev_top) else top[0])
        w0, w1 = float(lo - g.t0), float(hi - g.t0)
        out.append(_Path(rank, host, device, step, lo, hi, lengths_cand(cand, end, hi, lab),
                         walker.walk(last, w0, w1),
                         idle_after(float(g.e[last]), w0, w1)))
    return out


def lengths_cand(cand: np.ndarray, end: np.ndarray, hi: int, lab: Labels) -> np.ndarray:
    """The nodes whose ends a window's length after a change reads (critical_walk.
    window_lengths): ``cand`` less the XLA syncs that return after the window's end (the
    host reading a result after the device's step ended: that belongs to the next window,
    and its return after the device's work would hold this one's end where it was)."""
    if lab.host_tail is None:
        return cand
    return cand[~(lab.host_tail[cand] & (end[cand] > hi))]


_ACTIVITY = ["kind", "name", "category", "host", "device", "stream", "start_ns", "end_ns"]


def _device_path(p: _Path, g: Graph, nodes: pl.DataFrame, host_graph: bool,
                 activities: bool = True, kind: str = "GPU") -> DevicePath:
    comp = tuple(Component(k, v) for k, v in composition(p.walk))
    if not activities:
        return DevicePath(p.rank, p.host, p.device, p.step, Window(p.w0, p.w1), p.w1 - p.w0,
                          "host+device" if host_graph else "device-only", comp, (), kind,
                          p.idle_after)
    node = p.walk.on_node
    ns = p.walk.on_ns.astype(np.int64)  # int(): truncated
    ids = node[ns > 0]
    acts = nodes.select(_ACTIVITY)[ids].with_columns(
        on_path_ns=pl.Series(ns[ns > 0], dtype=pl.Int64), _id=pl.Series(ids)).sort(
        "start_ns", "_id")
    rows = tuple(PathActivity(*r) for r in _shared_text_rows(acts.drop("_id")))
    return DevicePath(p.rank, p.host, p.device, p.step, Window(p.w0, p.w1), p.w1 - p.w0,
                      "host+device" if host_graph else "device-only", comp, rows, kind,
                      p.idle_after)


def _shared_text_rows(frame: pl.DataFrame) -> Iterator[tuple]:
    """``frame.iter_rows()`` with one str object per distinct text value of a column:
    ``iter_rows`` makes a new str per cell, and a whole trace's paths list millions of
    activities of a few hundred names (512 against 264 bytes an activity)."""
    cols: list[list] = []
    for name, dtype in frame.schema.items():
        values = frame[name].to_list()
        if dtype in (pl.String, pl.Categorical, pl.Enum):
            seen: dict[str, str] = {}
            values = [v if v is None else seen.setdefault(v, v) for v in values]
        cols.append(values)
    return zip(*cols)


# ---------------------------------------------------------------------------------------------
# What-if projections
# ---------------------------------------------------------------------------------------------

def _lengths(g: Graph, paths: list[_Path], e: np.ndarray, no_tail: bool = False
             ) -> list[float]:
    """Each path's window length with node ends ``e`` (critical_walk.window_lengths);
    ``no_tail``: without the host tails (the ``host`` what-if)."""
    return window_lengths([(p.w0 - g.t0, p.w1 - g.t0, float(g.e[p.cand].max()),
                            float(e[p.cand].max())) for p in paths],
                          [host_tail(p.walk, p.idle_after) for p in paths] if no_tail else None)


def _on_path(paths: list[_Path], pred: Callable[[str], bool]) -> int:
    """The most ns any one path spends on components matching ``pred``."""
    best = 0.0
    for p in paths:
        best = max(best, p.walk.total(pred))
    return int(best)


def _what_ifs(g: Graph, nodes: pl.DataFrame, paths: list[_Path], top: int,
              kinds: pl.DataFrame | None = None) -> list[WhatIf]:
    if not paths:
        return []
    step = max(p.w1 - p.w0 for p in paths)
    base = max(_lengths(g, paths, g.e))
    assert int(base) == step, (base, step)  # the pass reproduces the trace (module doc)
    changes: list[tuple[str, str, Change, int]] = []
    # text columns compared in polars, not as arrays of a million Python strings each
    sub = nodes["subcategory"].fill_null("unknown")
    coll = ((nodes["category"] == "collective").fill_null(False).to_numpy()
            & nodes["device_node"].to_numpy())
    for t in sorted(sub.filter(coll).unique().to_list()):
        mask = coll & (sub == t).to_numpy()
        w = np.where(mask, 0.0, g.w)
        no_wait = np.zeros(g.n_groups, bool)
        no_wait[g.group[mask & (g.group >= 0)]] = True
        on = _on_path_typed(paths, nodes, mask)
        changes.append(("hide", t, Change(w=w, no_wait=no_wait), on))
    who = _who(nodes, kinds).fill_null("")
    # late participants: the last arrivals of collectives whose members all do the same work
    # (point-to-point transfers wait for the other stage by design: no one is late there)
    p2p = sub.is_in(list(P2P)).to_numpy()
    sym = np.zeros(g.n_groups, bool)
    if g.n_groups:
        sym[g.group[(g.group >= 0) & ~p2p]] = True
    late_names = set(who.to_numpy()[g.a_last[sym & (g.a_last >= 0)]].tolist()) \
        if g.n_groups else set()
    waited = sorted({c[5:] for p in paths for c in p.walk.components()
                     if c.startswith("wait:")} & late_names)
    peers = _peer_work(g, nodes, who, waited)
    lab_dev = nodes["device_node"].to_numpy()
    for name in waited:
        mine = (who == name).to_numpy()
        late = mine & (g.group >= 0) & ~p2p
        # what on time removes from a path: the waits for it, and its own work on the path
        on = int(max(p.walk.total(lambda c, n=name: c == f"wait:{n}")
                     + p.walk.on_total(mine & lab_dev) for p in paths))
        # on time: no one waits for it, and its activities take no longer than the same
        # activities of its peers (the median of the other devices' k-th execution of the
        # same name in the window): a slow device's work, or a late host, both removed
        w = np.where(mine & ~np.isnan(peers[name]), np.minimum(g.w, peers[name]), g.w) \
            if name in peers else g.w
        changes.append(("on_time", name, Change(w=w, late_ok=late), on))
    changes += _roofline_changes(g, nodes, paths)
    changes += _memory_change(g, nodes, paths)
    launch = g.s_kind == "launch"  # (a held-back call still waits for the device)
    # a trace that replays graphs graph-launches already (analyze.blocked); XLA's launches
    # are not graph-launched: their what-if is ``dispatch`` (xla_what_ifs)
    if (launch.any() or (g.s_kind == "host").any()) \
            and not replays_graphs(nodes.filter(~pl.col("device_node"))) \
            and not xc.has_dispatch(nodes):
        # one graph launch replays the launches: the activities wait for no launch call,
        # and the calls, with the host time between consecutive calls (what produced them),
        # take none
        dev_node = nodes["device_node"].to_numpy()
        call = ~dev_node & nodes["correlation_id"].is_not_null().to_numpy() \
            & ~nodes["sync"].fill_null(False).to_numpy()  # a blocking copy stays
        after_call = np.r_[False, call[:-1]] & ~g.first & call
        w = np.where(call, 0.0, g.w)
        lag = np.where(after_call, np.minimum(g.prev_lag, 0.0), g.prev_lag)
        on = _on_path(paths, lambda c: c in ("launch_latency", "host", "sync"))
        changes.append(("graph_launch", "host launches",
                        Change(w=w, drop_s=launch, prev_lag=lag), on))
    changes += xla_what_ifs(g, nodes, paths)
    done = xc.completions(nodes)
    out = []
    for change, target, ch, on in changes:
        e = solve(g, ch)
        if change == "sync":  # without syncs, the runtime's notices of results end no window
            e = np.where(done, -np.inf, e)
        proj = int(max(_lengths(g, paths, e, no_tail=True) if change in ("host", "sync")
                       else _lengths(g, paths, e)))
        out.append(WhatIf(change, target, step, proj, step - proj, on))
    out.sort(key=lambda x: (-x.saved_ns, x.change, x.target))
    return out[:top]


def xla_what_ifs(g: Graph, nodes: pl.DataFrame, paths: list[_Path]
                 ) -> list[tuple[str, str, Change, int]]:
    """The what-ifs of XLA host work (:mod:`tracelens.analyze.critical.xla_changes`), where
    the graph holds XLA dispatches: ``host`` where the paths hold host time, ``sync`` where
    a sync call on them waited for the device, ``transfer`` where there are host-to-device
    transfer calls, ``dispatch`` where an XLA dispatch is on them."""
    if not xc.has_dispatch(nodes):
        return []
    comps = {c for p in paths for c in p.walk.components()}
    on_nodes = np.zeros(nodes.height, bool)
    for p in paths:
        on_nodes[p.walk.on_node[p.walk.on_ns > 0]] = True
    out: list[tuple[str, str, Change, int]] = []
    lag = xc.host_lag(nodes, g.first, g.prev_lag)
    if "host" in comps:
        out.append(("host", "host", Change(prev_lag=lag), _on_path(paths, lambda c: c == "host")))
        if (xc.waited(nodes, g.b, g.s) & on_nodes).any():
            out.append(("sync", "sync", Change(w=xc.sync_w(nodes, g.w), prev_lag=lag),
                        _on_path(paths, lambda c: c in ("host", "sync"))))
    moved = xc.transfer(nodes, g.first, g.prev_lag, g.w)
    if moved is not None:
        out.append(("transfer", "host-to-device", Change(w=moved[0], prev_lag=moved[1]),
                    _on_path(paths, lambda c: c in ("transfer", "host"))))
    jit = xc.dispatch(nodes, g.first, g.prev_lag, g.w) \
        if (xc.dispatch_nodes(nodes) & on_nodes).any() else None
    if jit is not None:
        out.append(("dispatch", "per-op dispatch", Change(w=jit[0], prev_lag=jit[1]),
                    _on_path(paths, lambda c: c in ("host", "launch_latency", "transfer",
                                                    "sync"))))
    return out


P2P = ("send", "recv", "send-recv", "collective-permute")
"""Collective types whose members wait for each other by design (pipeline stages)."""


def _peer_work(g: Graph, nodes: pl.DataFrame, who: pl.Series, names: list[str]
               ) -> dict[str, np.ndarray]:
    """For each device of ``names`` (``<host>/GPU<d>``), each of its activities' peer time:
    the median own work of the other devices' executions of the same name and k-th
    occurrence in the window (NaN where no other device ran it)."""
    frame = pl.DataFrame({"who": who, "name": nodes["name"].cast(pl.String),
                          "dev": nodes["device_node"], "w": g.w}).with_row_index("_i")
    dev = frame.filter(pl.col("dev")).with_columns(
        k=pl.int_range(pl.len()).over("who", "name"))
    out: dict[str, np.ndarray] = {}
    for name in names:
        med = dev.filter(pl.col("who") != name).group_by("name", "k").agg(
            m=pl.col("w").median())
        got = dev.filter(pl.col("who") == name).join(med, on=["name", "k"], how="left")
        arr = np.full(len(g.w), np.nan)
        arr[got["_i"].to_numpy()] = np.floor(got["m"].fill_null(np.nan).to_numpy())
        out[name] = arr
    return out


def _roofline_changes(g: Graph, nodes: pl.DataFrame, paths: list[_Path]
                      ) -> list[tuple[str, str, Change, int]]:
    """``roofline <category>``: every kernel of a category on the paths whose attainable time
    is known runs at it (never slower than it ran); kernels without costs keep their time."""
    attain = nodes["attain_ns"].to_numpy()
    known = ~np.isnan(attain)
    cat = nodes["category"].fill_null("")
    on = {c for p in paths for c in p.walk.components()}
    out = []
    for c in sorted({x for x in cat.filter(known).unique().to_list() if x in on}):
        mask = known & (cat == c).to_numpy()
        w = np.where(mask, np.minimum(g.w, np.floor(np.nan_to_num(attain))), g.w)
        out.append(("roofline", c, Change(w=w), _on_path_typed(paths, nodes, mask)))
    return out


def _memory_change(g: Graph, nodes: pl.DataFrame, paths: list[_Path]
                   ) -> list[tuple[str, str, Change, int]]:
    """``hide memory``: the device's memory copies and sets on the paths take no time (as if
    overlapped with compute, or prefetched), when any is on a path."""
    if not any("memory" in p.walk.components() for p in paths):
        return []
    mask = copies_mask(nodes)
    return [("hide", "memory", Change(w=np.where(mask, 0.0, g.w)),
             _on_path_typed(paths, nodes, mask))]


def copies_mask(nodes: pl.DataFrame) -> np.ndarray:
    """The device nodes of category ``memory`` (copies, sets)."""
    return (nodes["category"].fill_null("") == "memory").to_numpy() \
        & nodes["device_node"].to_numpy()


def _on_path_typed(paths: list[_Path], nodes: pl.DataFrame, mask: np.ndarray) -> int:
    """The most ns any one path spends in the masked nodes (their work and their waits)."""
    best = 0.0
    for p in paths:
        best = max(best, p.walk.on_total(mask))
    return int(best)


__all__ = ["CriticalPath", "CriticalPathOptions", "CriticalPart", "EDGE_SCHEMA", "NODE_SCHEMA",
           "WINDOW_SCHEMA"]
