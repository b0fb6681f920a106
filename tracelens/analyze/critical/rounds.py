"""The stitched critical path (:mod:`tracelens.analyze.critical.stitched`) as rounds between
the job and its hosts: each host's part stays where its map made it (a
:class:`HostSide`, on its Dask worker or in this process), and the job asks all hosts at once,
round after round, for small answers: their instance members, their walks' segments, their
passes' latest member starts per instance, their counts for a late device's peer time, their
windows' lengths after each change, and at the end the longest path's activities. The job
never holds a host's nodes.

:func:`rounds_result` is :func:`critical_path.critical_paths` of the merged parts, byte for
byte, or :class:`~tracelens.analyze.critical.stitched.NotStitchable` where the job's graph
could differ (the caller then merges the parts as before).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol, Sequence

import numpy as np
import polars as pl

from tracelens.analyze.critical.path import (CriticalPart, CriticalPathOptions, default_window,
                                             _shared_text_rows, path_notes)
from tracelens.analyze.critical.stitched import (DeviceWindow, InstanceTable,
                                                 NotStitchable, _has_cycle, fold_arrivals,
                                                 table_of)
from tracelens.analyze.critical.walk import (Walk, composition, host_tail, step_path_key,
                                             window_lengths)
from tracelens.engine.protocol import JobPlan
from tracelens.loading.step_choice import hosts_disagree
from tracelens.results.critical_path import (Component, CriticalPathResult, DevicePath,
                                             PathActivity, WhatIf, Window)
from tracelens.analyze.critical.host_side import HostSide
from tracelens.engine.worker_store import STORE, Resident, drop_on, keep, still_there


# ---------------------------------------------------------------------------------------------
# Where the hosts are
# ---------------------------------------------------------------------------------------------

class Hosts(Protocol):
    """Where the hosts' sides are (:class:`LocalHosts`, :class:`DaskHosts`): a method run on
    each host, answers in order or folded one at a time."""

    rounds: int

    def __len__(self) -> int: ...

    def call(self, method: str, args: Sequence[tuple] | None = None,
             only: Sequence[int] | None = None, common: tuple = ()) -> list[object]: ...

    def fold(self, method: str, fold: Callable[[object, object], object], acc: object,
             common: tuple = ()) -> object: ...

    def each(self, method: str, take: Callable[[int, object], None],
             common: tuple = (), args: Sequence[tuple] | None = None) -> None: ...


class LocalHosts:
    """The hosts' sides in this process."""

    def fold(self, method: str, fold: Callable[[object, object], object], acc: object,
             common: tuple = ()) -> object:
        """``method`` on every host, each answer folded into ``acc`` (``fold`` is associative
        and commutative, and an answer has the shape of ``acc``: a group of hosts' answers
        folded is one more answer), so the job holds one host's answer at a time."""
        self.rounds += 1
        for side in self.sides:
            acc = fold(acc, getattr(side, method)(*common))
        return acc

    def each(self, method: str, take: Callable[[int, object], None],
             common: tuple = (), args: Sequence[tuple] | None = None) -> None:
        """``method`` on every host (with its ``args``, then ``common``), ``take(host,
        answer)`` as each comes (in no set order), not every host's answer at once."""
        self.rounds += 1
        for i, side in enumerate(self.sides):
            take(i, getattr(side, method)(*(args[i] if args is not None else ()), *common))

    def __init__(self, sides: Sequence[HostSide]) -> None:
        self.sides = list(sides)
        self.rounds = 0

    def __len__(self) -> int:
        return len(self.sides)

    def call(self, method: str, args: Sequence[tuple] | None = None,
             only: Sequence[int] | None = None, common: tuple = ()) -> list[object]:
        """``method`` on each host (``only``: those), with its ``args`` and then ``common``
        (the same for every host); results in order."""
        self.rounds += 1
        which = range(len(self.sides)) if only is None else only
        return [getattr(self.sides[i], method)(*(args[k] if args is not None else ()), *common)
                for k, i in enumerate(which)]


# -- on Dask workers: each host's side kept in its worker's process -------------------------------

def keep_here(part: CriticalPart) -> CriticalPart | Resident:
    """``part`` kept in this Dask worker's process for the job's rounds (the engine asks
    for it where the cluster outlives the finish); off a worker, ``part`` itself packed."""
    from tracelens.analyze.critical.path import CriticalPath

    packed = CriticalPath().pack(part)
    return keep(HostSide(packed)) or packed


