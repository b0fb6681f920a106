"""Figures against the hardware's peaks: the roofline (log-log, one ceiling per data type of
the device) and the collectives' time and bus bandwidth (against the spec's link bandwidth).

Same conventions as :mod:`reports.html.figures`: plain plotly dicts, every trace string through
:func:`reports.html.figures.ptext`.
"""

from __future__ import annotations

import math
from typing import Sequence

from reports.html.figures import Fig, axis, base_layout, ptext, rnd, time_unit, wrapped
from reports.html.palette import color
from reports.summary import shown
from tracelens.core.model import CATEGORIES
from tracelens.results.collectives import Collectives
from tracelens.results.summary import RooflineRow, SpecView

MAX_ROOFLINE_POINTS = 300  # largest op groups by time


# -- roofline ------------------------------------------------------------------------------
def _pos(v: float | None) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v) and v > 0


def roofline_points(rows: Sequence[RooflineRow]) -> tuple[list[RooflineRow], int]:
    """Rows that can be placed (positive intensity and TFLOP/s), largest by time first, and
    how many could not."""
    ok = [r for r in rows if _pos(shown(r, "intensity")) and _pos(shown(r, "tflops_per_s"))]
    ok.sort(key=lambda r: -r.sum_ns)
    return ok[:MAX_ROOFLINE_POINTS], len(rows) - len(ok)


DASHES = ["solid", "dash", "dot", "dashdot", "longdash", "longdashdot"]


def ceilings(spec: SpecView) -> list[tuple[list[str], float]]:
    """The spec's dtype peaks, highest first; dtypes with the same peak share one line."""
    by_peak: dict[float, list[str]] = {}
    for dtype, peak in spec.peak_tflops.items():
        if _pos(peak):
            by_peak.setdefault(float(peak), []).append(str(dtype))
    return [(by_peak[p], p) for p in sorted(by_peak, reverse=True)]


