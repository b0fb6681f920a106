"""Plotly figures of the HTML report, as plain ``{"data": [...], "layout": {...}}`` dicts.

Built from the typed ``summarize`` result only (no analysis here; numbers as its JSON rounds
them, :func:`reports.summary.shown`). Plotly
interprets a few HTML tags inside every text it draws (ticks, legends, hover labels), so every
string that comes from a trace goes through :func:`ptext` (entity-escaped: plotly turns the
entities back into plain text, never into tags). Figures use no plotly.py template, which keeps
each figure a few kilobytes.
"""

from __future__ import annotations

import html
import math
from typing import Sequence

from reports.html.palette import color, label
from reports.summary import shown
from tracelens.core import names
from tracelens.core.model import CATEGORIES, COMPUTE_CATEGORIES, DEVICE_KINDS
from tracelens.results.summary import (CategoryTime, DeviceSummary, StepTotal, Summary,
                                       TopKernel)

Fig = dict[str, object]  # a plotly figure: plain JSON values, as plotly.js reads them

MAX_STEP_BARS = 240       # per-step chart: (step, device) bars before steps are summed
KERNEL_BARS = 15
LABEL_CHARS = 56          # kernel names in chart axes
HOVER_LINE = 90           # hover labels wrap long names at this width
FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif"


# -- text --------------------------------------------------------------------------------------
def ptext(s: object) -> str:
    """Untrusted text for plotly: entity-escaped, so plotly shows it verbatim."""
    return html.escape(str(s), quote=False)


def short(name: str, width: int = LABEL_CHARS) -> str:
    """Start and end of a long name (Tensile names run to 640 characters)."""
    return names.short(name, width)


def chart_name(name: str, width: int = LABEL_CHARS) -> str:
    """A kernel name short enough for a chart axis (:func:`tracelens.core.names.chart_name`)."""
    return names.chart_name(name, width)


def wrapped(name: str, width: int = HOVER_LINE) -> str:
    """Escaped full text for a hover label, broken into lines of ``width`` characters."""
    return "<br>".join(ptext(name[i:i + width]) for i in range(0, len(name), width)) or ""


def time_unit(max_ns: float) -> tuple[str, float]:
    """A readable unit for times up to ``max_ns``: (name, ns per unit)."""
    if max_ns >= 20e9:
        return "s", 1e9
    if max_ns >= 1e6 or max_ns == 0:
        return "ms", 1e6
    return "µs", 1e3


HOST_CHARS = 32  # host names in chart labels


def device_label(d: DeviceSummary, many_hosts: bool, host_chars: int | None = None) -> str:
    """"GPU 3", or "host · GPU 3" when the trace has several hosts (the host name shortened
    to ``host_chars`` in charts)."""
    kind = DEVICE_KINDS.get((d.vendor or "").lower(), "GPU")  # TPU, CPU or GPU
    if not many_hosts:
        return f"{kind} {d.device}"
    host = str(d.host)
    return f"{short(host, host_chars) if host_chars else host} · {kind} {d.device}"


def host_index(summary: Summary) -> dict[str, int]:
    """Hosts numbered in the order of the device list (for compact chart labels)."""
    out: dict[str, int] = {}
    for d in summary.devices:
        out.setdefault(d.host, len(out))
    return out


def unique_labels(labels: list[str], extra: list[str | None]) -> list[str]:
    """Make chart category labels unique (one bar per row): every label that occurs more
    than once gets its ``extra`` in brackets, and a counter if still not unique."""
    dup = {lab for lab in labels if labels.count(lab) > 1}
    out: list[str] = []
    seen: set[str] = set()
    for lab, ex in zip(labels, extra):
        cand = f"{lab} [{ex}]" if lab in dup and ex else lab
        base, k = cand, 2
        while cand in seen:
            cand, k = f"{base} #{k}", k + 1
        seen.add(cand)
        out.append(cand)
    return out


def base_layout(height: int, **kw: object) -> dict[str, object]:
    base: dict[str, object] = {
        "height": height, "margin": {"l": 10, "r": 20, "t": 36, "b": 50},
        "font": {"family": FONT, "size": 12}, "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#ffffff", "hoverlabel": {"align": "left"},
        "legend": {"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0,
                   "xanchor": "left", "traceorder": "normal"},
    }
    base.update(kw)
    return base


