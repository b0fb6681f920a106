"""Waits that are the host's blocking calls, not launch latency; and graph replays.

A device activity normally starts within its device's launch latency of its launch call
(the least lag from a launch call's end to its activity's start on that device: a few µs).
When it starts much later while a thread of its rank sits in a blocking copy or sync call
(``hipMemcpyWithStream``, ``cudaMemcpy``, ``*Synchronize``: the idle breakdown's
:data:`~tracelens.analyze.timeline.idle.SYNC_CALL`), the device waited for the host's blocking call:
that wait is ``sync``, never launch latency, and no graph launch removes it. The real SGLang
prefill+decode trace (MI300X): a kernel launched at 0.05 ms ran at 493.287 ms, while the
thread that launched it sat in a 493.2 ms ``hipMemcpyWithStream``.

A trace that replays CUDA/HIP graphs (``cudaGraphLaunch``/``hipGraphLaunch`` calls) already
graph-launches: it gets no graph-launch what-if.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np
import polars as pl

from tracelens.core.model import Notice
from tracelens.core.text import matches

if TYPE_CHECKING:
    from tracelens.core.model import Trace

BLOCKED_SHARE = 0.5
"""A launch wait beyond the device's launch latency is the host's blocking call's when at
least this share of it lies inside the rank's blocking calls."""

GRAPH_LAUNCH = r"(?i)^(hip|cuda|cu)GraphLaunch(_ptsz|_spt)?$"
"""The host call that replays a captured CUDA/HIP graph."""


def replays_graphs(host: pl.DataFrame) -> bool:
    """Whether the host events (or host nodes, column ``name``) hold a graph replay."""
    return host.height > 0 and bool(matches(host, "name", GRAPH_LAUNCH).any())


def covered_ns(rows: pl.DataFrame, cover: pl.DataFrame, keys: Sequence[str]) -> np.ndarray:
    """Per row of ``rows`` (``keys``, start_ns, end_ns), the ns of [start_ns, end_ns) inside
    the union of ``cover``'s intervals (``keys``, start_ns, end_ns) of the same keys: the
    union's covered time before each end less that before each start, per key group (no
    per-row Python)."""
    out = np.zeros(rows.height, np.int64)
    if not rows.height or not cover.height:
        return out
    keys = list(keys)
    idx = rows.with_row_index("_i")
    for key, mine in idx.partition_by(keys, as_dict=True).items():
        cov = cover.filter(pl.all_horizontal(
            [pl.col(k) == v for k, v in zip(keys, key)])).sort("start_ns")
        if not cov.height:
            continue
        s, e = cov["start_ns"].to_numpy(), cov["end_ns"].to_numpy()
        reach = np.maximum.accumulate(e)  # the union as disjoint sorted runs
        new = np.r_[True, s[1:] > reach[:-1]]
        rs, re = s[new], np.maximum.reduceat(reach, np.flatnonzero(new))
        a, b = mine["start_ns"].to_numpy(), mine["end_ns"].to_numpy()
        out[mine["_i"].to_numpy()] = np.maximum(_upto(b, rs, re) - _upto(a, rs, re), 0)
    return out


def _upto(t: np.ndarray, rs: np.ndarray, re: np.ndarray) -> np.ndarray:
    """Per time in ``t``, the time of the disjoint sorted runs [rs, re) before it."""
    before = np.r_[0, np.cumsum(re - rs)]
    i = np.searchsorted(rs, t, side="right") - 1
    j = np.maximum(i, 0)
    part = np.clip(t - rs[j], 0, (re - rs)[j]) + before[j]
    return np.where(i < 0, 0, part)


def blocked(waits: pl.DataFrame, sync: pl.DataFrame, keys: Sequence[str]) -> pl.Series:
    """Per wait (``keys``, start_ns: where the device's launch latency ran out, end_ns: the
    activity's start), whether it was the host's blocking call: at least
    :data:`BLOCKED_SHARE` of it inside ``sync``'s calls of the same keys."""
    length = (waits["end_ns"] - waits["start_ns"]).clip(lower_bound=0).to_numpy()
    inside = covered_ns(waits, sync, keys)
    return pl.Series("blocked", (length > 0) & (inside >= BLOCKED_SHARE * length))


GRAPH_REPLAYS = "launch.graph_replays"
"""The note that a trace replays CUDA/HIP graphs (``summarize`` gives it no graph advice)."""


def note_graph_replays(trace: "Trace") -> None:
    """Say (a note) that the trace replays graphs, with how many replay calls: its findings
    then hold no graph-launch advice."""
    he = trace.host_events
    if not he.height:
        return
    calls = he.filter(matches(he, "name", GRAPH_LAUNCH))
    if calls.height:
        trace.meta.warn(Notice.of(
            GRAPH_REPLAYS, "the trace replays CUDA/HIP graphs ({name} x{n}): it "
            "graph-launches already, so no finding advises graph launches", n=calls.height,
            name=str(calls["name"][0])))
