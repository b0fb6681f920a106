"""``tracelens report``: one self-contained HTML file (jinja2 + plotly), from the typed
:class:`~tracelens.results.summary.Summary` (numbers as its JSON rounds them:
:func:`reports.summary.shown`), its category totals and its full collectives result.

Self-contained: plotly.js (the ``plotly.min.js`` bundled with the installed ``plotly`` package)
is inlined once, with the page's own CSS and JavaScript; the file makes no network request.
Size budget (docs/report.md): plotly.js is ~4.8 MB; everything else is small and capped
(top kernels, roofline points, per-step bars), so the 8-GPU sample's report stays under 5 MB.

Escaping: every string from a trace is untrusted. HTML goes through jinja2 autoescaping; the
data for the charts and the kernel table travels as one JSON document in a
``<script type="application/json">`` whose ``<``, ``>``, ``&`` and U+2028/2029 are written as
``\\uXXXX`` escapes (so ``</script>`` or ``<!--`` in a kernel name cannot end the element);
strings shown by plotly are entity-escaped (:func:`reports.html.figures.ptext`); the page's
JavaScript builds the kernel table with ``textContent`` only.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import re
from functools import lru_cache
from pathlib import Path

from jinja2 import Environment, FileSystemLoader
from markupsafe import Markup

from reports.html import figures as F
from reports.html import figures_hw as H
from reports.html.figures_memory import memory_figure
from reports.html.figures_window import path_on_timeline, step_timeline_figure
from reports.html.palette import color
from reports.summary import hardware_card
from reports.summary import mfu_label as headline_mfu_label
from reports.units import size
from tracelens.analyze.timeline.window import TimelineWindow
from reports.summary import shown
from tracelens.results.filters import FilterValue
from tracelens.results.summary import Summary, spec_view

TEMPLATES = Path(__file__).parent / "templates"
SIZE_BUDGET_BYTES = 5_000_000  # the 8-GPU sample's report (docs/report.md)

_JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028",
                 "\u2029": "\\u2029"}
_JSON_RE = re.compile("[<>&\u2028\u2029]")


def script_json(obj: object) -> str:
    """JSON safe inside a ``<script>`` element: no ``<``, ``>``, ``&``, U+2028/9 verbatim."""
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return _JSON_RE.sub(lambda m: _JSON_ESCAPES[m.group()], text)


@lru_cache(maxsize=1)
def plotly_js() -> str:
    """The plotly.min.js bundled with the installed plotly package."""
    from importlib.resources import files

    src = files("plotly").joinpath("package_data", "plotly.min.js").read_text("utf-8")
    # Inline in a <script>: nothing may close the element or open a comment-like state.
    return re.sub(r"</(script)", r"<\\/\1", src, flags=re.I).replace("<!--", "<\\!--")


@lru_cache(maxsize=1)
def _env() -> Environment:
    env = Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=True,
                      trim_blocks=True, lstrip_blocks=True,
                      keep_trailing_newline=True)
    env.filters.update(ms=ms, dur=dur, pct=pct, size=size, gbps=gbps, num=num, short=F.short)
    env.globals.update(color=color, ceilings=H.ceilings, shown=shown)
    return env


# -- formatting (the same conventions as the terminal tables) -----------------------------
def ms(ns: object, nd: int = 3) -> str:
    return "-" if not isinstance(ns, (int, float)) else f"{ns / 1e6:,.{nd}f}"


def pct(v: object, nd: int = 1) -> str:
    return "-" if not isinstance(v, (int, float)) or not math.isfinite(v) else f"{v:.{nd}f}%"


def num(v: object, spec: str = ",.1f") -> str:
    return "-" if not isinstance(v, (int, float)) or not math.isfinite(v) else format(v, spec)


def dur(ns: object) -> Markup:
    """A duration for the headline cards: value and unit (µs below 1 ms, s from 100 s)."""
    if not isinstance(ns, (int, float)):
        return Markup("-")
    unit, div = ("µs", 1e3) if ns < 1e6 else ("s", 1e9) if ns >= 1e11 else ("ms", 1e6)
    return Markup("{}<small> {}</small>").format(f"{ns / div:,.3f}", unit)


def gbps(v: object) -> str:
    return num(v, ",.1f")


# -- context -------------------------------------------------------------------------------
def _finite(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _kernel_rows(s: Summary) -> list[dict[str, object]]:
    """The kernel table's rows, as the page's script reads them."""
    rows: list[dict[str, object]] = []
    for k in s.top_kernels:
        mean = shown(k, "mean_ns")
        rows.append({"name": k.name, "short": F.chart_name(k.name, 110),
                     "category": k.category, "sub": k.subcategory or "", "rule": k.rule or "",
                     "count": k.count, "sum_ms": round(k.sum_ns / 1e6, 6),
                     "mean_us": None if mean is None else round(mean / 1e3, 3),
                     "share": shown(k, "share_pct"), "devices": k.devices,
                     "color": color(k.category)})
    return rows


def _input_names(paths: list[str]) -> list[str]:
    """File names for the title; where they repeat (one log directory per process, every file
    ``<host>.xplane.pb``), each with the first folder that tells it apart: ``p0/…/vm.xplane.pb``."""
    names = [Path(p).name for p in paths]
    if len(set(names)) == len(names):
        return names
    try:
        base = Path(os.path.commonpath(paths))
    except ValueError:  # absolute and relative paths mixed
        return [str(p) for p in paths]
    out = []
    for p in paths:
        parts = Path(p).relative_to(base).parts if Path(p) != base else (Path(p).name,)
        out.append("/".join(parts) if len(parts) <= 2 else f"{parts[0]}/…/{parts[-1]}")
    return out


def _filters(s: Summary) -> dict[str, FilterValue | list[str | int | None]]:
    """The filters in force, as the page names them (lists as the JSON writes them)."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in s.filters.items()
            if v is not None}


