"""Where a trace's steps come from (docs/definitions.md#steps), decided once per load.

In order: ``--step-marker REGEX`` when given (host markers whose name matches, else the
executions of a program whose module name matches); else the trace's own step annotations
(``StepTraceAnnotation``'s ``step_num``); else the executions of the program with the most
device time among those that run at least twice; else no steps. ``trace.meta.steps_source``
names the source in every output: ``"marker:<regex>"``, ``"annotation"``,
``"program:<module>(<program_id>)"`` or ``"none"``; a reader that knows where its steps
came from says so (Kineto: ``"annotation:gpu"``, ``"annotation:cpu"``,
``"annotation:cpu-launches"``, ``"graph-replay"``). A reader that offers several step
sources (Kineto) gives them all as candidates, in order (``trace.steps["candidate"]``); each
rank keeps one of them (:func:`choose_candidates`).

A program's executions on one rank (a host for XSpace): on each device, the program's first
kernel is its earliest one (by start, then stream, op, name) and is identified by its
(op, kernel name); the k-th execution on that device starts at the k-th occurrence of that
kernel. Step k of the rank starts at the earliest k-th start over the rank's devices and ends
where step k+1 starts; the last one ends at the program's last kernel end on the rank. The
devices of a rank must agree on the number of executions, else the rank gets no steps and a
warning says why: matching the k-th execution of one device with the k-th of another is
then a guess.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import polars as pl

from tracelens.core.model import STEP_SCHEMA, Notice, Trace, conform, on_async_lane
from tracelens.loading.step_choice import drop_partial
from tracelens.core.sweep import extension, references_forced

_SWEEP = extension("HIDDEN_ABI")  # the covered time in one pass; optional: numpy's the same

_FIRST_KERNEL = ["start_ns", "stream", "op", "name"]
# XSpace step annotations holding less of the step program's device time than MIN_INSIDE are
# the host's dispatch windows (the steps then come from the program's executions); holding
# less of all device time than WARN_INSIDE, a warning says how much they leave out. Measured:
# 5.7% of the program's time on the real asynchronous loop (tests/data/jax_async); 83-100% of
# all device time on every other real and sample trace with annotations. The same floors pick
# among a reader's candidate sources (choose_candidates): on Kineto traces, 61.8% for the real
# MI250 trace's GPU-side ProfilerStep (its CPU-side ones: 100%), 96-100% on every other one.
MIN_INSIDE = 0.5
WARN_INSIDE = 0.9

ORDERED_LAST = frozenset({"steps.marker_replaces", "steps.marker_programs",
                          "steps.marker_unmatched", "steps.marker_overlap",
                          "steps.program_uneven", "steps.partial"})
"""The step marking's notices that a merge of hosts loaded one by one puts after the loader's
stage notices (clipped overlaps, unaligned hosts), where loading the files at once raises
them (:func:`tracelens.analyze.summary.merge.merged_notices`): those of ``--step-marker`` and
of program steps. The annotation shares keep their place among the readers' notices."""


def mark_steps(trace: Trace, step_marker: str | None = None) -> None:
    """Set ``trace.steps`` and ``trace.meta.steps_source`` (see the module docstring)."""
    if step_marker is not None:
        steps, source = _from_marker(trace, step_marker)
        if steps.height and trace.steps.height:
            trace.meta.warn(Notice.of(
                "steps.marker_replaces", "--step-marker {pattern!r} replaces the trace's own "
                "{n} annotated steps", pattern=step_marker, n=trace.steps["step"].n_unique()))
    elif trace.steps.height:
        steps = trace.steps
        if steps["candidate"].drop_nulls().n_unique() > 0:
            steps = choose_candidates(trace, steps)
        source = _annotation_source(steps) if steps.height else "none"
        if source == "annotation":  # XSpace step_num: host-side windows, see _dispatch_only
            steps, source = _dispatch_only(trace, steps, source)
    else:
        steps, label = program_steps(trace, None)
        source = f"program:{label}" if steps.height else "none"
    hosts = dict(trace.devices.select("rank", pl.col("host").cast(pl.String)).unique(
        "rank", keep="first").iter_rows()) if trace.devices.height else {}
    before = steps
    steps, partial = drop_partial(steps, hosts)  # a step the profiler cut is no step
    if partial and steps.height and "source" in steps.columns \
            and source == _annotation_source(before):
        source = _annotation_source(steps)  # the sources of the steps kept
    for note in partial:
        trace.meta.warn(note)
    trace.steps = steps.sort("rank", "start_ns", "step")
    trace.meta.steps_source = source


