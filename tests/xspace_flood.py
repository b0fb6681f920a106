"""Builders of hostile XSpace files for the C decoder's hardening tests (issue 14): event
metadata ids chosen to collide in the unkeyed hash the decoder used to have, and the same file
with ordinary ids."""

from __future__ import annotations

import numpy as np

from tracelens_dev.writers.xspace_encode import encode_events, line_bytes
from parsers.xplane_schema import xspace_class
from tracelens_dev.wire import field_bytes, field_varint

_M1, _M2 = 0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53
_MASK = (1 << 64) - 1


def unmix64(h: int) -> int:
    """The x with ``mix64(x) == h`` for the finalizer the decoder hashed ids with (each step
    is a bijection: ``x ^= x >> 33`` is its own inverse, odd multipliers invert mod 2**64)."""
    for m in (_M2, _M1):
        h ^= h >> 33
        h = (h * pow(m, -1, 1 << 64)) & _MASK
    return h ^ (h >> 33)


def colliding_ids(n: int) -> np.ndarray:
    """n distinct ids whose old hashes share their low 32 bits: every one lands on the same
    slot of any table of up to 2**32 slots, so linear probing went quadratic."""
    return np.array([unmix64(i << 32) for i in range(1, n + 1)], np.uint64).view(np.int64)


def ordinary_ids(n: int, seed: int = 0) -> np.ndarray:
    """n distinct ids of the same varint size (random 64-bit values)."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(1 << 62, 1 << 63, size=2 * n, dtype=np.uint64)
    ids = np.unique(ids)[:n] | np.uint64(1 << 63)
    return rng.permutation(ids).view(np.int64)


def xspace_with_ids(ids: np.ndarray) -> bytes:
    """One GPU plane whose one stream holds an event per id (all ids dangling: the plane
    defines no event metadata), 10 ns apart."""
    n = len(ids)
    events = encode_events(ids, np.arange(n, dtype=np.int64) * 10_000,
                           np.full(n, 5_000, np.int64), [])
    space = xspace_class()()
    plane = space.planes.add(id=0, name="/device:GPU:0")
    head = plane.SerializeToString()
    line = line_bytes(1, "Stream #1", 0, events)
    return field_bytes(1, head + field_bytes(3, line)) + field_bytes(4, b"host0")


def empty_events(n: int) -> bytes:
    """One GPU stream of n empty events (2 bytes each on the wire)."""
    space = xspace_class()()
    plane = space.planes.add(id=0, name="/device:GPU:0")
    line = line_bytes(1, "Stream #1", 0, b"\x22\x00" * n)
    return field_bytes(1, plane.SerializeToString() + field_bytes(3, line))


def one_event_lines(n: int, md_id: int, stat_id: int) -> bytes:
    """One GPU plane of n stream lines of one event each, naming event metadata ``md_id``
    and carrying one stat of metadata ``stat_id`` whose ref value is ``stat_id`` (about 20
    bytes a line): with ids near the decoder's index bounds, every line held its index."""
    stat = field_varint(1, stat_id) + field_varint(7, stat_id)
    event = field_varint(1, md_id) + field_varint(2, 1) + field_varint(3, 1) \
        + field_bytes(4, stat)
    space = xspace_class()()
    plane = space.planes.add(id=0, name="/device:GPU:0")
    lines = b"".join(field_bytes(3, line_bytes(k, f"Stream #{k}", 0, field_bytes(4, event)))
                     for k in range(n))
    return field_bytes(1, plane.SerializeToString() + lines)
