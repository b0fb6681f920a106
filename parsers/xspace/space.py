"""The XSpace protobuf messages of one file: read (gunzipped, size and format checked) and
parsed, with one clear error for each way it fails."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from google.protobuf.message import DecodeError

from parsers.rawfile import is_gzip, read_maybe_gzip
from parsers.xplane_schema import xspace_class
from tracelens.core.errors import TraceInputError

FORMAT = "xspace"
MAX_PROTO_BYTES = 2 * 1024**3 - 1  # protobuf refuses messages of 2 GiB and more


def load_xspace(path: Path) -> Any:
    """Read, un-gzip and decode one XSpace file, with one clear error for each way it fails."""
    return parse(read_raw(path), path)


TOO_LARGE = "XSpace files of 2 GiB and more cannot be decoded by protobuf"


def read_raw(path: Path) -> bytes:
    """The serialized XSpace of one file (gunzipped), after the checks that need no decoding:
    a plain file's size and first bytes are checked before it is read (a 3 GiB sparse file
    is refused at once, not after reading it), a gzip's as it inflates and once inflated."""
    if not is_gzip(path):
        try:
            with open(path, "rb") as fh:
                _check_head(path, fh.read(64))
        except OSError as exc:
            raise TraceInputError(path, f"cannot read: {exc.strerror or exc}") from None
    raw = read_maybe_gzip(path, limit=(MAX_PROTO_BYTES, TOO_LARGE))
    _check_head(path, raw[:64])
    return raw


def _check_head(path: Path, head: bytes) -> None:
    """Refuse a file whose first bytes cannot start an XSpace."""
    if not head:
        return  # empty: read_maybe_gzip says so
    if head.lstrip()[:1] in (b"{", b"["):
        raise TraceInputError(path, "this is JSON, not an XSpace protobuf")
    if head[:1] != b"\x0a":  # XSpace field 1 (planes), length-delimited
        raise TraceInputError(path, "not an XSpace protobuf (unexpected first byte "
                              f"0x{head[0]:02x})")


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
