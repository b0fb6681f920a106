"""The critical-path walk in C (``_tracelens_sweep.walk``) against the Python walk it replaces
(``tracelens.analyze.critical.walk.walk``, the reference): the same pieces, the same ns on
the path per node in the same order, the same revisits cut, bit for bit; on random graphs
(cycles, waits for arrivals, sync hops, float times that round) and on every walk the
analysis makes of random traces."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polars.testing import assert_frame_equal

from tests.test_critical_path import RANDOM_TRACES, random_trace

from tracelens.analyze.critical import walk as cw
from tracelens.analyze.critical.solve import Graph

needs_c = pytest.mark.skipif(cw._SWEEP is None, reason="the C walk _tracelens_sweep is not "
                             "built (no compiler at install)")

COMPONENTS = ("gemm", "host", "communication", "sync", "other")
WHO = ("h0/GPU0", "h1/GPU0", "h1/GPU1", "host")


def _graph(n: int, seed: int) -> tuple[Graph, cw.Labels, np.random.Generator]:
    """A random graph of ``n`` nodes with the arrays a walk reads: times that mostly keep
    s <= b <= e but not always, and round (thirds, tenths); binding sources anywhere (cycles
    are cut by the revisit set); arrival waits, sync waits and S-side edges of each kind."""
    rng = np.random.default_rng(seed)
    frac = rng.choice([0.0, 0.0, 0.1, 1 / 3, 0.7, 1e-7], n)
    s = rng.integers(0, 60, n) + frac
    b = s + np.where(rng.random(n) < 0.5, 0.0, rng.integers(0, 15, n) + rng.random(n))
    e = b + rng.integers(0, 20, n) + np.where(rng.random(n) < 0.3, 0.1, 0.0)
    chaos = rng.random(n) < 0.1  # inconsistent nodes: begin before start, end before begin
    b[chaos] = s[chaos] - rng.integers(1, 5, int(chaos.sum()))
    e[chaos & (rng.random(n) < 0.5)] -= 30.0
    n_groups = int(rng.integers(0, 4))
    group = np.where(rng.random(n) < 0.4, rng.integers(-1, max(n_groups, 1), n), -1) \
        if n_groups else np.full(n, -1)
    a_last = rng.integers(0, n, n_groups)
    nb = int(rng.integers(0, n + 1))
    b_src = rng.integers(0, n, nb)
    b_bind = np.where(rng.random(n) < 0.5, rng.integers(-1, max(nb, 1), n), -1) if nb \
        else np.full(n, -1)
    arrive = (group >= 0) & (rng.random(n) < 0.6)
    b_bind[arrive] = -2
    ns = int(rng.integers(0, 2 * n + 1))
    s_src = rng.integers(0, n, ns)
    s_bind = np.where(rng.random(n) < 0.5, rng.integers(-1, max(ns, 1), n), -1) if ns \
        else np.full(n, -1)
    s_kind = rng.choice(np.array(["launch", "event", "other"], object), ns)
    s_at_start = rng.random(ns) < 0.4
    prev_binds = rng.random(n) < 0.6
    prev_binds[0] = False  # the first node of the first chain
    empty_f, empty_i = np.zeros(0), np.zeros(0, np.int64)
    g = Graph(0, s, e, np.zeros(n, np.int64), ~prev_binds, np.zeros(n), prev_binds, e - b, b,
              np.full(n, -np.inf), s_src.astype(np.int64), empty_i, s_at_start, empty_f,
              s_kind, b_src.astype(np.int64), empty_i, empty_f, group.astype(np.int64),
              np.zeros(n), n_groups, s_bind.astype(np.int64), b_bind.astype(np.int64),
              a_last.astype(np.int64))
    lab = cw.Labels(rng.integers(0, len(COMPONENTS), n), COMPONENTS,
                    rng.integers(0, len(WHO), n), WHO, rng.random(n) < 0.5)
    return g, lab, rng


def _bits(pieces: list[tuple[str, float]]) -> list[tuple[str, str]]:
    return [(c, float(v).hex()) for c, v in pieces]


def _same(got: cw.Walk, pieces: list[tuple[str, float]], on: dict[int, float],
          cut: int) -> None:
    """``got`` is the reference's result, float bits and order included, and what the
    analysis sums of it is the reference's sums."""
    assert _bits(got.pieces()) == _bits(pieces)
    assert list(got.on().keys()) == list(on.keys())
    assert [v.hex() for v in got.on().values()] == [v.hex() for v in on.values()]
    assert got.cut == cut
    assert cw.composition(got) == cw.composition_of(pieces)
    for pred in (lambda c: c.startswith("wait:"), lambda c: c in ("host", "sync", "idle")):
        want = sum(ns for comp, ns in pieces if pred(comp))
        assert got.total(pred).hex() == float(want).hex()
    mask = np.arange(max(list(on) + [0]) + 1) % 2 == 0
    want_on = sum(v for i, v in on.items() if mask[i])
    assert got.on_total(mask).hex() == float(want_on).hex()
    assert got.components() == {c for c, _ in pieces}


