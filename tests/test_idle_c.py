"""The idle gaps and pieces in one pass each of ``_tracelens_sweep`` (``idle_gaps``,
``idle_pieces``) equal the numpy references of ``tracelens.analyze.timeline.idle`` they stand in
for,
on random device axes with ties, several devices and gaps of every kind."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracelens.analyze.timeline import idle
from tracelens.core.intervals import on_one_axis
from tracelens.core.model import CATEGORIES, CategoryDtype

needs_c = pytest.mark.skipif(idle._SWEEP is None,
                             reason="_tracelens_sweep is not built (no compiler at install)")


def _axis(n: int, seed: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    rng = np.random.default_rng(seed)
    start = rng.integers(-50, 4 * n, n)
    corr = pl.Series(rng.integers(0, 20, n)).scatter(np.flatnonzero(rng.random(n) < 0.2),
                                                     None)
    ev = pl.DataFrame({
        "host": rng.choice(["a", "b"], n), "rank": rng.integers(0, 2, n).astype(np.int32),
        "device": rng.integers(0, 3, n).astype(np.int32), "start_ns": start,
        "end_ns": start + rng.integers(0, 15, n),
        "category": pl.Series(rng.choice(CATEGORIES, n)).cast(CategoryDtype),
        "correlation_id": corr})
    found = on_one_axis(ev, ["host", "rank", "device"], "correlation_id")
    assert found is not None
    return found


@needs_c
@settings(max_examples=100, deadline=None)
@given(st.integers(1, 150), st.integers(0, 2**32 - 1))
def test_the_gaps_and_pieces_in_c_equal_the_numpy_references(n: int, seed: int) -> None:
    rows, groups = _axis(n, seed)
    e, corr_all = idle._ties_by_end_and_id(rows)
    want = idle._gaps_numpy(rows, groups, e, corr_all)
    got = [np.frombuffer(b, np.int64) for b in idle._SWEEP.idle_gaps(
        rows["_s"].to_numpy(), np.ascontiguousarray(e, np.int64), rows["_g"].to_numpy(),
        groups["_shift"].to_numpy(), groups["_hi"].to_numpy())]
    for a, b in zip(got[:3], want[:3]):
        assert np.array_equal(a, b)
    at = pl.Series([None if r < 0 else int(r) for r in got[3]], dtype=pl.Int64)
    assert corr_all.gather(at).equals(want[3], check_names=False)
    rng = np.random.default_rng(seed)
    gap_g, gap_s, gap_e = want[:3]
    l_end = rng.integers(-60, 4 * n, len(gap_g))
    for has in (rng.random(len(gap_g)) < 0.6, np.zeros(len(gap_g), bool)):
        pieces = [np.frombuffer(b, np.int64) for b in idle._SWEEP.idle_pieces(
            gap_g, gap_s, gap_e, l_end, has)]
        for a, b in zip(pieces, idle._pieces_numpy(gap_g, gap_s, gap_e, l_end, has)):
            assert np.array_equal(a, b)


@needs_c
def test_the_c_gaps_are_taken_and_refuse_what_they_cannot_read(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the switch the C passes answer (the numpy references are not called); groups
    out of order or range, other types and lengths are errors, never a read out of bounds."""
    rows, groups = _axis(80, 3)
    monkeypatch.setattr(idle, "_gaps_numpy", None)
    monkeypatch.setattr(idle, "_pieces_numpy", None)
    assert idle._idle_on_axis(rows, groups, pl.DataFrame(
        schema={"host": pl.String, "rank": pl.Int32, "correlation_id": pl.Int64,
                "end_ns": pl.Int64})) is not None
    s = np.array([0, 5], np.int64)
    one = np.zeros(1, np.int64)
    with pytest.raises(ValueError):  # group 1 of a single group
        idle._SWEEP.idle_gaps(s, s, np.array([0, 1], np.uint32), one, one)
    with pytest.raises(ValueError):  # groups out of order
        idle._SWEEP.idle_gaps(s, s, np.array([1, 0], np.uint32), s, s)
    with pytest.raises(TypeError):
        idle._SWEEP.idle_gaps(s, s, s, one, one)
    with pytest.raises(ValueError):
        idle._SWEEP.idle_pieces(s, s, s[:1], s, np.zeros(2, bool))
