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
    if head[:1] != b"\x0a" and not _field_tag(head):  # planes (field 1) come first, but a
        raise TraceInputError(path, "not an XSpace protobuf (unexpected first byte "  # field
                              f"0x{head[0]:02x})")  # of a newer schema may precede them


def _field_tag(head: bytes) -> bool:
    """Whether ``head`` starts with a protobuf field tag: a varint of at most 5 bytes whose
    field number is at least 1 and whose wire type is one protobuf still writes (0 varint,
    1 fixed64, 2 length-delimited, 5 fixed32)."""
    tag = shift = 0
    for b in head[:5]:
        tag |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return tag >> 3 >= 1 and tag & 7 in (0, 1, 2, 5)
    return False


def parse(raw: bytes, path: Path) -> Any:
    """``raw`` (a whole XSpace, or the skeleton of one) as protobuf messages."""
    space = xspace_class()()
    try:
        space.ParseFromString(raw)
    except DecodeError as exc:
        raise undecodable(path, raw, f"corrupt or truncated XSpace protobuf ({exc})") from None
    if not space.planes or not any(p.name for p in space.planes):
        raise undecodable(path, raw, "decodes as protobuf but holds no XSpace planes")
    return space


def undecodable(path: Path, raw: bytes, problem: str) -> TraceInputError:
    """The error of a file that did not decode: ``problem``, unless it did not even start as
    an XSpace does (planes first): then it is no XSpace (a text file that happens to begin
    with a byte that is a valid field tag), as :func:`_check_head` says of other first
    bytes. A file that starts otherwise but decodes (an unknown field of a newer schema
    first) is read."""
    if raw[:1] not in (b"", b"\x0a"):
        return TraceInputError(path, f"not an XSpace protobuf (unexpected first byte "
                               f"0x{raw[0]:02x})")
    return TraceInputError(path, problem)
