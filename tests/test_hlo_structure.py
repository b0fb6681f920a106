"""Classification by HLO structure for fusions whose name says nothing (issue 12 item 7, HLO
part): a generic ``fusion_5.kd`` whose fused computation reduces is a reduction, whatever its
fusion kind or name. Tested on the real MI300X attention trace's own HLO: its reduce, loop and
transpose fusions are renamed to generic names (instruction, op and kernel), as XLA names
them when it does not know better, and must still land in the category of their body."""

from __future__ import annotations

import polars as pl
import pytest

import tracelens
from tests.conftest import real_trace
from tracelens.classify import classify
from tracelens.cost.events import op_cost_table, with_hlo_kind
from parsers.hlo.schema import hlo_proto_class


def _rename(blob: bytes, old: str, new: str) -> bytes:
    proto = hlo_proto_class()()
    proto.ParseFromString(blob)
    for comp in proto.hlo_module.computations:
        for inst in comp.instructions:
            if inst.name == old:
                inst.name = new
    return proto.SerializeToString()


@pytest.fixture(scope="module")
def attention_trace() -> tracelens.Trace:
    return tracelens.load(real_trace("mi300x_jax08_attention.xplane.pb"))


@pytest.mark.parametrize("program_id,op,category,subcategory,rule", [
    (49, "input_reduce_fusion", "reduction", None, "reduction.hlo_structure"),
    (47, "loop_convert_fusion", "elementwise", None, "elementwise.hlo_structure"),
    (30, "wrapped_transpose", "elementwise", "data-movement", "elementwise.hlo_data_movement"),
])
def test_generic_fusion_name_is_classified_by_its_body(
        attention_trace: tracelens.Trace, program_id: int, op: str, category: str,
        subcategory: str | None, rule: str) -> None:
    t = attention_trace
    mods = t.modules.with_columns(pl.when(pl.col("program_id") == program_id).then(
        pl.col("hlo_proto").map_elements(lambda b: _rename(b, op, "fusion.5"),
                                         return_dtype=pl.Binary))
        .otherwise(pl.col("hlo_proto")).alias("hlo_proto"))
    target = (pl.col("program_id") == program_id) & (pl.col("op") == op)
    assert t.events.filter(target).height > 0
    events = t.events.with_columns(
        op=pl.when(target).then(pl.lit("fusion.5")).otherwise(pl.col("op")),
        name=pl.when(target).then(pl.lit("fusion_5.kd")).otherwise(pl.col("name")))
    table, problems = op_cost_table(events, mods)
    assert problems == []
    out = classify(with_hlo_kind(events, table)).filter(pl.col("name") == "fusion_5.kd")
    assert out.height == t.events.filter(target).height
    assert set(out["category"].cast(pl.String)) == {category}
    assert set(out["rule"]) == {rule}
    assert set(out["subcategory"].to_list()) == {subcategory}


@pytest.mark.parametrize("name", ["mi300x_jax08_attention.xplane.pb",
                                  "mi300x_jax08_conv_8gpu.xplane.pb",
                                  "mi300x_jax08_gemm.xplane.pb",
                                  "cpu_4dev_dp_allreduce.xplane.pb"])
def test_no_fusion_left_in_other_on_real_traces(name: str) -> None:
    """Every kernel whose op's HLO is known gets a category from it or its name: nothing in
    ``other`` (on the CPU trace the loss ``ynn_fusion`` was, until its body decided)."""
    ev = tracelens.load(real_trace(name)).events
    assert ev.filter(pl.col("category") == "other").height == 0
