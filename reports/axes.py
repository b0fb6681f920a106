"""Render the typed ``tracelens axes`` result (terminal, Markdown, CSV, JSON): formatting
only, nothing aggregated here. Trace text (axis and group names) goes into rich ``Text``
cells, never markup."""

from __future__ import annotations

import csv
import io

from rich.console import Console
from rich.table import Table
from rich.text import Text

from reports.markdown import md_table
from reports.summary import ms
from reports.units import size
from tracelens.results.axes import Axes, AxisTotals, MeshAxis, Unmapped
from tracelens.results.encode import to_json


def _gbps(v: float | None) -> str:
    return "-" if v is None else f"{v:,.1f}"


def _yes(v: bool | None) -> str:
    return "?" if v is None else ("across" if v else "within")


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}×"


def tables(a: Axes) -> list[tuple[str, list[str], list[list[str]]]]:
    out = axis_tables(a.mesh, a.axes, a.unmapped, a.groups_inferred)
    b = a.balance
    if b is not None:
        out.append((f"All-to-all balance per step (max/mean over ranks; time: {b.time_basis})",
                    ["step", "instances", "time", "bytes"],
                    [[str(s.step), str(s.instances), _x(s.time_imbalance),
                      _x(s.bytes_imbalance)] for s in b.steps]))
        worst = sorted(b.instances, key=lambda i: (-(i.time_imbalance or 0), i.start_ns))[:10]
        out.append(("Most imbalanced all-to-all instances",
                    ["op", "#", "axis", "step", "ranks", "time", "bytes", "slowest"],
                    [[i.op or i.type, str(i.occurrence), i.axis or "-",
                      "-" if i.step is None else str(i.step), str(i.participants),
                      _x(i.time_imbalance), _x(i.bytes_imbalance),
                      "-" if i.slowest is None else f"{i.slowest.host}/{i.slowest.device}"]
                     for i in worst]))
        if b.slowest:
            out.append(("Ranks repeatedly the slowest in all-to-alls",
                        ["host/device", "rank", "slowest", "of instances"],
                        [[f"{r.host}/{r.device}", str(r.rank), str(r.times), str(r.instances)]
                         for r in b.slowest]))
    p = a.pipeline
    if p is not None:
        out.append((f"Pipeline bubbles per stage (axis {p.axis})",
                    ["stage", "devices", "step ms", "bubble ms", "bubble", "warm-up",
                     "cool-down"],
                    [[str(s.stage), str(s.devices), ms(round(s.step_ns)), ms(round(s.bubble_ns)),
                      _pct(s.bubble_fraction), _pct(s.warmup_share), _pct(s.cooldown_share)]
                     for s in p.stages]))
    return out


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def axis_tables(mesh_axes: tuple[MeshAxis, ...], totals: tuple[AxisTotals, ...],
                unmapped: tuple[Unmapped, ...], inferred: int | None = None
                ) -> list[tuple[str, list[str], list[list[str]]]]:
    """The per-axis table and the table of collectives without an axis (when any);
    ``inferred``: the activities whose group was inferred (said in the title)."""
    mesh = " × ".join(f"{m.name}={m.size}" for m in mesh_axes) or "none (no process group)"
    how = (f"; groups INFERRED for {inferred:,} activities from the ranks that matched each "
           "instance: the trace records no process group" if inferred else "")
    out = [(f"Collectives per mesh axis (mesh {mesh}{how})",
            ["axis", "size", "hosts", "types", "count", "bytes", "time ms",
             "exposed ms", "exp share", "busbw GB/s", "link", "of link"],
            [[r.axis + (" (inferred groups)" if r.groups_inferred else ""), str(r.size),
              _yes(r.crosses_hosts), ", ".join(r.types), f"{r.count:,}",
              size(r.bytes), ms(r.time_ns), ms(r.exposed_ns),
              "-" if r.exposed_share is None else f"{100 * r.exposed_share:.1f}%",
              _gbps(r.busbw.median), r.link or "?",
              "-" if r.busbw.link_pct is None else f"{r.busbw.link_pct:.0f}%"]
             for r in totals])]
    if unmapped:
        out.append(("Collectives without an axis", ["reason", "count", "exposed ms"],
                    [[u.reason, f"{u.count:,}", ms(u.exposed_ns)] for u in unmapped]))
    return out


def render_table(a: Axes, console: Console) -> None:
    if not a.activities:
        console.print(Text("No collective activity in this trace."))
        return
    for title, header, rows in tables(a):
        if not rows:  # no empty table: one line says what is missing
            console.print(Text(f"{title}: none"))
            continue
        table = Table(title=Text(title), title_justify="left")
        for col in header:
            table.add_column(col, no_wrap=col not in ("types", "reason", "axis"),
                             justify="left" if col in ("axis", "types", "reason", "link",
                                                       "op", "host/device", "slowest")
                             else "right")
        for row in rows:
            table.add_row(*[Text(cell) for cell in row])
        console.print(table)


def render_markdown(a: Axes) -> str:
    parts = ["# tracelens axes", ""]
    for title, header, rows in tables(a):
        parts += md_table(title, header, rows)
    return "\n".join(parts) + "\n"


def render_json(a: Axes) -> str:
    return to_json(a)


def render_csv(a: Axes) -> str:
    """One row per axis."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["axis", "size", "crosses_hosts", "types", "count", "bytes", "unsized",
                "time_ns", "exposed_ns", "exposed_share", "busbw_gb_per_s", "link",
                "link_pct"])
    for r in a.axes:
        w.writerow([r.axis, r.size, "" if r.crosses_hosts is None else r.crosses_hosts,
                    ";".join(r.types), r.count, r.bytes, r.unsized, r.time_ns, r.exposed_ns,
                    "" if r.exposed_share is None else round(r.exposed_share, 4),
                    "" if r.busbw.median is None else round(r.busbw.median, 3),
                    r.link or "", "" if r.busbw.link_pct is None else round(r.busbw.link_pct, 1)])
    return buf.getvalue()
