"""Render the typed ``tracelens collectives`` result (terminal, Markdown, CSV, JSON): formatting
only, nothing aggregated here."""

from __future__ import annotations

import csv
import io

from rich.console import Console
from rich.table import Table
from rich.text import Text

from reports.axes import axis_tables
from reports.markdown import md_cell, md_table
from reports.summary import filters_text, ms
from reports.units import size
from tracelens.results.collectives import Busbw, Collectives
from tracelens.results.encode import encode, to_json


def _gbps(v: float | None) -> str:
    return "-" if v is None else f"{v:,.1f}"


def _spread(b: Busbw) -> str:
    if b.median is None:
        return "-"
    return f"{_gbps(b.median)} ({_gbps(b.p10)}–{_gbps(b.p90)})"


def tables(c: Collectives) -> list[tuple[str, list[str], list[list[str]]]]:
    half = c.link_unidirectional_gb_per_s
    out = [("Collectives by type" + (f" (link: {half:,.0f} GB/s per direction)" if half else ""),
            ["type", "count", "time ms", "exposed ms", "busbw GB/s (p10–p90)", "of link"],
            [[r.type, f"{r.count:,}", ms(r.sum_ns), ms(r.exposed_ns), _spread(r.busbw),
              "-" if r.busbw.link_pct is None else f"{r.busbw.link_pct:.0f}%"]
             for r in c.by_type])]
    if c.axes or c.unmapped:
        out += axis_tables(c.mesh, c.axes, c.unmapped, c.groups_inferred)
    out += [
           ("Collective ops", ["type", "op", "count", "message", "time ms", "exposed ms",
                               "busbw GB/s"],
            [[r.type, r.op or "-", f"{r.count:,}", size(r.msg_bytes), ms(r.sum_ns),
              ms(r.exposed_ns), _gbps(r.busbw.median)] for r in c.ops]),
           *([("Where each op's type and message size come from",
               ["type", "op", "type from", "size from"],
               [[r.type, r.op or "-", r.type_source or "-", r.size_source or "unknown"]
                for r in c.ops])] if any(r.type_source for r in c.ops) else []),
           ("Worst instances (largest arrival skew)",
            ["type", "op", "axis", "#", "ranks", "skew ms", "transfer ms", "last to arrive"],
            [[r.type, r.op or "-", r.axis or "-", str(r.occurrence), str(r.participants),
              ms(r.arrival_skew_ns), ms(r.transfer_ns),
              "-" if r.last is None else f"{r.last.host}/{r.last.device}"]
             for r in c.worst]),
           ("Stragglers (who arrives last, and how long the others wait for it)",
            ["host/device", "rank", "instances", "last", "others waited ms", "own wait ms"],
            [[f"{r.host}/{r.device}", str(r.rank), str(r.instances), str(r.times_last),
              ms(r.wait_ns), ms(r.own_wait_ns)] for r in c.stragglers])]
    return out


def render_table(c: Collectives, console: Console) -> None:
    """The tables, after the filters in force (``c.filters``) when any."""
    if c.filters:
        console.print(Text(f"filters: {filters_text(c.filters)}"))
    if not c.instances:
        console.print(Text("No collective activity in this trace."))
        return
    for title, header, rows in tables(c):
        if not rows:  # no empty table
            console.print(Text(f"{title}: none"))
            continue
        table = Table(title=title, title_justify="left")
        for col in header:
            table.add_column(col, no_wrap=True, justify="left" if col in (
                "type", "op", "host/device", "last to arrive", "axis", "types", "reason",
                "link") else "right")
        for row in rows:
            table.add_row(*[Text(cell) for cell in row])
        console.print(table)
    console.print(Text(f"alignment across hosts: {c.alignment}"))


def render_markdown(c: Collectives) -> str:
    parts = ["# tracelens collectives", ""]
    if c.filters:
        parts += [f"Filters: {md_cell(filters_text(c.filters))}", ""]
    for title, header, rows in tables(c):
        parts += md_table(title, header, rows)
    parts.append(f"Alignment across hosts: {c.alignment}")
    return "\n".join(parts) + "\n"


def render_json(c: Collectives) -> str:
    """The JSON contract: the result's fields, with the command's steps source and filters."""
    return to_json(c)


def render_csv(c: Collectives) -> str:
    """The per-op table: one row per (type, op), rounded as in the JSON."""
    buf = io.StringIO()
    cols = ["type", "op", "count", "msg_bytes", "sum_ns", "exposed_ns", "busbw_gb_per_s",
            "busbw_p10_gb_per_s", "busbw_p90_gb_per_s"]
    w = csv.writer(buf)
    w.writerow(cols)
    for r in encode(c.ops):  # type: ignore[union-attr]
        w.writerow(["" if r[k] is None else r[k] for k in cols])  # type: ignore[index]
    return buf.getvalue()
