"""Render the typed ``tracelens compare`` and ``tracelens scaling`` results (terminal,
Markdown; JSON and CSV of their documented JSON rows): formatting only."""

from __future__ import annotations

import csv
import io
from typing import Mapping, Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from reports.markdown import md_table
from reports.summary import short_name
from reports.units import size
from tracelens.results.encode import to_json
from tracelens.results.findings import RankedFinding
from tracelens.results.runs import Comparison, KernelChange, KernelOnly, Noise, Scaling
from tracelens.results.summary import hardware_text

Tables = list[tuple[str, list[str], list[list[str]]]]


def _ms(ns: float | None) -> str:
    return "-" if ns is None else f"{ns / 1e6:,.3f}"


def _signed_ms(ns: float | None) -> str:
    return "-" if ns is None else f"{ns / 1e6:+,.3f}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{round(100 * x)}%"  # an int: never "-0%"


def _kernel_label(k: KernelChange | KernelOnly) -> str:
    """The kernel's name; the base name too when it differs; how many kernels a row holds."""
    text = short_name(k.name)
    base_name = getattr(k, "base_name", None)
    if base_name not in (None, k.name):
        text += f" (base: {short_name(base_name, 60)})"
    n = max(getattr(k, "kernels", None) or 1, getattr(k, "base_kernels", None) or 1,
            getattr(k, "new_kernels", None) or 1)
    match = getattr(k, "match", None)
    return text + (f" (+{n - 1} more of this op)" if n > 1 and match in ("op", "jax_op") else
                   f" ({n} kernels)" if n > 1 else "")


def _match_label(k: KernelChange) -> str:
    if k.match == "jax_op":
        return f"JAX op {k.jax_op}" + (f" in {k.program}" if k.program else "")
    if k.match != "op":
        return "name"
    return f"op {k.op}" + (f" in {k.program}" if k.program else "")


def noise_text(n: Noise) -> str:
    """The noise floor in words: its value and where it comes from, or why it is unknown."""
    if n.floor_ns is None:
        return f"unknown ({n.reason})"
    se = " and ".join(_ms(v) for v in n.se_ns)
    return (f"±{_ms(n.floor_ns)} ms (2 × √(se_a² + se_b²), the median steps' standard "
            f"errors {se} ms): the change is {'within' if n.within else 'beyond'} it")


def compare_tables(c: Comparison) -> Tables:
    b, n = c.base, c.new
    head = [["base", f"{b.path} ({b.devices} devices, step {_ms(b.step_ns)} ms)"],
            ["base hardware", hardware_text(b.hardware)],
            ["new", f"{n.path} ({n.devices} devices, step {_ms(n.step_ns)} ms)"],
            ["new hardware", hardware_text(n.hardware)],
            ["step time change", f"{_signed_ms(c.delta_ns)} ms ({c.delta_pct:+.1f}%)"
             if c.delta_pct is not None else "-"],
            ["noise floor", noise_text(c.noise)]]
    out: Tables = [("Compare", ["", ""], head)]  # warnings: on stderr (the CLI), not here
    out.append(("Verdict", ["", ""], [[str(i + 1), v] for i, v in enumerate(c.verdict)]))
    within = "; within noise: not decomposed" if c.noise.within else ""
    out.append(("Step components (ms per step, median step averaged over devices; shares of "
                f"the gross change {_ms(c.gross_ns)} ms{within})",
                ["component", "base", "new", "delta", "share"],
                [[r.component, _ms(r.base_ns), _ms(r.new_ns), _signed_ms(r.delta_ns),
                  _pct(r.share)] for r in c.components if r.base_ns or r.new_ns]))
    m = c.matching
    out.append(("Kernels with the largest change (ms per device-step; matched by HLO op, "
                f"then JAX op, then name: {m.by_op} by op, {m.by_jax_op} by JAX op, "
                f"{m.by_name} by name, {m.changed} "
                f"changed, {m.only_base} only in base, {m.only_new} only in new)",
                ["kernel", "category", "matched by", "base", "new", "delta"],
                [[_kernel_label(k), k.category or "-", _match_label(k), _ms(k.base_ns),
                  _ms(k.new_ns), _signed_ms(k.delta_ns)] for k in c.kernels]))
    if c.findings is not None:  # what to fix first, as summarize says it for each run
        out.append(("Findings that appeared in new or vanished from base (summarize's what "
                    "to fix first)", ["", "finding", "saving per step"],
                    [["appeared", f.title, _finding_saving(f)] for f in c.findings.appeared]
                    + [["vanished", f.title, _finding_saving(f)] for f in c.findings.vanished]))
    if c.memory:  # both runs record allocator events
        out.append(("Peak memory in use (allocator events; tracelens memory)",
                    ["host", "allocator", "base", "new", "change", "new of capacity"],
                    [[m.host, m.allocator, size(m.base_peak_bytes), size(m.new_peak_bytes),
                      ("+" if m.delta_bytes >= 0 else "-") + size(abs(m.delta_bytes))
                      + ("" if m.delta_pct is None else f" ({m.delta_pct:+.1f}%)"),
                      "-" if m.new_pct_of_capacity is None else f"{m.new_pct_of_capacity:.1f}%"]
                     for m in c.memory]))
    for side, only in (("base", c.only_base), ("new", c.only_new)):
        if only:
            out.append((f"Kernels only in {side}", ["kernel", "category", "ms per step"],
                        [[_kernel_label(k), k.category or "-", _ms(k.ns_per_step)]
                         for k in only]))
    return out


