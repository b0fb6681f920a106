"""Collectives (docs/definitions.md#collectives): type, size, bandwidth, exposure, and cross-device
skew.

Every collective activity gets its exposed time (the part of its interval no compute kernel on
its device covers), algbw and busbw when its message size is known (nccl-tests convention).
Instances are matched across devices: the k-th execution of the same op in the same module (or,
when the trace has no op, the k-th collective of the same type on each device). Per instance:
arrival skew, each participant's wait for the last arrival, the transfer time estimated as the
shortest participant duration, and busbw from that transfer time. Per device: how often it
arrived last (straggler score) and how long the others waited for it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from tracelens.core.intervals import on_one_axis
from tracelens.analyze.timeline.breakdown import DEVICE_KEYS, Axis
from tracelens.core.instances import with_instance_keys
from tracelens.core.model import CATEGORIES, COMPUTE_CATEGORIES
from tracelens.core.sweep import extension, references_forced
from tracelens.results.collectives import (Busbw, Collectives, Instance, OpTotals, Participant,
                                           Straggler, TypeTotals)

_COMPUTE_PRIOS = [CATEGORIES.index(c) for c in COMPUTE_CATEGORIES]  # ``_prio`` on an axis

_SWEEP = extension("HIDDEN_ABI")  # the covered time in one pass; optional: numpy's the same


def bus_factor_expr(kind: pl.Expr, n: pl.Expr) -> pl.Expr:
    """The busbw/algbw factor for a collective type and group size (nccl-tests
    PERFORMANCE.md: 2(n-1)/n for all-reduce, (n-1)/n for all-gather, reduce-scatter and
    all-to-all, 1 for point-to-point); null when unknown."""
    n = n.cast(pl.Float64)
    return (pl.when(kind == "all-reduce").then(2.0 * (n - 1) / n)
            .when(kind.is_in(["all-gather", "reduce-scatter", "all-to-all"])).then((n - 1) / n)
            .when(kind.is_in(["collective-permute", "send", "recv", "send-recv",
                              "collective-broadcast"])).then(pl.lit(1.0))
            .otherwise(None))


def compute_segments(events: pl.DataFrame) -> pl.DataFrame:
    """Merged compute intervals per device, with the compute time before each segment.

    Rows sorted by device and start. One sort on one column: devices are laid end to end on
    one time axis (``intervals.on_one_axis``), so one cumulative max finds every segment.
    """
    found = _segments_on_axis(events)
    if found is None:
        return _compute_segments_per_device(
            events.filter(pl.col("category").is_in(list(COMPUTE_CATEGORIES))))
    seg, groups = found
    shift = groups["_shift"].gather(seg["_g"])
    return pl.concat([groups.select(DEVICE_KEYS)[seg["_g"]],
                      seg.select(seg_s=pl.col("seg_s") - shift, seg_e=pl.col("seg_e") - shift,
                                 before="before")], how="horizontal")


def _segments_on_axis(events: pl.DataFrame, axis: Axis | None = None
                      ) -> tuple[pl.DataFrame, pl.DataFrame] | None:
    """Compute segments on ``on_one_axis``'s shared axis: ``_g``, ``seg_s``, ``seg_e``
    (shifted), ``before``; and the groups. None when the axis does not fit in int64.
    ``axis``: ``timeline.device_axis`` of ``events`` (every activity, with ``_prio``), when
    the caller has it: its compute rows are the compute axis (devices stay apart on it)."""
    found = _compute_axis(events, axis)
    if found is None:
        return None
    rows, groups = found
    if "_prio" in rows.columns:
        rows = rows.select("_g", "_s", "_e").filter(rows["_prio"].is_in(_COMPUTE_PRIOS))
    return _merged(rows), groups


def _compute_axis(events: pl.DataFrame, axis: Axis | None
                  ) -> tuple[pl.DataFrame, pl.DataFrame] | None:
    """The rows a compute axis is made of (``_g``, ``_s``, ``_e``; with ``_prio`` when they
    are ``axis``' rows, of which the compute priorities count) and its groups; None when
    the axis does not fit in int64."""
    if axis is not None:
        rows, groups = axis
        return rows.select("_g", "_prio", "_s", "_e"), groups
    comp = events.select(*DEVICE_KEYS, "start_ns", "end_ns", "category") \
        .filter(pl.col("category").is_in(list(COMPUTE_CATEGORIES)))  # only what is read
    return on_one_axis(comp, DEVICE_KEYS)


def _merged(rows: pl.DataFrame) -> pl.DataFrame:
    """The segments of axis ``rows`` (sorted by ``_s``): ``_g``, ``seg_s``, ``seg_e`` and
    ``before`` (the group's segment time before this one), in numpy over the row arrays.
    A segment starts where a start passes every end before it; it ends at the running max
    of the ends just before the next segment starts (earlier segments all end before it).
    Groups lie apart on the axis, so each group's segments are consecutive and its first
    row starts a segment."""
    s, e, g = rows["_s"].to_numpy(), rows["_e"].to_numpy(), rows["_g"].to_numpy()
    if not len(s):
        return pl.DataFrame({"_g": rows["_g"], "seg_s": rows["_s"], "seg_e": rows["_e"],
                             "before": rows["_s"]})
    run_end = np.maximum.accumulate(e)
    new = np.empty(len(s), bool)
    new[0] = True
    np.greater(s[1:], run_end[:-1], out=new[1:])
    first = np.flatnonzero(new)
    seg_g, seg_s = g[first], s[first]
    seg_e = run_end[np.r_[first[1:] - 1, len(s) - 1]]
    length = seg_e - seg_s
    upto = np.cumsum(length) - length  # segment time before each segment, all groups
    group_first = np.r_[True, seg_g[1:] != seg_g[:-1]]
    before = upto - upto[group_first][np.cumsum(group_first) - 1]
    return pl.DataFrame({"_g": pl.Series(seg_g, dtype=rows.schema["_g"]),
                         "seg_s": seg_s, "seg_e": seg_e, "before": before},
                        schema_overrides={"seg_s": pl.Int64, "seg_e": pl.Int64,
                                          "before": pl.Int64})


def _hidden_by_compute(coll: pl.DataFrame, events: pl.DataFrame, axis: Axis | None = None
                       ) -> pl.Series:
    """Per collective activity, the compute time on its device inside its interval."""
    found = _compute_axis(events, axis)
    if found is None:
        seg = compute_segments(events)
        return _covered_until(coll, seg, "end_ns") - _covered_until(coll, seg, "start_ns")
    rows, groups = found
    pts = coll.select(*DEVICE_KEYS, "start_ns", "end_ns").join(
        groups, on=DEVICE_KEYS, how="left", nulls_equal=True, maintain_order="left")
    # (a device key that is null matches no segment, as in an as-of join by device)
    has = pts.select(pl.all_horizontal(pl.col("_g", *DEVICE_KEYS).is_not_null()))\
        .to_series().to_numpy()
    g = pts["_g"].fill_null(0).cast(pl.Int64).to_numpy()
    lo, hi = pts["_lo"].fill_null(0).to_numpy(), pts["_hi"].fill_null(0).to_numpy()
    shift = pts["_shift"].fill_null(0).to_numpy()
    # Each time is first brought into its device's span, where the compute time before it is
    # the same (0 before it, all of it after), so the search stays on its device's segments.
    t0, t1 = (np.clip(pts[c].to_numpy(), lo - 1, hi) + shift for c in ("start_ns", "end_ns"))
    q_g = np.where(has, g, -1)
    if _SWEEP is not None and not references_forced() and t0.dtype == t1.dtype == np.int64 \
            and not any(rows.null_count().row(0)):  # (null times: the reference's float path)
        return _hidden_in_c(rows, q_g, t0, t1)
    if "_prio" in rows.columns:
        rows = rows.select("_g", "_s", "_e").filter(rows["_prio"].is_in(_COMPUTE_PRIOS))
    seg = _merged(rows)
    seg_g, seg_s = seg["_g"].to_numpy(), seg["seg_s"].to_numpy()
    seg_e, before = seg["seg_e"].to_numpy(), seg["before"].to_numpy()

    def covered(t: np.ndarray) -> np.ndarray:
        # compute time of the point's device strictly before t
        k = np.searchsorted(seg_s, t, side="right") - 1
        kk = np.maximum(k, 0)
        ok = (q_g >= 0) & (k >= 0) & (seg_g[kk] == q_g) if len(seg_s) else \
            np.zeros(len(t), bool)
        if not len(seg_s):
            return np.zeros(len(t), np.int64)
        part = np.clip(np.minimum(t, seg_e[kk]) - seg_s[kk], 0, None)
        return np.where(ok, before[kk] + part, 0)

    return pl.Series(covered(t1) - covered(t0), dtype=pl.Int64)


def _hidden_in_c(rows: pl.DataFrame, q_g: np.ndarray, t0: np.ndarray, t1: np.ndarray
                 ) -> pl.Series:
    """:func:`_hidden_by_compute`'s numpy path (``_merged``, then a search per point) in one
    pass of ``_tracelens_sweep.hidden``: the segments' arrays only, not a dozen temporaries
    of the rows' length (2M kernels: 0.02 s against 0.06-0.07 s, mostly fresh pages)."""
    if "_prio" in rows.columns:
        prio, mask = rows["_prio"].to_numpy(), sum(1 << p for p in _COMPUTE_PRIOS)
    else:  # every row a compute row
        prio, mask = np.zeros(rows.height, np.int32), 1
    out = _SWEEP.hidden(rows["_s"].to_numpy(), rows["_e"].to_numpy(),
                        np.ascontiguousarray(rows["_g"].to_numpy(), np.uint32),
                        np.ascontiguousarray(prio, np.int32), mask, q_g, t0, t1)
    return pl.Series(np.frombuffer(out, np.int64), dtype=pl.Int64)


def _compute_segments_per_device(comp: pl.DataFrame) -> pl.DataFrame:
    """``compute_segments`` with per-device windows (for times beyond ``on_one_axis``)."""
    comp = comp.select(*DEVICE_KEYS, "start_ns", "end_ns").sort([*DEVICE_KEYS, "start_ns"])
    prev_end = pl.col("end_ns").cum_max().shift(1).over(DEVICE_KEYS)
    seg = comp.with_columns(_new=(prev_end.is_null() | (pl.col("start_ns") > prev_end))) \
        .with_columns(_seg=pl.col("_new").cast(pl.Int64).cum_sum().over(DEVICE_KEYS)) \
        .group_by(*DEVICE_KEYS, "_seg").agg(seg_s=pl.col("start_ns").min(),
                                            seg_e=pl.col("end_ns").max()) \
        .sort([*DEVICE_KEYS, "seg_s"])
    return seg.with_columns(
        before=(pl.col("seg_e") - pl.col("seg_s")).cum_sum().shift(1, fill_value=0)
        .over(DEVICE_KEYS)).drop("_seg")


def _covered_until(points: pl.DataFrame, segments: pl.DataFrame, col: str) -> pl.Series:
    """Compute time on the point's device strictly before ``points[col]`` (exact)."""
    pts = points.select(*DEVICE_KEYS, pl.col(col).alias("_t")).with_row_index("_i")
    seg = segments.rename({"seg_s": "_t_seg"})
    j = pts.sort("_t").join_asof(seg.sort("_t_seg"), left_on="_t", right_on="_t_seg",
                                 by=DEVICE_KEYS, strategy="backward", check_sortedness=False)
    cov = (pl.col("before") + (pl.min_horizontal(pl.col("_t"), pl.col("seg_e"))
                               - pl.col("_t_seg")).clip(lower_bound=0)).fill_null(0)
    return j.with_columns(_cov=cov).sort("_i")["_cov"]


@dataclass
class CollectiveAnalysis:
    """``activities``: one row per collective activity; ``instances``: one row per matched
    instance; ``stragglers``: one row per device."""

    activities: pl.DataFrame
    instances: pl.DataFrame
    stragglers: pl.DataFrame


def collective_activities(events: pl.DataFrame, axis: Axis | None = None) -> pl.DataFrame:
    """Collective activities with type, exposure, bandwidth and their instance key.
    ``axis``: ``timeline.device_axis(events)``, when the caller has it (one sort fewer)."""
    coll = with_instance_keys(events)
    order = [*events.columns, "type", "dur_ns", "exposed_ns", "instance_key", "occurrence",
             "algbw_gb_per_s", "busbw_gb_per_s"]
    if coll.is_empty():
        return coll.with_columns(
            dur_ns=pl.lit(0, pl.Int64), exposed_ns=pl.lit(0, pl.Int64),
            algbw_gb_per_s=pl.lit(None, pl.Float64),
            busbw_gb_per_s=pl.lit(None, pl.Float64)).select(order)
    hidden = _hidden_by_compute(coll, events, axis)
    dur = pl.col("end_ns") - pl.col("start_ns")
    coll = coll.with_columns(dur_ns=dur, _hidden=hidden).with_columns(
        exposed_ns=pl.col("dur_ns") - pl.col("_hidden"))
    algbw = pl.col("msg_bytes").cast(pl.Float64) / pl.col("dur_ns").cast(pl.Float64)  # GB/s
    return coll.with_columns(
        algbw_gb_per_s=pl.when(pl.col("dur_ns") > 0).then(algbw),
    ).with_columns(
        busbw_gb_per_s=pl.col("algbw_gb_per_s") * bus_factor_expr(pl.col("type"),
                                                                  pl.col("group_size")),
    ).select(order)


PARTIAL_COLUMNS: tuple[str, ...] = (
    *DEVICE_KEYS, "stream", "start_ns", "end_ns", "op", "module", "program_id", "step",
    "msg_bytes", "group_size", "groups", "group_name", "type_source", "size_source", "type",
    "dur_ns", "exposed_ns", "instance_key", "occurrence", "algbw_gb_per_s", "busbw_gb_per_s")
"""The activity columns the reduces of per-host partials read (summary, collectives, HLO
findings, alignment, profiles): the rest (kernel name, costs, launch shape, ...) stays on
the host, so a partial carries a fraction of the event bytes."""


_ACTIVITY_READS: tuple[str, ...] = (
    *DEVICE_KEYS, "stream", "start_ns", "end_ns", "category", "subcategory", "op", "module",
    "program_id", "step", "msg_bytes", "group_size", "groups", "group_name", "type_source",
    "size_source")
"""The event columns :func:`partial_activities` reads: its output columns and what the
instance keys, the hidden compute time and the bandwidths are computed from."""


def partial_activities(events: pl.DataFrame, axis: Axis | None = None) -> pl.DataFrame:
    """:func:`collective_activities` narrowed to :data:`PARTIAL_COLUMNS`: the cross-host data
    of a per-host partial. Computed on the columns it reads alone (the collective rows'
    other event columns are never copied)."""
    return collective_activities(events.select(_ACTIVITY_READS), axis).select(PARTIAL_COLUMNS)


def _streamed(query: pl.LazyFrame) -> pl.DataFrame:
    """A group-by of activity rows run by polars' streaming engine: with a job's millions of
    rows grouped by their instance's string key the in-memory engine holds a copy of the keys
    and more (2M rows of 128 hosts: +220 MB at the reduce), the streaming one its groups
    (+15 MB). Same values; callers sort what they show."""
    return query.collect(engine="streaming")


def match_instances(acts: pl.DataFrame) -> pl.DataFrame:
    """Per activity: skew and wait within its instance; plus instance-level columns."""
    inst = ["instance_key", "occurrence"]
    return acts.with_columns(
        participants=pl.len().over(inst),
        first_start_ns=pl.col("start_ns").min().over(inst),
        last_start_ns=pl.col("start_ns").max().over(inst),
        transfer_ns=pl.col("dur_ns").min().over(inst),
    ).with_columns(
        skew_ns=pl.col("start_ns") - pl.col("first_start_ns"),
        wait_ns=pl.col("last_start_ns") - pl.col("start_ns"),
        # the unique last arrival of an instance with more than one participant
        is_last=(pl.col("start_ns") == pl.col("last_start_ns"))
        & ((pl.col("start_ns") == pl.col("last_start_ns")).sum().over(inst) == 1)
        & (pl.col("participants") > 1),
    )


def analyze_collectives(events: pl.DataFrame, acts: pl.DataFrame | None = None,
                        per_activity: bool = True) -> CollectiveAnalysis:
    """Instances, skew, waits and stragglers; ``acts``: :func:`collective_activities` of
    ``events`` when the caller already has them (computed once per command).
    ``per_activity``: ``activities`` carry :func:`match_instances`' columns (each row's skew
    and wait); else they are ``acts`` as given (the reduce of many hosts: seven more
    columns over millions of rows that the instances and stragglers do not need)."""
    acts = acts if acts is not None else collective_activities(events)
    instances, stragglers = _instances_and_stragglers(acts)
    return CollectiveAnalysis(activities=match_instances(acts) if per_activity else acts,
                              instances=instances, stragglers=stragglers)


def _instances_and_stragglers(acts: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The instance table and the stragglers of :func:`match_instances`' definitions,
    from group-bys and joins against the (small) instance table on the streaming engine:
    an instance's arrival skew and largest wait are both its last start less its first;
    its unique last arrival (more than one participant, one row at the last start) is
    charged that skew; each participant waits from its start to the last one."""
    inst = ["instance_key", "occurrence"]
    instances = _streamed(acts.lazy().group_by(inst).agg(
        type=pl.col("type").first(), op=pl.col("op").first(),
        module=pl.col("module").first(), participants=pl.len(),
        msg_bytes=pl.col("msg_bytes").max(), group_size=pl.col("group_size").max(),
        first_start_ns=pl.col("start_ns").min(), _last=pl.col("start_ns").max(),
        transfer_ns=pl.col("dur_ns").min(), exposed_ns=pl.col("exposed_ns").sum()))
    ends = instances.lazy().select(*inst, "first_start_ns", "_last", "participants")
    # the rows at their instance's last start (one an instance, but for ties)
    at_last = _streamed(acts.lazy().select(*inst, *DEVICE_KEYS, "start_ns").join(
        ends, on=inst, nulls_equal=True).filter(pl.col("start_ns") == pl.col("_last"))
        .group_by(inst).agg(pl.col(*DEVICE_KEYS).first(), _n=pl.len(),
                            skew=(pl.col("_last") - pl.col("first_start_ns")).first(),
                            _many=(pl.col("participants") > 1).first()))
    last = at_last.filter((pl.col("_n") == 1) & pl.col("_many"))
    instances = instances.join(
        last.select(*inst, last_host="host", last_rank="rank", last_device="device"),
        on=inst, how="left", nulls_equal=True).with_columns(
        arrival_skew_ns=pl.col("_last") - pl.col("first_start_ns"),
        max_wait_ns=pl.col("_last") - pl.col("first_start_ns"),
    ).select(*inst, "type", "op", "module", "participants", "msg_bytes", "group_size",
             "first_start_ns", "arrival_skew_ns", "max_wait_ns", "transfer_ns",
             "exposed_ns", "last_host", "last_rank", "last_device").with_columns(
        busbw_gb_per_s=pl.when(pl.col("transfer_ns") > 0).then(
            pl.col("msg_bytes").cast(pl.Float64) / pl.col("transfer_ns")
            * bus_factor_expr(pl.col("type"), pl.col("group_size"))),
    ).sort("first_start_ns")
    # The wait a last arrival imposes: how much later it came than the first participant.
    caused = last.group_by(DEVICE_KEYS).agg(times_last=pl.len(),
                                            caused_wait_ns=pl.col("skew").sum())
    own = _streamed(acts.lazy().select(*inst, *DEVICE_KEYS, "start_ns").join(
        ends.select(*inst, "_last"), on=inst, nulls_equal=True).group_by(DEVICE_KEYS).agg(
        instances=pl.len(), own_wait_ns=(pl.col("_last") - pl.col("start_ns")).sum()))
    stragglers = own.join(caused, on=DEVICE_KEYS, how="left").with_columns(
        pl.col("times_last").fill_null(0).cast(pl.Int64),
        pl.col("caused_wait_ns").fill_null(0),
    ).sort(["times_last", "caused_wait_ns", "rank", "device"],
           descending=[True, True, False, False])
    return instances, stragglers


def _sources(col: str) -> pl.Expr:
    """The distinct sources of a group's rows, sorted and joined (null: none said)."""
    return pl.col(col).cast(pl.String).drop_nulls().unique().sort().str.join(", ")


_SOURCE_COLUMNS = ("type_source", "size_source")


def type_summary(acts: pl.DataFrame) -> pl.DataFrame:
    """Per collective type (and op): count, bytes, time, exposed time, busbw spread, and
    where the types and sizes come from (when the activities carry it)."""
    src = [_sources(c).alias(c) for c in _SOURCE_COLUMNS if c in acts.columns]
    return _streamed(acts.lazy().group_by("type", "op").agg(*src,
        count=pl.len(), msg_bytes=pl.col("msg_bytes").max(),
        sum_ns=pl.col("dur_ns").sum(), exposed_ns=pl.col("exposed_ns").sum(),
        busbw_gb_per_s=pl.col("busbw_gb_per_s").median(),
        busbw_p10=pl.col("busbw_gb_per_s").quantile(0.1, "nearest"),
        busbw_p90=pl.col("busbw_gb_per_s").quantile(0.9, "nearest"),
    )).sort(["exposed_ns", "sum_ns", "type", "op"], descending=[True, True, False, False],
           nulls_last=True)


def link_of(devices: pl.DataFrame) -> float | None:
    """The GPU-GPU link bandwidth (GB/s, aggregate over links and both directions, from the
    hardware table) of the trace's devices, when they all share one."""
    from tracelens.analyze.compute.roofline import device_specs

    links = {s.link_gb_per_s for s in device_specs(devices).values() if s is not None}
    return links.pop() if len(links) == 1 else None


def collectives_from_activities(acts: pl.DataFrame, alignment: str, top: int = 10,
                                link_gb_per_s: float | None = None) -> Collectives:
    """The typed ``tracelens collectives`` result from :func:`collective_activities` rows
    (of one trace, or merged from per-host partials: nothing else is read).

    ``top``: how many instances of largest arrival skew to keep. busbw counts one direction
    per GPU (nccl-tests), so ``link_pct`` compares it with half the aggregate bidirectional
    link bandwidth of the hardware table.
    """
    res = analyze_collectives(acts, acts, per_activity=False)
    half = link_gb_per_s / 2 if link_gb_per_s else None

    def busbw(med: float | None, p10: float | None, p90: float | None) -> Busbw:
        pct = None if med is None or not half else 100.0 * med / half
        return Busbw(median=med, p10=p10, p90=p90, link_pct=pct)

    ops = tuple(OpTotals(
        type=r["type"], op=r["op"], count=int(r["count"]), msg_bytes=r["msg_bytes"],
        sum_ns=int(r["sum_ns"]), exposed_ns=int(r["exposed_ns"]),
        busbw=busbw(r["busbw_gb_per_s"], r["busbw_p10"], r["busbw_p90"]),
        type_source=r.get("type_source") or None, size_source=r.get("size_source") or None,
    ) for r in type_summary(res.activities).iter_rows(named=True))
    # instances equal in all three come in the group-by's order: their key decides
    worst = res.instances.sort(["arrival_skew_ns", "exposed_ns", "first_start_ns",
                                "instance_key", "occurrence"],
                               descending=[True, True, False, False, False]).head(top)
    worst_rows = tuple(Instance(
        type=r["type"], op=r["op"], module=r["module"], occurrence=r["occurrence"],
        participants=r["participants"], start_ns=r["first_start_ns"],
        arrival_skew_ns=r["arrival_skew_ns"], transfer_ns=r["transfer_ns"],
        exposed_ns=r["exposed_ns"], busbw_gb_per_s=r["busbw_gb_per_s"],
        last=None if r["last_device"] is None else Participant(
            host=r["last_host"], rank=r["last_rank"], device=r["last_device"]),
        key=r["instance_key"],
    ) for r in worst.iter_rows(named=True))
    stragglers = tuple(Straggler(
        host=r["host"], rank=r["rank"], device=r["device"], instances=int(r["instances"]),
        times_last=int(r["times_last"]), wait_ns=int(r["caused_wait_ns"]),
        own_wait_ns=int(r["own_wait_ns"]),
    ) for r in res.stragglers.iter_rows(named=True))
    by_type = tuple(TypeTotals(
        type=r["type"], count=int(r["count"]), sum_ns=int(r["sum_ns"]),
        exposed_ns=int(r["exposed_ns"]), busbw=busbw(r["busbw"], r["p10"], r["p90"]),
    ) for r in _streamed(res.activities.lazy().group_by("type").agg(
        count=pl.len(), sum_ns=pl.col("dur_ns").sum(), exposed_ns=pl.col("exposed_ns").sum(),
        busbw=pl.col("busbw_gb_per_s").median(),
        p10=pl.col("busbw_gb_per_s").quantile(0.1, "nearest"),
        p90=pl.col("busbw_gb_per_s").quantile(0.9, "nearest"),
    )).sort(["exposed_ns", "sum_ns", "type"], descending=[True, True, False])
        .iter_rows(named=True))
    return Collectives(by_type=by_type, ops=ops, worst=worst_rows, stragglers=stragglers,
                       alignment=alignment, instances=res.instances.height,
                       link_gb_per_s=link_gb_per_s)


def analyze(events: pl.DataFrame, alignment: str, top: int = 10,
            link_gb_per_s: float | None = None,
            acts: pl.DataFrame | None = None) -> Collectives:
    """:func:`collectives_from_activities` of ``events`` (``acts``: their
    :func:`collective_activities`, when the caller already has them)."""
    return collectives_from_activities(
        acts if acts is not None else collective_activities(events), alignment, top,
        link_gb_per_s)
