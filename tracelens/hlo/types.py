"""XLA element types: names, byte widths, and the roofline dtype they compute in.

``PrimitiveType`` numbers and widths from shared/reference/hlo.md §4 (``xla/xla_data.proto``,
``primitive_util::ByteWidth``). Sub-byte types are stored one per byte unless the layout sets
``element_size_in_bits`` (packed), as ``ShapeUtil::ByteSizeOfElements`` does.
"""

from __future__ import annotations

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

# HLO element type -> the dtype key of the hardware peak table (tracelens.hardware).
_ROOFLINE_DTYPE = {
    "f64": "fp64", "c128": "fp64", "f32": "fp32", "c64": "fp32", "f16": "fp16", "bf16": "bf16",
    "f4e2m1fn": "fp4", "f6e3m2fn": "fp6", "f6e2m3fn": "fp6",
    "s8": "int8", "u8": "int8", "s4": "int8", "u4": "int8",
}


def type_name(number: int) -> str | None:
    """HLO text name of a ``PrimitiveType`` number, None when unknown."""
    entry = PRIMITIVE_TYPES.get(number)
    return entry[0] if entry else None


def roofline_dtype(element_type: str | None) -> str | None:
    """The peak-table dtype an array of this element type computes in (fp8 for every f8
    flavour), None for types without a compute peak (pred, s32, tuple, ...)."""
    if element_type is None:
        return None
    if element_type.startswith("f8"):
        return "fp8"
    return _ROOFLINE_DTYPE.get(element_type)


# Order used to pick the dtype of a mixed-precision op: the widest input bounds the peak.
DTYPE_WIDTH_ORDER = ("fp64", "fp32", "tf32", "fp16", "bf16", "int8", "fp8", "fp6", "fp4")


def widest(dtypes: list[str | None]) -> str | None:
    known = [d for d in dtypes if d in DTYPE_WIDTH_ORDER]
    return min(known, key=DTYPE_WIDTH_ORDER.index) if known else None
