"""The roofline dtype an XLA element type computes in (the element types themselves, their
numbers and widths, are the HLO model's: :mod:`tracelens.core.hlo_model`)."""

from __future__ import annotations

# HLO element type -> the dtype key of the hardware peak table (tracelens.core.hardware).
_ROOFLINE_DTYPE = {
    "f64": "fp64", "c128": "fp64", "f32": "fp32", "c64": "fp32", "f16": "fp16", "bf16": "bf16",
    "f4e2m1fn": "fp4", "f6e3m2fn": "fp6", "f6e2m3fn": "fp6",
    "s8": "int8", "u8": "int8", "s4": "int8", "u4": "int8",
}


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
