"""A small, format-neutral model of an HLO module: what the cost model reads.

Both the ``HloProto`` decoder (:mod:`tracelens.hlo.proto`) and the HLO text parser
(:mod:`tracelens.hlo.text`) produce these objects, so the cost formulas have one input.
Operands and called computations are referenced by name (names are unique per module,
shared/reference/hlo.md §0.6).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from math import prod
from typing import Any

from tracelens.hlo.attrs import parse_attribute_dict
from tracelens.hlo.types import BYTE_WIDTH


@dataclass(frozen=True)
class Shape:
    """An array shape (``dtype`` an HLO element type name, ``dims``) or a tuple of shapes."""

    dtype: str
    dims: tuple[int, ...] = ()
    tuple_shapes: tuple["Shape", ...] = ()
    element_bits: int = 0  # layout element_size_in_bits; 0 = the type's natural width

    @property
    def is_tuple(self) -> bool:
        return self.dtype == "tuple"

    def leaves(self) -> list["Shape"]:
        if not self.is_tuple:
            return [self]
        return [leaf for s in self.tuple_shapes for leaf in s.leaves()]

    @property
    def elements(self) -> int:
        """Elements of an array (1 for a scalar); summed over the leaves of a tuple."""
        if self.is_tuple:
            return sum(s.elements for s in self.tuple_shapes)
        return prod(self.dims)

    @property
    def bytes(self) -> int:
        """Data bytes: elements × width (packed when ``element_bits`` is set), summed over tuple
        leaves; a tuple's own index table is not data and is left out (hlo.md §8)."""
        if self.is_tuple:
            return sum(s.bytes for s in self.tuple_shapes)
        if self.element_bits:
            return -(-prod(self.dims) * self.element_bits // 8)
        return prod(self.dims) * BYTE_WIDTH.get(self.dtype, 0)

    def __str__(self) -> str:
        if self.is_tuple:
            return "(" + ", ".join(str(s) for s in self.tuple_shapes) + ")"
        return f"{self.dtype}[{','.join(str(d) for d in self.dims)}]"


@dataclass(frozen=True)
class DotDims:
    lhs_contracting: tuple[int, ...] = ()
    rhs_contracting: tuple[int, ...] = ()
    lhs_batch: tuple[int, ...] = ()
    rhs_batch: tuple[int, ...] = ()


@dataclass(frozen=True)
class WindowDim:
    size: int = 1
    stride: int = 1
    padding_low: int = 0
    padding_high: int = 0
    window_dilation: int = 1
    base_dilation: int = 1


@dataclass(frozen=True)
class ConvDims:
    input_batch: int = 0
    input_feature: int = 0
    input_spatial: tuple[int, ...] = ()
    kernel_input_feature: int = 0
    kernel_output_feature: int = 0
    kernel_spatial: tuple[int, ...] = ()
    output_batch: int = 0
    output_feature: int = 0
    output_spatial: tuple[int, ...] = ()


@dataclass
class Instruction:
    name: str
    opcode: str
    shape: Shape
    operands: tuple[str, ...] = ()
    called: tuple[str, ...] = ()  # called computation names (fusion body, to_apply, ...)
    dimensions: tuple[int, ...] = ()
    dot: DotDims | None = None
    lhs_ragged_dims: tuple[int, ...] = ()  # ragged-dot: the lhs dimension the groups split
    window: tuple[WindowDim, ...] | None = None
    conv: ConvDims | None = None
    feature_group_count: int = 1
    batch_group_count: int = 1
    custom_call_target: str = ""
    backend_config_text: str = ""
    fusion_kind: str = ""
    replica_groups: list[list[int]] | None = None  # expanded; None = not given
    channel_id: int = 0
    use_global_device_ids: bool = False
    source_target_pairs: tuple[tuple[int, int], ...] = ()
    tuple_index: int = 0
    precision_algorithm: int = 0
    op_name: str = ""
    # Loop trip counts read these (tracelens.hlo.tripcount): a scalar constant's value (None for
    # arrays or a literal not decoded), a parameter's number, a compare's direction (EQ NE LT LE
    # GT GE) and its optional comparison type (SIGNED, UNSIGNED, FLOAT, TOTALORDER).
    literal: int | float | bool | None = None
    parameter_number: int = 0
    comparison_direction: str = ""
    comparison_type: str = ""

    @cached_property
    def backend_config(self) -> dict[str, Any]:
        """The JSON backend config (empty when absent or not JSON); hlo.md §6: proto3 JSON,
        int64 values as strings, keys drift across versions, so read known keys only."""
        text = self.backend_config_text.strip()
        if not text.startswith("{"):
            return {}
        try:
            value = json.loads(text)
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}

    @cached_property
    def ffi_attributes(self) -> dict[str, Any] | None:
        """The MLIR attribute dictionary of a typed-FFI custom call's ``backend_config``
        (``{attn_heads = 16 : i64, ...}``), None when the config is not one (JSON, empty)."""
        return parse_attribute_dict(self.backend_config_text)


@dataclass
class Computation:
    name: str
    instructions: dict[str, Instruction] = field(default_factory=dict)  # dependency order
    root: str = ""
    is_fusion: bool = False

    @property
    def root_instruction(self) -> Instruction | None:
        return self.instructions.get(self.root)


@dataclass
class Module:
    name: str
    program_id: int | None
    entry: str
    computations: dict[str, Computation] = field(default_factory=dict)
    replica_count: int | None = None
    partition_count: int | None = None

    @property
    def entry_computation(self) -> Computation:
        return self.computations[self.entry]

    def instruction(self, name: str) -> Instruction | None:
        """An instruction of the entry computation (the only ones kernels name, hlo.md §9.8)."""
        return self.entry_computation.instructions.get(name)

    def operand_shapes(self, inst: Instruction, comp: Computation | None = None) -> list[Shape]:
        comp = comp or self.entry_computation
        return [comp.instructions[o].shape for o in inst.operands if o in comp.instructions]