def axis(title: str, **kw: object) -> dict[str, object]:
    ax: dict[str, object] = {"title": {"text": title}, "automargin": True, "gridcolor": "#e6e6e6",
          "zerolinecolor": "#bdbdbd", "linecolor": "#bdbdbd"}
    ax.update(kw)
    return ax


def rnd(v: float, nd: int = 4) -> float:
    return round(float(v), nd)


# -- per-device timeline -------------------------------------------------------------------
def timeline_components(d: DeviceSummary) -> dict[str, int]:
    """Span split into compute categories (exclusive time), exposed comm and memory, idle.

    Compute categories outrank collective and memory, so their exclusive times add up to
    ``compute_ns``; the collective and memory exclusive times are the exposed communication
    and exposed memory; with idle they add up to the span exactly.
    """
    excl = {c.category: c.exclusive_ns for c in d.categories}
    t = d.timeline
    out = {c: int(excl.get(c, 0)) for c in COMPUTE_CATEGORIES}
    out["exposed_comm"] = int(t.exposed_comm_ns)
    out["exposed_memory"] = int(t.exposed_memory_ns)
    out["idle"] = int(t.idle_ns)
    return out


def timeline_figure(summary: Summary) -> Fig | None:
    devs = summary.devices
    if not devs:
        return None
    many_hosts = summary.headline.hosts > 1
    labels = [device_label(d, many_hosts, HOST_CHARS) for d in devs]
    comps = [timeline_components(d) for d in devs]
    spans = [d.timeline.span_ns for d in devs]
    unit, div = time_unit(max(spans))
    data = []
    for key in [*COMPUTE_CATEGORIES, "exposed_comm", "exposed_memory", "idle"]:
        vals = [c[key] for c in comps]
        if not any(vals):
            continue
        data.append({
            "type": "bar", "orientation": "h", "name": ptext(label(key)),
            "y": [ptext(x) for x in labels], "x": [rnd(v / div) for v in vals],
            "customdata": [rnd(100.0 * v / s, 2) if s else 0 for v, s in zip(vals, spans)],
            "marker": {"color": color(key)},
            "hovertemplate": f"%{{y}}<br>{ptext(label(key))}: %{{x:,.3f}} {unit} "
                             "(%{customdata:.1f}% of span)<extra></extra>",
        })
    return {"data": data, "layout": base_layout(
        max(150, 100 + 26 * len(devs)), barmode="stack", bargap=0.25,
        xaxis=axis(f"time on the device ({unit}); each bar adds up to the device's span"),
        yaxis=axis("", autorange="reversed", type="category"))}


# -- categories ----------------------------------------------------------------------------
def category_figure(totals: Sequence[CategoryTime]) -> Fig | None:
    cats = [c for c in totals if c.count]
    if not cats:
        return None
    unit, div = time_unit(max(max(c.sum_ns, c.exclusive_ns) for c in cats))
    names = [c.category for c in cats]
    colors = [color(n) for n in names]
    busy = sum(c.exclusive_ns for c in cats)
    data = [
        {"type": "bar", "orientation": "h", "name": "exclusive time", "y": names,
         "x": [rnd(c.exclusive_ns / div) for c in cats],
         "customdata": [rnd(100.0 * c.exclusive_ns / busy, 2) if busy else 0 for c in cats],
         "marker": {"color": colors},
         "hovertemplate": f"%{{y}}: %{{x:,.3f}} {unit} exclusive "
                          "(%{customdata:.1f}% of busy)<extra></extra>"},
        {"type": "bar", "orientation": "h", "name": "summed time (overlaps count twice)",
         "y": names, "x": [rnd(c.sum_ns / div) for c in cats],
         "customdata": [c.count for c in cats],
         "marker": {"color": "#ffffff", "line": {"color": colors, "width": 1.5},
                    "pattern": {"shape": "/", "fgcolor": colors, "size": 6, "solidity": 0.3}},
         "hovertemplate": f"%{{y}}: %{{x:,.3f}} {unit} summed over "
                          "%{customdata:,} activities<extra></extra>"},
    ]
    return {"data": data, "layout": base_layout(
        max(220, 110 + 44 * len(cats)), barmode="group", bargap=0.3, bargroupgap=0.05,
        xaxis=axis(f"time ({unit}, all reported devices)"),
        yaxis=axis("", autorange="reversed", type="category"))}


# -- device × metric heat map --------------------------------------------------------------
HEAT_SCALE = [[0.0, "#2166ac"], [0.25, "#92c5de"], [0.5, "#f7f7f7"], [0.75, "#f4a582"],
              [1.0, "#b2182b"]]  # blue below the median device, red above


