"""Protobuf wire-format encoding of single values (tag, varint, length-delimited field).

Shared by the XSpace writer (``tracelens_dev.writers.xspace_encode``) and the synthetic HLO
builder (``tracelens_dev.synth.hlo``); the readers decode with protobuf or the C extension and
never need it. Facts (protobuf encoding spec): tag = field_number << 3 | wire type; a varint
carries 7 bits per byte, low first, high bit = more; negative ints are their 64-bit
two's complement; a length-delimited field is tag, varint length, payload.
"""

from __future__ import annotations

VARINT, LEN = 0, 2
U64_MASK = (1 << 64) - 1


def varint(n: int) -> bytes:
    """One varint (negative ints as int64 two's complement)."""
    n &= U64_MASK
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def tag(number: int, wire: int) -> bytes:
    return varint(number << 3 | wire)


def field_bytes(number: int, payload: bytes) -> bytes:
    """A length-delimited field: tag, length, payload."""
    return tag(number, LEN) + varint(len(payload)) + payload


def field_varint(number: int, value: int) -> bytes:
    return tag(number, VARINT) + varint(value)
