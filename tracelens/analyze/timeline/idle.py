"""Why a device is idle: every idle nanosecond split into parts that add up to ``idle_ns``.

An idle gap ends where the device's next activity starts. That activity's launch call (the host
event with the same host, rank and correlation id) says whose turn it was:

- ``host_launch``: the gap before the launch call *ended* (the host had not issued the work
  yet), less the part the host spent blocked in a synchronizing call;
- ``sync_wait``: the part of that pre-launch time during which a thread of the same process
  was inside a synchronizing API call (``*Synchronize``, blocking ``*Memcpy``, event/stream
  waits): the host was waiting for the device, so the device ran dry;
- ``launch_latency``: from the end of the launch call to the activity's start: the work was
  issued and the device still started late (the runtime's launch latency, queueing behind a
  dependency, ...), less what lies past the device's least such lag while a thread of the
  process sat in a synchronizing call: that is ``sync_wait`` too (a kernel launched before a
  493 ms ``hipMemcpyWithStream`` that ran only when the copy returned waited for the copy);
- ``no_host_data``: gaps whose next activity has no launch call in the trace (no host events,
  no correlation id, or no next activity at all).

The parts are disjoint pieces of the gap, so ``host_launch + sync_wait + launch_latency +
no_host_data == idle_ns`` exactly, per device and per step window (pieces are cut at step
boundaries like kernels are).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import polars as pl

from tracelens.core.intervals import on_one_axis, subtract
from tracelens.analyze.timeline.breakdown import DEVICE_KEYS, clip_to_windows
from tracelens.core.frames import key_changes
from tracelens.core.model import Text
from tracelens.core.sweep import extension, references_forced
from tracelens.core.text import matches

_SWEEP = extension("IDLE_ABI")  # the gaps and pieces in one pass each; optional: numpy's

IDLE_PARTS: tuple[str, ...] = ("host_launch", "sync_wait", "launch_latency", "no_host_data")

SYNC_CALL = (r"(?i)^(hip|cuda|cu)(Device|Stream|Event|Ctx)Synchronize|"
             r"^(hip|cuda|cu)(Stream|Event)Query$|"
             r"^(hip|cuda|cu)Memcpy(DtoH|HtoD|DtoD|HtoA|AtoH|2D|3D)?(_v2)?$|"
             r"^hipMemcpyWithStream$|"
             r"^(hip|cuda)Memset(D8|D16|D32)?$")
"""Host API calls that block the calling thread until the device catches up
(``hipMemcpyWithStream``: the synchronous copy PyTorch's ``.cpu()`` makes on ROCm)."""

_INF = 2**62  # stands for ±infinity (year 2116 in ns since the epoch)


PartDtype = pl.Enum(list(IDLE_PARTS))
_SCHEMA = {"host": Text, "rank": pl.Int32, "device": pl.Int32, "part": PartDtype,
           "start_ns": pl.Int64, "end_ns": pl.Int64}


def idle_intervals(events: pl.DataFrame, host_events: pl.DataFrame,
                   axis: tuple[pl.DataFrame, pl.DataFrame] | None = None) -> pl.DataFrame:
    """Every idle interval of every device, labelled with its part (see the module doc).

    Columns: host, rank, device, part, start_ns, end_ns; sorted by device, start and part.
    Includes the stretch before a device's first activity and after its last (bounded by
    ±2^62 ns) so that any window, a step's included, finds its idle time here. ``axis``:
    ``on_one_axis(events, DEVICE_KEYS, "correlation_id", ...)``, when the caller has it.
    """
    if events.is_empty():
        return pl.DataFrame(schema=_SCHEMA)
    found = idle_pieces(events, host_events, axis)
    return _pieces_frame(found) if found is not None else \
        _idle_by_frames(events, host_events, _sync_calls(host_events))


class Pieces(NamedTuple):
    """:func:`idle_intervals`' rows in arrays (its one-axis path): per piece the device (a
    row of ``devices``), the part (an index into :data:`IDLE_PARTS`), start and end; a
    device's pieces together, in start order, disjoint."""

    devices: pl.DataFrame  # host, rank, device
    g: np.ndarray
    part: np.ndarray
    start: np.ndarray
    end: np.ndarray


def idle_pieces(events: pl.DataFrame, host_events: pl.DataFrame,
                axis: tuple[pl.DataFrame, pl.DataFrame] | None = None) -> Pieces | None:
    """:func:`idle_intervals` as :class:`Pieces`, when its one-axis path applies (no
    synchronizing call, times that fit one int64 axis, keys that fit the launch table);
    else None (the frame path)."""
    if events.is_empty() or not _sync_calls(host_events).is_empty():
        return None  # (sync calls cut gaps further: the frame path)
    if axis is None:
        axis = on_one_axis(events, DEVICE_KEYS, "correlation_id")
    return _idle_on_axis(*axis, host_events) if axis is not None else None


def _pieces_frame(p: Pieces) -> pl.DataFrame:
    names = pl.Series("part", [*_PART_ORDER], dtype=PartDtype)
    return p.devices[p.g].with_columns(
        names.gather(p.part), pl.Series("start_ns", p.start, pl.Int64),
        pl.Series("end_ns", p.end, pl.Int64)).cast(_SCHEMA)


def _idle_by_frames(events: pl.DataFrame, host_events: pl.DataFrame,
                    sync: pl.DataFrame) -> pl.DataFrame:
    """``idle_intervals`` with per-device frame operations (any times, any sync calls)."""
    gaps = _gaps(events)
    launch = _launch_calls(host_events)
    g = gaps.join(launch, on=["host", "rank", "correlation_id"], how="left",
                  maintain_order="left")
    has = pl.col("l_end").is_not_null()
    cut = pl.min_horizontal(pl.max_horizontal(pl.col("l_end"), pl.col("start_ns")),
                            pl.col("end_ns"))
    host_side = g.filter(has).select(*DEVICE_KEYS, "start_ns", end_ns=cut)
    latency = g.filter(has).select(*DEVICE_KEYS, start_ns=cut, end_ns=pl.col("end_ns"))
    unknown = g.filter(~has).select(*DEVICE_KEYS, "start_ns", "end_ns")
    sync_part, pre_launch = _split_by_sync(host_side, sync)
    # past the device's own launch latency (its least), a wait with the host blocked in a
    # synchronizing call is that call's, not launch latency (analyze.blocked)
    least = (pl.col("end_ns") - pl.col("start_ns")).min().over(DEVICE_KEYS)
    latency = latency.with_columns(_c=pl.min_horizontal(pl.col("start_ns") + least,
                                                        pl.col("end_ns")))
    late_sync, late_rest = _split_by_sync(
        latency.select(*DEVICE_KEYS, start_ns="_c", end_ns="end_ns"), sync)
    cuts = latency.filter((pl.col("_c") > pl.col("start_ns")) & (pl.col("_c") < pl.col("end_ns"))
                          ).select(*DEVICE_KEYS, start_ns="_c", _cut=pl.lit(True))
    latency = pl.concat([latency.select(*DEVICE_KEYS, "start_ns", end_ns="_c"), late_rest])
    parts = [pre_launch.with_columns(part=pl.lit("host_launch")),
             sync_part.with_columns(part=pl.lit("sync_wait")),
             late_sync.with_columns(part=pl.lit("sync_wait")),
             latency.with_columns(part=pl.lit("launch_latency")),
             unknown.with_columns(part=pl.lit("no_host_data"))]
    out = pl.concat([p.select(*DEVICE_KEYS, "part", "start_ns", "end_ns") for p in parts])
    out = out.filter(pl.col("end_ns") > pl.col("start_ns")).cast(_SCHEMA) \
        .sort(*DEVICE_KEYS, "start_ns", pl.col("part").cast(pl.String))
    # a wait cut at the device's least latency with no sync call past the cut is one piece of
    # launch latency, as the one-axis path has it: the two halves of such a cut are joined
    lat = pl.col("part") == "launch_latency"
    joined = pl.col("_cut").fill_null(False) & lat & lat.shift(1).fill_null(False) \
        & ~key_changes(list(DEVICE_KEYS)) & (pl.col("start_ns") == pl.col("end_ns").shift(1))
    out = out.join(cuts.cast({k: v for k, v in _SCHEMA.items() if k in cuts.columns}),
                   on=[*DEVICE_KEYS, "start_ns"], how="left", maintain_order="left")
    return out.with_columns(_run=(~joined).cum_sum()).group_by("_run", maintain_order=True).agg(
        *(pl.col(c).first() for c in ("host", "rank", "device", "part", "start_ns")),
        pl.col("end_ns").last()).drop("_run").cast(_SCHEMA)


def _idle_on_axis(rows: pl.DataFrame, groups: pl.DataFrame, host_events: pl.DataFrame
                  ) -> Pieces | None:
    """``idle_intervals`` without sync calls, on ``on_one_axis``'s shared time axis: the gaps
    come from one running maximum, the launch calls from one table or sorted array of
    (device's host and rank, correlation id) keys, and the pieces are built in output order
    (gaps are disjoint and increasing per device), so no string key is hashed or sorted per
    row. The gaps and pieces in one pass each of ``_tracelens_sweep`` when it is built
    (:func:`_gaps_numpy` and :func:`_pieces_numpy` are the references). None when the keys
    do not fit one int64 (the caller falls back)."""
    if groups["host"].null_count() or groups["rank"].null_count():
        return None  # a null host or rank matches no launch call: the frame path says so
    e, corr_all = _ties_by_end_and_id(rows)
    in_c = _SWEEP is not None and not references_forced() \
        and not any(rows.select("_s", "_e", "_g").null_count().row(0))
    if in_c:
        found = _SWEEP.idle_gaps(rows["_s"].to_numpy(), np.ascontiguousarray(e, np.int64),
                                 rows["_g"].to_numpy(), groups["_shift"].to_numpy(),
                                 groups["_hi"].to_numpy())
        gap_g, gap_s, gap_e, gap_row = (np.frombuffer(b, np.int64) for b in found)
        at = pl.DataFrame({"i": gap_row}).select(pl.when(pl.col("i") >= 0).then("i"))
        corr = corr_all.gather(at.to_series())  # null after a device's last activity
    else:
        gap_g, gap_s, gap_e, corr = _gaps_numpy(rows, groups, e, corr_all)
    launch = _launch_ends(groups, gap_g, corr, host_events)
    if launch is None:
        return None
    l_end, has = launch
    if in_c:
        pieces = [np.frombuffer(b, np.int64) for b in _SWEEP.idle_pieces(
            gap_g, gap_s, gap_e, l_end, has)]
        return Pieces(groups.select(DEVICE_KEYS), *pieces)
    return Pieces(groups.select(DEVICE_KEYS), *_pieces_numpy(gap_g, gap_s, gap_e, l_end, has))


def _gaps_numpy(rows: pl.DataFrame, groups: pl.DataFrame, e: np.ndarray, corr_all: pl.Series
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, pl.Series]:
    """Every device's gaps in time order, then its stretch after its last activity: group,
    start and end (less the group's shift) and the correlation id of the activity that ends
    the gap (null for the stretch)."""
    # row-length arrays are made once each (a 2M-activity trace: 16 MB apiece); what is
    # computed per gap is taken at the gaps only
    s = rows["_s"].to_numpy()
    g = rows["_g"].to_numpy()
    prev = np.empty_like(e)
    prev[0] = 0
    np.maximum.accumulate(e[:-1], out=prev[1:])  # never carries over from the previous device
    first = np.empty(len(g), bool)
    first[0] = True
    np.not_equal(g[1:], g[:-1], out=first[1:])
    gap = first | (s > prev)
    corr = corr_all.filter(pl.Series(gap))
    n_dev = groups.height
    at_g = g[gap].astype(np.int64)
    shift = groups["_shift"].to_numpy()[at_g]
    gap_g = np.concatenate([at_g, np.arange(n_dev)])
    gap_s = np.concatenate([np.where(first[gap], -_INF, prev[gap] - shift),
                            groups["_hi"].to_numpy()])
    gap_e = np.concatenate([s[gap] - shift, np.full(n_dev, _INF, np.int64)])
    corr = corr.append(pl.Series([None] * n_dev, dtype=corr.dtype))
    order = np.argsort(gap_g, kind="stable")
    return gap_g[order], gap_s[order], gap_e[order], corr.gather(order)


def _pieces_numpy(gap_g: np.ndarray, gap_s: np.ndarray, gap_e: np.ndarray,
                  l_end: np.ndarray, has: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each gap as its pieces (group, part, start, end), empty ones dropped: [start, cut)
    host_launch and [cut, end) launch_latency where a launch call ends at ``l_end``
    (cut = that end brought into the gap), else [start, end) no_host_data; interleaved so
    that the pieces stay in start order."""
    if has.any():
        cut = np.minimum(np.maximum(l_end, gap_s), gap_e)
        p_g = np.repeat(gap_g, 2)
        p_s, p_e, p_part = (np.empty(2 * len(has), np.int64) for _ in range(3))
        p_s[0::2], p_s[1::2] = gap_s, cut
        p_e[0::2], p_e[1::2] = np.where(has, cut, gap_e), gap_e
        p_part[0::2], p_part[1::2] = np.where(has, 0, 3), 2
        keep = p_e > p_s
        keep[1::2] &= has
    else:  # no launch call found (no host events): each gap is one no_host_data piece
        p_g, p_s, p_e = gap_g, gap_s, gap_e
        p_part = np.full(len(has), 3)
        keep = p_e > p_s
    kept = np.flatnonzero(keep)  # once, then a gather per array (a boolean mask each: 4x)
    return p_g[kept], p_part[kept], p_s[kept], p_e[kept]


_PART_ORDER = ("host_launch", "sync_wait", "launch_latency", "no_host_data")


def _ties_by_end_and_id(rows: pl.DataFrame) -> tuple[np.ndarray, pl.Series]:
    """The ends and correlation ids of ``rows`` (sorted by ``_s``) with activities that start
    together ordered by end, then correlation id (nulls last): the first of them ends the
    gap. Only the tied rows are sorted and moved (they are few; a full three-key sort or a
    gather of millions of rows costs more); tied rows share ``_s`` and ``_g`` (devices lie
    apart on the axis), so those columns stay as they are."""
    s = rows["_s"].to_numpy()
    e, corr = rows["_e"].to_numpy(), rows["correlation_id"]
    same = s[1:] == s[:-1]
    if not same.any():
        return e, corr
    tied = np.zeros(len(s), bool)
    tied[1:] |= same
    tied[:-1] |= same
    pos = np.flatnonzero(tied)
    at = corr.gather(pos)
    order = np.lexsort((at.fill_null(0).to_numpy(), at.is_null().to_numpy(), e[pos], s[pos]))
    e = e.copy()
    e[pos] = e[pos[order]]
    return e, corr.clone().scatter(pos, at.gather(order))  # (the frame keeps its column)


def _launch_ends(groups: pl.DataFrame, gap_g: np.ndarray, corr: pl.Series,
                 host_events: pl.DataFrame) -> tuple[np.ndarray, np.ndarray] | None:
    """Per gap, the end of the launch call of the activity that ends it, and whether there
    is one: the latest end among host events with the device's host and rank and that
    correlation id. Keys are ``pair × span + (id − smallest id)`` with pairs numbered over
    the devices' (host, rank) and ``span`` the ids' range; None when they would not fit in
    int64. Dense keys (at most twice as many possible keys as launches or gaps) are looked
    up in a table indexed by key, written only where a key is (no fill of the whole table);
    others by binary search in the sorted keys."""
    he = host_events.lazy().select("host", "rank", "correlation_id", "end_ns").filter(
        pl.col("correlation_id").is_not_null() & pl.col("host").is_not_null()
        & pl.col("rank").is_not_null() & pl.col("end_ns").is_not_null()
    ).collect()  # only the columns read are copied; a call without an end ends no gap
    l_end, found = np.zeros(len(gap_g), np.int64), np.zeros(len(gap_g), bool)
    if he.is_empty() or not corr.is_not_null().any():
        return l_end, found
    hosts = groups["host"].unique().sort().to_list()
    pairs = groups.select(_pair_key(hosts)).to_series().to_numpy()
    upairs = np.unique(pairs)
    lo, hi = int(he["correlation_id"].min()), int(he["correlation_id"].max())  # type: ignore
    span = hi - lo + 1
    if len(upairs) * span >= 2**62:
        return None
    he_pair = he.select(_pair_key(hosts)).to_series().to_numpy()
    code = np.searchsorted(upairs, he_pair).clip(max=len(upairs) - 1)
    mine = upairs[code] == he_pair  # host events of a rank without devices match nothing
    ids, end = he["correlation_id"].to_numpy(), he["end_ns"].to_numpy()
    if not mine.all():  # (a mask over millions of launches costs more than the check)
        code, ids, end = code[mine], ids[mine], end[mine]
    key = code * span + (ids - lo)
    if not len(key):
        return l_end, found
    known = corr.is_not_null().to_numpy()
    cv = corr.fill_null(lo).to_numpy()
    known &= (cv >= lo) & (cv <= hi)
    gkey = np.searchsorted(upairs, pairs[gap_g]) * span + (np.where(known, cv, lo) - lo)
    size = len(upairs) * span  # every key is below it
    if size <= 2 * max(len(key), len(gkey)):  # dense ids (a process's launches): one table
        last_end = np.empty(size, np.int64)  # read only where a key is (``has``)
        last_end[key] = end  # one of each key's ends, then the latest of them
        np.maximum.at(last_end, key, end)
        has = np.zeros(size, bool)
        has[key] = True
        found = known & has[gkey]
        l_end[found] = last_end[gkey[found]]
        return l_end, found
    order = np.argsort(key, kind="stable")
    key, end = key[order], end[order]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    ukey, last_end = key[starts], np.maximum.reduceat(end, starts)
    at = np.searchsorted(ukey, gkey).clip(max=len(ukey) - 1)
    found = known & (ukey[at] == gkey)
    l_end[found] = last_end[at[found]]
    return l_end, found


def _pair_key(hosts: list[str]) -> pl.Expr:
    """(host, rank) as one int64: the host's index in ``hosts`` (-1: another host) and the
    rank."""
    code = pl.col("host").replace_strict(hosts, list(range(len(hosts))), default=-1,
                                         return_dtype=pl.Int64)
    return code * 2**32 + pl.col("rank").cast(pl.Int64) + 2**31


def idle_breakdowns(events: pl.DataFrame, host_events: pl.DataFrame,
                    windows: list[tuple[pl.DataFrame | None, pl.DataFrame | None]],
                    axis: tuple[pl.DataFrame, pl.DataFrame] | None = None
                    ) -> list[pl.DataFrame]:
    """:func:`idle_breakdown` of :func:`idle_intervals` for each ``(steps, spans)`` of
    ``windows``, from the :class:`Pieces` when the one-axis path gives them: no frame of
    every piece is made (a 2M-kernel trace has millions), and each ``(steps, spans)``'s
    windows are read off one running sum per part and device. Else from the frame, as
    ``idle_breakdown`` computes it."""
    pieces = idle_pieces(events, host_events, axis)
    frame: pl.DataFrame | None = None
    out = []
    for steps, spans in windows:
        got = pieces_breakdown(pieces, events, steps, spans) if pieces is not None else None
        if got is None:
            if frame is None:
                frame = _pieces_frame(pieces) if pieces is not None else \
                    idle_intervals(events, host_events, axis)
            got = idle_breakdown(frame, events, steps, spans)
        out.append(got)
    return out


def idle_breakdown(parts: pl.DataFrame, events: pl.DataFrame,
                   steps: pl.DataFrame | None = None, spans: pl.DataFrame | None = None
                   ) -> pl.DataFrame:
    """Idle ns per part (``parts`` from :func:`idle_intervals`) within each device's span
    (first start to last end of its ``events``, as the timeline's ``span_ns``), or with
    ``steps`` (rank, step, start_ns, end_ns) within each step window of the device's rank.

    Output: device keys (+ ``step``) and one ``<part>_ns`` column per part (zeros included),
    one row per device (and step) that has idle time. ``spans``: each device's span (device
    keys, ``_lo``, ``_hi``: ``on_one_axis``'s groups) when the caller has them.
    """
    keys = DEVICE_KEYS if steps is None else [*DEVICE_KEYS, "step"]
    fast = _breakdown_by_prefix(parts, events, steps, spans)
    if fast is not None:
        return fast
    # lazy: the (integer) sums group in parallel and only the columns read are kept
    if steps is None:
        spans = events.lazy().group_by(DEVICE_KEYS).agg(_lo=pl.col("start_ns").min(),
                                                        _hi=pl.col("end_ns").max())
        clipped = parts.lazy().join(spans, on=DEVICE_KEYS).with_columns(
            start_ns=pl.max_horizontal("start_ns", "_lo"),
            end_ns=pl.min_horizontal("end_ns", "_hi")).filter(
            pl.col("end_ns") > pl.col("start_ns"))
    elif steps.is_empty() or parts.is_empty():
        clipped = parts.lazy().head(0).with_columns(step=pl.lit(None, dtype=pl.Int32))
    else:
        clipped = clip_to_windows(parts, steps).lazy()
    sums = clipped.group_by(*keys, "part").agg(
        ns=(pl.col("end_ns") - pl.col("start_ns")).sum()).collect()
    wide = sums.pivot(on="part", index=keys, values="ns") if sums.height else \
        sums.select(keys)
    return wide.select(*keys, *[(pl.col(p) if p in wide.columns else pl.lit(0))
                                .fill_null(0).cast(pl.Int64).alias(f"{p}_ns")
                                for p in IDLE_PARTS]).sort(keys)


def _breakdown_by_prefix(parts: pl.DataFrame, events: pl.DataFrame,
                         steps: pl.DataFrame | None, spans: pl.DataFrame | None = None
                         ) -> pl.DataFrame | None:
    """:func:`idle_breakdown` by :func:`pieces_breakdown` of the frame's rows, when no key,
    part or time is null and each device's pieces come together (what ``idle_intervals``
    gives); else None (the caller clips)."""
    if parts.is_empty():
        return None
    if parts.select(pl.any_horizontal(pl.col(*DEVICE_KEYS, "part", "start_ns", "end_ns")
                                      .is_null().any())).item():
        return None
    # a device's pieces come together: one run of rows each
    d = parts.select((key_changes(DEVICE_KEYS).cum_sum() - 1).cast(pl.Int64)).to_series() \
        .to_numpy()
    devs = parts.select(DEVICE_KEYS)[np.flatnonzero(np.r_[True, d[1:] != d[:-1]])]
    part = parts["part"].cast(PartDtype).to_physical().cast(pl.Int64).to_numpy()
    return pieces_breakdown(Pieces(devs, d, part, parts["start_ns"].to_numpy(),
                                   parts["end_ns"].to_numpy()), events, steps, spans)


def pieces_breakdown(p: Pieces, events: pl.DataFrame, steps: pl.DataFrame | None,
                     spans: pl.DataFrame | None = None) -> pl.DataFrame | None:
    """:func:`idle_breakdown` of :class:`Pieces` from running sums instead of clipping every
    piece: a device's pieces are disjoint and in start order, so a part's time inside a
    window is F(end) - F(start), F(t) = its time before t (one binary search per window
    bound). None (the caller clips) when a device's pieces overlap or are out of order or
    apart, a key is null, a window ends before it starts, or the step windows of a rank
    overlap."""
    from tracelens.analyze.timeline.breakdown import _disjoint

    keys = DEVICE_KEYS if steps is None else [*DEVICE_KEYS, "step"]
    if not len(p.g) or (steps is not None and (steps.is_empty() or not _disjoint(steps))):
        return None
    devs = p.devices
    if devs.select(pl.any_horizontal(pl.col(*DEVICE_KEYS).is_null().any())
                   | pl.struct(DEVICE_KEYS).is_duplicated().any()).item():
        return None
    if (np.diff(p.g) < 0).any():  # a device's pieces together, devices in order
        return None
    if steps is None:  # each device's span: its first start to its last end
        win = spans.select(*DEVICE_KEYS, _a="_lo", _b="_hi") if spans is not None else \
            events.lazy().group_by(DEVICE_KEYS).agg(
                _a=pl.col("start_ns").min(), _b=pl.col("end_ns").max()).collect()
    else:
        win = steps.select("rank", "step", _a="start_ns", _b="end_ns")
    win = devs.with_row_index("_d").join(win, on="rank" if steps is not None else DEVICE_KEYS,
                                         how="inner").sort("_d", "_a")
    if win.is_empty() or win.select(pl.any_horizontal(pl.col("_a", "_b").is_null().any())
                                    | (pl.col("_a") > pl.col("_b")).any()).item():
        return None  # (a window ending before it starts: clipping says what that means)
    # a device's pieces in start order, not overlapping (what idle_intervals gives)
    if ((p.g[1:] == p.g[:-1]) & (p.start[1:] < p.end[:-1])).any():
        return None
    lo, hi = int(win["_a"].min()), int(win["_b"].max())  # type: ignore[arg-type]
    wd, wa, wb = win["_d"].to_numpy(), win["_a"].to_numpy(), win["_b"].to_numpy()
    sums = _window_sums(p.g, p.part, np.clip(p.start, lo, hi),  # bounded: no sum overflows
                        np.clip(p.end, lo, hi), wd, wa, wb)
    has = sums.sum(axis=1) > 0
    out = devs[wd[has]]
    if steps is not None:
        out = out.with_columns(win["step"].filter(pl.Series(has)))
    out = out.with_columns(pl.Series(f"{n}_ns", sums[has, k], dtype=pl.Int64)
                           for k, n in enumerate(IDLE_PARTS))
    return out.select(*keys, *[f"{n}_ns" for n in IDLE_PARTS]).sort(keys)


def _window_sums(g: np.ndarray, part: np.ndarray, s: np.ndarray, e: np.ndarray,
                 wd: np.ndarray, wa: np.ndarray, wb: np.ndarray) -> np.ndarray:
    """Per window (device ``wd``, from ``wa`` to ``wb``; sorted by device), each part's time
    inside it: F(wb) - F(wa), F(t) = the part's time before t, from one running sum per
    part present on the device. Pieces of a device are disjoint and in start order, so all
    those starting at or before t but the last lie wholly before t."""
    sums = np.zeros((len(wd), len(IDLE_PARTS)), np.int64)
    w_cut = np.flatnonzero(np.r_[True, wd[1:] != wd[:-1], True])
    w_of = {int(wd[a]): (a, b) for a, b in zip(w_cut[:-1], w_cut[1:])}
    cut = np.flatnonzero(np.r_[True, g[1:] != g[:-1], True])
    for a, b in zip(cut[:-1], cut[1:]):
        w = w_of.get(int(g[a]))
        if w is None:
            continue
        ps, pe, pp = s[a:b], e[a:b], part[a:b]
        bounds = np.concatenate([wa[w[0]:w[1]], wb[w[0]:w[1]]])
        k = np.searchsorted(ps, bounds, side="right") - 1  # the last piece starting by t
        kk = np.maximum(k, 0)
        last = np.where(k >= 0, np.minimum(pe[kk], bounds) - ps[kk], 0)  # (its start <= t)
        length = pe - ps
        n = w[1] - w[0]
        for q in np.flatnonzero(np.bincount(pp, minlength=len(IDLE_PARTS))):
            mine = pp == q
            before = np.r_[0, np.cumsum(np.where(mine, length, 0))]  # part q before each
            f = np.where(k >= 0, before[kk] + np.where(mine[kk], last, 0), 0)
            sums[w[0]:w[1], q] = f[n:] - f[:n]
    return sums


def _gaps(events: pl.DataFrame) -> pl.DataFrame:
    """Complement of each device's busy time, with the correlation id (and host, rank) of the
    activity that ends each gap (null after the last activity)."""
    ev = events.select(*DEVICE_KEYS, "start_ns", "end_ns", "correlation_id") \
        .sort(*DEVICE_KEYS, "start_ns", "end_ns", "correlation_id", nulls_last=True)
    covered = pl.col("end_ns").cum_max().shift(1).over(DEVICE_KEYS)
    # a gap ends at a row that starts after everything before it on the device has ended
    ev = ev.with_columns(_prev=covered)
    inner = ev.filter(pl.col("_prev").is_null() | (pl.col("start_ns") > pl.col("_prev")))
    gaps = inner.select(*DEVICE_KEYS, start_ns=pl.col("_prev").fill_null(-_INF),
                        end_ns=pl.col("start_ns"), correlation_id="correlation_id")
    # of activities starting together the first in (start, end, correlation id) order ends
    # the gap: the others start at or before what came before them has ended
    tail = ev.group_by(DEVICE_KEYS).agg(start_ns=pl.col("end_ns").max()).with_columns(
        end_ns=pl.lit(_INF, dtype=pl.Int64), correlation_id=pl.lit(None, dtype=pl.Int64))
    return pl.concat([gaps, tail.select(gaps.columns)])


def _launch_calls(host_events: pl.DataFrame) -> pl.DataFrame:
    """(host, rank, correlation_id) -> the launch call's end (the outermost call when several
    host events share the id)."""
    he = host_events.filter(pl.col("correlation_id").is_not_null())
    return he.group_by("host", "rank", "correlation_id").agg(l_end=pl.col("end_ns").max())


def _sync_calls(host_events: pl.DataFrame) -> pl.DataFrame:
    """(rank, start, end) of every synchronizing call (they may overlap: threads)."""
    return host_events.filter(matches(host_events, "name", SYNC_CALL)) \
        .select("rank", "start_ns", "end_ns")


def _split_by_sync(host_side: pl.DataFrame, sync: pl.DataFrame
                   ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(pieces of ``host_side`` inside the union of their rank's sync calls, the rest)."""
    if sync.is_empty() or host_side.is_empty():
        return host_side.head(0), host_side
    per_device = host_side.select(DEVICE_KEYS).unique().join(sync, on="rank")
    rest = subtract(host_side, per_device, DEVICE_KEYS)
    return subtract(host_side, rest, DEVICE_KEYS), rest