def _on_sides(keys: list[str], method: str, args: list[tuple], common: list[object]
              ) -> list[object]:
    """``method`` on each of this worker's hosts ``keys``: their answers, in order."""
    return [getattr(STORE[k], method)(*a, *common) for k, a in zip(keys, args)]


def _fold_sides(keys: list[str], method: str, args: list[tuple], common: list[object],
                fold: Callable[[object, object], object], acc: object) -> object:
    """``method`` on each of this worker's hosts ``keys``, folded into ``acc``."""
    for k, a in zip(keys, args):
        acc = fold(acc, getattr(STORE[k], method)(*a, *common))
    return acc


class DaskHosts:
    """The hosts' sides on their Dask workers: each call one task per host, on its worker."""

    def __init__(self, where: Sequence[Resident]) -> None:
        from tracelens.engine.cluster import connect

        self.where = list(where)
        self.client = connect(self.where[0].scheduler)
        self.rounds = 0
        try:
            still_there(self.client, self.where)
        except BaseException:
            self.client.close()
            raise

    def __len__(self) -> int:
        return len(self.where)

    def _batches(self, which: Sequence[int]) -> dict[str, list[int]]:
        """The positions of ``which`` (host indexes) grouped by the worker that holds them."""
        out: dict[str, list[int]] = {}
        for k, i in enumerate(which):
            out.setdefault(self.where[i].worker, []).append(k)
        return out

    def _submit(self, fn: Callable, which: Sequence[int], method: str,
                args: Sequence[tuple] | None, common: tuple, *extra: object
                ) -> tuple[list[list[int]], list[object], list[object]]:
        """One task a worker: ``fn`` over the worker's hosts among ``which`` (``common`` sent
        once to each worker, scattered): (positions per task, futures, scattered)."""
        shared = self.client.scatter(list(common), broadcast=True, hash=False) \
            if common else []
        batches = self._batches(which)
        futures = [self.client.submit(
            fn, [self.where[which[k]].key for k in ks], method,
            [args[k] if args is not None else () for k in ks], list(shared), *extra,
            workers=[w], allow_other_workers=False, pure=False) for w, ks in batches.items()]
        return list(batches.values()), futures, shared

    def call(self, method: str, args: Sequence[tuple] | None = None,
             only: Sequence[int] | None = None, common: tuple = ()) -> list[object]:
        """:meth:`LocalHosts.call` on the workers: one task a worker for its hosts (a task
        per host would be the client's and scheduler's cost of every host, every round)."""
        self.rounds += 1
        which = list(range(len(self.where))) if only is None else list(only)
        positions, futures, shared = self._submit(_on_sides, which, method, args, common)
        try:
            out: list[object] = [None] * len(which)
            for ks, fut in zip(positions, futures):
                for k, got in zip(ks, fut.result()):  # type: ignore[attr-defined]
                    out[k] = got
            return out
        finally:
            self.client.cancel(futures + shared)

    def fold(self, method: str, fold: Callable[[object, object], object], acc: object,
             common: tuple = ()) -> object:
        """:meth:`LocalHosts.fold` on the workers: each worker folds its hosts' answers
        into a copy of ``acc``, and the job folds the workers' folds."""
        self.rounds += 1
        positions, futures, shared = self._submit(
            _fold_sides, range(len(self.where)), method, None, common, fold, acc)
        try:
            for k, fut in enumerate(futures):
                acc = fold(acc, fut.result())  # type: ignore[attr-defined]
                fut.release()  # type: ignore[attr-defined]
                futures[k] = None
            return acc
        finally:
            self.client.cancel([f for f in futures if f is not None] + shared)

    def each(self, method: str, take: Callable[[int, object], None],
             common: tuple = (), args: Sequence[tuple] | None = None) -> None:
        """:meth:`LocalHosts.each` on the workers: one worker's answers at a time."""
        self.rounds += 1
        which = list(range(len(self.where)))
        positions, futures, shared = self._submit(_on_sides, which, method, args, common)
        try:
            for j, (ks, fut) in enumerate(zip(positions, futures)):
                for k, got in zip(ks, fut.result()):  # type: ignore[attr-defined]
                    take(which[k], got)
                fut.release()  # type: ignore[attr-defined]
                futures[j] = None
        finally:
            self.client.cancel([f for f in futures if f is not None] + shared)

    def close(self) -> None:
        try:
            drop_on(self.client, self.where)
        finally:
            self.client.close()


