"""The compute time under each collective (``collectives._hidden_by_compute``): the one pass of
``_tracelens_sweep.hidden`` equals the numpy reference (``TRACELENS_SWEEP=numpy``) and the
definition written out by hand, on the device axis the summary shares and on the collectives'
own axis."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracelens.analyze.communication import collectives
from tracelens.analyze.timeline.breakdown import DEVICE_KEYS, device_axis
from tracelens.core.sweep import SWEEP_ENV
from tracelens.core.model import COMPUTE_CATEGORIES, EVENT_SCHEMA, conform

needs_c = pytest.mark.skipif(collectives._SWEEP is None,
                             reason="_tracelens_sweep is not built (no compiler at install)")


def _events(n: int, seed: int) -> pl.DataFrame:
    """Kernels of several devices and hosts: overlapping, nested, touching and zero-length,
    a fifth of them collectives, some memory copies (neither compute nor collective)."""
    rng = np.random.default_rng(seed)
    start = rng.integers(0, 4 * n, n)
    cat = rng.choice(["gemm", "elementwise", "collective", "memory", "attention"], n,
                     p=[0.3, 0.25, 0.2, 0.1, 0.15])
    return conform(pl.DataFrame({
        "host": rng.choice(["a", "b"], n), "rank": rng.integers(0, 2, n).astype(np.int32),
        "device": rng.integers(0, 3, n).astype(np.int32), "stream": rng.integers(0, 2, n),
        "kind": np.where(cat == "memory", "memcpy", "kernel"), "name": cat,
        "start_ns": start, "end_ns": start + rng.integers(0, 12, n),
        "category": cat}), EVENT_SCHEMA).sort([*DEVICE_KEYS, "start_ns"])


def _by_hand(coll: pl.DataFrame, ev: pl.DataFrame) -> list[int]:
    """Per collective: the length of the union of its device's compute intervals inside it."""
    comp = ev.filter(pl.col("category").is_in(list(COMPUTE_CATEGORIES)))
    out = []
    for c in coll.iter_rows(named=True):
        mine = comp.filter(*(pl.col(k) == c[k] for k in DEVICE_KEYS))
        covered: set[int] = set()
        for s, e in mine.select("start_ns", "end_ns").iter_rows():
            covered.update(range(max(s, c["start_ns"]), min(e, c["end_ns"])))
        out.append(len(covered))
    return out


@needs_c
@settings(max_examples=80, deadline=None)
@given(st.integers(1, 120), st.integers(0, 2**32 - 1))
def test_the_one_pass_equals_the_reference_and_the_definition(n: int, seed: int) -> None:
    ev = _events(n, seed)
    coll = ev.filter(pl.col("category") == "collective")
    axis = device_axis(ev)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(SWEEP_ENV, "numpy")
        ref = [collectives._hidden_by_compute(coll, ev, a).to_list() for a in (axis, None)]
    got = [collectives._hidden_by_compute(coll, ev, a).to_list() for a in (axis, None)]
    assert got == ref
    assert got[0] == _by_hand(coll, ev)


@needs_c
def test_the_one_pass_is_taken_and_refuses_what_it_cannot_read(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the switch the C pass answers (a spy sees it); a priority beyond 63 or arrays of
    other types or lengths are errors, never a read out of bounds."""
    ev = _events(60, 7)
    coll = ev.filter(pl.col("category") == "collective")
    calls = []
    real = collectives._SWEEP.hidden
    monkeypatch.setattr(collectives, "_SWEEP", type("Spy", (), {
        "hidden": staticmethod(lambda *a: calls.append(1) or real(*a))}))
    collectives._hidden_by_compute(coll, ev, device_axis(ev))
    assert calls == [1]
    s, e = np.array([0, 5], np.int64), np.array([3, 9], np.int64)
    g, p = np.zeros(2, np.uint32), np.array([0, 1], np.int32)
    q = np.array([1], np.int64)
    assert np.frombuffer(real(s, e, g, p, 1, np.zeros(1, np.int64), q - 1, q + 8),
                         np.int64).tolist() == [3]  # [0, 9) holds [0, 3), of priority 0
    # a later collective ending before the one before it ends: its end is looked up
    # backwards from the earlier end's segment, and lands inside the segment before
    s3, e3 = np.array([0, 20, 40], np.int64), np.array([10, 30, 50], np.int64)
    starts, ends = np.array([5, 6], np.int64), np.array([45, 25], np.int64)
    assert np.frombuffer(real(s3, e3, np.zeros(3, np.uint32), np.zeros(3, np.int32), 1,
                              np.zeros(2, np.int64), starts, ends), np.int64).tolist() == \
        [5 + 10 + 5, 4 + 5]
    with pytest.raises(ValueError):
        real(s, e, g, np.array([0, 64], np.int32), 1, q, q, q)
    with pytest.raises(ValueError):
        real(s, e[:1], g, p, 1, q, q, q)
    with pytest.raises(TypeError):
        real(s, e, g.astype(np.int64), p, 1, q, q, q)