@needs_c
@settings(max_examples=300, deadline=None)
@given(st.integers(1, 40), st.integers(0, 2**32 - 1))
def test_the_c_walk_equals_the_python_walk(n: int, seed: int) -> None:
    g, lab, rng = _graph(n, seed)
    c_walk, py_walk = cw.Walker(g, lab, use_c=True), cw.Walker(g, lab, use_c=False)
    lists = cw.walkable(g, lab)
    for _ in range(4):
        sink = int(rng.integers(0, n))
        w0 = float(rng.integers(-5, 40)) + float(rng.choice([0.0, 0.25, 1 / 3]))
        w1 = w0 + float(rng.integers(0, 90)) + float(rng.choice([0.0, 0.5, 0.1]))
        pieces, on, cut = cw.walk(g, lab, sink, w0, w1, lists)
        _same(c_walk.walk(sink, w0, w1), pieces, on, cut)
        _same(py_walk.walk(sink, w0, w1), pieces, on, cut)


@needs_c
def test_random_graphs_reach_every_branch_of_the_walk() -> None:
    """The generator of the property test makes what the walk must get right: revisits cut,
    arrival waits, sync hops, launch and event edges, chain gaps, a node's own work and wait
    summed on the path."""
    seen: set[str] = set()
    for seed in range(400):
        g, lab, rng = _graph(int(np.random.default_rng(seed).integers(1, 40)), seed)
        n = len(g.s)
        for _ in range(4):
            sink = int(rng.integers(0, n))
            w0 = float(rng.integers(-5, 40))
            pieces, on, cut = cw.walk(g, lab, sink, w0, w0 + float(rng.integers(0, 90)))
            comps = {c for c, _ in pieces}
            seen |= {"cut"} if cut else set()
            seen |= {"wait"} if any(c.startswith("wait:") for c in comps) else set()
            seen |= comps & {"launch_latency", "sync", "host", "idle"}
            ids = [i for i, _ in pieces]
            seen |= {"own+wait"} if any(a in COMPONENTS and b.startswith("wait:")
                                        for a, b in zip(ids, ids[1:])) else set()
    assert seen == {"cut", "wait", "launch_latency", "sync", "host", "idle", "own+wait"}


@needs_c
def test_the_c_walk_refuses_what_it_cannot_index() -> None:
    """An index out of its array (a sink, a binding source, an edge, a group, the node
    before the first) is a ValueError, never a read out of bounds; a wrong dtype or length
    a TypeError or ValueError."""
    g, lab, _ = _graph(6, 1)
    walker = cw.Walker(g, lab, use_c=True)
    arrays = list(walker._c_arrays())
    idle = walker.index["idle"]
    n = len(g.s)
    with pytest.raises(ValueError):
        cw._SWEEP.walk(*arrays, idle, n, 0.0, 100.0)
    with pytest.raises(ValueError):
        cw._SWEEP.walk(*arrays, idle, -1, 0.0, 100.0)

    def one(k: int, value: np.ndarray) -> None:
        bad = list(arrays)
        bad[k] = value
        with pytest.raises(ValueError):
            cw._SWEEP.walk(*bad, idle, 0, 0.0, 100.0)

    s = np.zeros(n)
    e = np.full(n, 10.0)
    b = np.full(n, 5.0)
    base = [s, e, b, np.full(n, -1), np.zeros(1, np.int64), np.full(n, -1),
            np.zeros(1, np.int64), np.zeros(1, bool), np.zeros(n, bool), np.full(n, -1),
            np.zeros(1, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64),
            np.zeros(1, np.int64), np.zeros(n, np.int64)]
    base = [np.ascontiguousarray(a, np.bool_ if a.dtype == bool else a.dtype)
            for a in base]
    arrays = base
    cw._SWEEP.walk(*arrays, idle, 0, 0.0, 100.0)  # valid: own work, then nothing before
    one(3, np.full(n, 1, np.int64))  # b_bind past the B-side edges
    arrays[3] = np.zeros(n, np.int64)  # a sync wait: b_src out of range
    one(4, np.full(1, n, np.int64))
    one(4, np.full(1, -1, np.int64))
    arrays[3] = np.full(n, -2, np.int64)  # waits for an arrival: group -1
    one(9, np.full(n, -1, np.int64))
    arrays[9] = np.zeros(n, np.int64)
    one(10, np.full(1, n, np.int64))  # the last to arrive out of range
    one(10, np.zeros(0, np.int64))  # no such group
    arrays[3] = np.full(n, -1, np.int64)
    one(5, np.full(n, 1, np.int64))  # s_bind past the S-side edges
    arrays[5] = np.zeros(n, np.int64)
    one(6, np.full(1, n, np.int64))  # s_src out of range
    arrays[5] = np.full(n, -1, np.int64)
    one(8, np.ones(n, bool))  # the first node has no previous node
    one(1, np.zeros(n + 1))  # lengths
    one(13, np.zeros(2, np.int64))
    with pytest.raises(TypeError):
        cw._SWEEP.walk(*arrays[:3], arrays[3].astype(np.int32), *arrays[4:], idle, 0, 0.0, 1.0)
    with pytest.raises(TypeError):
        cw._SWEEP.walk(arrays[0].astype(np.float32), *arrays[1:], idle, 0, 0.0, 1.0)


