"""The critical-path forward pass in C (``_tracelens_sweep.solve``) against the rounds it
replaces (``tracelens.analyze.critical.solve._rounds``, the reference): the same end for every
node, bit for bit (-inf included), on random acyclic graphs (chains, S-side edges from a
source's start or end, sync edges, collective groups that arrive and wait) under every kind of
``Change``; the fall back to the rounds where one pass cannot be exact (fractions, sums past
2^51) or the graph has a cycle; bad indices refused; and every solve the analysis makes of
random traces."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.test_critical_path import RANDOM_TRACES, random_trace

from tracelens.analyze.critical import solve as cs
from tracelens.analyze.critical.solve import NEG, Change, Graph

needs_c = pytest.mark.skipif(cs._SWEEP is None, reason="the C forward pass _tracelens_sweep "
                             "is not built (no compiler at install)")


def _acyclic(n: int, first: np.ndarray, s_src: np.ndarray, s_dst: np.ndarray,
             s_start: np.ndarray, b_src: np.ndarray, b_dst: np.ndarray,
             group: np.ndarray) -> bool:
    """The points' graph (S and E of each node, one per group) has no cycle (Kahn)."""
    succ: list[list[int]] = [[] for _ in range(2 * n + max(int(group.max()) + 1, 0))]
    for v in range(n):
        succ[v].append(n + v)
        if v and not first[v]:
            succ[n + v - 1] += [v, n + v]
        if group[v] >= 0:
            succ[v].append(2 * n + int(group[v]))
            succ[2 * n + int(group[v])].append(n + v)
    for a, b, st_ in zip(s_src.tolist(), s_dst.tolist(), s_start.tolist()):
        succ[a if st_ else n + a].append(b)
    for a, b in zip(b_src.tolist(), b_dst.tolist()):
        succ[n + a].append(n + b)
    indeg = [0] * len(succ)
    for out in succ:
        for q in out:
            indeg[q] += 1
    todo = [p for p, d in enumerate(indeg) if d == 0]
    done = 0
    while todo:
        p = todo.pop()
        done += 1
        for q in succ[p]:
            indeg[q] -= 1
            if indeg[q] == 0:
                todo.append(q)
    return done == len(succ)


def _graph(n: int, seed: int, acyclic: bool = True, scale: int = 1) -> tuple[Graph,
                                                                          np.random.Generator]:
    """A random graph of ``n`` nodes with integer times: chains, S-side edges (forward in
    node order, from the source's start or end), sync edges, collective groups whose members
    arrive and (mostly) wait; lags of either sign, a few anchors. ``acyclic``: groups that
    would close a cycle are left out."""
    rng = np.random.default_rng(seed)
    first = rng.random(n) < 0.3
    first[0] = True
    chain = np.cumsum(first) - 1
    s = np.where(rng.random(n) < 0.1, 0, rng.integers(0, 100, n)).astype(float) * scale
    w = rng.integers(0, 20, n).astype(float) * scale
    e = s + w
    prev_lag = np.where(first, 0.0, rng.integers(-5, 10, n)).astype(float) * scale
    anchor = np.where(rng.random(n) < 0.3, s, NEG)
    anchor[first & (rng.random(n) < 0.5)] = NEG  # some heads only by their sources
    anchor[(anchor == 0) & (rng.random(n) < 0.5)] = -0.0  # the rounds never end at -0.0

    def pairs(k: int) -> tuple[np.ndarray, np.ndarray]:
        """k edges between distinct nodes, from the earlier to the later when acyclic"""
        a, b = rng.integers(0, n, k), rng.integers(0, n, k)
        a, b = a[a != b], b[a != b]
        if acyclic:
            a, b = np.minimum(a, b), np.maximum(a, b)
        return a.astype(np.int64), b.astype(np.int64)

    s_src, s_dst = pairs(int(rng.integers(0, 2 * n + 1)))
    s_start = rng.random(len(s_src)) < 0.4
    s_lag = rng.integers(-8, 12, len(s_src)).astype(float) * scale
    b_src, b_dst = pairs(int(rng.integers(0, n + 1)))
    b_lag = rng.integers(-6, 1, len(b_src)).astype(float) * scale
    group = np.full(n, -1, np.int64)
    n_groups = 0
    for _ in range(int(rng.integers(0, 5))):
        members = rng.choice(n, min(n, int(rng.integers(2, 5))), replace=False)
        members = members[group[members] < 0]
        if len(members) < 2:
            continue
        trial = group.copy()
        trial[members] = n_groups
        if not acyclic or _acyclic(n, first, s_src, s_dst, s_start, b_src, b_dst, trial):
            group, n_groups = trial, n_groups + 1
    a_lag = np.where(group >= 0, rng.integers(-4, 1, n), 0).astype(float) * scale
    z = np.zeros(0, np.int64)
    g = Graph(0, s, e, chain, first, prev_lag, ~first, w, s, anchor, s_src, s_dst, s_start,
              s_lag, np.array(["launch"] * len(s_src), object), b_src, b_dst, b_lag, group,
              a_lag, n_groups, np.full(n, -1, np.int64), np.full(n, -1, np.int64), z)
    return g, rng


