"""The one step every output describes, and the partial steps none of them count.

A median of an even number of step spans interpolated between the two middle ones is a time
no step took (36.990 ms from steps of 31.379 and 42.6 ms), and the findings then solved a
step the headline never named. So the headline, the findings, the critical path and the
report's timeline all use one step that ran: :func:`headline_step`, the step whose span,
averaged over the ranks that ran it, is the median, the lower of the two middle ones for an
even count (ties by number). Its time (:func:`step_time_ns`) is its longest rank's span, the
window the critical path solves.

A step at either edge of a rank's steps shorter than :data:`PARTIAL_SHARE` of the median of
the rank's step spans is partial: the profiler started or stopped inside it (a truncated last
step of 0.049 ms among steps of 8.9 ms). A program's executions and graph replays
(:data:`WHOLE_SOURCES`) are never partial: each is bounded by its own kernels, so the last one
is whole work, only without the host's gap after it (and often the shortest). A partial step
is dropped from the steps when they are marked (:func:`drop_partial`), so no median, MFU or
step count includes it, and a note says so.
"""

from __future__ import annotations

import polars as pl

from tracelens.core.model import Notice

PARTIAL_SHARE = 0.5
"""An edge step shorter than this share of the median step span of its rank is partial."""

PARTIAL_CODE = "steps.partial"

WHOLE_SOURCES = ("program", "graph-replay")
"""Step sources whose every step is the span of its own work (a program's execution, a graph
replay): never cut by the profiler, so never partial."""


def partial_rows(steps: pl.DataFrame) -> pl.DataFrame:
    """The rows of ``steps`` (rank, step, start_ns, end_ns, ...) that are partial: the first
    or the last step of its rank by start, shorter than :data:`PARTIAL_SHARE` of the median
    span of the rank's steps, not of a :data:`WHOLE_SOURCES` source. A rank with
    fewer than two steps has none."""
    if steps.height < 2:
        return steps.head(0)
    span = pl.col("end_ns") - pl.col("start_ns")
    pos = pl.int_range(pl.len()).over("rank", order_by=["start_ns", "step"])
    n = pl.len().over("rank")
    windowed = ~pl.col("source").is_in(list(WHOLE_SOURCES)).fill_null(False) \
        if "source" in steps.columns else pl.lit(True)
    return steps.filter(
        (n >= 2) & ((pos == 0) | (pos == n - 1)) & windowed
        & (span < PARTIAL_SHARE * span.median().over("rank")))


def drop_partial(steps: pl.DataFrame, hosts: dict[int, str] | None = None
                 ) -> tuple[pl.DataFrame, list[Notice]]:
    """``steps`` without their partial rows (:func:`partial_rows`), and the notes that say
    which were left out, one per host (``hosts``: each rank's host; a host read alone says
    the same as the job read at once)."""
    part = partial_rows(steps)
    if not part.height:
        return steps, []
    kept = steps.join(part.select("rank", "step"), on=["rank", "step"], how="anti")
    hosts = hosts or {}
    by_host: dict[str, list[tuple[int, int, int, int]]] = {}
    for r, st, b, e in part.sort("rank", "step").select("rank", "step", "start_ns",
                                                          "end_ns").iter_rows():
        by_host.setdefault(hosts.get(r, "?"), []).append((r, st, b, e))
    notes = []
    for host, rows in sorted(by_host.items()):
        shown = ", ".join(f"{st} ({(e - b) / 1e6:,.3f} ms)" for _, st, b, e in rows)
        notes.append(Notice.of(
            PARTIAL_CODE, "{host}: {n} partial step(s) at the trace's edges left out: step "
            "{which}, under {share:.0%} of the median step; the profiler started or stopped "
            "inside them, so they count in no step, median or MFU", host=host, n=len(rows),
            which=shown, share=PARTIAL_SHARE))
    return kept, notes


def headline_step(steps: pl.DataFrame) -> int | None:
    """The step every output describes: the median by span averaged over the ranks that ran
    it, the lower of the two middle ones (ties by step number); None without steps."""
    if not steps.height:
        return None
    per = steps.group_by("step").agg(span=(pl.col("end_ns") - pl.col("start_ns")).mean()) \
        .sort("span", "step")
    return int(per["step"][(per.height - 1) // 2])


def step_time_ns(steps: pl.DataFrame, step: int | None) -> int | None:
    """The time of ``step``: its longest rank's span (the window the critical path solves);
    None when it is not in ``steps``."""
    if step is None:
        return None
    rows = steps.filter(pl.col("step") == step)
    return int((rows["end_ns"] - rows["start_ns"]).max()) if rows.height else None  # type: ignore


STEPS_DIFFER = "the hosts' median steps differ"


def hosts_disagree(windows: pl.DataFrame) -> str | None:
    """Why a job's default windows (host, rank, step, ...) cannot be solved together: each
    host read alone picks the headline step of its own steps, and hosts whose spans order
    differently pick different steps (a cross-host collective would then join two steps).
    None when every window is of one step (or none has a step)."""
    picked = windows.filter(pl.col("step").is_not_null()).group_by("step").agg(
        pl.col("host").cast(pl.String).min()).sort("step")
    if picked.height < 2:
        return None
    which = "; ".join(f"step {s} ({h}, ...)" for s, h in picked.iter_rows())
    return (f"{STEPS_DIFFER} ({which}): each host read alone picks its own; "
            f"pass --step N for one step on every host")