def build_context(s: Summary, title: str | None, generated: str | None,
                  window: TimelineWindow | None = None) -> dict[str, object]:
    h = s.headline
    many_hosts = h.hosts > 1
    specs = [spec_view(x) for x in s.specs]
    link_gb = H.link_peak_gb_per_s(specs)
    drawn = path_on_timeline(window, s.critical_path)
    figs: dict[str, F.Fig | None] = {
        "timeline": F.timeline_figure(s),
        "categories": F.category_figure(s.category_totals),
        "heatmap": F.heatmap_figure(s),
        "steps": F.steps_figure(s),
        "kernels": F.kernels_figure(s.top_kernels),
        "roofline": H.roofline_figure(s.roofline, specs),
        "coll_time": H.collective_time_figure(s.collectives),
        "coll_busbw": H.collective_busbw_figure(s.collectives, link_gb),
        "step_timeline": step_timeline_figure(window, many_hosts, drawn),
        "memory": memory_figure(s),
    }
    mfu, mfu_label = shown(h, "mfu"), headline_mfu_label(h)  # the headline's, as all
    roof = sorted(s.roofline, key=lambda r: -r.sum_ns)
    placed, unplaced = H.roofline_points(roof)
    inputs = [i.get("path", "?") for i in s.inputs]
    if title is None:
        title = "tracelens report — " + ", ".join(_input_names(inputs)[:3]) + (
            f" (+{len(inputs) - 3})" if len(inputs) > 3 else "")
    return {
        "title": title, "summary": s, "h": h, "hardware": hardware_card(s),
        "many_hosts": many_hosts, "inputs": inputs, "generated": generated,
        "filters": _filters(s),
        "devices": s.devices,
        "device_labels": [F.device_label(d, many_hosts) for d in s.devices],
        "idle_devices": s.idle_devices,
        "hosts": list(F.host_index(s)),
        "categories": s.category_totals,
        "figs": figs, "mfu": mfu, "mfu_label": mfu_label,
        "roofline": roof[:50], "roofline_n": len(roof), "roofline_unplaced": unplaced,
        "roofline_placed": len(placed), "specs": specs,
        "coll": s.collectives if s.collectives.instances else None,
        # the link bandwidth matters only next to a busbw (it needs message sizes)
        "link_gb": link_gb if figs["coll_busbw"] is not None else None,
        "no_cost_n": s.no_cost_data,
        "no_cost_ns": s.no_cost_data_ns,
        "device_mfu": any(_finite(shown(d, "mfu")) for d in s.devices),
        "kernels_n": len(s.top_kernels),
        "data_json": Markup(script_json({
            "figures": {k: v for k, v in figs.items() if v is not None},
            "kernels": _kernel_rows(s)})),
        "plotly_js": Markup(plotly_js()),
        "css": Markup((TEMPLATES / "report.css").read_text("utf-8")),
        "app_js": Markup((TEMPLATES / "report.js").read_text("utf-8")),
        "version": s.version,
        "window": window,
        "path_drawn": drawn is not None,
    }


def render_html(summary: Summary, title: str | None = None, generated: str | None = None,
                window: TimelineWindow | None = None) -> str:
    """The report as one HTML document (str); ``window`` adds the step timeline. The
    collectives section comes from ``summary.collectives`` (nothing is recomputed)."""
    if generated is None:
        generated = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    ctx = build_context(summary, title, generated, window)
    return _env().get_template("report.html.j2").render(**ctx)
