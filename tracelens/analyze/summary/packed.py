"""A summary partial as it travels from a host's map to the reduce and waits there for the
other hosts: its larger frames as zstd-compressed Arrow IPC bytes with their
strings dictionary-encoded (a host's 16k collective rows: 3.7 MB pickled, 0.3 MB packed),
and each HLO program's bytes held once per process however many hosts send the same program.

:func:`pack_summary` runs on the host's worker; :func:`unpack_summary` in the reduce, one
host at a time (:func:`tracelens.analyze.summary.merge.merge_partials`), so the client never
holds every host's partial unpacked at once. Unpacking gives back the same frames, value for
value: only string columns travel as Categorical, and :func:`strings_back` (or
``strings=True``) turns them back into String.
"""

from __future__ import annotations

import hashlib
import io
import weakref
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable

import polars as pl

if TYPE_CHECKING:
    from tracelens.analyze.summary.types import SummaryPartial

FRAMES = ("kernels", "roofline", "roofline_mix", "gaps", "acts")
"""The SummaryPartial fields worth packing (the rest are a few rows each)."""


@dataclass(frozen=True)
class PackedFrame:
    """A frame as zstd-compressed IPC bytes; ``strings``: its columns that were String
    (Categorical in the bytes: each distinct string stored once)."""

    data: bytes
    strings: tuple[str, ...]

    def frame(self, strings: bool = True) -> pl.DataFrame:
        """The frame; ``strings`` False leaves the String columns Categorical (cheaper to
        hold and to concatenate; :func:`strings_back` restores them)."""
        df = pl.read_ipc(io.BytesIO(self.data))
        return strings_back(df, self.strings) if strings else df


def pack_frame(df: pl.DataFrame) -> PackedFrame:
    strs = tuple(c for c, t in df.schema.items() if t == pl.String)
    buf = io.BytesIO()
    df.with_columns(pl.col(strs).cast(pl.Categorical)).write_ipc(buf, compression="zstd")
    return PackedFrame(buf.getvalue(), strs)


def strings_back(df: pl.DataFrame, columns: tuple[str, ...] | list[str]) -> pl.DataFrame:
    """``df`` with ``columns`` (those it has that are Categorical) cast back to String."""
    cols = [c for c in columns if df.schema.get(c) == pl.Categorical]
    return df.with_columns(pl.col(cols).cast(pl.String)) if cols else df


class Blob:
    """Bytes that many hosts send alike (an HLO program): unpickled, each distinct content
    is one object in this process (keyed by its digest) as long as something holds it."""

    __slots__ = ("data", "digest", "__weakref__")
    _live: "weakref.WeakValueDictionary[str, Blob]" = weakref.WeakValueDictionary()

    def __init__(self, data: bytes, digest: str) -> None:
        self.data, self.digest = data, digest

    @classmethod
    def of(cls, data: bytes) -> "Blob":
        return _blob(hashlib.blake2b(data, digest_size=20).hexdigest(), data)

    def __reduce__(self) -> "tuple[Callable[[str, bytes], Blob], tuple[str, bytes]]":
        return _blob, (self.digest, self.data)


def _blob(digest: str, data: bytes) -> Blob:
    found = Blob._live.get(digest)
    if found is None:
        found = Blob._live[digest] = Blob(data, digest)
    return found


@dataclass(frozen=True)
class PackedPrograms:
    """An HLO programs table (``hlo_findings.program_protos``): its rows but the program
    bytes packed, and those bytes as shared :class:`Blob` objects (None: a null proto)."""

    rows: PackedFrame
    protos: tuple[Blob | None, ...]
    order: tuple[str, ...]

    def frame(self) -> pl.DataFrame:
        blobs = pl.Series("hlo_proto", [None if b is None else b.data for b in self.protos],
                          dtype=pl.Binary)
        return self.rows.frame().with_columns(blobs).select(self.order)


def pack_programs(df: pl.DataFrame) -> PackedPrograms:
    protos = tuple(None if b is None else Blob.of(b) for b in df["hlo_proto"].to_list())
    return PackedPrograms(pack_frame(df.drop("hlo_proto")), protos, tuple(df.columns))


def pack_summary(p: "SummaryPartial") -> "SummaryPartial":
    """``p`` to send and hold: its larger frames packed (see the module doc)."""
    hlo = p.hlo
    if hlo is not None and "hlo_proto" in hlo.programs.columns:
        hlo = replace(hlo, programs=pack_programs(hlo.programs))
    return replace(p, hlo=hlo, **{f: pack_frame(getattr(p, f)) for f in FRAMES})


def is_packed(p: "SummaryPartial") -> bool:
    return isinstance(p.acts, PackedFrame)


def unpack_summary(p: "SummaryPartial", strings: bool = True) -> "SummaryPartial":
    """``p`` as :func:`pack_summary` found it (a partial not packed is returned as it is);
    ``strings`` False leaves the activity rows' strings Categorical."""
    if not is_packed(p):
        return p
    hlo = p.hlo
    if hlo is not None and isinstance(hlo.programs, PackedPrograms):
        hlo = replace(hlo, programs=hlo.programs.frame())
    frames = {f: getattr(p, f).frame(strings or f != "acts") for f in FRAMES}
    return replace(p, hlo=hlo, **frames)
