"""Every collective type JAX's shard_map lowers to, on a real XLA:CPU trace
(``sample_traces/hlo/comm_types.xplane.pb``, made by ``sample_traces/hlo/make_comm.py``).

JAX names the ops after its primitives (``ppermute.3``, ``psum_invariant.7``), so only the HLO
opcode says what they are. Before the HLO-opcode rule ran ahead of the kernel-name rules,
``ppermute.3`` matched the name rule for PyTorch ``permute`` kernels and its time counted as
elementwise compute instead of communication.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from tracelens.analyze.compute.hlo_findings import lens_trace
from tracelens.classify import explain
from tracelens.loading.loader import load

TRACE = Path(__file__).resolve().parents[1] / "sample_traces" / "hlo" / "comm_types.xplane.pb"


def test_each_collective_gets_the_type_of_its_hlo_opcode():
    trace = load([TRACE])
    # the HLO lens reads opcodes and shapes from the embedded HloProto: an independent path
    lens = {c.name: c for p in lens_trace(trace).programs for c in p.collectives}
    assert sorted(c.opcode for c in lens.values()) == [
        "all-gather", "all-reduce", "all-to-all", "collective-permute", "reduce-scatter"]
    ev = trace.events.filter(pl.col("op").is_in(list(lens)))
    got = ev.group_by("op").agg(pl.col("category").cast(pl.String).unique(),
                                pl.col("subcategory").unique(), pl.col("msg_bytes").unique(),
                                pl.len())
    for row in got.iter_rows(named=True):
        c = lens[row["op"]]
        assert row["category"] == ["collective"], row
        assert row["subcategory"] == [c.opcode], row
        assert row["msg_bytes"] == [c.bytes], row
        assert row["len"] == 8 * 3  # every device, every step
    assert got.height == len(lens)


def test_no_collective_time_is_left_in_compute():
    trace = load([TRACE])
    ops = {c.name for p in lens_trace(trace).programs for c in p.collectives}
    compute = trace.events.filter(pl.col("category") != "collective")
    assert not set(compute["op"].drop_nulls()) & ops


def test_ppermute_explained_by_its_opcode_not_its_name():
    m = explain("ppermute.3", op="ppermute.3", hlo="collective:collective-permute")
    assert (m.category, m.subcategory, m.rule_id) == (
        "collective", "collective-permute", "collective.hlo_opcode")
    # without the HLO the name alone still reads as a PyTorch permute kernel
    assert explain("ppermute.3").category == "elementwise"
