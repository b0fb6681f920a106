"""Reading an input file's bytes, gunzipped when it is gzip, with one clear error per failure.

Every reader of a maybe-gzipped input goes through here, so that every one is bounded by the
inflation budget (:mod:`parsers.budget`): the gzip stream is inflated in chunks and refused
as soon as it passes the budget, so that a decompression bomb costs at most the budget in
memory (or, for :func:`inflate_to`, on disk) and a fraction of a second per 100 MB."""

from __future__ import annotations

import gzip
import io
import os
import re
import zlib
from pathlib import Path
from typing import BinaryIO

from parsers.budget import check_plain, gzip_budget, human
from tracelens.core.errors import TraceInputError
from tracelens.core.model import Notice

GZIP_MAGIC = b"\x1f\x8b"
CHUNK = 4 << 20  # inflated bytes per step: the budget is checked after each


def is_gzip(path: Path) -> bool:
    """Whether the file starts with the gzip magic (``TraceInputError`` when unreadable)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(2) == GZIP_MAGIC
    except OSError as exc:
        raise TraceInputError(path, f"cannot read: {exc.strerror or exc}") from None


def read_maybe_gzip(path: Path, text: bool | str = False,
                    limit: tuple[int, str] | None = None) -> bytes:
    """The file's bytes, decompressed when they start with the gzip magic. Raises
    :class:`TraceInputError` for an empty, unreadable or damaged file, and for one past the
    inflation budget (a plain file is refused before it is read). ``text``: the file is
    text (JSON; or the kind named, e.g. ``"CSV"``), which holds no NUL byte: the first
    one ends the read, and a plain file is looked at first (:func:`check_text`: its holes,
    head and tail), so that a sparse or zero-filled file is refused before any bulk read.
    ``limit``: (bytes, why) the format can hold at most, checked on the size of a plain
    file and as a gzip inflates."""
    kind = text if isinstance(text, str) else "JSON"
    out = _JsonText(path, kind) if text else io.BytesIO()
    if is_gzip(path):
        inflate_to(path, out, limit)
        if not out.tell():
            raise TraceInputError(path, "empty file (after gunzip)")
        data = out.getvalue()  # the buffer itself, not a copy (BytesIO hands it over)
        return without_bom(data) if text else data
    try:
        size = path.stat().st_size
        if limit is not None and size > limit[0]:
            raise TraceInputError(path, f"{human(size)}: {limit[1]}")
        check_plain(path, size)
        if text:
            check_text(path, size, kind)
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
    return without_bom(raw) if text else raw


BOM = b"\xef\xbb\xbf"


def without_bom(raw: bytes) -> bytes:
    """Text without its UTF-8 byte order mark (Windows editors and PowerShell write one
    before JSON; JSON parsers refuse it): a copy only when there is one."""
    return raw[len(BOM):] if raw.startswith(BOM) else raw


# a \uD800-\uDBFF escape not followed by a \uDC00-\uDFFF one, or a \uDC00-\uDFFF escape
# not preceded by a high one; each preceded by an even number of backslashes (a real escape)
_LONE = re.compile(rb"(?<!\\)((?:\\\\)*)(\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F])"
                   rb"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2})")


def lone_surrogates(raw: bytes) -> tuple[bytes, int]:
    """``raw`` with each lone UTF-16 surrogate escape (``\\ud800`` without its pair: what a
    name cut mid-character, or written from unpaired UTF-16, gives) replaced by ``\\ufffd``,
    and how many there were. JSON parsers refuse them (a string must be Unicode text); the
    caller says how many were replaced. Called only after a parse failed: it scans the text."""
    n = 0

    def swap(m: re.Match[bytes]) -> bytes:
        nonlocal n
        n += 1
        return m.group(1) + rb"\ufffd"
    return _LONE.sub(swap, raw), n


def lone_note(file: str, n: int) -> Notice:
    """The note of ``n`` lone surrogate escapes replaced (:func:`lone_surrogates`)."""
    return Notice.of("read.lone_surrogates", "{file}: {n} lone UTF-16 surrogate escape(s) "
                     "(\\ud800 without its pair, not Unicode text) in strings replaced by "
                     "U+FFFD", file=file, n=n)


EDGE = 1 << 20  # bytes looked at, at each end of a plain text file, before it is read


def check_text(path: Path, size: int, kind: str = "JSON") -> None:
    """Refuse a plain text file that is not text, from its layout and its two ends, before
    any bulk read: a hole (a region never written, read back as zeros: a sparse or
    preallocated file) or a NUL byte in its first or last MiB. Text holds no NUL byte, so
    neither can be part of a trace; a file that is text at both ends and between them
    zeros without holes is still refused at its first NUL as it is read."""
    with open(path, "rb") as fh:
        checker = _JsonText(path, kind)
        checker.check(fh.read(EDGE))
        hole = _first_hole(fh.fileno(), size)
        if hole is not None:
            raise TraceInputError(path, f"a hole (a region never written, read as zero "
                                  f"bytes) at offset {hole:,} of its {human(size)}: not "
                                  f"{kind} text (a sparse or preallocated file)")
        if size > EDGE:
            at = max(EDGE, size - EDGE)
            fh.seek(at)
            checker.check(fh.read(EDGE), at)


def _first_hole(fd: int, size: int) -> int | None:
    """The offset of the file's first hole before its end (None: none, or the file system
    cannot say); ``SEEK_HOLE`` answers from the file's layout, reading nothing."""
    seek_hole = getattr(os, "SEEK_HOLE", None)
    if seek_hole is None or not size:
        return None
    try:  # moves the file's offset: callers seek to where they read next
        at = os.lseek(fd, 0, seek_hole)
    except OSError:
        return None
    return at if at < size else None


class _JsonText(io.BytesIO):
    """The bytes of a JSON document (or other text: ``kind``), refused at the first NUL
    byte written (JSON has none: a control character must be escaped even inside a
    string; nor has a rocprofv3 CSV)."""

    def __init__(self, path: Path, kind: str = "JSON") -> None:
        super().__init__()
        self.path, self.kind = path, kind

    def write(self, chunk: bytes) -> int:  # type: ignore[override]
        self.check(chunk, self.tell())
        return super().write(chunk)

    def check(self, data: bytes, offset: int = 0) -> None:
        """Refuse ``data``, found at ``offset`` of the file, if it holds a NUL byte."""
        at = data.find(0)
        if at >= 0:
            raise TraceInputError(self.path, f"a NUL byte at offset {offset + at:,}: "
                                  f"not {self.kind} text (a zero-filled or sparse file?)")


def inflate_to(path: Path, dst: BinaryIO, limit: tuple[int, str] | None = None) -> int:
    """Gunzip ``path`` into ``dst`` in chunks, refusing it once it passes the inflation
    budget, or ``limit`` (bytes, why) when given; the number of bytes written. An
    ``OSError`` writing ``dst`` (a full disk) is the caller's to report: it is not damaged
    gzip data."""
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
            if limit is not None and total > limit[0]:
                raise TraceInputError(path, f"gunzips to more than {human(limit[0])}: "
                                      f"{limit[1]}")
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
