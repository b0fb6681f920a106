"""The loader's per-signature classification and costs (tracelens.core.signatures) equal the
per-event passes they replace, on the bundled samples, real traces and random frames."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

import tracelens
from tests.conftest import SAMPLES, SHARED
from tracelens.classify import classify
from tracelens.cost.events import annotate_events, hlo_kinds, op_cost_table, with_hlo_kind
from tracelens.core.model import EVENT_SCHEMA, conform
from tracelens.core.signatures import SIGNATURE, distinct_rows, packed_key, signatures

TRACES = [SAMPLES / "mi300x_8gpu_llama_step.xplane.pb", SAMPLES / "h100_8gpu_moe_ddp.xplane.pb",
          SAMPLES / "mi355x_2x8gpu_straggler",
          SHARED / "traces" / "xprof" / "mi300x_jax08_conv_8gpu.xplane.pb",
          SHARED / "traces" / "kineto" / "a100_nccl_2rank_rank0.json.gz",
          SHARED / "traces" / "rocprof" / "mi350x_908_results.json.gz"]


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name)
def test_per_signature_stages_equal_the_per_event_passes(path: Path) -> None:
    if not path.exists():
        pytest.skip(f"{path} absent (shared/ is not beside this checkout)")
    trace = tracelens.load(path)
    ev = trace.events
    table, _ = op_cost_table(ev, trace.modules)
    sig = signatures(ev)
    assert_frame_equal(op_cost_table(sig.table, trace.modules)[0], table)
    assert sig.spread(hlo_kinds(sig.table, table)).equals(with_hlo_kind(ev, table)["hlo"])
    by_event = classify(with_hlo_kind(ev, table)).drop("hlo")
    assert_frame_equal(classify(ev, signed=(sig, hlo_kinds(sig.table, table))), by_event)
    assert_frame_equal(annotate_events(ev, table, sig), annotate_events(ev, table))


def _annotated_heights(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The heights of the frames the cost columns are worked out on, as they happen."""
    import tracelens.cost.events as mod

    heights: list[int] = []
    real = mod._annotated

    def spy(ev: pl.DataFrame) -> pl.DataFrame:
        heights.append(ev.height)
        return real(ev)
    monkeypatch.setattr(mod, "_annotated", spy)
    return heights


@pytest.mark.parametrize("change", ["none", "category", "flops"])
def test_costs_per_signature_only_where_every_event_of_one_agrees(
        change: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """An XSpace trace's cost columns are worked out once per signature and spread; an event
    whose category differs from its signature's first event, or a cost the reader filled,
    sends the whole frame to the per-event pass. Every way, the result is the per-event one."""
    trace = tracelens.load(SAMPLES / "mi300x_8gpu_llama_step.xplane.pb")
    ev = trace.events.with_columns(  # as the reader gives them: no cost yet
        pl.lit(None, dtype=trace.events.schema[c]).alias(c)
        for c in ("flops", "bytes", "dtype", "dtype_source", "cost_source", "cost_note",
                  "msg_bytes", "group_size", "groups"))
    table, _ = op_cost_table(ev, trace.modules)
    sig = signatures(ev)
    last = ev.height - 1  # not a signature's first event (the last kernel name repeats)
    assert int(sig.row.arg_unique().max()) < last  # type: ignore[arg-type]
    if change == "category":
        other = "memory" if ev["category"][last] != "memory" else "gemm"
        ev = ev.with_columns(category=pl.when(pl.int_range(pl.len()) == last)
                             .then(pl.lit(other, dtype=ev.schema["category"]))
                             .otherwise(pl.col("category")))
    elif change == "flops":
        ev = ev.with_columns(flops=pl.when(pl.int_range(pl.len()) == last).then(1.0)
                             .otherwise(pl.col("flops")))
    heights = _annotated_heights(monkeypatch)
    got = annotate_events(ev, table, sig)
    assert heights == [sig.table.height if change == "none" else ev.height]
    assert_frame_equal(got, annotate_events(ev, table))
    if change == "flops":
        assert got["flops"][last] is not None


def test_distinct_rows_index_every_row_back() -> None:
    """Every row is its distinct row (nulls included), the distinct rows in first-seen
    order; a colliding hash falls back to the exact join with the same answer."""
    rng = np.random.default_rng(3)
    n = 5000
    ev = conform(pl.DataFrame({
        "host": rng.choice(["a", "b"], n), "rank": rng.integers(0, 2, n).astype(np.int32),
        "device": rng.integers(0, 3, n).astype(np.int32),
        "kind": rng.choice(["kernel", "memcpy"], n),
        "name": rng.choice(["k1", "k2", "k3", "Memcpy"], n),
        "op": pl.Series(rng.choice(["dot.1", "fusion.2", ""], n)).replace("", None),
        "program_id": pl.Series(rng.integers(0, 3, n)).replace(0, None),
        "start_ns": np.zeros(n, np.int64), "end_ns": np.ones(n, np.int64)}), EVENT_SCHEMA)
    sig = signatures(ev)
    keys = ev.select(SIGNATURE)
    assert_frame_equal(sig.table[sig.row], keys)
    assert sig.table.height == keys.unique().height
    assert_frame_equal(sig.table, keys.unique(maintain_order=True))
    import tracelens.core.signatures as mod

    real = mod.combo_hash

    def colliding(frame: pl.DataFrame, seed: int) -> pl.Series:
        return pl.Series("h", [1] * frame.height, dtype=pl.UInt64) if seed == 0 \
            else real(frame, seed)

    real_packed = mod.packed_key
    mod.combo_hash = colliding  # type: ignore[assignment]
    mod.packed_key = lambda keys: None  # type: ignore[assignment]  # the hashed path
    try:
        table, row = distinct_rows(keys)
    finally:
        mod.combo_hash = real  # type: ignore[assignment]
        mod.packed_key = real_packed  # type: ignore[assignment]
    assert_frame_equal(table, sig.table)
    assert row.cast(pl.UInt32).equals(sig.row)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 300), st.integers(0, 2**32 - 1))
