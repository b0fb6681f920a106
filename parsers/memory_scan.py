"""Whether a trace file mentions a name at all, found without holding or decoding the file: a
pass over its (inflated) bytes in chunks. The memory readers use it to skip the files that
record no allocator event (most of them) at the cost of a byte search."""

from __future__ import annotations

import gzip
import mmap
import os
import zlib
from pathlib import Path

from parsers.rawfile import is_gzip
from tracelens.core.errors import TraceInputError

CHUNK = 8 << 20


def mentions(path: Path, needles: tuple[bytes, ...]) -> bool:
    """True when any of ``needles`` occurs in the file's bytes (gunzipped when gzip): a plain
    file is searched in place (memory-mapped, no copy), a gzip as it inflates, in chunks. A
    file that cannot be read or inflated answers True: its reader then says what is wrong."""
    try:
        if not is_gzip(path):
            with open(path, "rb") as fh:
                if os.fstat(fh.fileno()).st_size == 0:
                    return False
                with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                    return any(mm.find(n) >= 0 for n in needles)
        keep = max(len(n) for n in needles) - 1
        with gzip.open(path, "rb") as gz:
            tail = b""
            while chunk := gz.read(CHUNK):
                window = tail + chunk
                if any(n in window for n in needles):
                    return True
                tail = window[-keep:] if keep else b""
    except (OSError, EOFError, ValueError, zlib.error, TraceInputError):
        return True
    return False
