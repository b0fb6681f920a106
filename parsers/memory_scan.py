"""Whether a trace file mentions a name at all, found without holding or decoding the file: a
pass over its (inflated) bytes in chunks. The memory readers use it to skip the files that
record no allocator event (most of them) at the cost of a byte search."""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

from parsers.rawfile import is_gzip
from tracelens.errors import TraceInputError

CHUNK = 8 << 20


def mentions(path: Path, needles: tuple[bytes, ...]) -> bool:
    """True when any of ``needles`` occurs in the file's bytes (gunzipped when gzip). A file
    that cannot be read or inflated answers True: its reader then says what is wrong."""
    keep = max(len(n) for n in needles) - 1
    try:
        opener = gzip.open if is_gzip(path) else open
        with opener(path, "rb") as fh:  # type: ignore[operator]
            tail = b""
            while chunk := fh.read(CHUNK):
                window = tail + chunk
                if any(n in window for n in needles):
                    return True
                tail = window[-keep:] if keep else b""
    except (OSError, EOFError, zlib.error, TraceInputError):
        return True
    return False