def _change(g: Graph, rng: np.random.Generator, kind: int) -> Change:
    """0: none; 1: new work; 2: S-side edges dropped; 3: arrivals on time; 4: groups no one
    waits for; 5: all of them."""
    n = len(g.s)
    w = np.where(rng.random(n) < 0.5, np.floor(g.w * rng.random(n)), g.w)
    w[rng.random(n) < 0.1] = -0.0  # (np.floor of -0.0)
    drop = rng.random(len(g.s_src)) < 0.4
    late = (g.group >= 0) & (rng.random(n) < 0.5)
    no_wait = rng.random(g.n_groups) < 0.5  # (empty for a graph without groups)
    return [Change(), Change(w=w), Change(drop_s=drop), Change(late_ok=late),
            Change(no_wait=no_wait), Change(w, drop, late, no_wait)][kind]


NO_CHANGE = Change()
_REAL_SOLVE = cs.solve  # the analysis' solve, whatever a test patches in its place


def _status(g: Graph, change: Change, anchor: np.ndarray | None = None) -> int:
    """What the C pass says of ``g`` under ``change`` (0 solved, 1 not exact, 2 a cycle)."""
    got: list[int] = []
    real = cs._SWEEP.solve  # type: ignore[union-attr]

    def spy(*args: object) -> int:
        got.append(real(*args))
        return got[-1]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cs._SWEEP, "solve", spy)
        mp.setattr(cs, "_rounds", lambda g, *a: g.e)  # not the fall back: its answer only
        _REAL_SOLVE(g, change, anchor, use_c=True)
    return got[0]


def _same(a: np.ndarray, b: np.ndarray) -> None:
    assert a.dtype == b.dtype == np.float64 and a.shape == b.shape
    assert np.array_equal(a.view(np.int64), b.view(np.int64))  # bits: -inf, signed zeros


@needs_c
@settings(max_examples=400, deadline=None)
@given(st.integers(1, 40), st.integers(0, 2**32 - 1), st.integers(0, 5))
def test_the_c_pass_equals_the_rounds(n: int, seed: int, kind: int) -> None:
    g, rng = _graph(n, seed)
    change = _change(g, rng, kind)
    want = cs.solve(g, change, use_c=False)
    got = cs.solve(g, change, use_c=True)
    _same(got, want)
    assert _status(g, change) == cs.C_SOLVED  # acyclic and integer: in one pass
    anchor = np.where(rng.random(n) < 0.5, g.s, g.anchor)  # _reproduce's anchors
    _same(cs.solve(g, change, anchor, use_c=True), cs.solve(g, change, anchor, use_c=False))