def _finding_saving(f: RankedFinding) -> str:
    if f.saved_ns is None:
        return "no projection"
    return f"{_ms(f.saved_ns)} ms" + ("" if f.saved_pct is None else f" ({f.saved_pct:.1f}%)")


def scaling_tables(s: Scaling) -> Tables:
    out: Tables = [("Runs", ["run", "devices", "hosts", "steps", "step ms"],
                    [[r.path, str(r.devices), str(r.hosts), str(r.steps), _ms(r.step_ns)]
                     for r in s.runs])]
    for t in s.transitions:
        title = (f"{t.from_path} → {t.to_path} ({t.devices[0]} → {t.devices[1]} devices, "
                 f"{t.mode} scaling efficiency {_pct(t.efficiency)}, lost "
                 f"{_signed_ms(t.delta_ns)} ms per step; noise floor {noise_text(t.noise)})")
        out.append((title, ["", ""], [[str(i + 1), v] for i, v in enumerate(t.verdict)]))
        within = "; within noise: not decomposed" if t.noise.within else ""
        out.append((f"Causes (ms per step and device; shares of the gross change "
                    f"{_ms(t.gross_ns)} ms{within})",
                    ["component", "delta", "share"],
                    [[c.component, _signed_ms(c.delta_ns), _pct(c.share)]
                     for c in t.causes if abs(c.delta_ns) >= 0.5]))
    return out


def render_table(tables: Tables, console: Console) -> None:
    for title, header, rows in tables:
        if not rows:  # no empty table
            console.print(Text(f"{title}: none"))
            continue
        table = Table(title=title, title_justify="left", show_header=any(header))
        for col in header:
            table.add_column(col, justify="left" if col in (
                "", "component", "kernel", "category", "run", "finding") else "right",
                             overflow="fold")
        for row in rows:
            table.add_row(*[Text(c) for c in row])
        console.print(table)


def render_markdown(title: str, tables: Tables) -> str:
    parts = [f"# {title}", ""]
    for t, header, rows in tables:
        parts += md_table(t, [h or " " for h in header], rows)
    return "\n".join(parts)


def render_json(result: Comparison | Scaling) -> str:
    return to_json(result)


CSVRow = Mapping[str, str | int | float | None]


def render_csv(rows: Sequence[CSVRow], cols: list[str]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(cols)
    for r in rows:
        w.writerow(["" if r.get(c) is None else r.get(c) for c in cols])
    return buf.getvalue()
