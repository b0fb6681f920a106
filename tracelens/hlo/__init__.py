"""XLA HLO for the cost model: a runtime-descriptor decoder of ``xla.HloProto`` (``schema``,
``proto``), an HLO text-dump parser (``text``), one small IR for both (``ir``), replica-group
expansion (``replica_groups``), the index by (host, program id, instruction name) (``index``)
and the per-instruction FLOP/byte formulas (``opcost``). See docs/cost-model.md."""

from tracelens.hlo.index import HloIndex
from tracelens.hlo.opcost import OpCost, instruction_cost
from tracelens.hlo.proto import module_from_proto
from tracelens.hlo.text import load_text_dump, parse_module

__all__ = ["HloIndex", "OpCost", "instruction_cost", "module_from_proto", "load_text_dump",
           "parse_module"]
