"""Where a trace's steps come from (DESIGN §6.0), decided once per load.

In order: ``--step-marker REGEX`` when given (host markers whose name matches, else the
executions of a program whose module name matches); else the trace's own step annotations
(``StepTraceAnnotation``'s ``step_num``); else the executions of the program with the most
device time among those that run at least twice; else no steps. ``trace.meta.steps_source``
names the source in every output: ``"marker:<regex>"``, ``"annotation"``,
``"program:<module>(<program_id>)"`` or ``"none"``; a reader that knows where its steps
came from says so (Kineto: ``"annotation:gpu"``, ``"annotation:cpu"``,
``"annotation:cpu-launches"``, ``"graph-replay"``).

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

import polars as pl

from tracelens.model import STEP_SCHEMA, Trace, conform

_FIRST_KERNEL = ["start_ns", "stream", "op", "name"]


def mark_steps(trace: Trace, step_marker: str | None = None) -> None:
    """Set ``trace.steps`` and ``trace.meta.steps_source`` (see the module docstring)."""
    if step_marker is not None:
        steps, source = _from_marker(trace, step_marker)
        if steps.height and trace.steps.height:
            trace.meta.warn(f"--step-marker {step_marker!r} replaces the trace's own "
                            f"{trace.steps['step'].n_unique()} annotated steps")
    elif trace.steps.height:
        steps, source = trace.steps, _annotation_source(trace.steps)
    else:
        steps, label = program_steps(trace, None)
        source = f"program:{label}" if steps.height else "none"
    trace.steps = steps.sort("rank", "start_ns", "step")
    trace.meta.steps_source = source


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
        return steps, source
    modules = trace.events.select("program_id", "module").unique().drop_nulls()
    wanted = [p for p, m in modules.iter_rows() if regex.search(m)]
    steps, label = program_steps(trace, wanted) if wanted else (
        pl.DataFrame(schema=STEP_SCHEMA), "")
    if steps.height:
        if len(wanted) > 1:
            trace.meta.warn(f"--step-marker {pattern!r} names {len(wanted)} programs; the "
                            f"steps are the executions of {label}, the one with the most "
                            "device time")
        return steps, source
    trace.meta.warn(f"no ROCTx range matches --step-marker {pattern!r} (nor any XSpace host "
                    "annotation or program name): no steps")
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
                         schema={"name": pl.String, "num": pl.Int64})
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
        trace.meta.warn(f"{n} steps from --step-marker {pattern!r} overlap the previous step "
                        "(nested or concurrent markers?): an event counts in the later one")


def program_steps(trace: Trace, candidates: list[int] | None) -> tuple[pl.DataFrame, str]:
    """Steps (source "program") from the executions of one program per rank, and the label
    ``<module>(<program_id>)`` of the programs used (ranks that chose differently are joined
    with ", "). ``candidates``: the program ids to choose from (None: every program that
    runs at least twice); the one with the most device time on the rank wins."""
    key = ["rank", "device", "program_id"]
    ev = trace.events.select(*key, "stream", "op", "name", "start_ns", "end_ns", "module") \
        .filter(pl.col("program_id").is_not_null())
    if candidates is not None:
        ev = ev.filter(pl.col("program_id").is_in(candidates))
    if ev.is_empty():
        return pl.DataFrame(schema=STEP_SCHEMA), ""
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
    label = pl.format("{}({})", pl.col("module").fill_null("?"), "program_id")
    chosen = chosen.with_columns(label=label)
    for r in chosen.filter(pl.col("lo") != pl.col("hi")).iter_rows(named=True):
        host = trace.events.filter(pl.col("rank") == r["rank"])["host"][0]
        trace.meta.warn(
            f"no steps on {host}: the program with the most device time, {r['label']}, runs "
            f"a different number of times on its devices ({', '.join(r['per_device'])}), so "
            "its executions cannot be matched across devices")
    chosen = chosen.filter(pl.col("lo") == pl.col("hi"))
    if chosen.is_empty():
        return pl.DataFrame(schema=STEP_SCHEMA), ""
    starts = (runs.join(chosen.select("rank", "program_id"), on=["rank", "program_id"])
              .group_by("rank", "k").agg(start_ns=pl.col("start_ns").min())
              .sort("rank", "k"))
    steps = (starts.join(chosen.select("rank", "last"), on="rank")
             .with_columns(end_ns=pl.col("start_ns").shift(-1).over("rank", order_by="k")
                           .fill_null(pl.col("last")))
             .select("rank", "start_ns", "end_ns", step="k", source=pl.lit("program")))
    return conform(steps, STEP_SCHEMA), ", ".join(sorted(set(chosen["label"].to_list())))
