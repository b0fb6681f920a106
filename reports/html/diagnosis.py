"""``compare --html`` and ``scaling --html``: the verdict, the lost time split into components
and the kernel deltas as one self-contained HTML page, with the report's CSS, palette, plotly
inlining and escaping (see ``reports.html.page``)."""

from __future__ import annotations

import datetime as _dt
from typing import Sequence

from markupsafe import Markup

from reports.html import figures as F
from reports.html.page import TEMPLATES, _env, plotly_js, script_json
from reports.html.palette import color
from tracelens.results.runs import Cause, Comparison, ComponentChange, Scaling
from tracelens.results.summary import hardware_text

Figure = dict[str, object]  # a plotly figure: data and layout, as plotly.js reads them


STRAGGLER_WAIT_COLOR = "#7b1a1a"  # dark red: communication time spent waiting for a peer


def _component_color(component: str) -> str:
    kind, _, what = component.partition(":")
    if kind == "straggler_wait":
        return STRAGGLER_WAIT_COLOR
    return color(what if kind == "compute" else kind)


def _component_label(component: str) -> str:
    kind, _, what = component.partition(":")
    return {"compute": f"{what} compute", "exposed_comm": f"exposed {what}",
            "straggler_wait": f"waiting in {what} for the last arrival",
            "exposed_memory": "exposed memory", "idle": "idle"}.get(kind, component)


def delta_figure(rows: Sequence[ComponentChange | Cause], title: str) -> Figure | None:
    """Horizontal bars: each component's change in ms per step (they add up to the total)."""
    rows = sorted((r for r in rows if abs(r.delta_ns) >= 0.5), key=lambda r: r.delta_ns)
    if not rows:
        return None
    labels = [F.ptext(_component_label(r.component)) for r in rows]
    return {"data": [{
        "type": "bar", "orientation": "h", "y": labels,
        "x": [F.rnd(r.delta_ns / 1e6, 6) for r in rows],
        "marker": {"color": [_component_color(r.component) for r in rows]},
        "hovertemplate": "%{y}: %{x:+.3f} ms per step<extra></extra>",
    }], "layout": F.base_layout(80 + 28 * len(rows), showlegend=False,
                                title={"text": F.ptext(title), "font": {"size": 13}},
                                xaxis=F.axis("change in ms per step (device-averaged)"),
                                yaxis=F.axis("", automargin=True))}


def render_diagnosis(rep: Comparison | Scaling, title: str | None = None,
                     generated: str | None = None) -> str:
    """One HTML page for a ``compare`` (a :class:`Comparison`) or ``scaling`` result."""
    if generated is None:
        generated = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    figs: dict[str, Figure | None] = {}
    hardware: dict[str, str] = {}
    sections: list[dict[str, object]] = []
    if isinstance(rep, Comparison):
        kind = "compare"
        figs["delta0"] = delta_figure(rep.components, "NEW − BASE, per component")
        sections = [{"fig": "delta0", "title": "NEW − BASE", "verdict": rep.verdict,
                     "rows": rep.components, "delta_ns": rep.delta_ns,
                     "noise": rep.noise, "noise_gross": rep.gross_ns}]
        inputs = [rep.base.path, rep.new.path]
        hardware = {"base": hardware_text(rep.base.hardware),
                    "new": hardware_text(rep.new.hardware)}
    else:
        kind = "scaling"
        for i, t in enumerate(rep.transitions):
            key = f"delta{i}"
            figs[key] = delta_figure(t.causes, f"{t.from_path} → {t.to_path}: change")
            sections.append({"fig": key, "title": f"{t.from_path} → {t.to_path}",
                             "verdict": t.verdict, "rows": t.causes,
                             "delta_ns": t.delta_ns, "t": t, "noise": t.noise,
                             "noise_gross": t.gross_ns})
        inputs = [r.path for r in rep.runs]
    ctx = {
        "kind": kind, "rep": rep, "sections": sections, "inputs": inputs, "hardware": hardware,
        "title": title or f"tracelens {kind}", "generated": generated,
        "label": _component_label,
        "data_json": Markup(script_json({"figures": {k: v for k, v in figs.items() if v},
                                         "kernels": []})),
        "plotly_js": Markup(plotly_js()),
        "css": Markup((TEMPLATES / "report.css").read_text("utf-8")),
        "app_js": Markup((TEMPLATES / "report.js").read_text("utf-8")),
    }
    return _env().get_template("diagnosis.html.j2").render(**ctx)
