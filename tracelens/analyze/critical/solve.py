"""The critical-path graph of a job solved: observed lags, the forward pass, the walk back.

Each node has a start point S, a begin point B (where its own work starts, after what it
waits for inside it) and an end E = B + w. The forward pass computes, for every node,

    S = max(prev E + lag, external S-side sources + lag, anchor)
    B = max(S, B-side sources + lag, its instance's last arrival + lag)
    E = B + w

with the lags taken from the trace so that, unchanged, the pass reproduces every observed
time exactly: the binding source's lag is the observed gap, every other source's is
``min(0, gap)`` (it cannot be what the node waited for, but it cannot end later than the node
started either), but for a device stream's previous activity, whose lag is its device's
queue latency, at most the gap (:func:`_queue_latency`). A what-if changes ``w`` or removes
sources and solves again on the same graph: that is the projection.

The reference pass (:func:`_rounds`) is columnar: within a chain (a stream or a thread),
``E_n = max(E_{n-1} + a_n, Z_n)`` is a max-plus recurrence solved with one cumulative sum and
one cumulative max per chain; chains see each other only through external sources, so the
pass repeats until nothing changes (as many rounds as the longest path switches chains, plus
one). On a long window that is thousands of rounds over every node: a window of a whole
2M-kernel trace did not finish in 20 minutes; in one pass in C, its 15 solves (the reproduction
and the what-ifs) take 2.8 s.

:func:`solve` therefore runs the pass once, in dependency order, in the optional C extension
(``tracelens/_sweep.c``, ``solve``; ``SOLVE_ABI`` 1) when it is built and
``TRACELENS_SWEEP`` is not ``numpy``: each node's start and end are points of a graph (a start
after the chain's previous end and its S-side sources, an end after its start, the chain's
previous end, its B-side sources and its instance's group; a group after the starts of its
arriving members), computed once every point they read is final (Kahn's order). The inputs
are the arrays the reference derives from the graph and the change (anchors, chain starts,
lags, the edges kept, who arrives, who waits), so a change means the same in both.

The two agree bit for bit where every sum is exact: the one pass adds ``E_{n-1} + a_n``
directly, the rounds ``c_n + cummax(Z - c)`` with ``c`` a cumulative sum; on integers (times
are integer ns, roofline widths are floored) whose every path sum stays below 2^51 (the C
checks the bound: the largest anchor plus the sum of every |work| and |lag|) both are the
exact value, and an end at zero is +0.0 in both. Where an input is not an integer (or NaN or
+inf) or the bound fails, the C says so (``C_NOT_EXACT``) and the rounds solve; where the
points have a cycle (binding sources that a consistent trace never has, or instances met in
different orders on two ranks) the C says so (``C_CYCLE``) without guessing and the rounds
decide (they settle, or raise after ``MAX_ROUNDS``), as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from tracelens.analyze.critical.graph import QUEUED_NS
from tracelens.core.sweep import extension, references_forced

_SWEEP = extension("SOLVE_ABI")  # the forward pass in C; optional: the rounds give the same

NEG = -np.inf
MAX_ROUNDS = 100_000


@dataclass(frozen=True)
class Graph:
    """The solved-for arrays of a job's nodes (in chain order, ids = positions), times in
    float64 ns relative to ``t0`` (exact: integers below 2^53)."""

    t0: int
    s: np.ndarray
    e: np.ndarray
    chain: np.ndarray
    first: np.ndarray  # first node of its chain
    prev_lag: np.ndarray  # lag from the chain's previous node's end to this start
    prev_binds: np.ndarray  # the walk goes on to the chain's previous node (it binds the
    # S side, or the node's start is unexplained: :data:`UNSEEN_GAP_NS`)
    w: np.ndarray  # own work, ns
    b: np.ndarray  # observed begin
    anchor: np.ndarray  # S lower bound (observed start; -inf when the node has sources)
    s_src: np.ndarray  # S-side edges: source, destination, source point is start, lag
    s_dst: np.ndarray
    s_at_start: np.ndarray
    s_lag: np.ndarray
    s_kind: np.ndarray  # object: launch, event
    b_src: np.ndarray  # B-side edges (sync waits)
    b_dst: np.ndarray
    b_lag: np.ndarray
    group: np.ndarray  # instance group of a collective node (-1: none)
    a_lag: np.ndarray  # lag from its instance's last arrival to its begin
    n_groups: int
    s_bind: np.ndarray  # binding S-side edge index (-1: chain previous or none)
    b_bind: np.ndarray  # binding B-side: edge index >= 0, -2 arrival, -1 none
    a_last: np.ndarray  # per group: the node that arrived last (observed)
    anchored: int = 0  # nodes anchored because their sources could not reproduce them
    notes: tuple[str, ...] = field(default=())


def _rel(col: pl.Series, t0: int) -> np.ndarray:
    return (col.to_numpy().astype(np.int64) - t0).astype(np.float64)


Groups = tuple[np.ndarray, np.ndarray, np.ndarray, int]
"""(instance group per node or -1, observed last arrival per group, the node that arrived
last per group, number of groups): :func:`_groups`."""


def build_graph(nodes: pl.DataFrame, edges: pl.DataFrame, t0: int | None = None,
                groups: Groups | None = None) -> Graph:
    """The graph of ``nodes`` (chain-ordered, ``id`` = row) and their external ``edges``,
    with the instance arrivals of the collective nodes across every rank of the job.
    ``t0`` and ``groups`` (relative to ``t0``) given: one host's piece of the job's graph,
    its instances' arrivals as the job saw them (:mod:`tracelens.analyze.critical.stitched`);
    the back edges then stay (the caller checks there are none)."""
    n = nodes.height
    if t0 is None:
        t0 = int(nodes["start_ns"].min()) if n else 0  # type: ignore[arg-type]
    s, e = _rel(nodes["start_ns"], t0), _rel(nodes["end_ns"], t0)
    chain = nodes["chain"].to_numpy()
    first = np.r_[True, chain[1:] != chain[:-1]] if n else np.zeros(0, bool)
    prev_e = np.r_[NEG, e[:-1]] if n else e.copy()
    prev_e[first] = NEG
    sk = edges.filter(pl.col("side") == "S")
    bk = edges.filter(pl.col("side") == "B")
    s_src, s_dst = sk["src"].to_numpy(), sk["dst"].to_numpy()
    s_at_start = (sk["point"] == "S").to_numpy()
    s_kind = sk["kind"].to_numpy().astype(object)
    b_src, b_dst = bk["src"].to_numpy(), bk["dst"].to_numpy()
    # observed S-side: the binding source is the latest (a launch with its device's launch
    # latency); a node with a host-delay edge starts its own chain: the untraced time before
    # it was waiting for the device, so its thread's previous call does not hold it back
    # (docs/critical-path.md)
    s_t = np.where(s_at_start, s[s_src], e[s_src])
    s_when = s_t + _launch_latency(nodes, s, s_t, s_dst,
                                   (s_kind == "launch") | (s_kind == "blocked"))
    detached = np.zeros(n, bool)
    detached[s_dst[s_kind == "host"]] = True
    first = first | detached  # its thread's previous call does not hold it back
    t_max = np.where(detached, NEG, prev_e)
    np.maximum.at(t_max, s_dst, s_when)
    # a device activity of a rank without host events that started well after everything
    # the trace says it waited for waited for something the trace does not show (its
    # launch, a host sync): it is pinned at its start, and the path before it is unknown
    unseen = _unseen_starts(nodes, s, t_max)
    t_max = np.where(unseen, s, t_max)
    has_src = ~np.isneginf(np.maximum(t_max, prev_e))
    anchor = np.where(has_src & ~unseen, NEG, s)
    prev_binds = ~first & ~detached & (prev_e == t_max)
    gap_prev = s - prev_e
    prev_lag = np.where(prev_binds, gap_prev,
                        np.minimum(gap_prev, _queue_latency(nodes, gap_prev, prev_binds)))
    prev_lag[first] = 0.0
    edge_binds = s_when == t_max[s_dst]
    s_lag = np.where(edge_binds, s[s_dst] - s_t, np.minimum(0.0, s[s_dst] - s_t))
    s_bind = np.full(n, -1, np.int64)
    # the chain previous wins ties (the stream order), else the first binding edge
    cand = np.flatnonzero(edge_binds & ~prev_binds[s_dst])
    s_bind[s_dst[cand[::-1]]] = cand[::-1]
    # arrivals: each collective node's instance (same key and k) across the job
    group, a_obs, a_last, n_groups = _groups(nodes, s) if groups is None else groups
    b_t = np.full(n, NEG)
    np.maximum.at(b_t, b_dst, e[b_src])
    arr = np.where(group >= 0, a_obs[np.maximum(group, 0)] if n_groups else NEG, NEG)
    b_obs = np.minimum(np.maximum.reduce([s, b_t, arr]), e)
    b_obs = np.maximum(b_obs, s)  # a zero-length node: begin = start
    w = e - b_obs
    b_lag = np.minimum(0.0, b_obs[b_dst] - e[b_src])
    a_lag = np.where(group >= 0, np.minimum(0.0, b_obs - arr), 0.0)
    b_bind = np.full(n, -1, np.int64)
    waits = b_obs > s
    # arrival binds when it is the latest B source; else the latest sync edge
    by_arr = waits & (group >= 0) & (arr >= b_t) & (arr > s)
    bcand = np.flatnonzero(e[b_src] == b_t[b_dst])
    bsel = np.full(n, -1, np.int64)
    bsel[b_dst[bcand[::-1]]] = bcand[::-1]
    b_bind[waits & ~by_arr & (bsel >= 0)] = bsel[waits & ~by_arr & (bsel >= 0)]
    b_bind[by_arr] = -2
    # on a device busy most of the window (:data:`WALK_BUSY_SHARE`), the walk goes on past
    # an unexplained start to its latest known source (its chain's previous node, or an
    # edge's that ended later), the gap as idle: the device's previous work is on the path,
    # not the whole window before it (a program boundary's 17 µs on a TPU 99.8% busy). On a
    # mostly idle device the host was behind: the path before it stays idle, the host's.
    # The solve keeps the node at its observed start (what it waited for is not in the
    # trace); s_bind and walk_prev are the walk's only
    walk_prev = prev_binds.copy()
    unseen = unseen & _busy_devices(nodes, s, e)
    if unseen.any():
        latest = np.full(n, NEG)
        np.maximum.at(latest, s_dst, s_t)
        d = s_dst
        by_edge = unseen[d] & (s_t == latest[d]) & (s_t > prev_e[d]) & (s_t <= s[d])
        pick = np.flatnonzero(by_edge)
        s_bind[d[pick[::-1]]] = pick[::-1]
        walk_prev |= unseen & ~first & (s_bind < 0)
    g = Graph(t0, s, e, chain, first, prev_lag, walk_prev, w, b_obs, anchor, s_src, s_dst,
              s_at_start, s_lag, s_kind, b_src, b_dst, b_lag, group, a_lag, n_groups,
              s_bind, b_bind, a_last)
    # a held-back host's launch may wait for an activity that ends after the call began (the
    # host issued the next activity a little before the device was ready for it): an edge
    # back in time. From an activity that had started when the call began, a cycle needs a
    # path back in time through a wait inside a node (a collective's last arrival, a sync);
    # where the one pass finds one, the edges from such nodes go, then every backward one,
    # and the calls wait for the device's progress alone (a cycle would leave the solve to
    # the rounds: hours on a whole trace)
    back = (s_kind == "host") & (s_t > s[s_dst])
    if back.any() and groups is None and solves_in_one_pass(g) is False:
        waits_inside = (group >= 0) | np.isin(np.arange(n), b_dst)
        drop = back & waits_inside[s_src]
        if not drop.any():  # (those went in the first round)
            drop = back
        return build_graph(nodes, _without(edges, drop))  # type: ignore[arg-type]
    return _reproduce(g)


UNSEEN_GAP_NS = QUEUED_NS
"""A device activity that started more than this after its latest known source (its stream's
previous activity, an order or event edge), on a rank whose trace has no host events, waited
for what the trace does not record: a kernel queued behind another starts within a few µs of
it (the launch overhead), a kernel the host was late to launch does not."""


WALK_BUSY_SHARE = 0.5
"""A device-only device whose activities fill at least this share of its span in the window
is the bottleneck: the path goes on through its work past an unexplained start (its gaps
are its own dispatch between programs); below it, the host was behind (the simulator's
host-bound regime: kernels shorter than the host's gaps), and the path before the start
stays idle."""


def _busy_devices(nodes: pl.DataFrame, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Per node: whether its device's activities (summed) fill at least
    :data:`WALK_BUSY_SHARE` of the device's span among the nodes (host nodes: False)."""
    n = nodes.height
    if not n or "device_node" not in nodes.columns:
        return np.zeros(n, bool)
    dev = nodes["device_node"].to_numpy()
    share = pl.DataFrame({"k": nodes.select(pl.concat_str(
        pl.col("host").cast(pl.String), pl.col("rank"), pl.col("device"), separator="\x1f"))
        .to_series(), "s": s, "e": e}).select(
        ((pl.col("e") - pl.col("s")).sum().over("k")
         / (pl.col("e").max().over("k") - pl.col("s").min().over("k")))).to_series()
    return dev & (share.fill_nan(0.0).fill_null(0.0).to_numpy() >= WALK_BUSY_SHARE)


def _unseen_starts(nodes: pl.DataFrame, s: np.ndarray, t_max: np.ndarray) -> np.ndarray:
    """Per node: a device activity of a device-only rank whose start no known source explains
    (:data:`UNSEEN_GAP_NS`); its chain's first node has no source and is anchored anyway."""
    n = nodes.height
    if not n or "device_node" not in nodes.columns:
        return np.zeros(n, bool)
    dev = nodes["device_node"].to_numpy()
    # a rank's host events explain its device's gaps where some of them launch or wait for
    # its work (a launch's correlation id, a sync): dispatches alone (an XLA host plane
    # without the runtime's launch events) leave the rank device-only
    hosted = nodes.filter(~pl.col("device_node") & (pl.col("correlation_id").is_not_null()
                                                    | pl.col("sync").fill_null(False))
                          ).select("host", "rank").unique()
    only = ~nodes.select(pl.struct("host", "rank").is_in(hosted.to_struct().implode())
                         ).to_series().to_numpy() if hosted.height else np.ones(n, bool)
    known = ~np.isneginf(t_max)
    cand = dev & only & known & (s - np.where(known, t_max, 0.0) > UNSEEN_GAP_NS)
    if not cand.any():
        return cand
    # after a device-to-host copy the host read a result (a blocking copy): the gap is its
    # reaction to the copy, which is then on the path, as the stream's order puts it
    keys = ["host", "rank", "device"]
    ends = nodes.lazy().filter(pl.col("device_node")).select(
        *keys, t="end_ns", d2h=pl.col("subcategory").cast(pl.String) == "d2h").collect() \
        .sort("t")
    asked = nodes.lazy().with_row_index("_i").filter(pl.Series(cand)).select(
        "_i", *keys, t="start_ns").collect().sort("t")
    after = asked.join_asof(ends, on="t", by=keys, strategy="backward",
                            check_sortedness=False).filter(pl.col("d2h").fill_null(False))
    cand[after["_i"].to_numpy()] = False
    return cand


def _queue_latency(nodes: pl.DataFrame, gap_prev: np.ndarray, prev_binds: np.ndarray
                   ) -> np.ndarray:
    """Per node, the least lag after its chain's previous node should that come to bind it:
    on a device, its queue latency, the median lag of the activities that waited for their
    stream's previous one (a kernel queued behind another starts a few µs after it; the
    samples' generator draws 2-9 µs); 0 on a host thread and where no activity of the device
    waited for its stream. At most the observed gap (module doc), so the unchanged pass still
    reproduces the trace."""
    n = nodes.height
    if not n or "device_node" not in nodes.columns:
        return np.zeros(n)
    dev = nodes["device_node"].to_numpy()
    q = nodes.select("host", "rank", "device").with_columns(
        _g=pl.Series(np.where(dev & prev_binds, gap_prev, np.nan)).fill_nan(None)).select(
        pl.col("_g").median().over("host", "rank", "device")).to_series()
    # whole ns (the one-pass solve is exact on integers only: module doc)
    return np.where(dev, np.floor(q.fill_null(0.0).to_numpy()), 0.0)


def _launch_latency(nodes: pl.DataFrame, s: np.ndarray, s_t: np.ndarray, s_dst: np.ndarray,
                    launch: np.ndarray) -> np.ndarray:
    """Per S-side edge, the launch latency of its destination's device for a launch edge (0
    for the others): the least lag from a launch call's end to its activity's start there (no
    activity starts sooner after its launch; 0 where the device has one launch). A launch
    binds where it came, with the latency, after every other source: an activity that
    started one latency after its launch waited for it, though another source ended in
    between."""
    out = np.zeros(len(s_dst))
    if not launch.any():
        return out
    dev = nodes.select(pl.concat_str(pl.col("host"), pl.col("rank"), pl.col("device"),
                                     separator="\x1f")).to_series()
    code = dev.rank("dense").fill_null(0).to_numpy().astype(np.int64)
    where = np.flatnonzero(launch)
    d = code[s_dst[where]]
    gap = np.maximum(s[s_dst[where]] - s_t[where], 0.0)
    least = np.full(int(code.max()) + 1, np.inf)
    np.minimum.at(least, d, gap)
    # one launch alone on a device says nothing of its latency (critical_graph's rule): 0
    least[np.bincount(d, minlength=len(least)) < 2] = 0.0
    out[where] = least[d]
    return out


def _without(edges: pl.DataFrame, drop_s: np.ndarray) -> pl.DataFrame:
    """``edges`` less the S-side edges where ``drop_s``."""
    keep = np.ones(edges.height, bool)
    keep[np.flatnonzero(edges["side"].to_numpy() == "S")[drop_s]] = False
    return edges.filter(pl.Series(keep))


def solves_in_one_pass(g: Graph) -> bool | None:
    """Whether the C forward pass solves ``g`` unchanged without finding a cycle (None: the
    C pass is not built). Asked also where the references are forced: the graph (which edges
    go) must not depend on which pass then solves it."""
    if _SWEEP is None or not len(g.s):
        return None
    f64, i64 = np.float64, np.int64

    def arr(x: np.ndarray, t: type) -> np.ndarray:
        return np.ascontiguousarray(x, t)

    has = ~g.first.copy()
    has[g.s_dst] = True
    anchor = np.where(has, g.anchor, np.maximum(g.anchor, g.s))
    out = np.empty(len(g.s))
    status = _SWEEP.solve(
        arr(g.first, np.bool_), arr(np.where(g.first, 0.0, g.prev_lag), f64), arr(g.w, f64),
        arr(anchor, f64), arr(g.s_src, i64), arr(g.s_dst, i64), arr(g.s_at_start, np.bool_),
        arr(g.s_lag, f64), arr(g.b_src, i64), arr(g.b_dst, i64), arr(g.b_lag, f64),
        arr(g.group, i64), arr(g.group >= 0, np.bool_), arr(g.group >= 0, np.bool_),
        arr(g.a_lag, f64), int(g.n_groups), out)
    return status != C_CYCLE


def _groups(nodes: pl.DataFrame, s: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(instance group per node or -1, observed last arrival per group, the node that
    arrived last per group, number of groups): an instance is the same collective key and
    occurrence on every device of the job."""
    key = pl.concat_str(pl.col("instance"), pl.lit("#"), pl.col("occurrence").cast(pl.String))
    g = nodes.select(_g=pl.when(pl.col("instance").is_not_null()).then(key))["_g"]
    codes = g.rank("dense").fill_null(0).to_numpy().astype(np.int64) - 1
    n_groups = int(codes.max()) + 1 if len(codes) and codes.max() >= 0 else 0
    a_obs = np.full(n_groups, NEG)
    mine = codes >= 0
    if not n_groups:
        return codes, a_obs, np.zeros(0, np.int64), 0
    np.maximum.at(a_obs, codes[mine], s[mine])
    # the last to arrive: the latest start, ties to the first node (rank, host order)
    a_last = np.full(n_groups, -1, np.int64)
    idx = np.flatnonzero(mine & (s == np.where(mine, a_obs[np.maximum(codes, 0)], NEG)))
    a_last[codes[idx[::-1]]] = idx[::-1]
    sizes = np.bincount(codes[mine], minlength=n_groups)
    single = sizes[np.maximum(codes, 0)] < 2
    codes = np.where(mine & single, -1, codes)  # a collective alone waits for no one
    return codes, a_obs, a_last, n_groups


def _reproduce(g: Graph) -> Graph:
    """Anchor the nodes whose sources do not reproduce their observed start (cycles of
    binding sources, which a consistent trace never has) until the pass is exact."""
    anchor = g.anchor.copy()
    anchored = 0
    for _ in range(8):
        got = solve(g, anchor=anchor)
        bad = got != g.e
        if not bad.any():
            break
        newly = bad & np.isneginf(anchor)
        if not newly.any():
            break
        anchor[newly] = g.s[newly]
        anchored += int(newly.sum())
    notes: tuple[str, ...] = ()
    if anchored:
        notes = (f"{anchored} activities anchored at their observed start (their "
                 f"dependencies in the trace do not explain it)",)
    return Graph(**{**g.__dict__, "anchor": anchor, "anchored": anchored, "notes": notes})


@dataclass(frozen=True)
class Change:
    """A what-if on the graph: ``w`` per node replaced where ``w_mask``; S-side edges
    dropped where ``drop_s``; nodes whose arrival no one waits for (``late_ok``); groups
    whose arrival waits are removed (``no_wait``); the lags within chains (``prev_lag``)."""

    w: np.ndarray | None = None
    drop_s: np.ndarray | None = None
    late_ok: np.ndarray | None = None
    no_wait: np.ndarray | None = None
    prev_lag: np.ndarray | None = None  # the lags to each chain's previous node, replaced


def solve(g: Graph, change: Change = Change(), anchor: np.ndarray | None = None,
          use_c: bool | None = None) -> np.ndarray:
    """Every node's end under ``change`` (the forward pass of the module doc): in one pass in
    C when it is built, exact and acyclic (``use_c`` None: unless ``TRACELENS_SWEEP`` is
    ``numpy``), else in rounds."""
    n = len(g.s)
    if n == 0:
        return g.e.copy()
    anchor = g.anchor if anchor is None else anchor
    w = g.w if change.w is None else change.w
    keep_s = np.ones(len(g.s_src), bool) if change.drop_s is None else ~change.drop_s
    s_src, s_dst, s_lag = g.s_src[keep_s], g.s_dst[keep_s], g.s_lag[keep_s]
    s_start = g.s_at_start[keep_s]
    first = g.first
    arrives = g.group >= 0
    if change.late_ok is not None:
        # on time: no one waits for these arrivals, and each starts when the others' last
        # has arrived (a fresh start of its chain, its own sources dropped)
        arrives &= ~change.late_ok
        first = first | change.late_ok
        keep = ~change.late_ok[s_dst]
        s_src, s_dst, s_lag, s_start = s_src[keep], s_dst[keep], s_lag[keep], s_start[keep]
    waits = g.group >= 0
    if change.no_wait is not None and g.n_groups:  # (no groups: no one waits anyway)
        waits &= ~change.no_wait[np.maximum(g.group, 0)]
    # a node left with no start source at all starts when it was seen to
    has = ~first.copy()
    has[s_dst] = True
    if change.late_ok is not None:
        has |= change.late_ok
    anchor = np.where(has, anchor, np.maximum(anchor, g.s))
    prev_lag = np.where(first, 0.0, g.prev_lag if change.prev_lag is None else change.prev_lag)
    if use_c is None:
        use_c = _SWEEP is not None and not references_forced()
    if use_c:
        if _SWEEP is None:
            raise RuntimeError("the C forward pass (_tracelens_sweep) is not built")
        f64, i64 = np.float64, np.int64

        def arr(x: np.ndarray, t: type) -> np.ndarray:
            return np.ascontiguousarray(x, t)

        out = np.empty(n)
        status = _SWEEP.solve(
            arr(first, np.bool_), arr(prev_lag, f64), arr(w, f64), arr(anchor, f64),
            arr(s_src, i64), arr(s_dst, i64), arr(s_start, np.bool_), arr(s_lag, f64),
            arr(g.b_src, i64), arr(g.b_dst, i64), arr(g.b_lag, f64), arr(g.group, i64),
            arr(arrives, np.bool_), arr(waits, np.bool_), arr(g.a_lag, f64), int(g.n_groups),
            out)
        if status == C_SOLVED:
            return out
    return _rounds(g, w, anchor, first, prev_lag, s_src, s_dst, s_lag, s_start, arrives,
                   waits)


C_SOLVED, C_NOT_EXACT, C_CYCLE = 0, 1, 2  # what the C pass says (module doc)


def _rounds(g: Graph, w: np.ndarray, anchor: np.ndarray, first: np.ndarray,
            prev_lag: np.ndarray, s_src: np.ndarray, s_dst: np.ndarray, s_lag: np.ndarray,
            s_start: np.ndarray, arrives: np.ndarray, waits: np.ndarray) -> np.ndarray:
    """The forward pass in rounds over every node until nothing changes (the reference)."""
    n = len(g.s)
    a_step = prev_lag + w
    c = _chain_cumsum(a_step, first)
    E = np.full(n, NEG)
    S = np.full(n, NEG)
    for _ in range(MAX_ROUNDS):
        xs = anchor.copy()
        np.maximum.at(xs, s_dst, np.where(s_start, S[s_src], E[s_src]) + s_lag)
        xb = np.full(n, NEG)
        np.maximum.at(xb, g.b_dst, E[g.b_src] + g.b_lag)
        if g.n_groups:
            arr = np.full(g.n_groups, NEG)
            np.maximum.at(arr, g.group[arrives], S[arrives])
            xb = np.maximum(xb, np.where(waits, arr[np.maximum(g.group, 0)] + g.a_lag, NEG))
        z = np.maximum(xs, xb) + w
        new_e = c + _chain_cummax(z - c, np.cumsum(first))
        prev = np.r_[NEG, new_e[:-1]]
        prev[first] = NEG
        new_s = np.maximum(prev + prev_lag, xs)
        if np.array_equal(new_e, E) and np.array_equal(new_s, S):
            return E
        E, S = new_e, new_s
    raise RuntimeError("critical path: the forward pass did not converge")


def _chain_cumsum(a: np.ndarray, first: np.ndarray) -> np.ndarray:
    """Cumulative sum of ``a`` restarting at each chain's first node."""
    total = np.cumsum(a)
    return total - _ffill(np.where(first, total - a, np.nan))


def _ffill(x: np.ndarray) -> np.ndarray:
    idx = np.where(~np.isnan(x), np.arange(len(x)), 0)
    np.maximum.accumulate(idx, out=idx)
    return x[idx]


_FEW_CHAINS = 512  # below this, one accumulate per chain beats a polars window


def _chain_cummax(x: np.ndarray, chain: np.ndarray) -> np.ndarray:
    """Cumulative max of ``x`` within each chain (chains contiguous, numbered in order):
    one ``maximum.accumulate`` per chain (a graph has one per stream and thread, and the
    forward pass runs this every round), else a polars window."""
    cuts = np.flatnonzero(np.r_[True, chain[1:] != chain[:-1], True]) if len(x) else \
        np.zeros(1, np.int64)
    if len(cuts) - 1 > _FEW_CHAINS:
        return pl.DataFrame({"x": x, "c": chain}).select(
            pl.col("x").cum_max().over("c"))["x"].to_numpy()
    out = np.empty_like(x)
    for a, b in zip(cuts[:-1], cuts[1:]):
        np.maximum.accumulate(x[a:b], out=out[a:b])
    return out
