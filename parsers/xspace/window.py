"""The times an XSpace event can have, and the events outside them dropped and counted.

XProf writes event times relative to the profile start (``Task Environment``'s
``profile_start_time``), so every event of a sound file lies in 0..(stop - start): on the
real traces here the last event ends 1-10% before ``profile_stop_time``. Without a recorded
window, times before 0 or past ~104 days, and device work over a day, are implausible. A
line timestamp or offset damaged to INT64_MIN/INT64_MAX gives spans of -9.2e18 or 9.2e18 ns
that no analysis can use; such events are dropped, counted, and the warning names the window.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from parsers.xspace.columns import INT64_MAX

_DAY_NS = 86_400 * 10**9
_LONGEST_NS = 1 << 53  # ~104 days: a profile longer than this is damaged


def profile_window(stats: dict[str, Any]) -> tuple[int, int, str]:
    """(earliest start, latest end, the reason for the warning) of the file's events: the
    recorded profile length with a tenth of it (at least 1 ms) either side, else 0..2^53 ns
    (times are relative to the profile start)."""
    start, stop = stats.get("profile_start_time"), stats.get("profile_stop_time")
    if type(start) is int and type(stop) is int and 0 <= start <= INT64_MAX \
            and 0 < stop - start < _LONGEST_NS:
        length = stop - start
        slack = max(length // 10, 1_000_000)
        return -slack, length + slack, (f"outside the profile's {length} ns window (Task "
                                        "Environment profile_start_time..profile_stop_time)")
    return 0, _LONGEST_NS, ("at implausible times (before the profile start, after 2^53 ns, "
                            "or lasting over a day)")


def drop_outside(df: pl.DataFrame, window: tuple[int, int, str]) -> tuple[pl.DataFrame, int]:
    """``df`` without the events that start or end outside ``window`` (without a recorded
    window, also those that last more than a day), and how many there were."""
    lo, hi, why = window
    inside = (pl.col("start_ns") >= lo) & (pl.col("end_ns") <= hi)
    if hi == _LONGEST_NS:
        inside = inside & (pl.col("end_ns") - pl.col("start_ns") <= _DAY_NS)
    kept = df.filter(inside.fill_null(False))
    return kept, df.height - kept.height
