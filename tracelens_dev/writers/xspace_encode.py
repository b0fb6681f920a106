"""Bulk protobuf encoding of XSpace event lines, with numpy instead of one message per event.

An ``XLine``'s events are a repeated length-delimited field, so a line's bytes are its header
fields followed by ``0x22 <len> <XEvent bytes>`` per event. The XEvent bytes are built column by
column: every field becomes a (rows × width) byte matrix of its varint encoding plus a length per
row (0 when the field is absent in that row); stacking the matrices side by side and keeping the
bytes inside each row's lengths yields all events, in order, in one ``tobytes``. The output is
ordinary protobuf wire format that any parser reads (tests decode it with the protobuf runtime).

Wire facts used (protobuf encoding spec): tag = field_number << 3 | wire_type; varint = 7 bits
per byte, low group first, high bit set on all but the last byte; int64 negatives are encoded as
their 64-bit two's complement (10 bytes); length-delimited = varint length + payload.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracelens_dev.wire import LEN, VARINT, field_bytes, field_varint, tag, varint  # noqa: F401 (re-exported)


def varint_matrix(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Varint bytes of every value: a (n × width) uint8 matrix and each row's length."""
    v = np.asarray(values).astype(np.int64).view(np.uint64)
    lens = np.ones(len(v), np.int64)
    for k in range(1, 10):
        lens += v >= (np.uint64(1) << np.uint64(7 * k))
    width = int(lens.max()) if len(v) else 1
    mat = np.empty((len(v), width), np.uint8)
    for k in range(width):
        low = ((v >> np.uint64(7 * k)) & np.uint64(0x7F)).astype(np.uint8)
        mat[:, k] = low | ((lens > k + 1).astype(np.uint8) << 7)
    return mat, lens


@dataclass
class Column:
    """One event stat column: XStat ``metadata_id``, value field number, values, presence."""

    metadata_id: int
    value_field: int  # 3 uint64_value, 4 int64_value, 7 ref_value
    values: np.ndarray  # int64 (uint64 values above 2**63 as their two's complement)
    present: np.ndarray | None = None  # bool; None = every row


class _Rows:
    """Byte pieces of n rows, concatenated per row in the order they are added."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.mats: list[np.ndarray] = []
        self.lens: list[np.ndarray] = []

    def const(self, data: bytes, present: np.ndarray | None = None) -> np.ndarray:
        mat = np.broadcast_to(np.frombuffer(data, np.uint8), (self.n, len(data)))
        lens = np.full(self.n, len(data), np.int64)
        return self._add(mat, lens, present)

    def varint(self, values: np.ndarray, present: np.ndarray | None = None) -> np.ndarray:
        mat, lens = varint_matrix(values)
        return self._add(mat, lens, present)

    def _add(self, mat: np.ndarray, lens: np.ndarray, present: np.ndarray | None) -> np.ndarray:
        if present is not None:
            lens = np.where(present, lens, 0)
        self.mats.append(mat)
        self.lens.append(lens)
        return lens

    def total(self) -> np.ndarray:
        return np.sum(self.lens, axis=0) if self.lens else np.zeros(self.n, np.int64)

    def tobytes(self, prefix: "_Rows | None" = None) -> bytes:
        parts = ([*prefix.mats, *self.mats], [*prefix.lens, *self.lens]) if prefix else \
            (self.mats, self.lens)
        mats, lens = parts
        if not self.n:
            return b""
        data = np.hstack(mats)
        keep = np.hstack([np.arange(m.shape[1])[None, :] < ln[:, None]
                          for m, ln in zip(mats, lens)])
        return data[keep].tobytes()


def encode_events(metadata_id: np.ndarray, offset_ps: np.ndarray, duration_ps: np.ndarray,
                  stats: list[Column]) -> bytes:
    """The ``events`` entries (field 4 of XLine) of n events, ready to append to a line."""
    n = len(metadata_id)
    body = _Rows(n)
    body.const(tag(1, VARINT))
    body.varint(metadata_id)
    body.const(tag(2, VARINT))
    body.varint(offset_ps)
    body.const(tag(3, VARINT))
    body.varint(duration_ps)
    for col in stats:
        present = col.present
        md = varint(col.metadata_id)
        vmat, vlens = varint_matrix(col.values)
        stat_len = 1 + len(md) + 1 + vlens
        body.const(tag(4, LEN), present)
        body.varint(stat_len, present)
        body.const(tag(1, VARINT) + md, present)
        body.const(tag(col.value_field, VARINT), present)
        body._add(vmat, vlens, present)
    head = _Rows(n)
    head.const(tag(4, LEN))
    head.varint(body.total())
    return body.tobytes(prefix=head)


def line_bytes(line_id: int, name: str, timestamp_ns: int, events: bytes) -> bytes:
    """A whole XLine: id, name, timestamp_ns, then the pre-encoded events."""
    return (field_varint(1, line_id) + field_bytes(2, name.encode())
            + field_varint(3, timestamp_ns) + events)