def heatmap_figure(summary: Summary) -> Fig | None:
    """Each device's shares of its span; colour: the difference from the median device's
    (:attr:`tracelens.results.summary.Summary.median_shares`)."""
    devs, medians = summary.devices, summary.median_shares
    if len(devs) < 2:
        return None
    many_hosts = summary.headline.hosts > 1
    metrics: list[tuple[str, str]] = [
        ("busy", "busy_ns"), ("compute", "compute_ns"), ("exposed<br>comm", "exposed_comm_ns"),
        ("exposed<br>memory", "exposed_memory_ns"), ("idle", "idle_ns")]
    # Compute categories' exclusive shares (collective and memory exclusive time are the
    # exposed columns above), those present on some device.
    metrics += [(f"{k[5:]}<br>excl.", k) for k in medians if k.startswith("excl:")]
    rows = []
    for d in devs:
        excl = {x.category: x.exclusive_ns for x in d.categories}
        span = d.timeline.span_ns
        rows.append([100.0 * (excl.get(k[5:], 0) if k.startswith("excl:")
                              else getattr(d.timeline, k)) / span if span else 0.0
                     for _, k in metrics])
    med = [medians[k] for _, k in metrics]
    z = [[rnd(v - m, 3) for v, m in zip(r, med)] for r in rows]
    lim = max((abs(v) for r in z for v in r), default=0.0) or 1.0
    text = [[f"{v:.1f}" for v in r] for r in rows]
    labels = [ptext(device_label(d, many_hosts, HOST_CHARS)) for d in devs]
    return {"data": [{
        "type": "heatmap", "x": [m for m, _ in metrics], "y": labels, "z": z,
        "text": text, "texttemplate": "%{text}" if len(devs) * len(metrics) <= 600 else "",
        "textfont": {"size": 11}, "customdata": text,
        "colorscale": HEAT_SCALE, "zmid": 0, "zmin": -lim, "zmax": lim,
        "xgap": 1, "ygap": 1,
        "colorbar": {"title": {"text": "pp", "side": "top"}, "thickness": 12},
        "hovertemplate": "%{y} · %{x}:<br>%{customdata}% of span "
                         "(%{z:+.2f} pp vs. the median of all devices)<extra></extra>",
    }], "layout": base_layout(
        max(260, 120 + 24 * len(devs)),
        xaxis=axis("% of each device's span (cell text); colour: difference from the median "
                   "of all devices, in percentage points (pp)", type="category",
                   tickangle=0),
        yaxis=axis("", autorange="reversed", type="category"))}


# -- per step ------------------------------------------------------------------------------
def _mfu_pct(v: float | None) -> float | None:
    """MFU is a fraction (docs/definitions.md#mfu); shown in percent."""
    if v is None or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return rnd(100.0 * v, 3)