def inside_share(events: pl.DataFrame, steps: pl.DataFrame) -> float | None:
    """The share of the events' summed duration that lies inside their rank's step windows
    (exact: each interval against the union of its rank's windows); None without events."""
    total = int((events["end_ns"] - events["start_ns"]).sum()) if events.height else 0
    if not total:
        return None
    return sum(inside_ns(events, steps).values()) / total


def inside_ns(events: pl.DataFrame, steps: pl.DataFrame) -> dict[int, int]:
    """Per rank with step windows: the events' summed time inside them (see
    :func:`inside_share`)."""
    out: dict[int, int] = {}
    if not events.height:
        return out
    rank = events["rank"].to_numpy()
    start, end = events["start_ns"].to_numpy(), events["end_ns"].to_numpy()
    one_rank = events["rank"].n_unique() == 1
    for (r,), win in steps.sort("start_ns").group_by("rank", maintain_order=True):
        ws, we = win["start_ns"].to_numpy(), win["end_ns"].to_numpy()
        # the union of the windows, as disjoint sorted runs
        reach = np.maximum.accumulate(we)
        new_run = np.r_[True, ws[1:] > reach[:-1]]
        runs = ws[new_run], np.maximum.reduceat(we, np.flatnonzero(new_run))
        if one_rank:  # every event is of this rank, or of none that has windows
            mine = rank[:1] == r
            s_r, e_r = (start, end) if mine.all() else (start[:0], end[:0])
        else:
            sel = rank == r
            s_r, e_r = start[sel], end[sel]
        in_c = _SWEEP is not None and not references_forced() \
            and s_r.dtype == e_r.dtype == np.int64  # (null times: the reference's floats)
        out[r] = _inside_in_c(*runs, s_r, e_r) if in_c else \
            _window_time_sum(e_r, *runs) - _window_time_sum(s_r, *runs)
    return out


def _inside_in_c(starts: np.ndarray, ends: np.ndarray, s: np.ndarray, e: np.ndarray) -> int:
    """The events' summed time inside the disjoint sorted runs: the collectives' one pass
    (``_tracelens_sweep.hidden``, the runs as one group's segments) instead of
    :func:`_window_time_sum`'s temporaries of the events' length, twice."""
    n = len(starts)
    inside = _SWEEP.hidden(starts, ends, np.zeros(n, np.uint32), np.zeros(n, np.int32), 1,
                           np.zeros(len(s), np.int64), np.ascontiguousarray(s),
                           np.ascontiguousarray(e))
    return int(np.frombuffer(inside, np.int64).sum())


