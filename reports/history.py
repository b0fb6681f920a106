"""Render the ``tracelens history`` results: tables (terminal, Markdown, CSV),
JSON through :mod:`tracelens.results.encode`, and ``--html``: one self-contained page with a
trend chart per series, regressions marked. Formatting only; trace text (labels, tags,
paths) is escaped in the page (jinja2 autoescape, :func:`reports.html.figures.ptext`)."""

from __future__ import annotations

import datetime as _dt
from typing import Sequence

from markupsafe import Markup

from reports.html import figures as F
from reports.html.page import TEMPLATES, _env, plotly_js, script_json
from reports.html.palette import color
from reports.scaling import Tables
from tracelens.results.encode import JSONValue
from tracelens.results.history import (HistoryCheck, HistoryShow, Regression, RunPoint,
                                       RunRecord)

METRICS = ("step", "mfu", "component")
REGRESSION_COLOR = "#c62828"


def _ms(ns: float | None) -> str:
    return "-" if ns is None else f"{ns / 1e6:,.3f}"


def _mfu(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _tags(tags: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(tags.items())) or "-"


def components_of(runs: Sequence[RunPoint], nonzero: bool = False) -> list[str]:
    """Every component any run has (``nonzero``: that is not 0 in every run), in the first
    run's order, the others after."""
    seen: dict[str, None] = {}
    for r in runs:
        seen.update(dict.fromkeys(r.components))
    return [c for c in seen if not nonzero or any(r.components.get(c) for r in runs)]


def _by_series(runs: Sequence[RunPoint]) -> dict[str, list[RunPoint]]:
    out: dict[str, list[RunPoint]] = {}
    for r in runs:
        out.setdefault(r.series, []).append(r)
    return out


def _regression_rows(regs: Sequence[Regression]) -> list[list[str]]:
    return [[g.label, g.series, _ms(g.baseline_step_ns), _ms(g.step_ns),
             f"{g.change_pct:+.1f}%", g.first_label,
             "; ".join(f"{c.component} {c.delta_ns / 1e6:+,.3f} ms" for c in g.causes) or
             "no single component beyond its spread"] for g in regs]


REG_HEADER = ["run", "series", "baseline ms", "step ms", "change", "since", "causes"]


def list_tables(runs: Sequence[RunRecord]) -> Tables:
    """``history list``: one row per run."""
    return [("Runs (in the order recorded)",
             ["run", "recorded", "series", "steps", "step ms", "MFU", "inputs", "tool"],
             [[r.label, r.recorded_at, r.series, f"{r.steps} ({r.steps_source})",
               _ms(r.step_ns), _mfu(r.mfu), str(len(r.inputs)), r.tool_version]
              for r in runs])]


def show_tables(s: HistoryShow) -> Tables:
    """``history show``: the metric per run; regressions marked with ``!``."""
    out: Tables = []
    for series, runs in _by_series(s.runs).items():
        if s.metric == "component":
            comps = components_of(runs, nonzero=True)
            out.append((f"{series}: ms per median step (averaged over devices; ! = regressed "
                        "when recorded)", ["run", *comps, "step"],
                        [[("! " if r.regression else "") + r.label,
                          *[_ms(r.components.get(c)) for c in comps], _ms(r.step_ns)]
                         for r in runs]))
        else:
            out.append((f"{series} (! = regressed when recorded)",
                        ["run", "recorded", "step ms" if s.metric == "step" else "MFU"],
                        [[("! " if r.regression else "") + r.label, r.recorded_at,
                          _ms(r.step_ns) if s.metric == "step" else _mfu(r.mfu)]
                         for r in runs]))
    if s.regressions:
        out.append(("Regressions", REG_HEADER, _regression_rows(s.regressions)))
    if s.notes:
        out.append(("Notes", ["", ""], [["!", n] for n in s.notes]))
    return out


def check_tables(c: HistoryCheck) -> Tables:
    """``history check``: each series' verdict, then the regressions."""
    how = f"against {c.baseline}" if c.baseline else f"window {c.window}"
    out: Tables = [(f"Series ({how}, limit {c.fail_above_pct:g}%)",
                    ["series", "runs", "newest", "status", "baseline", "change", "threshold ms"],
                    [[v.series, str(v.runs), v.newest,
                      v.status + (f" ({v.reason})" if v.reason else ""), v.baseline_label or "-",
                      "-" if v.change_pct is None else f"{v.change_pct:+.1f}%",
                      _ms(v.threshold_ns)] for v in c.series])]
    if c.regressions:
        out.append(("Regressions", REG_HEADER, _regression_rows(c.regressions)))
    moved = [[v.series, what, title] for v in c.series
             for what, titles in (("appeared", v.findings_appeared),
                                  ("vanished", v.findings_vanished)) for title in titles or ()]
    unknown = [v.series for v in c.series if v.baseline_label and v.findings_appeared is None]
    if moved or any(v.findings_appeared is not None for v in c.series):
        out.append(("Findings since the baseline (summarize's what to fix first)",
                    ["series", "", "finding"], moved))
    if unknown:
        out.append(("Notes", ["", ""], [["!", f"{s}: findings not compared (a run of the two "
                                         "was recorded before the store kept findings)"]
                                        for s in unknown]))
    if c.notes:
        out.append(("Notes", ["", ""], [["!", n] for n in c.notes]))
    return out


def csv_rows(runs: Sequence[RunPoint]) -> tuple[list[dict[str, object]], list[str]]:
    """One CSV row per run: identity, step, MFU and every component (ns)."""
    comps = components_of(runs)
    cols = ["label", "recorded_at", "series", "tags", "step_ns", "mfu", "regression", *comps]
    rows: list[dict[str, object]] = [
        {"label": r.label, "recorded_at": r.recorded_at, "series": r.series,
         "tags": _tags(r.tags), "step_ns": r.step_ns, "mfu": r.mfu,
         "regression": r.regression, **{c: r.components.get(c) for c in comps}}
        for r in runs]
    return rows, cols


def _metric_values(r: RunPoint, metric: str) -> dict[str, float | None]:
    if metric == "component":
        return {c: F.rnd(ns / 1e6, 6) for c, ns in r.components.items()}
    if metric == "mfu":
        return {"MFU %": None if r.mfu is None else F.rnd(100 * r.mfu, 4)}
    return {"step ms": F.rnd(r.step_ns / 1e6, 6)}


TICK_CHARS = 24  # a run label's characters on the trend chart's axis


def trend_figure(runs: Sequence[RunPoint], metric: str
                 ) -> dict[str, JSONValue]:
    """One series' trend: a line per metric (per component for ``component``), x the runs
    in order; regressed runs marked on the step (or first) line."""
    x = [F.ptext(r.label) for r in runs]
    names = components_of(runs, nonzero=True) if metric == "component" else \
        list(_metric_values(runs[0], metric))
    data: list[JSONValue] = []
    if metric == "component":
        data.append({"type": "scatter", "mode": "lines", "name": "step", "x": x,
                     "y": [F.rnd(r.step_ns / 1e6, 6) for r in runs],
                     "line": {"color": "#444444", "dash": "dot"}})
    for name in names:
        kind, _, what = name.partition(":")
        data.append({"type": "scatter", "mode": "lines+markers", "name": F.ptext(name), "x": x,
                     "y": [_metric_values(r, metric).get(name) for r in runs],
                     "line": {"color": color(what if kind == "compute" else kind)
                              if metric == "component" else "#1f77b4"},
                     "hovertemplate": "%{x}: %{y}<extra>" + F.ptext(name) + "</extra>"})
    marked = [(F.ptext(r.label), _metric_values(r, metric).get(names[0]) if metric != "component"
               else F.rnd(r.step_ns / 1e6, 6)) for r in runs if r.regression]
    if marked:
        data.append({"type": "scatter", "mode": "markers", "name": "regression",
                     "x": [m[0] for m in marked], "y": [m[1] for m in marked],
                     "marker": {"color": REGRESSION_COLOR, "size": 13, "symbol": "x"},
                     "hovertemplate": "%{x}: regression<extra></extra>"})
    ytitle = {"step": "median step, ms", "mfu": "MFU, %",
              "component": "ms per median step (device-averaged)"}[metric]
    # a long label would take the chart's height for its tick: shortened there (the hover
    # and the tables below keep it whole)
    ticks = [F.ptext(r.label if len(r.label) <= TICK_CHARS else r.label[:TICK_CHARS] + "…")
             for r in runs]
    return {"data": data, "layout": F.base_layout(  # the section's heading names the series
        340, xaxis=F.axis("run", type="category", tickvals=x, ticktext=ticks),
        yaxis=F.axis(ytitle))}


def render_html(s: HistoryShow, store: str, generated: str | None = None) -> str:
    """The ``history show --html`` page: a trend chart per series, the regressions."""
    if generated is None:
        generated = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    groups = _by_series(s.runs)
    figs = {f"trend{i}": trend_figure(runs, s.metric)
            for i, (series, runs) in enumerate(groups.items())}
    sections = [{"fig": f"trend{i}", "series": series, "runs": runs}
                for i, (series, runs) in enumerate(groups.items())]
    ctx = {
        "title": "tracelens history", "store": store, "generated": generated,
        "metric": s.metric, "sections": sections, "regressions": s.regressions,
        "notes": s.notes, "ms": _ms, "mfu": _mfu,
        "data_json": Markup(script_json({"figures": figs, "kernels": []})),
        "plotly_js": Markup(plotly_js()),
        "css": Markup((TEMPLATES / "report.css").read_text("utf-8")),
        "app_js": Markup((TEMPLATES / "report.js").read_text("utf-8")),
    }
    return _env().get_template("history.html.j2").render(**ctx)
