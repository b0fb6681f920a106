"""Reading an input file's bytes, gunzipped when it is gzip, with one clear error per failure."""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

from tracelens.errors import TraceInputError


def read_maybe_gzip(path: Path) -> bytes:
    """The file's bytes, decompressed when they start with the gzip magic. Raises
    :class:`TraceInputError` for an empty, unreadable or damaged file."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise TraceInputError(path, f"cannot read: {exc.strerror or exc}") from None
    if not raw:
        raise TraceInputError(path, "empty file")
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (EOFError, OSError, zlib.error) as exc:
            raise TraceInputError(path, f"corrupt or truncated gzip data ({exc})") from None
        if not raw:
            raise TraceInputError(path, "empty file (after gunzip)")
    return raw
