"""The report's step timeline: one step, per device and stream, activities as bars coloured by
category, exposed communication marked on its own row per device (zoom with plotly's drag).

Compact by construction (the page has a size budget): one plotly trace per distinct kernel
name, so each name is written once, and rows are numbers with their labels on the axis."""

from __future__ import annotations

from typing import Any

import polars as pl

from reports.html.figures import Fig, axis, base_layout, chart_name, ptext, rnd, time_unit
from reports.html.palette import color, label
from tracelens.analyze.timeline.window import TimelineWindow
from tracelens.core.model import CATEGORIES
from tracelens.results.summary import CriticalPathLines

NAME_CHARS = 90


def _hover_literal(text: str) -> str:
    """Untrusted text placed inside a hovertemplate: escaped, and no ``%{`` placeholders."""
    return ptext(text).replace("%", "&#37;")


def _bars(part: pl.DataFrame, start: int, div: float) -> dict[str, object]:
    s, e = part["start_ns"].to_list(), part["end_ns"].to_list()
    # an explicit bar thickness (in rows): plotly would derive one per trace from its points
    return {"y": part["_y"].to_list(), "base": [rnd((a - start) / div) for a in s],
            "x": [rnd((b - a) / div) for a, b in zip(s, e)], "width": 0.8}


def path_on_timeline(w: TimelineWindow | None, path: CriticalPathLines | None
                     ) -> CriticalPathLines | None:
    """The critical path to draw on the timeline: only one of the timeline's own step (the
    summary's path is of ``--step`` or the middle step by number; the timeline's default is
    the median step by span) with activities on a shown device."""
    if w is None or path is None or path.step != w.step or not path.activities:
        return None
    shown = set(w.events.select("host", "device").unique().iter_rows())
    return path if any((a.host, a.device) in shown for a in path.activities) else None


def _path_bars(w: TimelineWindow, path: CriticalPathLines, rows: pl.DataFrame,
               div: float) -> pl.DataFrame:
    """The path's time on each activity drawn on its stream's row: the last ``on_path_ns``
    of the activity (its own work ends it; a wait before it belongs to another part),
    clipped to the window."""
    acts = pl.DataFrame([(a.host, a.device, a.stream, a.end_ns - a.on_path_ns, a.end_ns)
                         for a in path.activities], orient="row",
                        schema={"host": pl.String, "device": pl.Int32, "_k": pl.Int64,
                                "start_ns": pl.Int64, "end_ns": pl.Int64})
    return acts.with_columns(start_ns=pl.max_horizontal("start_ns", pl.lit(w.start_ns)),
                             end_ns=pl.min_horizontal("end_ns", pl.lit(w.end_ns))).filter(
        pl.col("end_ns") > pl.col("start_ns")).join(
        rows.select(pl.col("host").cast(pl.String), pl.col("device").cast(pl.Int32), "_k", "_y"),
        on=["host", "device", "_k"]).sort("_y", "start_ns")


def step_timeline_figure(w: TimelineWindow | None, many_hosts: bool,
                         path: CriticalPathLines | None = None) -> Fig | None:
    """The timeline; ``path`` (:func:`path_on_timeline`) adds the critical path's
    activities as a thin dark bar over each."""
    if w is None or w.events.is_empty():
        return None
    unit, div = time_unit(w.end_ns - w.start_ns)
    dev = (pl.concat_str(pl.col("host"), pl.lit("/"), pl.col("device").cast(pl.String))
           if many_hosts else pl.col("device").cast(pl.String))
    rows = pl.concat([
        w.events.select("host", "rank", "device", _k=pl.col("stream"),
                        _label=pl.concat_str(dev, pl.lit(" s"), pl.col("stream").cast(pl.String))),
        w.exposed.select("host", "rank", "device", _k=pl.lit(2**62, pl.Int64),
                         _label=pl.concat_str(dev, pl.lit(" exposed comm"))),
    ]).unique(["host", "rank", "device", "_k"]).sort("rank", "device", "host", "_k") \
        .with_row_index("_y")
    keys = ["host", "rank", "device", "_k"]
    ev = w.events.with_columns(_k=pl.col("stream")).join(rows, on=keys)
    data: list[dict[str, Any]] = []
    parts = ev.with_columns(_c=pl.col("category").cast(pl.String).replace_strict(
        {c: i for i, c in enumerate(CATEGORIES)}, default=len(CATEGORIES))) \
        .sort("_c", "name", "_y", "start_ns").partition_by("_c", "name", maintain_order=True)
    seen: set[str] = set()
    for part in parts:  # one trace per distinct name: bounded by the window's cap
        cat = str(part["category"][0])
        data.append({
            "type": "bar", "orientation": "h", "name": ptext(label(cat)),
            "legendgroup": cat, "showlegend": cat not in seen, **_bars(part, w.start_ns, div),
            "marker": {"color": color(cat), "line": {"width": 0}},
            "hovertemplate": _hover_literal(chart_name(part["name"][0], NAME_CHARS))
            + f"<br>%{{base:,.3f}} {unit} +%{{x:,.3f}} {unit}<extra></extra>"})
        seen.add(cat)
    if w.exposed.height:
        ex = w.exposed.with_columns(_k=pl.lit(2**62, pl.Int64)).join(rows, on=keys)
        data.append({
            "type": "bar", "orientation": "h", "name": "exposed communication",
            **_bars(ex, w.start_ns, div), "marker": {"color": color("exposed_comm")},
            "hovertemplate": f"exposed communication<br>%{{base:,.3f}} {unit} "
                             f"+%{{x:,.3f}} {unit}<extra></extra>"})
    if path is not None:
        on = _path_bars(w, path, rows, div)
        if on.height:
            data.append({
                "type": "bar", "orientation": "h",
                "name": ptext(f"critical path ({path.host} · device {path.device})"),
                **_bars(on, w.start_ns, div), "width": 0.25,
                "marker": {"color": color("critical_path"), "line": {"width": 0}},
                "hovertemplate": f"on the critical path<br>%{{base:,.3f}} {unit} "
                                 f"+%{{x:,.3f}} {unit}<extra></extra>"})
    return {"data": data, "layout": base_layout(
        max(180, 90 + 18 * rows.height), barmode="overlay", bargap=0.15,
        xaxis=axis(f"time from the window's start ({unit}); drag to zoom"),
        yaxis=axis("", autorange="reversed", tickvals=rows["_y"].to_list(),
                   ticktext=[ptext(t) for t in rows["_label"].to_list()]))}
