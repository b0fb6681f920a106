"""The pure-Python line source: event columns from the protobuf messages, one event at a
time. The reference implementation, and the fallback when the C decoder is not built."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from parsers.xspace.columns import (EVENT_STATS, INT64_MAX, INT64_MIN, INT_STATS, UNKNOWN_NAME,
                                    device_kind, line_frame, too_large)
from parsers.xspace.planes import PlaneReader
from parsers.xspace.source import StreamLines, stream_frames_by_line
from tracelens.core.errors import TraceInputError


def line_columns(reader: PlaneReader, line: Any) -> dict[str, list[Any]]:
    """Event columns of one line: name, start/end ns, and the wanted stats."""
    base_ps = line.timestamp_ns * 1000
    names, starts, ends, negative, unknown = [], [], [], 0, 0
    stat_cols: list[list[Any]] = [[] for _ in EVENT_STATS]
    defaults, event_names = reader.defaults, reader.event_names
    for ev in line.events:
        start_ps = base_ps + ev.offset_ps
        dur = ev.duration_ps
        if dur < 0:
            negative += 1
            continue
        name = event_names.get(ev.metadata_id)
        if name is None:  # dangling reference: keep the time, say the name is unknown
            unknown += 1
            name = UNKNOWN_NAME
        names.append(name)
        starts.append(start_ps // 1000)
        ends.append((start_ps + dur) // 1000)
        if ev.stats:
            vals = reader.read_stats(ev.stats, defaults.get(ev.metadata_id))
        else:
            vals = defaults.get(ev.metadata_id) or [None] * len(EVENT_STATS)
        for col, v in zip(stat_cols, vals):
            col.append(v)
    cols: dict[str, list[Any]] = {"name": names, "start_ns": starts, "end_ns": ends}
    cols.update(zip(EVENT_STATS, stat_cols))
    cols["_negative"] = [negative]
    cols["_unknown"] = [unknown]
    return cols


class PythonLines:
    """Event columns of each line from the protobuf messages, one event at a time.

    The reference implementation, and the fallback when the C decoder (``parsers.xspace.native``)
    is not built. ``frame`` returns the line's events as
    :func:`~parsers.xspace.columns.line_frame` builds them (or
    None when the line has no event to keep) and the counts of dropped and unnamed events.
    ``wanted_only`` allows a source to leave out events that carry none of the stats we read
    (the host plane's callers filter on them anyway); this one keeps every event.
    """

    decoder = "python"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.too_large: dict[str, int] = {}

    def count(self, plane_idx: int, line_idx: int, line: Any) -> int:
        return len(line.events)

    def cut_metadata(self, plane_idx: int) -> None:
        """Nothing is cut out of the protobuf messages this source reads."""
        return None

    def plan(self, reader: PlaneReader, plane_idx: int, lines: list[tuple[int, Any]],
             wanted_only: bool) -> None:
        """The lines ``frame`` will be asked for (this source reads them one at a time)."""

    def frame(self, reader: PlaneReader, plane_idx: int, line_idx: int, line: Any,
              wanted_only: bool = False) -> tuple[pl.DataFrame | None, int, int]:
        cols = line_columns(reader, line)
        for stat in INT_STATS:
            n = too_large(cols[stat])
            if n:
                self.too_large[stat] = self.too_large.get(stat, 0) + n
        if not cols["name"]:
            return None, cols["_negative"][0], cols["_unknown"][0]
        if min(cols["start_ns"]) < INT64_MIN or max(cols["end_ns"]) > INT64_MAX or \
                max(cols["start_ns"]) > INT64_MAX or min(cols["end_ns"]) < INT64_MIN:
            # the C decoder's check, on the same events (every one of a line not dropped)
            raise TraceInputError(self.path, "corrupt or truncated XSpace protobuf (event time "
                                  "out of the int64 nanosecond range)")
        return line_frame(cols), cols["_negative"][0], cols["_unknown"][0]

    def device_kind(self, df: pl.DataFrame, line_types: str | None) -> pl.DataFrame:
        return device_kind(df, line_types)

    def stream_frames(self, planes: list[StreamLines]) -> tuple[list[pl.DataFrame], int, int]:
        return stream_frames_by_line(self, planes)

    def finish(self) -> None:
        """Check what was not read (nothing to do: the protobuf runtime parsed it all)."""