def test_the_reference_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    """TRACELENS_SWEEP=numpy walks in Python (the reference); else C when it is built."""
    g, lab, _ = _graph(5, 3)
    monkeypatch.setenv("TRACELENS_SWEEP", "numpy")
    assert not cw.Walker(g, lab).use_c
    monkeypatch.delenv("TRACELENS_SWEEP")
    assert cw.Walker(g, lab).use_c == (cw._SWEEP is not None)


# -- every walk of the analysis on random traces ------------------------------------------------


@needs_c
@settings(max_examples=60, deadline=None)
@RANDOM_TRACES
def test_every_walk_of_random_traces(kernels: list, apis: list,
                                     step: tuple[int, int] | None) -> None:
    """Random two-rank traces (streams, all-reduces, launches that may bind) through
    ``critical_paths``: each walk it makes, in C, is the reference's walk; and the result
    with the C walk is the result with the reference."""
    from tracelens.analyze.critical.path import CriticalPath, CriticalPathOptions
    from tracelens.engine.protocol import run_trace

    trace = random_trace(kernels, apis, step)
    walks = []
    real = cw.Walker.walk

    def checked(self: cw.Walker, sink: int, w0: float, w1: float) -> cw.Walk:
        got = real(self, sink, w0, w1)
        pieces, on, cut = cw.walk(self.g, self.lab, sink, w0, w1)
        _same(got, pieces, on, cut)
        walks.append(self.use_c)
        return got

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cw.Walker, "walk", checked)
        mp.delenv("TRACELENS_SWEEP", raising=False)
        with_c = run_trace(CriticalPath(), trace, CriticalPathOptions(top=5))
        mp.setenv("TRACELENS_SWEEP", "numpy")
        reference = run_trace(CriticalPath(), trace, CriticalPathOptions(top=5))
    assert with_c == reference
    half = len(walks) // 2  # none when no device has activity in the window
    assert len(walks) == 2 * half and all(walks[:half]) and not any(walks[half:])


def test_labels_as_codes() -> None:
    """``_labels``: the components and participants as codes into their distinct names."""
    from tracelens.analyze.critical.path import _coded

    col = pl.Series(["gemm", "host", "gemm", "wait", "host"])
    codes, names = _coded(col)
    assert [names[k] for k in codes] == col.to_list() and list(names) == sorted(set(names))
    codes, names = _coded(pl.Series([], dtype=pl.String))
    assert len(codes) == 0 and names == ()


_host_event = st.tuples(st.integers(0, 1), st.integers(0, 1), st.integers(0, 60),
                        st.integers(0, 25), st.sampled_from(["api", "cpu_op", "python"]))


@settings(max_examples=200, deadline=None)
@given(st.lists(_host_event, min_size=0, max_size=25),
       st.lists(st.tuples(st.integers(0, 1), st.integers(-5, 70), st.integers(0, 30)),
                min_size=1, max_size=2))
def test_host_nodes_see_only_the_events_near_the_window(events: list, windows: list) -> None:
    """``critical_graph._near`` drops host events before the leaf test: the window's host
    nodes equal those found over every host event (nested calls, zero-length events, events
    ending where the next starts, windows before, after and around them)."""
    from types import SimpleNamespace

    from tracelens.analyze.critical import graph as cg

    he = pl.DataFrame(
        [("h", rank, 7, tid, kind, f"e{i}", s, s + d, i)
         for i, (rank, tid, s, d, kind) in enumerate(events)],
        schema={"host": pl.String, "rank": pl.Int32, "pid": pl.Int64, "tid": pl.Int64,
                "kind": pl.String, "name": pl.String, "start_ns": pl.Int64, "end_ns": pl.Int64,
                "correlation_id": pl.Int64}, orient="row")
    win = pl.DataFrame([("h", r, None, s, s + d) for r, s, d in windows],
                       schema={"host": pl.String, "rank": pl.Int32, "step": pl.Int32,
                               "start_ns": pl.Int64, "end_ns": pl.Int64}, orient="row") \
        .unique(["host", "rank"], keep="first", maintain_order=True)
    trace = SimpleNamespace(host_events=he)
    got = cg.host_nodes(trace, win)  # type: ignore[arg-type]
    real = cg._near
    try:
        cg._near = lambda he, win, keep: he.filter(keep)  # type: ignore[assignment]
        want = cg.host_nodes(trace, win)  # type: ignore[arg-type]
    finally:
        cg._near = real  # type: ignore[assignment]
    key = ["rank", "tid", "start_ns", "end_ns", "name"]
    assert_frame_equal(got.sort(key), want.sort(key))
