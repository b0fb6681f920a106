"""The XSpace protobuf messages of one file: read (gunzipped, size and format checked) and
parsed, with one clear error for each way it fails."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from google.protobuf.message import DecodeError

from parsers.rawfile import read_maybe_gzip
from parsers.xplane_schema import xspace_class
from tracelens.errors import TraceInputError

FORMAT = "xspace"
MAX_PROTO_BYTES = 2 * 1024**3 - 1  # protobuf refuses messages of 2 GiB and more


def load_xspace(path: Path) -> Any:
    """Read, un-gzip and decode one XSpace file, with one clear error for each way it fails."""
    return parse(read_raw(path), path)


def read_raw(path: Path) -> bytes:
    """The serialized XSpace of one file (gunzipped), after the checks that need no decoding."""
    raw = read_maybe_gzip(path)
    if len(raw) > MAX_PROTO_BYTES:
        raise TraceInputError(path, f"{len(raw) / 1024**3:.1f} GiB: XSpace files of 2 GiB "
                              "and more cannot be decoded by protobuf")
    head = raw[:64].lstrip()
    if head[:1] in (b"{", b"["):
        raise TraceInputError(path, "this is JSON, not an XSpace protobuf")
    if raw[:1] != b"\x0a":  # XSpace field 1 (planes), length-delimited
        raise TraceInputError(path, "not an XSpace protobuf (unexpected first byte "
                              f"0x{raw[0]:02x})")
    return raw


def parse(raw: bytes, path: Path) -> Any:
    """``raw`` (a whole XSpace, or the skeleton of one) as protobuf messages."""
    space = xspace_class()()
    try:
        space.ParseFromString(raw)
    except DecodeError as exc:
        raise TraceInputError(path, f"corrupt or truncated XSpace protobuf ({exc})") from None
    if not space.planes or not any(p.name for p in space.planes):
        raise TraceInputError(path, "decodes as protobuf but holds no XSpace planes")
    return space