def merged_placed(parts: Sequence[CriticalPart]) -> CriticalPart:
    """The hosts' parts, already placed, as one job part (:meth:`CriticalPath.merge` without
    the placing): where the stitch refuses, the job's graph as before."""
    nodes, edges, offset, chains = [], [], 0, 0
    for p in parts:
        n = p.unpacked().nodes
        assert isinstance(n, pl.DataFrame)
        nodes.append(n.with_columns(id=pl.col("id") + offset, chain=pl.col("chain") + chains))
        edges.append(p.edges.with_columns(src=pl.col("src") + offset,
                                          dst=pl.col("dst") + offset))
        offset += n.height
        chains += int(n["chain"].max()) + 1 if n.height else 0  # type: ignore[arg-type]
    return CriticalPart(pl.concat(nodes), pl.concat(edges),
                        pl.concat([p.windows for p in parts]),
                        pl.concat([p.host_ranks for p in parts]),
                        pl.concat([p.unwindowed for p in parts]))


def resident_result(where: Sequence[Resident], plan: JobPlan, options: CriticalPathOptions
                    ) -> CriticalPathResult:
    """The critical path of the hosts' parts kept on their workers: in rounds, or, where the
    stitch refuses, the job's graph of their parts fetched (as before)."""
    from tracelens.analyze.critical.path import critical_paths

    H = DaskHosts(where)
    try:
        try:
            return rounds_result(H, plan, options)
        except NotStitchable:
            parts = H.call("placed")
            return critical_paths(merged_placed(parts), options)
    finally:
        H.close()


def rounds_result(H: "Hosts", plan: JobPlan | None, options: CriticalPathOptions
                  ) -> CriticalPathResult:
    """The job's critical-path result from the hosts ``H`` (module doc)."""
    n = len(H)

    placed: dict[str, list] = {name: [None] * n for name in  # in host order, as they come
                               ("t_min", "windows", "host_ranks", "unwindowed")}
    waiting: list[pl.DataFrame] = []  # hosts' records folded FOLD_BATCH at a time
    folded: list[pl.DataFrame | None] = [None]

    def take(i: int, got: dict) -> None:
        for name, kept in placed.items():
            kept[i] = got[name]
        waiting.append(got["instances"])
        if len(waiting) >= FOLD_BATCH:
            folded[0] = fold_arrivals(folded[0], pl.concat(waiting))
            waiting.clear()

    H.each("place", take, args=[(plan, i) for i in range(n)])
    if waiting:
        folded[0] = fold_arrivals(folded[0], pl.concat(waiting))
    inst = table_of(min((t for t in placed["t_min"] if t is not None), default=0), folded[0])
    win_all = pl.concat(placed["windows"])
    split = default_window(options) and hosts_disagree(win_all)
    if split:
        return CriticalPathResult((), (), (split,))
    win = win_all if options.rank is None else win_all.filter(pl.col("rank") == options.rank)
    info = JobInfo(n=[0] * n, devices=[[] for _ in range(n)])
    H.each("build", lambda i, x: _joined(info, i, x), common=(inst, win))
    if info.backward or inst.table["a_obs_ns"].is_duplicated().any():
        if _has_cycle([e for es in H.call("instance_edges") for e in es]):
            raise NotStitchable("the job's graph has a cycle across hosts")
    offset = np.cumsum([0] + info.n)
    todo = sorted(((d, i, k) for i, ds in enumerate(info.devices) for k, d in enumerate(ds)),
                  key=lambda t: (t[0][0], t[0][1], t[0][2]))
    walks, after = _walks(H, todo)
    H.call("walks_done")
    devs = [DeviceWindow(*d, sink=-1, cand=np.zeros(0, np.int64)) for d, _, _ in todo]
    longest = max(range(len(devs)), default=-1, key=lambda k: step_path_key(
        devs[k].w1 - devs[k].w0, after[k], devs[k].rank, devs[k].device))
    with_host = {(h, r) for p in placed["host_ranks"] for h, r in p.iter_rows()}
    t0 = inst.t0
    paths = []
    for k, d in enumerate(devs):
        listed = options.activities == "all" or (options.activities == "longest"
                                                 and k == longest)
        acts = _activities(H, k, offset) if listed else None
        comp = tuple(Component(c, v) for c, v in composition(walks[k]))
        graph = "host+device" if (d.host, d.rank) in with_host else "device-only"
        w0, w1 = d.w0 + t0, d.w1 + t0
        paths.append(DevicePath(d.rank, d.host, d.device, d.step, Window(w0, w1), w1 - w0,
                                graph, comp, acts if acts is not None else (),
                                idle_after_ns=after[k]))
    unwindowed = pl.concat(placed["unwindowed"])
    notes = path_notes(win, unwindowed, {(p.host, p.rank) for p in paths}, options)
    what = _what_ifs(H, info, inst, devs, todo, walks, options.top, after)
    return CriticalPathResult(tuple(paths), tuple(what), tuple(notes))


