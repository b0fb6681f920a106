"""Render the ``tracelens collectives`` result (terminal, Markdown, CSV, JSON)."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from reports.markdown import md_table
from reports.summary import ms


def _gbps(v: float | None) -> str:
    return "-" if v is None else f"{v:,.1f}"


def _size(b: int | None) -> str:
    if b is None:
        return "-"
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div:
            return f"{b / div:,.1f} {unit}"
    return f"{b} B"


def _spread(r: dict[str, Any]) -> str:
    if r["busbw_gb_per_s"] is None:
        return "-"
    return (f"{_gbps(r['busbw_gb_per_s'])} ({_gbps(r['busbw_p10_gb_per_s'])}–"
            f"{_gbps(r['busbw_p90_gb_per_s'])})")


def tables(rep: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]]]]:
    half = rep.get("link_unidirectional_gb_per_s")
    out = [("Collectives by type" + (f" (link: {half:,.0f} GB/s per direction)" if half else ""),
            ["type", "count", "time ms", "exposed ms", "busbw GB/s (p10–p90)", "of link"],
            [[r["type"], f"{r['count']:,}", ms(r["sum_ns"]), ms(r["exposed_ns"]),
              _spread(r), "-" if r.get("busbw_link_pct") is None
              else f"{r['busbw_link_pct']:.0f}%"] for r in rep["by_type"]]),
           ("Collective ops", ["type", "op", "count", "message", "time ms", "exposed ms",
                               "busbw GB/s"],
            [[r["type"], r["op"] or "-", f"{r['count']:,}", _size(r["msg_bytes"]),
              ms(r["sum_ns"]), ms(r["exposed_ns"]), _gbps(r["busbw_gb_per_s"])]
             for r in rep["collectives"]]),
           ("Worst instances (largest arrival skew)",
            ["type", "op", "#", "ranks", "skew ms", "transfer ms", "last to arrive"],
            [[r["type"], r["op"] or "-", str(r["occurrence"]), str(r["participants"]),
              ms(r["arrival_skew_ns"]), ms(r["transfer_ns"]),
              "-" if r["last"] is None else f"{r['last']['host']}/{r['last']['device']}"]
             for r in rep["worst_instances"]]),
           ("Stragglers (who arrives last, and how long the others wait for it)",
            ["host/device", "rank", "instances", "last", "others waited ms", "own wait ms"],
            [[f"{r['host']}/{r['device']}", str(r["rank"]), str(r["instances"]),
              str(r["times_last"]), ms(r["wait_ns"]), ms(r["own_wait_ns"])]
             for r in rep["stragglers"]])]
    return out


def render_table(rep: dict[str, Any], console: Console) -> None:
    if not rep["instances"]:
        console.print(Text("No collective activity in this trace."))
        return
    for title, header, rows in tables(rep):
        table = Table(title=title, title_justify="left")
        for col in header:
            table.add_column(col, no_wrap=True, justify="left" if col in (
                "type", "op", "host/device", "last to arrive") else "right")
        for row in rows:
            table.add_row(*[Text(c) for c in row])
        console.print(table)
    console.print(Text(f"alignment across hosts: {rep['alignment']}"))


def render_markdown(rep: dict[str, Any]) -> str:
    parts = ["# tracelens collectives", ""]
    for title, header, rows in tables(rep):
        parts += md_table(title, header, rows)
    parts.append(f"Alignment across hosts: {rep['alignment']}")
    return "\n".join(parts) + "\n"


def render_json(rep: dict[str, Any]) -> str:
    return json.dumps(rep, indent=2)


def render_csv(rep: dict[str, Any]) -> str:
    """The per-op table: one row per (type, op)."""
    buf = io.StringIO()
    cols = ["type", "op", "count", "msg_bytes", "sum_ns", "exposed_ns", "busbw_gb_per_s",
            "busbw_p10_gb_per_s", "busbw_p90_gb_per_s"]
    w = csv.writer(buf)
    w.writerow(cols)
    for r in rep["collectives"]:
        w.writerow(["" if r[c] is None else r[c] for c in cols])
    return buf.getvalue()
