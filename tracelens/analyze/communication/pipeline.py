"""Pipeline bubbles per stage.

The pipeline axis is the mesh axis named ``pp`` (``--mesh``, the trace's process groups),
else the one axis all point-to-point collectives (send, recv, collective-permute) lie
along; a device's stage is its coordinate on that axis. Per device and step, its *bubble* is
the step time in which it computes nothing and moves nothing it could hide: the idle time
#timeline) plus the exposed time of its point-to-point transfers (a
of its timeline (docs/definitions.md
receive waiting for the neighbour stage's activations or gradients). Per stage, averaged
over its devices and steps: the step time, the bubble, its fraction of the step, and the
shares of the bubble before the stage's first compute kernel of the step (warm-up) and
after its last (cool-down). A step window where the device computes nothing counts as all
bubble, with no warm-up or cool-down split (it has no first kernel).
"""

from __future__ import annotations

import polars as pl

from tracelens.analyze.communication.mesh import Mesh
from tracelens.analyze.timeline.breakdown import DEVICE_KEYS, clip_to_windows, step_breakdown
from tracelens.core.model import COMPUTE_CATEGORIES, Text, Trace
from tracelens.results.axes import Pipeline, StageBubble

P2P_TYPES = ("send", "recv", "send-recv", "collective-permute")
ROWS_SCHEMA = {"host": Text, "rank": pl.Int32, "device": pl.Int32, "step": pl.Int32,
               "span_ns": pl.Int64, "idle_ns": pl.Int64, "p2p_exposed_ns": pl.Int64,
               "warm_ns": pl.Int64, "cool_ns": pl.Int64}


def pipeline_rows(trace: Trace, acts: pl.DataFrame) -> pl.DataFrame:
    """One host's per (device, step) numbers (ROWS_SCHEMA; warm/cool: the time before the
    first / after the last compute kernel in the step), empty when the host runs no
    point-to-point collective or marks no steps (a bubble is a part of a step)."""
    p2p = acts.filter(pl.col("type").is_in(P2P_TYPES))
    if p2p.is_empty() or trace.steps.is_empty():
        return pl.DataFrame(schema=ROWS_SCHEMA)
    keys = [*DEVICE_KEYS, "step"]
    tl = step_breakdown(trace.events, trace.steps, trace.devices).timeline
    windows = trace.steps.select("rank", "step", w0="start_ns", w1="end_ns")
    comp = clip_to_windows(trace.events.filter(pl.col("category").is_in(
        list(COMPUTE_CATEGORIES))).select(*DEVICE_KEYS, "start_ns", "end_ns"), trace.steps)
    edges = comp.group_by(keys).agg(first=pl.col("start_ns").min(),
                                    last=pl.col("end_ns").max())
    exposed = p2p.filter(pl.col("step").is_not_null()).group_by(keys).agg(
        p2p_exposed_ns=pl.col("exposed_ns").sum())
    rows = tl.select(*keys, "span_ns", "idle_ns").join(windows, on=["rank", "step"]) \
        .join(edges, on=keys, how="left").join(exposed, on=keys, how="left")
    return rows.select(
        *keys, "span_ns", "idle_ns", pl.col("p2p_exposed_ns").fill_null(0),
        warm_ns=pl.col("first") - pl.col("w0"), cool_ns=pl.col("w1") - pl.col("last"),
    ).cast(ROWS_SCHEMA).sort(keys)  # type: ignore[arg-type]


def pipeline_axis(mesh: Mesh, acts: pl.DataFrame) -> int | None:
    """The index of the pipeline axis (module doc), None when there is none."""
    names = [a.name for a in mesh.axes]
    if "pp" in names:
        return names.index("pp")
    along = acts.filter(pl.col("type").is_in(P2P_TYPES))["axis"].unique().to_list()
    if len(along) == 1 and along[0] in names:
        return names.index(along[0])
    return None


def pipeline(rows: pl.DataFrame, mesh: Mesh, acts: pl.DataFrame,
             ids: pl.DataFrame) -> Pipeline | None:
    """Per-stage bubbles from every host's :func:`pipeline_rows` (placed in the job), the
    mesh, the mapped activities (``axis``) and the devices' ids (host, rank, device, _me)."""
    k = pipeline_axis(mesh, acts)
    if k is None or rows.is_empty():
        return None
    ax = mesh.axes[k]
    rows = rows.join(ids.select(*DEVICE_KEYS, "_me"), on=DEVICE_KEYS, how="left").with_columns(
        stage=(pl.col("_me") // ax.stride) % ax.size,
        bubble=pl.col("idle_ns") + pl.col("p2p_exposed_ns"))
    bubble = pl.col("bubble")
    per = rows.filter(pl.col("stage").is_not_null()).group_by("stage").agg(
        devices=pl.col("_me").n_unique(), n=pl.len(), span=pl.col("span_ns").mean(),
        bubble=bubble.mean(), frac=pl.when(pl.col("span_ns").sum() > 0).then(
            bubble.sum() / pl.col("span_ns").sum()),
        warm=pl.when(bubble.sum() > 0).then(
            pl.col("warm_ns").clip(upper_bound=bubble).sum() / bubble.sum()),
        cool=pl.when(bubble.sum() > 0).then(
            pl.col("cool_ns").clip(upper_bound=bubble).sum() / bubble.sum()),
    ).sort("stage")
    stages = tuple(StageBubble(int(r["stage"]), int(r["devices"]), int(r["n"]), r["span"],
                               r["bubble"], r["frac"], r["warm"], r["cool"])
                   for r in per.iter_rows(named=True))
    return Pipeline(axis=ax.name, stages=stages)
