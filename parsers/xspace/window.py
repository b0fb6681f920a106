"""The times an XSpace event can have, and the events outside them dropped and counted.

XProf writes event times relative to the profile start (``Task Environment``'s
``profile_start_time``), so every event of a sound file lies in 0..(stop - start): on the
real traces here the last event ends 1-10% before ``profile_stop_time``. A file whose events
are on an absolute clock (a writer that did not normalize them) is judged on that clock, so
that its events are not all taken for damage. Without a recorded window, times before 0 or
past 2^53 ns (2^62 on an absolute clock), and device work over a day, are implausible. A line
timestamp or offset damaged to INT64_MIN/INT64_MAX gives spans of -9.2e18 or 9.2e18 ns that no
analysis can use; such events are dropped, counted, and the warning names the window.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import polars as pl

from parsers.xspace.columns import INT64_MAX

_DAY_NS = 86_400 * 10**9
_LONGEST_NS = 1 << 53  # ~104 days: a profile longer than this is damaged
_LATEST_NS = 1 << 62  # an absolute clock reading past this (year 2116) is damaged


class Window(NamedTuple):
    lo: int
    hi: int
    why: str  # the reason the warning gives
    recorded: bool  # the file's own profile window (else only implausible times go)


def profile_span(stats: dict[str, Any]) -> tuple[int, int] | None:
    """``Task Environment``'s (profile_start_time, profile_stop_time) when they make a
    plausible window, else None."""
    start, stop = stats.get("profile_start_time"), stats.get("profile_stop_time")
    if type(start) is int and type(stop) is int and 0 <= start <= INT64_MAX \
            and 0 < stop - start < _LONGEST_NS:
        return start, stop
    return None


def event_window(span: tuple[int, int] | None, starts: pl.Series) -> Window:
    """The times the file's events can have. With a recorded span: its length with a
    tenth of it (at least 1 ms) either side, on the clock the events are on: relative to
    the profile start (what XProf saves) or absolute (a writer that did not normalize),
    whichever holds the median event start. Without one, or when neither does: only
    implausible times (before 0, past 2^53 ns on a relative clock or 2^62 on an absolute
    one, or lasting over a day)."""
    # (one chunk first: polars' median of the reader's per-plane chunks is 10x slower)
    mid = starts.rechunk().median() if starts.len() else None
    if span is not None:
        length = span[1] - span[0]
        slack = max(length // 10, 1_000_000)
        for base, clock in ((0, "relative to its start"), (span[0], "absolute")):
            if mid is None or base - slack <= mid <= base + length + slack:
                return Window(base - slack, base + length + slack,
                              f"outside the profile's {length} ns window (Task Environment "
                              f"profile_start_time..profile_stop_time, times {clock})", True)
    absolute = mid is not None and mid >= _LONGEST_NS
    return Window(0, _LATEST_NS if absolute else _LONGEST_NS,
                  "at implausible times (before 0, after 2^{} ns, or lasting over a day)"
                  .format(62 if absolute else 53), False)


def drop_outside(df: pl.DataFrame, window: Window) -> tuple[pl.DataFrame, int]:
    """``df`` without the events that start or end outside ``window`` (without a recorded
    window, also those that last more than a day), and how many there were."""
    inside = (pl.col("start_ns") >= window.lo) & (pl.col("end_ns") <= window.hi)
    if not window.recorded:
        inside = inside & (pl.col("end_ns") - pl.col("start_ns") <= _DAY_NS)
    kept = df.filter(inside.fill_null(False))
    return kept, df.height - kept.height