def roofline_figure(rows: Sequence[RooflineRow], specs: Sequence[SpecView]) -> Fig | None:
    """The op groups against the ceilings of ``specs`` (the devices' distinct specs, the most
    used first: :attr:`tracelens.results.summary.Summary.specs`)."""
    if not rows:
        return None
    pts, _ = roofline_points(rows)
    if not pts:  # ceilings alone say nothing about the trace
        return None
    xs = [shown(r, "intensity") or 0.0 for r in pts]
    ridges = []
    for s in specs:
        hbm = s.hbm_tb_per_s
        for peak in s.peak_tflops.values():
            if _pos(peak) and _pos(hbm):
                ridges.append(peak / hbm)
    lo = min(xs + ridges) / 4
    hi = max(xs + ridges) * 4
    data: list[dict[str, object]] = []
    annotations = []
    used_dtypes = {r.dtype for r in pts if r.dtype}
    for si, s in enumerate(specs[:2]):
        hbm = s.hbm_tb_per_s
        for j, (dtypes, peak) in enumerate(ceilings(s)):
            tag = "/".join(dtypes)
            name = f"{tag} peak {peak:,.0f} TFLOP/s" + (
                f" ({s.name})" if len(specs) > 1 else "")
            x0 = max(peak / hbm, lo) if _pos(hbm) else lo  # flat from the ridge point on
            cx, cy = [x0, hi], [peak, peak]
            # The ceilings of the data types the op groups compute in stand out.
            used = bool(used_dtypes & set(dtypes)) or not used_dtypes
            data.append({"type": "scatter", "mode": "lines", "name": ptext(name),
                         "x": [rnd(v, 6) for v in cx], "y": [rnd(v, 6) for v in cy],
                         "line": {"color": color("ceiling") if used else "#a8a8a8",
                                  "width": 1.8 if used else 1.0,
                                  "dash": DASHES[(j + si) % len(DASHES)]},
                         "hovertemplate": ptext(name) + "<extra></extra>",
                         "legendgroup": "ceilings", "showlegend": False})
            annotations.append({"x": math.log10(hi), "y": math.log10(peak), "xref": "x",
                                "yref": "y", "text": ptext(f"{tag} {peak:,.0f} TFLOP/s"),
                                "showarrow": False, "xanchor": "right", "yanchor": "bottom",
                                "font": {"size": 11, "color": color("ceiling") if used
                                         else "#8a8a8a"}})
        if _pos(hbm) and ceilings(s):  # one HBM slope, up to the highest ceiling
            top = ceilings(s)[0][1]
            name = f"HBM {hbm:g} TB/s" + (f" ({s.name})" if len(specs) > 1 else "")
            data.append({"type": "scatter", "mode": "lines", "name": ptext(name),
                         "x": [rnd(lo, 6), rnd(max(top / hbm, lo), 6)],
                         "y": [rnd(lo * hbm, 6), rnd(max(top, lo * hbm), 6)],
                         "line": {"color": color("ceiling"), "width": 1.8},
                         "hovertemplate": ptext(name) + "<extra></extra>",
                         "legendgroup": "ceilings", "showlegend": False})
            at = lo * 8  # label above the slope, ending where it touches the line
            annotations.append({
                "x": math.log10(at), "y": math.log10(at * hbm), "xref": "x",
                "yref": "y", "text": ptext(f"HBM {hbm:g} TB/s"), "showarrow": False,
                "xanchor": "right", "yanchor": "bottom",
                "font": {"size": 11, "color": color("ceiling")}})
    maxt = max((r.sum_ns for r in pts), default=0) or 1
    cats = [r.category or "other" for r in pts]
    for cat in [c for c in CATEGORIES if c in cats] + [c for c in dict.fromkeys(cats)
                                                        if c not in CATEGORIES]:
        sel = [r for r, c in zip(pts, cats) if c == cat]
        data.append({
            "type": "scatter", "mode": "markers", "name": ptext(cat),
            "x": [rnd(shown(r, "intensity") or 0.0, 6) for r in sel],
            "y": [rnd(shown(r, "tflops_per_s") or 0.0, 6) for r in sel],
            "marker": {"color": color(cat), "opacity": 0.75,
                       "line": {"color": "#ffffff", "width": 0.5},
                       "size": [rnd(6 + 34 * math.sqrt(r.sum_ns / maxt), 2)
                                for r in sel]},
            "customdata": [[_roof_hover(r)] for r in sel],
            "hovertemplate": "%{customdata[0]}<extra></extra>",
        })
    return {"data": data, "layout": base_layout(
        520, annotations=annotations, showlegend=True,
        xaxis=axis("arithmetic intensity (FLOP/byte, log scale)", type="log",
                   range=[math.log10(lo), math.log10(hi)], dtick=1, tickformat="~g"),
        yaxis=axis("achieved TFLOP/s (log scale)", type="log", dtick=1, tickformat="~g"))}


def _fmt(v: float | None, spec: str) -> str:
    return "-" if not isinstance(v, (int, float)) or not math.isfinite(v) else format(v, spec)


def _roof_hover(r: RooflineRow) -> str:
    lines = [f"<b>{wrapped(str(r.op or '-'))}</b>"
             + (f" in {ptext(r.module)}" if r.module else "")]
    if r.kernel:
        lines.append("kernel: " + wrapped(str(r.kernel)))
    eff = shown(r, "efficiency")
    lines.append(ptext(
        f"{r.category or '-'}" + (f" · {r.dtype}" if r.dtype else "")
        + f" · {r.count} calls · {_fmt(r.sum_ns / 1e6, ',.3f')} ms"))
    lines.append(ptext(
        f"{_fmt(shown(r, 'tflops_per_s'), ',.4g')} TFLOP/s · "
        f"{_fmt(shown(r, 'tb_per_s'), ',.3g')} TB/s"
        f" · {_fmt(shown(r, 'intensity'), ',.4g')} FLOP/byte"))
    if r.bound:
        lines.append(ptext(f"{r.bound}-bound · "
                           f"{_fmt(100 * eff if isinstance(eff, (int, float)) else None, '.1f')}"
                           "% of attainable"))
    return "<br>".join(lines)