@needs_c
def test_random_graphs_reach_what_the_pass_must_get_right() -> None:
    """The generator makes groups that arrive and wait, chains, both kinds of S-side source,
    sync edges, ends at -inf (an on-time arrival no one waits for) and long chain switching
    (many rounds)."""
    seen: set[str] = set()
    for seed in range(300):
        g, rng = _graph(int(np.random.default_rng(seed).integers(1, 40)), seed)
        seen |= {"group"} if g.n_groups else set()
        seen |= {"start"} if g.s_at_start.any() else set()
        seen |= {"end"} if (~g.s_at_start).any() else set()
        seen |= {"sync"} if len(g.b_src) else set()
        for kind in range(6):
            e = cs.solve(g, _change(g, rng, kind), use_c=True)
            seen |= {"-inf"} if np.isneginf(e).any() else set()
        rounds = _count_rounds(g)
        seen |= {"rounds>3"} if rounds > 3 else set()
    assert seen == {"group", "start", "end", "sync", "-inf", "rounds>3"}


def _count_rounds(g: Graph) -> int:
    count = 0
    real = cs._chain_cummax

    def counted(x: np.ndarray, chain: np.ndarray) -> np.ndarray:
        nonlocal count
        count += 1
        return real(x, chain)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cs, "_chain_cummax", counted)
        cs.solve(g, use_c=False)
    return count


@needs_c
@settings(max_examples=100, deadline=None)
@given(st.integers(2, 30), st.integers(0, 2**32 - 1), st.integers(0, 5))
def test_cycles_fall_back_to_the_rounds(n: int, seed: int, kind: int) -> None:
    """A graph with a cycle (here one that the rounds settle: every lag on it is negative
    enough) is not guessed in C: the rounds solve it."""
    g, rng = _graph(n, seed)
    # the last node's start waits for its own end (a cycle of two points), with a lag so low
    # that the rounds settle; the change keeps that edge
    g = Graph(**{**g.__dict__,
                 "s_src": np.r_[g.s_src, n - 1].astype(np.int64),
                 "s_dst": np.r_[g.s_dst, n - 1].astype(np.int64),
                 "s_at_start": np.r_[g.s_at_start, False],
                 "s_lag": np.r_[g.s_lag, -1e6],
                 "s_kind": np.r_[g.s_kind, np.array(["event"], object)]})
    change = _change(g, rng, kind)
    if change.drop_s is not None:
        change = replace(change, drop_s=np.r_[change.drop_s[:-1], False])
    if change.late_ok is not None:
        change = replace(change, late_ok=np.r_[change.late_ok[:-1], False])
    assert _status(g, change) == cs.C_CYCLE
    _same(cs.solve(g, change, use_c=True), cs.solve(g, change, use_c=False))


@needs_c
@pytest.mark.parametrize("use_c", [False, pytest.param(True, marks=needs_c)])
def test_no_wait_on_a_graph_without_groups_changes_nothing(use_c: bool) -> None:
    """A graph without collective groups takes an empty ``no_wait`` (it used to raise
    IndexError: ``solve`` indexed it by group 0)."""
    for seed in range(50):
        g, _ = _graph(12, seed)
        if g.n_groups == 0:
            break
    assert g.n_groups == 0
    _same(cs.solve(g, Change(no_wait=np.zeros(0, bool)), use_c=use_c),
          cs.solve(g, NO_CHANGE, use_c=use_c))


def test_a_collective_that_arrives_and_waits_is_no_cycle() -> None:
    """Every member's start (arrival) before every member's begin: start and end are apart,
    so a group whose members all arrive and wait is solved in one pass."""
    g, _ = _graph(3, 0)
    first = np.array([True, True, True])
    g = Graph(**{**g.__dict__, "first": first, "chain": np.arange(3), "prev_lag": np.zeros(3),
                 "s": np.array([0.0, 5.0, 9.0]), "w": np.array([3.0, 4.0, 2.0]),
                 "anchor": np.array([0.0, 5.0, 9.0]), "s_src": np.zeros(0, np.int64),
                 "s_dst": np.zeros(0, np.int64), "s_at_start": np.zeros(0, bool),
                 "s_lag": np.zeros(0), "s_kind": np.zeros(0, object),
                 "b_src": np.zeros(0, np.int64), "b_dst": np.zeros(0, np.int64),
                 "b_lag": np.zeros(0), "group": np.zeros(3, np.int64), "n_groups": 1,
                 "a_lag": np.array([0.0, -1.0, 0.0])})
    assert _status(g, Change()) == cs.C_SOLVED
    e = cs.solve(g, use_c=True)
    assert e.tolist() == [12.0, 12.0, 11.0]  # all wait for 9 (minus its lag), then work
    _same(e, cs.solve(g, use_c=False))