def steps_figure(summary: Summary) -> Fig | None:
    """Per-step bars: per device, or past MAX_STEP_BARS (or for one device) each step summed
    over its devices (:attr:`tracelens.results.summary.Summary.step_totals`)."""
    devs = [d for d in summary.devices if d.steps]
    if not devs:
        return None
    totals: Sequence[StepTotal] = summary.step_totals
    many_hosts = summary.headline.hosts > 1
    keys = [("compute", "compute_ns"), ("exposed_comm", "exposed_comm_ns"),
            ("exposed_memory", "exposed_memory_ns"), ("idle", "idle_ns")]
    n_bars = sum(len(d.steps) for d in devs)
    summed = n_bars > MAX_STEP_BARS or len(devs) == 1
    rows: list[tuple[int, str | None, dict[str, int], list[float]]] = []
    if summed:  # one bar per step: the devices added up
        rows = [(t.step, None, {k: getattr(t.timeline, k) for _, k in keys},
                 [] if _mfu_pct(t.mfu_mean) is None else [_mfu_pct(t.mfu_mean)])
                for t in totals]
    else:
        # One host and few devices: "GPU 3"; otherwise compact "3", or "h1·3" for host 1
        # (the section lists the host numbers), so the labels of a step fit side by side.
        hosts = host_index(summary)
        compact = len(devs) > 8 or many_hosts
        for d in devs:
            lab = (f"h{hosts[d.host]}·{d.device}" if many_hosts else str(d.device)) \
                if compact else device_label(d, many_hosts)
            for st in d.steps:
                m = _mfu_pct(shown(st, "mfu"))
                rows.append((st.step, lab, {k: getattr(st.timeline, k) for _, k in keys},
                             [] if m is None else [m]))
        rows.sort(key=lambda r: r[0])  # stable: device order kept within a step
    unit, div = time_unit(max(sum(r[2][k] for _, k in keys) for r in rows))
    x: list[str] | list[list[str]]
    if summed:
        x = [f"step {r[0]}" for r in rows]
    else:
        x = [[f"step {r[0]}" for r in rows], [ptext(r[1]) for r in rows]]
    data = []
    for key, col in keys:
        vals = [r[2][col] for r in rows]
        if not any(vals):
            continue
        data.append({"type": "bar", "name": ptext(label(key)), "x": x,
                     "y": [rnd(v / div) for v in vals], "marker": {"color": color(key)},
                     "hovertemplate": f"{ptext(label(key))}: %{{y:,.3f}} {unit}"
                                      "<extra>%{x}</extra>"})
    x_title = "step" if summed else "step · device" if not many_hosts \
        else "step · host number·device"
    y_title = f"time ({unit})" + (f", summed over {len(devs)} devices"
                                  if summed and len(devs) > 1 else "")
    layout = base_layout(380, barmode="stack", bargap=0.15,
                         xaxis=axis(x_title, tickangle=0,
                                    type="category" if summed else "multicategory"),
                         yaxis=axis(y_title))
    mfu_y = [(sum(r[3]) / len(r[3])) if r[3] else None for r in rows]
    if any(v is not None for v in mfu_y):
        data.append({"type": "scatter", "mode": "lines+markers", "name": "MFU (%)",
                     "x": x, "y": [None if v is None else rnd(v, 2) for v in mfu_y],
                     "yaxis": "y2", "line": {"color": "#111111", "width": 1.5},
                     "marker": {"size": 6}, "connectgaps": False,
                     "hovertemplate": "MFU %{y:.1f}%<extra>%{x}</extra>"})
        top = max(v for v in mfu_y if v is not None)
        layout["yaxis2"] = axis("MFU (%)", overlaying="y", side="right", showgrid=False,
                                range=[0, max(top * 1.15, 1.0)], tickmode="auto",
                                ticksuffix="%", zeroline=False)
    return {"data": data, "layout": layout}


# -- top kernels ---------------------------------------------------------------------------
def _or_zero(v: float | None) -> float | int:
    return 0 if v is None else v


def _kind(k: TopKernel) -> str:
    return k.category + (f"/{k.subcategory}" if k.subcategory else "")


def kernels_figure(kernels: Sequence[TopKernel]) -> Fig | None:
    top = kernels[:KERNEL_BARS]
    if not top:
        return None
    unit, div = time_unit(max(k.sum_ns for k in top))
    labels = unique_labels([chart_name(k.name) for k in top], [_kind(k) for k in top])
    cats = [k.category for k in top]
    data = []
    order = {c: i for i, c in enumerate(CATEGORIES)}
    for cat in sorted(dict.fromkeys(cats), key=lambda c: order.get(c, 99)):
        # one trace per category: its legend entry and colour
        idx = [i for i, c in enumerate(cats) if c == cat]
        data.append({
            "type": "bar", "orientation": "h", "name": cat,
            "y": [ptext(labels[i]) for i in idx],
            "x": [rnd(top[i].sum_ns / div) for i in idx],
            "customdata": [[wrapped(top[i].name), ptext(_kind(top[i])), top[i].count,
                            rnd((shown(top[i], "mean_ns") or 0.0) / 1e3, 2),
                            _or_zero(shown(top[i], "share_pct"))]
                           for i in idx],
            "marker": {"color": color(cat)},
            "hovertemplate": "%{customdata[0]}<br>%{customdata[1]} · %{customdata[2]:,} "
                             f"calls · %{{x:,.3f}} {unit} total · mean %{{customdata[3]:,}} µs"
                             " · %{customdata[4]:.1f}% of device time<extra></extra>",
        })
    return {"data": data, "layout": base_layout(
        max(240, 110 + 26 * len(top)), barmode="stack", bargap=0.25,
        xaxis=axis(f"time ({unit}, summed over devices)"),
        yaxis=axis("", autorange="reversed", type="category",
                   categoryorder="array", categoryarray=[ptext(x) for x in labels],
                   tickfont={"family": "ui-monospace, SFMono-Regular, Menlo, monospace",
                             "size": 11}))}