def test_packed_keys_group_as_the_values(n: int, seed: int) -> None:
    """The packed path (one exact int64 per row) gives the distinct rows and indexes of the
    values themselves: nulls, negative and wide integers, constant, all-null, categorical and
    enum columns; a column it cannot pack (text, floats, a range past 2**62) leaves it to the
    hashes, with the same answer."""
    rng = np.random.default_rng(seed)
    big = int(rng.choice([3, 2**20, 2**40, 2**62]))
    keys = pl.DataFrame({
        "cat": pl.Series(rng.choice(["k1", "k2", "k3"], n)).cast(pl.Categorical),
        "enum": pl.Series(rng.choice(["kernel", "memcpy"], n)).cast(
            pl.Enum(["kernel", "memcpy", "memset"])),
        "i32": pl.Series(rng.integers(-3, 3, n).astype(np.int32)),
        "wide": pl.Series(rng.integers(-big, big, n) // max(1, big // 4)).replace(0, None),
        "const": pl.Series([7] * n, dtype=pl.Int64),
        "none": pl.Series([None] * n, dtype=pl.Int64),
        "op": pl.Series(rng.choice(["dot.1", "fusion.2", ""], n)).replace("", None)
        .cast(pl.Categorical)})
    want = keys.unique(maintain_order=True)
    for frame in (keys, keys.with_columns(pl.col("op").cast(pl.String)),
                  keys.with_columns(pl.col("i32").cast(pl.Float64))):
        table, row = distinct_rows(frame)
        assert_frame_equal(table, frame.unique(maintain_order=True))
        assert_frame_equal(table[row], frame)
        assert table.height == want.height
    assert packed_key(keys) is not None
    assert packed_key(keys.with_columns(pl.col("op").cast(pl.String))) is None
    assert packed_key(keys.with_columns(pl.col("i32").cast(pl.Float64))) is None
    wide = pl.DataFrame({"a": [0, 2**40], "b": [0, 2**30]})
    assert packed_key(wide) is None  # 2**40 * 2**30 values: past 2**62
    edge = pl.DataFrame({"a": pl.Series([-2**63, None, -2**63, 2**63 - 1], dtype=pl.Int64)})
    assert packed_key(edge) is None  # the full int64 range
    low = edge.head(3)  # the smallest int64 and null: two digits
    assert distinct_rows(low)[1].to_list() == [0, 1, 0] and packed_key(low) is not None