@needs_c
def test_an_end_at_zero_is_plus_zero_as_in_the_rounds() -> None:
    """The rounds' ends are sums from +0.0, never -0.0; one pass may reach -0.0 (an anchor of
    -0.0 plus a work of -0.0, np.floor's) and must say +0.0."""
    g, _ = _graph(2, 0)
    g = Graph(**{**g.__dict__, "first": np.array([True, False]), "chain": np.zeros(2, np.int64),
                 "prev_lag": np.array([0.0, -5.0]), "s": np.zeros(2), "w": np.zeros(2),
                 "anchor": np.array([0.0, -0.0]), "s_src": np.zeros(0, np.int64),
                 "s_dst": np.zeros(0, np.int64), "s_at_start": np.zeros(0, bool),
                 "s_lag": np.zeros(0), "s_kind": np.zeros(0, object),
                 "b_src": np.zeros(0, np.int64), "b_dst": np.zeros(0, np.int64),
                 "b_lag": np.zeros(0), "group": np.full(2, -1, np.int64), "n_groups": 0,
                 "a_lag": np.zeros(2)})
    change = Change(w=np.array([0.0, -0.0]))
    assert _status(g, change) == cs.C_SOLVED
    want = cs.solve(g, change, use_c=False)
    assert want.tolist() == [0.0, 0.0] and not np.signbit(want).any()
    _same(cs.solve(g, change, use_c=True), want)


@needs_c
@pytest.mark.parametrize("what", ["w", "prev_lag", "s_lag", "b_lag", "a_lag", "anchor",
                                  "big", "nan", "inf"])
def test_what_one_pass_cannot_make_exact_falls_back(what: str) -> None:
    """A fraction in any input, a NaN or +inf work, or sums that may pass 2^51: the rounds,
    as before."""
    for seed in range(50):
        g, _ = _graph(12, seed, scale=2**46 if what == "big" else 1)
        if what != "big":
            name = "w" if what in ("nan", "inf") else what
            x = getattr(g, name).copy()
            ok = np.isfinite(x)
            if what == "a_lag":
                ok &= g.group >= 0
            if what == "prev_lag":
                ok &= ~g.first
            if not ok.any():
                continue
            k = int(np.flatnonzero(ok)[0])
            x[k] = {"nan": np.nan, "inf": np.inf}.get(what, x[k] + 0.5)
            g = Graph(**{**g.__dict__, name: x})
        assert _status(g, Change()) == cs.C_NOT_EXACT
        if what not in ("nan", "inf"):  # those the rounds never settle
            _same(cs.solve(g, use_c=True), cs.solve(g, use_c=False))
        return
    raise AssertionError("no graph had what the case needs")