def _window_time_sum(t: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> int:
    """Summed over the times ``t``: how much of the disjoint sorted runs [starts, ends) lies
    before each (few temporaries: this runs over every event)."""
    if not len(t):
        return 0
    covered = np.r_[0, np.cumsum(ends - starts)]  # run time before each run
    i = np.searchsorted(starts, t, side="right") - 1
    before = i < 0
    np.maximum(i, 0, out=i)
    part = t - starts[i]
    np.clip(part, 0, (ends - starts)[i], out=part)
    part += covered[i]
    part[before] = 0
    return int(part.sum())


def _dispatch_only(trace: Trace, steps: pl.DataFrame, source: str
                   ) -> tuple[pl.DataFrame, str]:
    """XSpace step annotations are host-side: under JAX's asynchronous dispatch a
    ``StepTraceAnnotation`` spans the host dispatching the step, and the devices run it later,
    outside every window. When the heaviest repeating program runs once per annotation and
    under ``MIN_INSIDE`` of its device time lies inside the windows, the steps are its
    executions instead, numbered as the annotations, and a warning says so. Otherwise, when
    the windows hold under ``WARN_INSIDE`` of all device time, they stay and a warning says
    how much they leave out (a long evaluation after the annotated steps, say)."""
    span = trace.events.select("rank", "program_id", "start_ns", "end_ns")
    share = inside_share(span, steps)
    if share is None or share >= WARN_INSIDE:
        return steps, source
    runs, label, chosen = _program_runs(trace, None)
    numbers = steps.sort("rank", "start_ns").group_by("rank", maintain_order=True) \
        .agg(pl.col("step"))
    counts = runs.group_by("rank").agg(pl.len()).join(numbers, on="rank", how="full",
                                                      coalesce=True)
    same_count = counts.height > 0 and bool(
        (counts["step"].list.len() == counts["len"]).fill_null(False).all())
    own = span.join(chosen, on=["rank", "program_id"], how="semi")
    own_share = inside_share(own, steps) if same_count else None
    if own_share is not None and own_share < MIN_INSIDE:
        runs = runs.sort("rank", "step").with_columns(step=pl.Series(
            [n for row in numbers.join(counts.select("rank"), on="rank")["step"].to_list()
             for n in row], dtype=pl.Int32))
        trace.meta.warn(Notice.of(
            "steps.dispatch_windows", "the step annotations hold only {pct:.1f}% of the device "
            "time of {program}, which runs once per annotation: they are the host dispatching "
            "each step (asynchronous dispatch), not the devices running it; steps are the "
            "executions of {program} instead, numbered as the annotations",
            pct=100 * own_share, program=label))
        return runs, f"program:{label}"
    trace.meta.warn(Notice.of(
        "steps.annotations_share", "the step annotations hold {pct:.1f}% of device time: the "
        "rest runs outside every annotated step (before the first, after the last, or work "
        "dispatched in one step that runs after its annotation ends), and per-step numbers "
        "leave it out", pct=100 * share))
    return steps, source


_DESCRIBE = {"annotation:gpu": "GPU-side ProfilerStep annotations",
             "annotation:cpu-launches": "CPU-side ProfilerStep annotations",
             "annotation:cpu": "CPU-side ProfilerStep annotations",
             "graph-replay": "graph replays"}


def choose_candidates(trace: Trace, steps: pl.DataFrame) -> pl.DataFrame:
    """One step source per rank among the reader's candidates (STEP_SCHEMA ``candidate``):
    the first that holds at least ``WARN_INSIDE`` of the rank's device time, else the first
    that holds at least ``MIN_INSIDE``, else none: a source holding less than half cannot
    be the steps (GPU-side ProfilerStep annotations of 17 µs in 16 ms CPU-side steps), and
    one that leaves out a tenth gives way to a later one that does not (a GPU-side window
    that ends before most of the work its CPU-side step launched). Every source passed over,
    and a kept one under ``WARN_INSIDE``, is said in a warning with its share. A rank
    without device time keeps its first candidate. Rows without a candidate stay."""
    fixed = steps.filter(pl.col("candidate").is_null())
    offered = steps.filter(pl.col("candidate").is_not_null())
    ev = trace.events.select("rank", "start_ns", "end_ns")
    totals = dict(ev.group_by("rank").agg((pl.col("end_ns") - pl.col("start_ns")).sum())
                  .iter_rows())
    # (rank, candidate) -> (label, share of the rank's device time; None: no device time)
    found: dict[tuple[int, int], tuple[str, float | None]] = {}
    for (c,), rows in sorted(offered.partition_by("candidate", as_dict=True).items()):
        inside = inside_ns(ev, rows)
        for (r,), mine in rows.partition_by("rank", as_dict=True).items():
            total = totals.get(r)
            found[(r, c)] = (_annotation_source(mine),
                             inside.get(r, 0) / total if total else None)
    keep: list[tuple[int, int]] = []
    said: dict[tuple[Any, ...], list[tuple[int, list[float | None]]]] = {}
    for r in sorted({r for r, _ in found}):
        cands = sorted((c, *found[(r, c)]) for rr, c in found if rr == r)
        pick = _pick([share for _, _, share in cands])
        if pick is not None:
            keep.append((r, cands[pick][0]))
        upto = cands if pick is None else cands[:pick + 1]
        key = (tuple(label for _, label, _ in upto), pick is None)
        said.setdefault(key, []).append((r, [share for _, _, share in upto]))
    n_ranks = len({r for r, _ in found})
    for (labels, none), per_rank in said.items():
        _warn_choice(trace, labels, none, per_rank, n_ranks)
    chosen = offered.join(pl.DataFrame(keep, schema={"rank": pl.Int32, "candidate": pl.Int32},
                                       orient="row"), on=["rank", "candidate"], how="semi")
    return pl.concat([fixed, chosen])


def _pick(shares: list[float | None]) -> int | None:
    """The index :func:`choose_candidates` keeps among shares in order, None: none."""
    if any(s is None for s in shares):
        return 0
    for floor in (WARN_INSIDE, MIN_INSIDE):
        for i, s in enumerate(shares):
            if s is not None and s >= floor:
                return i
    return None


def _warn_choice(trace: Trace, labels: tuple[str, ...], none: bool,
                 per_rank: list[tuple[int, list[float | None]]], n_ranks: int) -> None:
    """The warning for ranks that passed over the same step sources (shares as a range)."""
    def pct(i: int) -> str:
        vals = sorted(f"{100 * s[i]:.1f}" for _, s in per_rank if s[i] is not None)
        if not vals:
            return "no device time"
        lo, hi = min(vals, key=float), max(vals, key=float)
        return f"{lo}%" if lo == hi else f"{lo}-{hi}%"

    def name(i: int) -> str:
        label = labels[i]
        desc = next((v for k, v in _DESCRIBE.items() if k in label.split("+")), None)
        return f"the {desc} ({label})" if desc else f"the steps from {label}"

    ranks = [r for r, _ in per_rank]
    where = "" if n_ranks == 1 else (f" on all {n_ranks} ranks" if len(ranks) == n_ranks else
                                     f" on {len(ranks)} of {n_ranks} ranks ({_few(ranks)})")
    if none:
        held = ", ".join(f"{name(i)} {pct(i)}" for i in range(len(labels)))
        trace.meta.warn(Notice.of(
            "steps.no_source", "no step source holds half of device time{where} ({held}): "
            "they cannot be the steps, so there are none", where=where, held=held))
        return
    last = len(labels) - 1
    for i in range(last):
        why = "under half" if all(s[i] is not None and s[i] < MIN_INSIDE  # type: ignore
                                  for _, s in per_rank) else \
            f"under {WARN_INSIDE:.0%}, and a later source holds more"
        trace.meta.warn(Notice.of(
            "steps.source_not_used", "{source} hold {pct} of device time{where} ({why}): not "
            "used as the steps; the steps are {used} instead, which hold {used_pct}",
            source=name(i), pct=pct(i), where=where, why=why, used=name(last),
            used_pct=pct(last)))
    if any(s[last] is not None and s[last] < WARN_INSIDE for _, s in per_rank):
        trace.meta.warn(Notice.of(
            "steps.source_share", "the steps ({source}) hold {pct} of device time{where}: the "
            "rest runs outside every step (before the first, after the last, or between them), "
            "and per-step numbers leave it out", source=labels[last], pct=pct(last),
            where=where))


def _few(ranks: list[int], n: int = 8) -> str:
    return ", ".join(map(str, ranks[:n])) + (", ..." if len(ranks) > n else "")


def _annotation_source(steps: pl.DataFrame) -> str:
    """``annotation`` for step annotations (XSpace ``step_num``); a reader that knows more
    says so in the steps' ``source`` (Kineto: ``annotation:gpu``, ``annotation:cpu``,
    ``annotation:cpu-launches``, ``graph-replay``), joined with ``+`` when they differ."""
    named = sorted(v for v in set(steps["source"].drop_nulls().to_list())
                   if v not in ("step_num", "annotation"))
    return "+".join(named) if named else "annotation"


def _from_marker(trace: Trace, pattern: str) -> tuple[pl.DataFrame, str]:
    regex = re.compile(pattern)
    source = f"marker:{pattern}"
    steps = marker_steps(trace.host_events.filter(pl.col("kind") == "marker"), regex)
    if steps.height:
        _warn_overlaps(trace, steps, pattern)
        share = inside_share(trace.events.select("rank", "start_ns", "end_ns"), steps)
        if share is not None and share < WARN_INSIDE:  # host ranges: the device may lag
            trace.meta.warn(Notice.of(
                "steps.marker_share", "the --step-marker {pattern!r} ranges hold {pct:.1f}% of "
                "device time: they are host ranges, and work launched in one that runs after "
                "it ends (or outside every range) is in no step", pattern=pattern,
                pct=100 * share))
        return steps, source
    modules = trace.events.select("program_id", "module").unique().drop_nulls()
    wanted = [p for p, m in modules.iter_rows() if regex.search(m)]
    steps, label = program_steps(trace, wanted) if wanted else (
        pl.DataFrame(schema=STEP_SCHEMA), "")
    if steps.height:
        if len(wanted) > 1:
            trace.meta.warn(Notice.of(
                "steps.marker_programs", "--step-marker {pattern!r} names {n} programs; the "
                "steps are the executions of {program}, the one with the most device time",
                pattern=pattern, n=len(wanted), program=label))
        return steps, source
    trace.meta.warn(Notice.of(
        "steps.marker_unmatched", "no ROCTx range matches --step-marker {pattern!r} (nor any "
        "XSpace host annotation or program name): no steps", pattern=pattern))
    return pl.DataFrame(schema=STEP_SCHEMA), "none"


def _number(m: re.Match[str]) -> int | None:
    """The step number a marker names: its group ``step``, else its first group."""
    text = m.group("step") if "step" in m.re.groupindex else (m.group(1) if m.re.groups else None)
    text = text.strip() if text else ""
    return int(text) if text.lstrip("-").isdigit() else None


def marker_steps(markers: pl.DataFrame, regex: re.Pattern[str]) -> pl.DataFrame:
    """Steps (source "marker") from host markers (rank, name, start_ns, end_ns) whose name
    matches ``regex`` (``re.search``; zero-length markers ignored). Numbered by the marker
    when every match names a number (markers with one number on one rank, one per thread
    say, become one step from the first start to the last end), else 0, 1, ... per rank in
    start order."""
    ranges = markers.filter((pl.col("end_ns") > pl.col("start_ns")) & pl.col("name").is_not_null())
    names = sorted(ranges["name"].unique().to_list())
    hits = [(n, m) for n in names if (m := regex.search(n))]
    table = pl.DataFrame({"name": [n for n, _ in hits], "num": [_number(m) for _, m in hits]},
                         schema={"name": ranges.schema["name"], "num": pl.Int64})
    sel = ranges.join(table, on="name", how="inner")
    if sel.is_empty():
        return pl.DataFrame(schema=STEP_SCHEMA)
    if sel["num"].null_count() == 0:
        sel = sel.group_by("rank", "num").agg(pl.col("start_ns").min(), pl.col("end_ns").max())
    else:
        sel = sel.sort("rank", "start_ns", "end_ns", "name").with_columns(
            num=pl.int_range(pl.len()).over("rank"))
    return conform(sel.select("rank", "start_ns", "end_ns", step="num",
                              source=pl.lit("marker")), STEP_SCHEMA)


def _warn_overlaps(trace: Trace, steps: pl.DataFrame, pattern: str) -> None:
    prev_end = pl.col("end_ns").shift(1).over("rank", order_by="start_ns")
    n = steps.sort("rank", "start_ns").filter(pl.col("start_ns") < prev_end).height
    if n:
        trace.meta.warn(Notice.of(
            "steps.marker_overlap", "{n} steps from --step-marker {pattern!r} overlap the "
            "previous step (nested or concurrent markers?): an event counts in the later one",
            n=n, pattern=pattern))


def program_steps(trace: Trace, candidates: list[int] | None) -> tuple[pl.DataFrame, str]:
    """Steps (source "program") from the executions of one program per rank, and the label
    ``<module>(<program_id>)`` of the programs used (ranks that chose differently are joined
    with ", "). ``candidates``: the program ids to choose from (None: every program that
    runs at least twice); the one with the most device time on the rank wins."""
    steps, label, _ = _program_runs(trace, candidates)
    return steps, label


def _program_runs(trace: Trace, candidates: list[int] | None
                  ) -> tuple[pl.DataFrame, str, pl.DataFrame]:
    """:func:`program_steps`, and the (rank, program_id) each rank's steps come from."""
    none = pl.DataFrame(schema={"rank": pl.Int32, "program_id": pl.Int64})
    key = ["rank", "device", "program_id"]
    ev = trace.events
    if "hlo_category" in ev.columns:  # a TPU copy's span in flight is no run of its program
        ev = ev.filter(~on_async_lane())
    ev = ev.select(*key, "stream", "op", "name", "start_ns", "end_ns", "module") \
        .filter(pl.col("program_id").is_not_null())
    if candidates is not None:
        ev = ev.filter(pl.col("program_id").is_in(candidates))
    if ev.is_empty():
        return pl.DataFrame(schema=STEP_SCHEMA), "", none
    # the first kernel of each (rank, device, program): among its earliest-starting rows
    earliest = ev.filter(pl.col("start_ns") == pl.col("start_ns").min().over(key))
    first = (earliest.sort([*key, *_FIRST_KERNEL], nulls_last=True)
             .group_by(key, maintain_order=True).agg(pl.col("op").first(), pl.col("name").first()))
    # its occurrences: narrowed by name first, so the exact join runs on few rows
    runs = (ev.filter(pl.col("name").is_in(first["name"].unique().implode()))
            .join(first, on=[*key, "op", "name"], nulls_equal=True)
            .sort("start_ns", "stream")
            .with_columns(k=pl.int_range(pl.len()).over(key)))
    counts = runs.group_by(key).agg(n=pl.len())
    per_prog = (ev.group_by("rank", "program_id")
                .agg(time=(pl.col("end_ns") - pl.col("start_ns")).sum(),
                     module=pl.col("module").drop_nulls().min(), last=pl.col("end_ns").max())
                .join(counts.group_by("rank", "program_id")
                      .agg(lo=pl.col("n").min(), hi=pl.col("n").max(),
                           per_device=pl.format("device {}: {}", "device", "n")
                           .sort_by("device")), on=["rank", "program_id"]))
    need = 1 if candidates is not None else 2
    chosen = (per_prog.filter(pl.col("hi") >= need)
              .sort(["rank", "time", "program_id"], descending=[False, True, False])
              .group_by("rank", maintain_order=True).first())
    # the id as the trace writes it (a TPU fingerprint is a uint64: model.shown_program_id)
    label = pl.format("{}({})", pl.col("module").fill_null("?"),
                      pl.col("program_id").reinterpret(signed=False))
    chosen = chosen.with_columns(label=label)
    for r in chosen.filter(pl.col("lo") != pl.col("hi")).iter_rows(named=True):
        host = trace.events.filter(pl.col("rank") == r["rank"])["host"][0]
        trace.meta.warn(Notice.of(
            "steps.program_uneven", "no steps on {host}: the program with the most device "
            "time, {program}, runs a different number of times on its devices ({counts}), so "
            "its executions cannot be matched across devices", host=host, program=r["label"],
            counts=", ".join(r["per_device"])))
    chosen = chosen.filter(pl.col("lo") == pl.col("hi"))
    if chosen.is_empty():
        return pl.DataFrame(schema=STEP_SCHEMA), "", none
    starts = (runs.join(chosen.select("rank", "program_id"), on=["rank", "program_id"])
              .group_by("rank", "k").agg(start_ns=pl.col("start_ns").min())
              .sort("rank", "k"))
    steps = (starts.join(chosen.select("rank", "last"), on="rank")
             .with_columns(end_ns=pl.col("start_ns").shift(-1).over("rank", order_by="k")
                           .fill_null(pl.col("last")))
             .select("rank", "start_ns", "end_ns", step="k", source=pl.lit("program")))
    return (conform(steps, STEP_SCHEMA), ", ".join(sorted(set(chosen["label"].to_list()))),
            chosen.select("rank", "program_id"))
