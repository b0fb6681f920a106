"""The loader's per-signature classification and costs (tracelens.signatures) equal the
per-event passes they replace, on the bundled samples, real traces and random frames."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

import tracelens
from tests.conftest import SAMPLES, SHARED
from tracelens.classify import classify
from tracelens.cost.events import annotate_events, hlo_kinds, op_cost_table, with_hlo_kind
from tracelens.model import EVENT_SCHEMA, conform
from tracelens.signatures import SIGNATURE, distinct_rows, signatures

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
    import tracelens.signatures as mod

    real = mod.combo_hash

    def colliding(frame: pl.DataFrame, seed: int) -> pl.Series:
        return pl.Series("h", [1] * frame.height, dtype=pl.UInt64) if seed == 0 \
            else real(frame, seed)

    mod.combo_hash = colliding  # type: ignore[assignment]
    try:
        table, row = distinct_rows(keys)
    finally:
        mod.combo_hash = real  # type: ignore[assignment]
    assert_frame_equal(table, sig.table)
    assert row.cast(pl.UInt32).equals(sig.row)
