"""The one small interface both line sources implement (``python_lines.PythonLines`` over
protobuf messages, ``native.FastLines`` over the serialized bytes with the C decoder), so the
reader builds the same Trace from either."""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

import polars as pl

from parsers.xspace.planes import CutMetadata, PlaneReader


class StreamLines(NamedTuple):
    """A GPU plane's stream lines: its reader, index and device ordinal, and per line its
    index, the line and its types (``Stream #N(<types>)``; None without)."""

    reader: PlaneReader
    plane_idx: int
    device: int
    lines: list[tuple[int, Any, str | None]]


class LineSource(Protocol):
    """Event columns of the lines of one XSpace file."""

    decoder: str  # "python" or "c": recorded in meta.format_facts (XSpaceFacts)
    too_large: dict[str, int]  # per integer stat: uint64 values the model cannot hold

    def count(self, plane_idx: int, line_idx: int, line: Any) -> int:
        """Events of a line (before any is read)."""

    def cut_metadata(self, plane_idx: int) -> CutMetadata | None:
        """The event metadata cut out of the plane's map, for ``PlaneReader`` (None: the map
        is whole)."""

    def plan(self, reader: PlaneReader, plane_idx: int, lines: list[tuple[int, Any]],
             wanted_only: bool) -> None:
        """The lines of a plane ``frame`` will be asked for, told up front."""

    def frame(self, reader: PlaneReader, plane_idx: int, line_idx: int, line: Any,
              wanted_only: bool = False) -> tuple[pl.DataFrame | None, int, int]:
        """The line's events as ``columns.line_frame`` builds them (None when none is
        kept), the number dropped for a negative duration, and the number unnamed.
        ``wanted_only`` allows leaving out events that carry none of the stats we read."""

    def device_kind(self, df: pl.DataFrame, line_types: str | None) -> pl.DataFrame:
        """``columns.device_kind`` of the frame ``frame`` just returned."""

    def stream_frames(self, planes: list[StreamLines]) -> tuple[list[pl.DataFrame], int, int]:
        """The events of the GPU planes' stream lines, in plane and line order, as
        :func:`stream_frames_by_line` makes them (a source may build fewer, larger frames of
        the same rows), the number dropped for a negative duration and the number unnamed."""

    def finish(self) -> None:
        """Check every byte of what was not read."""


def stream_frames_by_line(source: LineSource, planes: list[StreamLines]
                          ) -> tuple[list[pl.DataFrame], int, int]:
    """:meth:`LineSource.stream_frames`, one line at a time: each line's frame with its
    ``device`` and ``stream`` (the line id), then its kinds (``device_kind``)."""
    frames: list[pl.DataFrame] = []
    negative = unknown = 0
    for reader, plane_idx, device, lines in planes:
        for line_idx, line, line_types in lines:
            df, n_neg, n_unknown = source.frame(reader, plane_idx, line_idx, line)
            negative += n_neg
            unknown += n_unknown
            if df is None:
                continue
            df = df.with_columns(device=pl.lit(device, dtype=pl.Int64),
                                 stream=pl.lit(line.id, dtype=pl.Int64))
            frames.append(source.device_kind(df, line_types))
    return frames, negative, unknown
