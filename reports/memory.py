"""Render the typed ``tracelens memory`` result (terminal, Markdown, CSV, JSON): formatting
only, nothing aggregated here."""

from __future__ import annotations

import csv
import io

from rich.console import Console
from rich.table import Table
from rich.text import Text

from reports.markdown import md_table
from reports.units import size
from tracelens.results.encode import encode, to_json
from tracelens.results.memory import DeviceMemory, MemoryResult


def _ms(ns: int | None, start: int | None) -> str:
    """A time as ms into the trace (from its first activity), or on its clock when unknown."""
    if ns is None:
        return "-"
    return f"{ns / 1e6:,.3f} ms" if start is None else f"{(ns - start) / 1e6:,.3f} ms"


def _pct(p: float | None) -> str:
    return "-" if p is None else f"{p:.1f}%"


def headline(d: DeviceMemory, start: int | None = None) -> list[str]:
    """The lines that say one allocator's peak and what holds it."""
    who = (f"device {d.device}" if d.device is not None else "host memory")
    cap = (f" of {size(d.capacity_bytes)} ({_pct(d.peak_pct_of_capacity)})"
           if d.capacity_bytes is not None else f" (capacity unknown: {d.capacity_note})")
    step = f", step {d.peak_step}" if d.peak_step is not None else ", in no step"
    lines = [f"{d.host} · {who} (allocator {d.allocator}, {d.events:,} events): peak "
             f"{size(d.peak_bytes)} in use{cap} at {_ms(d.peak_time_ns, start)}{step}"]
    parts = []
    if d.heap_bytes is not None:
        parts.append(f"allocated {size(d.heap_bytes)}")
    if d.stack_bytes is not None:
        parts.append(f"stack {size(d.stack_bytes)}")
    if d.reserved_bytes is not None:
        cached = ("" if d.cached_free_bytes is None
                  else f" ({size(d.cached_free_bytes)} cached, not allocated)")
        parts.append(f"reserved {size(d.reserved_bytes)}{cached}")
    if d.fragmentation is not None:
        parts.append(f"fragmentation {d.fragmentation:.4f}")
    if d.lifetime_peak_bytes is not None:
        parts.append(f"allocator's lifetime peak {size(d.lifetime_peak_bytes)}")
    if parts:
        lines.append("  " + " · ".join(parts))
    before = ("" if d.unattributed_bytes is None else
              f"; {size(d.unattributed_bytes)} allocated before the profile (no event)")
    lines.append(f"  live at the peak: {d.live_count:,} allocations of the profile, "
                 f"{size(d.live_bytes)}{before}; last allocating op: {d.peak_op or '-'}")
    return lines


def tables(d: DeviceMemory, start: int | None = None
           ) -> list[tuple[str, list[str], list[list[str]]]]:
    live = [[size(a.allocation_bytes), f"{a.count:,}", size(a.total_bytes), a.op or "-",
             a.shape or "-", a.dtype or "-", a.region or "-",
             "-" if a.step is None else str(a.step)] for a in d.live]
    steps = [[str(s.step), size(s.peak_bytes), _ms(s.time_ns, start)] for s in d.steps]
    return [("Live at the peak, largest first",
             ["size", "count", "total", "op", "shape", "dtype", "region", "step"], live),
            ("Peak per step", ["step", "peak in use", "at"], steps)]


def finding_lines(m: MemoryResult) -> list[str]:
    return [f"Finding: {f.title} ({f.evidence})" for f in m.findings]


def render_table(m: MemoryResult, console: Console) -> None:
    for line in finding_lines(m):
        console.print(Text(line), soft_wrap=True)
    for d in m.devices:
        for line in headline(d, m.start_ns):
            console.print(Text(line), soft_wrap=True)
        for title, header, rows in tables(d, m.start_ns):
            if not rows:
                console.print(Text(f"{title}: none"))
                continue
            table = Table(title=title, title_justify="left")
            for col in header:
                table.add_column(col)
            for r in rows:
                table.add_row(*r)
            console.print(table)
    for line in m.without:
        console.print(Text(line), soft_wrap=True)  # one line, however long


def render_markdown(m: MemoryResult) -> str:
    parts = ["# tracelens memory", ""]
    if m.findings:
        parts += [*finding_lines(m), ""]
    for d in m.devices:
        parts += [*headline(d, m.start_ns), ""]
        for title, header, rows in tables(d, m.start_ns):
            parts += md_table(title, header, rows)
    parts += list(m.without)
    return "\n".join(parts) + "\n"


def render_json(m: MemoryResult) -> str:
    return to_json(m)


def render_csv(m: MemoryResult) -> str:
    """The live allocations at each allocator's peak, one row per group."""
    buf = io.StringIO()
    cols = ["allocation_bytes", "count", "total_bytes", "requested_bytes", "op", "shape",
            "dtype", "region", "first_time_ns", "step"]
    w = csv.writer(buf)
    w.writerow(["host", "allocator", *cols])
    for d in m.devices:
        for r in encode(d.live):  # type: ignore[union-attr]
            w.writerow([d.host, d.allocator,
                        *("" if r[k] is None else r[k] for k in cols)])  # type: ignore[index]
    return buf.getvalue()