FOLD_BATCH = 64  # hosts' instance records folded at once: one sort per batch, not per host


@dataclass
class JobInfo:
    """What the job keeps of its hosts' builds (folded one host at a time: the sets are the
    job's, each instance key once, not once per host): per host its node count and windows
    to walk; the collective types with the instances of each, the instances of symmetric
    collectives, the categories with a roofline; whether any host has an edge back in
    time, launches or host edges."""

    n: list[int] = field(default_factory=list)
    devices: list[list[tuple]] = field(default_factory=list)
    types: dict[str, set[str]] = field(default_factory=dict)
    sym: set[str] = field(default_factory=set)
    cats: set[str] = field(default_factory=set)
    backward: bool = False
    launch: bool = False
    xla: bool = False
    transfer: bool = False
    replays: bool = False  # a host replays CUDA/HIP graphs: no graph-launch what-if


def _joined(acc: JobInfo, i: int, x: dict) -> None:
    """Host ``i``'s build answer into the job's :class:`JobInfo`."""
    acc.n[i] = x["n"]
    acc.devices[i] = x["devices"]
    for t, keys in x["types"].items():
        acc.types.setdefault(t, set()).update(keys)
    acc.sym.update(x["sym"])
    acc.cats.update(x["cats"])
    acc.backward = acc.backward or x["backward"]
    acc.launch = acc.launch or x["launch"] or x["host_edges"]
    acc.xla = acc.xla or x["xla"]
    acc.transfer = acc.transfer or x["transfer"]
    acc.replays = acc.replays or x.get("replays", False)


def _walks(H: "Hosts", todo: list[tuple]) -> tuple[list[Walk], list[int]]:
    """Every device's walk, all at once, round after round: each round, every host walks on
    the segments that reached it (module doc of :mod:`critical_segments`); and each walk's
    :func:`~tracelens.analyze.critical.walk.idle_after`."""
    totals: list[dict[str, float]] = [{} for _ in todo]
    cuts = [0] * len(todo)
    after = [0] * len(todo)
    pending: dict[int, list[tuple]] = {}
    for wid, (d, i, k) in enumerate(todo):
        pending.setdefault(i, []).append((wid, k, 0, False, 0.0, float(d[4])))
    while pending:
        hosts = sorted(pending)
        got = H.call("walk", [(pending[i],) for i in hosts], only=hosts)
        pending = {}
        for answers in got:
            for wid, tot, cut, where, tail in answers:
                for name, ns in tot.items():
                    totals[wid][name] = totals[wid].get(name, 0.0) + ns
                cuts[wid] += cut
                after[wid] += tail
                if where is not None:
                    host, node, c = where
                    pending.setdefault(host, []).append(
                        (wid, None, node, True, c, float(todo[wid][0][4])))
    out = []
    for tot, cut in zip(totals, cuts):
        names = tuple(tot)
        out.append(Walk(names, np.arange(len(names), dtype=np.int64),
                        np.array([tot[x] for x in names], np.float64),
                        np.zeros(0, np.int64), np.zeros(0), cut))
    return out, after


def _activities(H: "Hosts", wid: int, offset: np.ndarray) -> tuple[PathActivity, ...]:
    frames = [f for f in H.call("activities", [(wid, int(offset[i])) for i in range(len(H))])
              if f.height]
    if not frames:
        return ()
    acts = pl.concat(frames).sort("start_ns", "_id")
    return tuple(PathActivity(*r) for r in _shared_text_rows(acts.drop("_id")))


def _on_totals(H: "Hosts", n_walks: int, specs: list[tuple[str, str]]) -> list[list[float]]:
    """Per spec, per walk: the ns on its path of the nodes the spec names, summed over the
    hosts it went through (whole ns: the order of the sum does not matter)."""
    out = [[0.0] * n_walks for _ in specs]
    walked = H.call("walked")
    for i, rows in enumerate(H.call("on_totals", common=(specs,))):
        for j, row in enumerate(rows):
            for wid, v in zip(walked[i], row):
                out[j][wid] += v
    return out


