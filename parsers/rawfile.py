"""Reading an input file's bytes, gunzipped when it is gzip, with one clear error per failure.

Every reader of a maybe-gzipped input goes through here, so that every one is bounded by the
inflation budget (:mod:`parsers.budget`): the gzip stream is inflated in chunks and refused
as soon as it passes the budget, so that a decompression bomb costs at most the budget in
memory (or, for :func:`inflate_to`, on disk) and a fraction of a second per 100 MB."""

from __future__ import annotations

import gzip
import io
import zlib
from pathlib import Path
from typing import BinaryIO

from parsers.budget import check_plain, gzip_budget, human
from tracelens.errors import TraceInputError

GZIP_MAGIC = b"\x1f\x8b"
CHUNK = 4 << 20  # inflated bytes per step: the budget is checked after each


def is_gzip(path: Path) -> bool:
    """Whether the file starts with the gzip magic (``TraceInputError`` when unreadable)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(2) == GZIP_MAGIC
    except OSError as exc:
        raise TraceInputError(path, f"cannot read: {exc.strerror or exc}") from None


def read_maybe_gzip(path: Path, text: bool = False) -> bytes:
    """The file's bytes, decompressed when they start with the gzip magic. Raises
    :class:`TraceInputError` for an empty, unreadable or damaged file, and for one past the
    inflation budget (a plain file is refused before it is read). ``text``: the file is
    JSON, which holds no NUL byte: the first one ends the read (a sparse or zero-filled
    file is refused after one chunk, not after gigabytes of zeros)."""
    out = _JsonText(path) if text else io.BytesIO()
    if is_gzip(path):
        inflate_to(path, out)
        if not out.tell():
            raise TraceInputError(path, "empty file (after gunzip)")
        return out.getvalue()  # the buffer itself, not a copy (BytesIO hands it over)
    try:
        check_plain(path, path.stat().st_size)
        if text:
            with open(path, "rb") as fh:
                # the first chunk on its own, so that a zero-filled or sparse file is refused
                # after it; then the whole file in one buffer (no copy through a BytesIO)
                out.write(fh.read(CHUNK))
                fh.seek(0)
                raw = fh.read()
            out.check(raw)
        else:
            raw = path.read_bytes()
    except OSError as exc:
        raise TraceInputError(path, f"cannot read: {exc.strerror or exc}") from None
    if not raw:
        raise TraceInputError(path, "empty file")
    return raw


class _JsonText(io.BytesIO):
    """The bytes of a JSON document, refused at the first NUL byte written (JSON has none:
    a control character must be escaped even inside a string)."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path

    def write(self, chunk: bytes) -> int:  # type: ignore[override]
        self.check(chunk, self.tell())
        return super().write(chunk)

    def check(self, data: bytes, offset: int = 0) -> None:
        """Refuse ``data``, found at ``offset`` of the file, if it holds a NUL byte."""
        at = data.find(0)
        if at >= 0:
            raise TraceInputError(self.path, f"a NUL byte at offset {offset + at:,}: "
                                  "not JSON text (a zero-filled or sparse file?)")


def inflate_to(path: Path, dst: BinaryIO) -> int:
    """Gunzip ``path`` into ``dst`` in chunks, refusing it once it passes the inflation
    budget; the number of bytes written. An ``OSError`` writing ``dst`` (a full disk) is
    the caller's to report: it is not damaged gzip data."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise TraceInputError(path, f"cannot read: {exc.strerror or exc}") from None
    budget = gzip_budget(size)
    total = 0
    with _open(path) as fh, gzip.GzipFile(fileobj=fh, mode="rb") as src:
        while True:
            try:
                chunk = src.read(CHUNK)
            except (EOFError, OSError, zlib.error) as exc:
                raise TraceInputError(path, f"corrupt or truncated gzip data ({exc})") from None
            if not chunk:
                return total
            total += len(chunk)
            if not budget.allows(total, fh.tell()):  # tell: read, at most 128 KiB ahead
                raise budget.refuse(path, f"gunzips to at least {human(total)} from"
                                    f" its first {human(fh.tell())} of {human(size)}",
                                    "a decompression bomb, or a trace too large for this "
                                    "machine")
            dst.write(chunk)


def _open(path: Path) -> BinaryIO:
    try:
        return open(path, "rb")
    except OSError as exc:
        raise TraceInputError(path, f"cannot read: {exc.strerror or exc}") from None