@needs_c
def test_the_c_pass_refuses_what_it_cannot_index() -> None:
    """An edge's node, a group out of range: a ValueError, never a read out of bounds; a
    wrong dtype or length a TypeError or ValueError."""
    n = 4
    f64, src, dst = np.zeros(n), np.zeros(1, np.int64), np.ones(1, np.int64)
    first = np.array([True, False, True, False])
    base = [first, f64, f64, f64, src, dst, np.zeros(1, bool), np.zeros(1), src, dst,
            np.zeros(1), np.zeros(n, np.int64), np.zeros(n, bool), np.zeros(n, bool), f64]
    solve = cs._SWEEP.solve  # type: ignore[union-attr]
    assert solve(*base, 1, np.empty(n)) == cs.C_SOLVED

    def bad(k: int, value: np.ndarray, groups: int = 1, exc: type = ValueError) -> None:
        args = list(base)
        args[k] = value
        with pytest.raises(exc):
            solve(*args, groups, np.empty(n))

    for k in (4, 5, 8, 9):  # s_src, s_dst, b_src, b_dst
        bad(k, np.full(1, n, np.int64))
        bad(k, np.full(1, -1, np.int64))
    bad(12, np.ones(n, bool), groups=0)  # arrives: group 0 of none
    bad(13, np.ones(n, bool), groups=0)  # waits
    args = list(base)
    args[11] = np.full(n, -1, np.int64)
    args[13] = np.ones(n, bool)
    with pytest.raises(ValueError):
        solve(*args, 1, np.empty(n))
    bad(1, np.zeros(n + 1))  # lengths
    bad(5, np.zeros(2, np.int64))
    bad(6, np.zeros(2, bool))
    bad(14, np.zeros(1))
    bad(11, np.zeros(n, np.int32), exc=TypeError)
    bad(2, np.zeros(n, np.float32), exc=TypeError)
    with pytest.raises(ValueError):
        solve(*base, -1, np.empty(n))
    with pytest.raises(ValueError):
        solve(*base, 1, np.empty(n + 1))
    with pytest.raises((ValueError, BufferError, TypeError)):
        ro = np.empty(n)
        ro.flags.writeable = False
        solve(*base, 1, ro)


def test_the_reference_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    """TRACELENS_SWEEP=numpy solves in rounds (the reference); else in C when it is built
    (an old build without SOLVE_ABI 1 is not used)."""
    g, _ = _graph(8, 5)
    calls: list[int] = []
    if cs._SWEEP is not None:
        real = cs._SWEEP.solve

        def spy(*args: object) -> int:
            calls.append(1)
            return real(*args)

        monkeypatch.setattr(cs._SWEEP, "solve", spy)
    monkeypatch.setenv("TRACELENS_SWEEP", "numpy")
    want = cs.solve(g)
    assert not calls
    monkeypatch.delenv("TRACELENS_SWEEP")
    _same(cs.solve(g), want)
    assert len(calls) == (cs._SWEEP is not None)
    monkeypatch.setattr(cs, "_SWEEP", None)
    with pytest.raises(RuntimeError):
        cs.solve(g, use_c=True)
    _same(cs.solve(g), want)


# -- every solve of the analysis on random traces -----------------------------------------------


@needs_c
@settings(max_examples=60, deadline=None)
@RANDOM_TRACES
def test_every_solve_of_random_traces(kernels: list, apis: list,
                                      step: tuple[int, int] | None) -> None:
    """Random two-rank traces (streams, all-reduces, launches that may bind, syncs) through
    ``critical_paths``: every solve it makes (the reproduction, each what-if), in C, is the
    rounds' result bit for bit; and the result with the C pass is the result with the
    reference."""
    from tracelens.analyze.critical import path as cp
    from tracelens.analyze.critical.path import CriticalPath, CriticalPathOptions
    from tracelens.engine.protocol import run_trace

    trace = random_trace(kernels, apis, step)
    statuses: list[int] = []
    real = cs.solve

    def checked(g: Graph, change: Change = NO_CHANGE, anchor: np.ndarray | None = None,
                use_c: bool | None = None) -> np.ndarray:
        got = real(g, change, anchor, use_c)
        _same(got, real(g, change, anchor, use_c=False))
        if len(g.s):  # (an empty graph is its own answer, no pass at all)
            statuses.append(_status(g, change, anchor))
        return got

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cs, "solve", checked)
        mp.setattr(cp, "solve", checked)
        mp.delenv("TRACELENS_SWEEP", raising=False)
        with_c = run_trace(CriticalPath(), trace, CriticalPathOptions(top=5))
        mp.setenv("TRACELENS_SWEEP", "numpy")
        reference = run_trace(CriticalPath(), trace, CriticalPathOptions(top=5))
    assert with_c == reference
    # integer ns: never inexact; a cycle only where ties order two instances differently on
    # two ranks (zero-length collectives at one ns), and the rounds solve those
    assert all(s in (cs.C_SOLVED, cs.C_CYCLE) for s in statuses)