def _what_ifs(H: "Hosts", info: JobInfo, inst: InstanceTable, devs: list[DeviceWindow],
              todo: list[tuple], walks: list[Walk], top: int, after: list[int]
              ) -> list[WhatIf]:
    """:func:`critical_path._what_ifs` over the hosts' rounds."""
    if not walks:
        return []
    step = max(d.w1 - d.w0 for d in devs)
    nw = len(walks)
    specs: list[tuple] = []
    labels: list[tuple[str, str]] = []
    on: list[int] = []
    types = sorted(info.types)
    hide_on = _on_totals(H, nw, [("type", t) for t in types])
    for t, row in zip(types, hide_on):
        specs.append(("hide", t, info.types[t]))
        labels.append(("hide", t))
        on.append(int(max(row)))
    late_names = set(inst.table.filter(pl.col("key").is_in(list(info.sym)))["who"].to_list())
    waited = sorted({c[5:] for w in walks for c in w.components() if c.startswith("wait:")}
                    & late_names)
    peers = _peer_medians(H, waited)
    mine_on = _on_totals(H, nw, [("device", name) for name in waited])
    for name, row in zip(waited, mine_on):
        total = [w.total(lambda c, n=name: c == f"wait:{n}") + row[k]
                 for k, w in enumerate(walks)]
        specs.append(("on_time", name, peers.get(name)))
        labels.append(("on_time", name))
        on.append(int(max(total)))
    on_comp = {c for w in walks for c in w.components()}
    cats = sorted(c for c in info.cats if c in on_comp)
    for c, row in zip(cats, _on_totals(H, nw, [("category", c) for c in cats])):
        specs.append(("roofline", c))
        labels.append(("roofline", c))
        on.append(int(max(row)))
    if "memory" in on_comp:  # as critical_path._memory_change
        (row,) = _on_totals(H, nw, [("copies", "")])
        specs.append(("hide_memory",))
        labels.append(("hide", "memory"))
        on.append(int(max(row)))
    if info.launch and not info.replays and not info.xla:  # (XLA's: dispatch, _xla_specs)
        specs.append(("graph_launch",))
        labels.append(("graph_launch", "host launches"))
        on.append(int(max(w.total(lambda c: c in ("launch_latency", "host", "sync"))
                          for w in walks)))
    for kind, target, comps in _xla_specs(H, info, walks):
        specs.append((kind,))
        labels.append((kind, target))
        on.append(int(max(w.total(lambda c, cs=comps: c in cs) for w in walks)))
    H.call("set_changes", common=(specs,))  # each host takes its own of the peer times
    _passes(H, inst, len(specs))
    windows: list[list] = [[None] * len(devs) for _ in specs]
    index = {(i, k): j for j, (_, i, k) in enumerate(todo)}
    for i, rows in enumerate(H.call("lengths")):
        for c, row in enumerate(rows):
            for k, v in enumerate(row):
                windows[c][index[(i, k)]] = v
    out = []
    tails = [host_tail(w, a) for w, a in zip(walks, after)]
    for (kind, target), row, o in zip(labels, windows, on):
        proj = int(max(window_lengths(row, tails if kind in ("host", "sync") else None)))
        out.append(WhatIf(kind, target, step, proj, step - proj, o))
    out.sort(key=lambda x: (-x.saved_ns, x.change, x.target))
    return out[:top]


def _xla_specs(H: "Hosts", info: JobInfo, walks: list[Walk]
               ) -> list[tuple[str, str, tuple[str, ...]]]:
    """The XLA what-ifs the job takes (:func:`critical_path.xla_what_ifs`, the same
    conditions): (change, target, the path components its ``on_path_ns`` counts)."""
    if not info.xla:
        return []
    comps = {c for w in walks for c in w.components()}
    flags = H.call("xla_on_path")
    waited, dispatched = any(f[0] for f in flags), any(f[1] for f in flags)
    out: list[tuple[str, str, tuple[str, ...]]] = []
    if "host" in comps:
        out.append(("host", "host", ("host",)))
        if waited:
            out.append(("sync", "sync", ("host", "sync")))
    if info.transfer:
        out.append(("transfer", "host-to-device", ("transfer", "host")))
    if dispatched:
        out.append(("dispatch", "per-op dispatch", ("host", "launch_latency", "transfer",
                                                    "sync")))
    return out