# -- collectives ---------------------------------------------------------------------------
def link_peak_gb_per_s(specs: Sequence[SpecView]) -> float | None:
    """The GPU–GPU link bandwidth of the first device spec that gives one, in GB/s."""
    for s in specs:
        if s.link_gb_per_s is not None and _pos(s.link_gb_per_s):
            return float(s.link_gb_per_s)
    return None


def collective_time_figure(coll: Collectives | None) -> Fig | None:
    rows = coll.by_type if coll is not None else ()
    if not rows:
        return None
    unit, div = time_unit(max(r.sum_ns for r in rows))
    types = [ptext(r.type) for r in rows]
    data = [
        {"type": "bar", "orientation": "h", "name": "exposed (no compute overlaps it)",
         "y": types, "x": [rnd(r.exposed_ns / div) for r in rows],
         "marker": {"color": color("exposed_comm")},
         "hovertemplate": f"%{{y}}: %{{x:,.3f}} {unit} exposed<extra></extra>"},
        {"type": "bar", "orientation": "h", "name": "hidden behind compute",
         "y": types, "x": [rnd((r.sum_ns - r.exposed_ns) / div) for r in rows],
         "marker": {"color": color("hidden_comm")},
         "hovertemplate": f"%{{y}}: %{{x:,.3f}} {unit} hidden<extra></extra>"},
    ]
    return {"data": data, "layout": base_layout(
        max(200, 110 + 34 * len(rows)), barmode="stack", bargap=0.35,
        xaxis=axis(f"time ({unit}, summed over devices)"),
        yaxis=axis("", autorange="reversed", type="category"))}


def collective_busbw_figure(coll: Collectives | None, link_gb: float | None) -> Fig | None:
    rows = [r for r in (coll.by_type if coll is not None else ())
            if shown(r.busbw, "median") is not None]
    if not rows:
        return None
    med = [shown(r.busbw, "median") or 0.0 for r in rows]
    p10 = [shown(r.busbw, "p10") for r in rows]
    p90 = [shown(r.busbw, "p90") for r in rows]
    types = [ptext(r.type) for r in rows]
    pct = [rnd(100 * m / link_gb, 1) if link_gb else None for m in med]
    data = [{
        "type": "bar", "orientation": "h", "name": "busbw (median)", "y": types, "x": med,
        "marker": {"color": color("collective")},
        "error_x": {"type": "data", "symmetric": False,
                    "array": [rnd(max((h if h is not None else m) - m, 0), 3)
                              for h, m in zip(p90, med)],
                    "arrayminus": [rnd(max(m - (lo if lo is not None else m), 0), 3)
                                   for lo, m in zip(p10, med)],
                    "color": "#555555", "thickness": 1.2, "width": 4},
        "customdata": [[lo, h, p] for lo, h, p in zip(p10, p90, pct)],
        "hovertemplate": "%{y}: median %{x:,.1f} GB/s (p10 %{customdata[0]:,.1f}, p90 "
                         "%{customdata[1]:,.1f})"
                         + (" · %{customdata[2]}% of the spec's link bandwidth" if link_gb
                            else "") + "<extra></extra>",
        "showlegend": False,
    }]
    shapes, annotations = [], []
    xmax = max([*(h or 0 for h in p90), *med])
    if link_gb:
        shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": link_gb,
                       "x1": link_gb, "y0": 0, "y1": 1,
                       "line": {"color": color("link_peak"), "dash": "dash", "width": 1.5}})
        annotations.append({"x": link_gb, "xref": "x", "y": 1, "yref": "paper",
                            "text": f"spec link bandwidth {link_gb:,.0f} GB/s",
                            "showarrow": False,
                            "xanchor": "right", "yanchor": "bottom", "font": {"size": 11}})
        xmax = max(xmax, link_gb)
    return {"data": data, "layout": base_layout(
        max(200, 110 + 34 * len(rows)), shapes=shapes, annotations=annotations, bargap=0.35,
        xaxis=axis("bus bandwidth (GB/s, nccl-tests convention; whiskers p10–p90)",
                   range=[0, xmax * 1.08]),
        yaxis=axis("", autorange="reversed", type="category"))}
