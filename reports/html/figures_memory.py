"""The report's memory chart: bytes in use per allocator over the profile, the step
boundaries and each peak marked, from the ``memory`` section of the typed ``summarize``
result (nothing computed here)."""

from __future__ import annotations

from reports.html.figures import Fig, axis, base_layout, ptext, rnd
from tracelens.results.summary import Summary

MAX_LINES = 16  # allocators drawn (the highest peaks); the rest are in the JSON
_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2",
           "#17becf", "#7f7f7f", "#bcbd22")
GIB = float(1 << 30)


def memory_figure(s: Summary) -> Fig | None:
    """One line per allocator (GiB in use against ms from the first step, or the first
    event), a dashed line at each device's capacity, a marker at each peak, and dotted lines
    at the step starts of the first device; None without allocator events."""
    m = s.memory
    if m is None or not m.devices:
        return None
    devs = sorted(m.devices, key=lambda d: -d.peak_bytes)[:MAX_LINES]
    starts = sorted({st.start_ns for d in s.devices[:1] for st in d.steps})
    t0 = min([*starts[:1], *(d.timeline[0][0] for d in devs if d.timeline)])
    data: list[dict[str, object]] = []
    for i, d in enumerate(devs):
        c = _COLORS[i % len(_COLORS)]
        name = ptext(f"{d.host} {d.allocator}" if d.device is None
                     else f"{d.host}/device {d.device}")
        data.append({"type": "scatter", "mode": "lines", "name": name, "line": {"color": c,
                                                                               "shape": "hv"},
                     "x": [rnd((t - t0) / 1e6, 6) for t, _ in d.timeline],
                     "y": [rnd(b / GIB, 6) for _, b in d.timeline],
                     "hovertemplate": f"{name}<br>%{{x:,.3f}} ms: %{{y:,.3f}} GiB in use"
                                      "<extra></extra>"})
        step = "" if d.peak_step is None else f", step {d.peak_step}"
        data.append({"type": "scatter", "mode": "markers", "showlegend": False,
                     "marker": {"color": c, "size": 10, "symbol": "triangle-down"},
                     "x": [rnd((d.peak_time_ns - t0) / 1e6, 6)],
                     "y": [rnd(d.peak_bytes / GIB, 6)],
                     "hovertemplate": f"{name}: peak %{{y:,.3f}} GiB at %{{x:,.3f}} ms{step}"
                                      "<extra></extra>"})
        if d.capacity_bytes is not None and d.device is not None:
            data.append({"type": "scatter", "mode": "lines", "showlegend": False,
                         "line": {"color": c, "dash": "dash", "width": 1},
                         "x": [rnd((d.timeline[0][0] - t0) / 1e6, 6) if d.timeline else 0,
                               rnd((d.timeline[-1][0] - t0) / 1e6, 6) if d.timeline else 0],
                         "y": [rnd(d.capacity_bytes / GIB, 6)] * 2,
                         "hovertemplate": f"{name}: capacity %{{y:,.3f}} GiB<extra></extra>"})
    shapes = [{"type": "line", "xref": "x", "yref": "paper", "x0": rnd((t - t0) / 1e6, 6),
               "x1": rnd((t - t0) / 1e6, 6), "y0": 0, "y1": 1,
               "line": {"color": "#9e9e9e", "width": 1, "dash": "dot"}} for t in starts]
    return {"data": data, "layout": base_layout(
        360, shapes=shapes,
        xaxis=axis("ms from the first step's start (dotted: step starts)"),
        yaxis=axis("GiB in use (dashed: capacity; ▼ peak)", rangemode="tozero"))}