def _passes(H: "Hosts", inst: InstanceTable, n: int) -> int:
    """Every change's pass in rounds until its arrivals settle (:func:`critical_segments.
    stitched_solve`); returns the rounds."""
    base = dict(zip(inst.table["key"].to_list(),
                    (inst.table["a_obs_ns"].cast(pl.Int64) - inst.t0).cast(pl.Float64)
                    .to_list()))
    arrival: list[dict[str, float] | None] = [dict(base) for _ in range(n)]
    rounds = 0
    while any(a is not None for a in arrival):
        rounds += 1
        latest: list[dict[str, float]] = H.fold(
            "solve_round", _latest, [{} for _ in range(n)], common=(arrival,))
        nxt: list[dict[str, float] | None] = []
        for j, arr in enumerate(arrival):
            if arr is None:
                nxt.append(None)
                continue
            new = {key: latest[j].get(key, -np.inf) for key in arr}
            nxt.append(None if new == arr else new)
        arrival = nxt
    return rounds


def _latest(acc: list[dict[str, float]], host: list[dict[str, float] | None]
            ) -> list[dict[str, float]]:
    """Fold: the latest member start per instance, per change."""
    for j, got in enumerate(host):
        for key, v in (got or {}).items():
            acc[j][key] = max(acc[j].get(key, -np.inf), v)
    return acc


def _stats(acc: list[tuple[np.ndarray, ...]], per: list[tuple[np.ndarray, ...]]
           ) -> list[tuple[np.ndarray, ...]]:
    """Fold: per late device and key, counts summed, the least and the largest."""
    return [(c0 + c, np.minimum(a0, a), np.maximum(b0, b))
            for (c0, a0, b0), (c, a, b) in zip(acc, per)]


def _add(acc: list[np.ndarray], per: list[np.ndarray]) -> list[np.ndarray]:
    """Fold: counts summed per late device and rank."""
    for j, c in enumerate(per):
        acc[j] += c
    return acc


def _peer_medians(H: "Hosts", names: list[str]) -> dict[str, tuple[int, np.ndarray, np.ndarray]]:
    """{device: (its host, its nodes ``_i``, their peer time)}: :func:`critical_path.
    _peer_work` with each host's work kept where it is. Per key (name, k) of the device's
    activities, the hosts answer how many of their other devices' w they hold, the least and
    the largest, then, round by round, how many are at most a bound: a bisection on the
    integer ns finds the two middle values (the median of an even count is their mean, as
    polars takes it), floored. What travels is a few numbers per key, however many devices;
    every late device's bisection runs in the same rounds (the keys sent once, then per
    round one bound per key)."""
    if not names:
        return {}
    found = H.call("peer_keys", common=(names,))
    owner = {name: i for i, got in enumerate(found) for name in got}
    keys = {name: found[owner[name]][name] for name in names if name in owner}
    todo = list(keys)
    if not todo:
        return {}
    q = [keys[x].height for x in todo]
    got = H.fold("peer_setup", _stats, [(np.zeros(m, np.int64), np.full(m, np.inf),
                                         np.full(m, -np.inf)) for m in q], common=(keys,))
    count, lo, hi = [c for c, _, _ in got], [a for _, a, _ in got], [b for _, _, b in got]
    has = [c > 0 for c in count]
    # the two middle values of each key, all devices and both ranks in the same rounds
    ranks = [(c - 1) // 2 for c in count] + [c // 2 for c in count]
    a = [np.where(h, x, 0.0) for h, x in zip(has, lo)] * 2
    b = [np.where(h, x, 0.0) for h, x in zip(has, hi)] * 2
    names2 = todo + todo
    while any((x < y).any() for x, y in zip(a, b)):
        mid = [np.floor((x + y) / 2) for x, y in zip(a, b)]
        below = H.fold("peer_below", _add, [np.zeros(len(m), np.int64) for m in mid],
                       common=(names2, mid))
        for j in range(len(a)):
            enough = below[j] >= ranks[j] + 1
            a[j], b[j] = (np.where(enough | (a[j] >= b[j]), a[j], mid[j] + 1),
                          np.where(enough & (a[j] < b[j]), mid[j], b[j]))
    out = {}
    for j, name in enumerate(todo):
        med = np.where(has[j], np.floor((a[j] + a[j + len(todo)]) / 2), np.nan)
        rows = H.call("peer_row", [(name,)], only=[owner[name]])[0]
        out[name] = (owner[name], rows, med)
    return out


__all__ = ["DaskHosts", "HostSide", "LocalHosts", "Resident", "keep_here", "resident_result",
           "rounds_result"]
