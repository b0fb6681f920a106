"""A small, format-neutral model of an HLO module: what the cost model and the HLO lens read.

The data model of XLA programs, as :mod:`tracelens.core.model` is that of traces: the ``HloProto``
decoder (:mod:`parsers.hlo.proto`) and the HLO text parser (:mod:`parsers.hlo.text`) produce
these objects, so the cost formulas have one input. Operands and called computations are
referenced by name (names are unique per module, shared/reference/hlo.md §0.6). XLA's element
types (``PrimitiveType`` numbers, names and widths) are here because a shape's bytes need them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from math import prod
from typing import Any

# ``PrimitiveType`` numbers and widths from shared/reference/hlo.md §4 (``xla/xla_data.proto``,
# ``primitive_util::ByteWidth``). Sub-byte types are stored one per byte unless the layout sets
# ``element_size_in_bits`` (packed), as ``ShapeUtil::ByteSizeOfElements`` does.
# number -> (HLO text name, bytes per element when not packed)
PRIMITIVE_TYPES: dict[int, tuple[str, int]] = {
    1: ("pred", 1), 2: ("s8", 1), 3: ("s16", 2), 4: ("s32", 4), 5: ("s64", 8),
    6: ("u8", 1), 7: ("u16", 2), 8: ("u32", 4), 9: ("u64", 8),
    10: ("f16", 2), 11: ("f32", 4), 12: ("f64", 8), 13: ("tuple", 0), 14: ("opaque", 0),
    15: ("c64", 8), 16: ("bf16", 2), 17: ("token", 0), 18: ("c128", 16),
    19: ("f8e5m2", 1), 20: ("f8e4m3fn", 1), 21: ("s4", 1), 22: ("u4", 1),
    23: ("f8e4m3b11fnuz", 1), 24: ("f8e5m2fnuz", 1), 25: ("f8e4m3fnuz", 1),
    26: ("s2", 1), 27: ("u2", 1), 28: ("f8e4m3", 1), 29: ("f8e3m4", 1),
    30: ("s1", 1), 31: ("u1", 1), 32: ("f4e2m1fn", 1), 33: ("f8e8m0fnu", 1), 34: ("buffer", 0),
    35: ("f6e3m2fn", 1), 36: ("f6e2m3fn", 1),
}
BYTE_WIDTH: dict[str, int] = {name: width for name, width in PRIMITIVE_TYPES.values()}

Schedule = dict[str, list[str]]  # computation name -> instruction names in run order


def type_name(number: int) -> str | None:
    """HLO text name of a ``PrimitiveType`` number, None when unknown."""
    entry = PRIMITIVE_TYPES.get(number)
    return entry[0] if entry else None


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
    # The MLIR attribute dictionary of a typed-FFI custom call's ``backend_config``
    # (``{attn_heads = 16 : i64, ...}``), as the decoders read it for custom calls
    # (:mod:`parsers.hlo.attrs`); None when the config is not one (JSON, empty) or the
    # instruction is no custom call.
    ffi_attributes: dict[str, Any] | None = None
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
