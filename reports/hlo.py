"""Render the typed ``tracelens hlo`` result (terminal, Markdown, CSV, JSON, HTML)."""

from __future__ import annotations

import csv
import io

from markupsafe import escape
from rich.console import Console
from rich.table import Table
from rich.text import Text

from reports.html.page import TEMPLATES
from reports.markdown import md_table
from reports.summary import ms, shown
from reports.units import size
from tracelens.hlo.lens import Finding, program_label
from tracelens.results.encode import to_json, written
from tracelens.results.hlo import HloLensResult

Tables = list[tuple[str, list[str], list[list[str]]]]
CSV_COLUMNS = ["kind", "program", "instruction", "bytes_per_step", "exposed_ns_per_step",
               "compilations", "executed", "message"]


def _opt(v: str | int | None) -> str:
    return "-" if v is None else str(v)


def _flops(v: float | None) -> str:
    return "-" if v is None else f"{v:,.0f}"


def _yes(v: bool | None) -> str:
    return "unknown" if v is None else ("yes" if v else "no")


def _program(f: Finding) -> str:
    """The finding's program, with how many compilations of its module it stands for and
    whether any of them ran."""
    n = f.compilations
    return (f.program + (f" ×{n} compilations" if n > 1 else "")
            + (" (never ran)" if f.executed is False else ""))


def tables(rep: HloLensResult) -> Tables:
    out: Tables = []
    how = "exposed time per step per device from the trace" if rep.timed else \
        "an HLO dump has no timings"
    out.append((f"Findings ({len(rep.findings)} of {rep.findings_total}, costliest "
                f"first, programs that never ran in this trace last; {how})",
                ["kind", "program", "instruction", "bytes/step", "exposed ms/step",
                 "what to do"],
                [[f.kind, _program(f), f.instruction, size(f.bytes_per_step),
                  ms(shown(f, "exposed_ns_per_step")), f.message] for f in rep.findings]))
    # programs that never ran in this trace last (stable: in program order otherwise)
    for p in sorted(rep.programs, key=lambda p: p.executed is False):
        if not p.collectives:
            continue
        out.append((f"Collectives of {program_label(p.module, p.program_id)}"
                    + ("" if p.scheduled else " (no schedule)")
                    + (" (never ran in this trace)" if p.executed is False else ""),
                    ["name", "opcode", "dtype", "bytes", "group", "async", "loop", "trips",
                     "runs/step", "bytes/step", "cross-host", "overlap FLOPs"],
                    [[c.name, c.opcode, _opt(c.dtype), size(c.bytes),
                      _opt(c.group_size), "yes" if c.is_async else "no",
                      c.loop or "-", _opt(c.trip_count), _opt(c.executions_per_step),
                      size(c.bytes_per_step), _yes(c.spans_hosts),
                      _flops(c.overlap_flops)] for c in p.collectives]))
    notes = [[program_label(p.module, p.program_id), n] for p in rep.programs for n in p.notes]
    if notes:
        out.append(("Notes", ["program", "note"], notes))
    quiet = [p for p in rep.programs if not p.collectives]
    if quiet:
        idle = sum(p.executed is False for p in quiet)
        out.append(("Programs without collectives", ["", ""], [["programs", str(len(quiet))]]
                    + ([["never ran in this trace", str(idle)]] if idle else [])))
    if rep.problems:
        out.append(("Problems", ["", ""], [[str(i + 1), s] for i, s in
                                           enumerate(rep.problems)]))
    return out


def render_table(rep: HloLensResult, console: Console) -> None:
    if not rep.findings:
        console.print("no findings" + ("" if rep.programs else " (no HLO programs)"))
    for title, header, rows in tables(rep):
        if not rows:
            continue
        table = Table(title=title, title_justify="left", show_header=any(header))
        wrap = "what to do" in header  # findings: only the explanation wraps
        for col in header:
            if wrap and col != "what to do":
                table.add_column(col, no_wrap=True)
            else:
                table.add_column(col, overflow="fold")
        for row in rows:
            table.add_row(*[Text(c) for c in row])
        console.print(table)


def render_markdown(rep: HloLensResult) -> str:
    parts = ["# tracelens hlo", ""]
    for title, header, rows in tables(rep):
        parts += md_table(title, [h or " " for h in header], rows)
    return "\n".join(parts)


def render_json(rep: HloLensResult) -> str:
    return to_json(rep)


def render_csv(rep: HloLensResult) -> str:
    """One row per finding (values as the JSON writes them)."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(CSV_COLUMNS)
    for f in rep.findings:
        w.writerow(["" if v is None else v for v in (written(f, c) for c in CSV_COLUMNS)])
    return buf.getvalue()


def render_html(rep: HloLensResult, title: str = "tracelens hlo") -> str:
    """One self-contained page (the report's CSS, no script); every text escaped."""
    body = []
    for t, header, rows in tables(rep):
        head = "".join(f"<th class=\"l\">{escape(h)}</th>" for h in header)
        cells = "".join("<tr>" + "".join(f"<td class=\"l\">{escape(c)}</td>" for c in row)
                        + "</tr>" for row in rows)
        body.append(f"<section><h2>{escape(t)}</h2><table><thead><tr>{head}</tr></thead>"
                    f"<tbody>{cells}</tbody></table></section>")
    css = (TEMPLATES / "report.css").read_text("utf-8")
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{escape(title)}</title><style>{css}</style></head><body>"
            f"<header class=\"top\"><h1>{escape(title)}</h1></header><main>"
            + ("".join(body) or "<p>no findings</p>") + "</main></body></html>\n")
