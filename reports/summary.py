"""Render the typed ``summarize`` result as a terminal table, JSON, CSV or Markdown.

Only formatting happens here: every number comes from the typed
:class:`~tracelens.results.summary.Summary` (sums over devices included), as its JSON
contract rounds it (:func:`tracelens.results.encode.written`).
Kernel names are untrusted text: rich cells are plain ``Text`` (no markup), Markdown cells
escape the characters that would break a table.
"""

from __future__ import annotations

import re

import csv
import io
from typing import TYPE_CHECKING

from reports.markdown import md_cell
from reports.summary_text import (_coverage_text, _device_label, _gbps, _mfu_text,  # noqa: F401
                                  _peaks_line, peaks_unknown,
                                  filters_text, hosts_word, mfu_label, ms, pct, short_name,
                                  shown)
from tracelens.analyze.timeline.idle import IDLE_PARTS
from tracelens.analyze.timeline.breakdown import TIMELINE_COLUMNS
from tracelens.analyze.summary.reduce import OUTLIER_POINTS
from tracelens.core.model import CATEGORIES
from tracelens.results.encode import to_json
from tracelens.results.summary import (IdleBreakdown, Summary,
                                       Timeline, hardware_text)

if TYPE_CHECKING:
    from rich.console import Console


def _share(record: object, name: str) -> str:
    v = shown(record, name)
    return "-" if v is None else f"{v:.1f}%"


def _tables(s: Summary, all_rows: bool = False
            ) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) for every table, shared by the terminal and Markdown output."""
    h = s.headline
    many_hosts = h.hosts > 1
    tables = []
    head = [
        ["hardware", hardware_text(h.hardware)],
        ["devices", f"{h.active_devices} active of {h.devices}"
                    + (f" on {h.hosts} {hosts_word(h)}" if many_hosts else "")],
        ["steps", f"{h.steps}" + (f" (median {ms(h.median_step_ns)} ms)"
                                  if h.median_step_ns is not None else "")
         + f", from {s.steps_source}"],
        ["longest device span", f"{ms(h.max_span_ns)} ms"],
        ["busy", _share(h, "busy_pct")],
        ["exposed communication", _share(h, "exposed_comm_pct")],
        ["exposed memory", _share(h, "exposed_memory_pct")],
        [mfu_label(h), _mfu_text(shown(h, "mfu"), h.mfu_lower_bound)],
        ["FLOPs coverage", _coverage_text(h)],
    ]
    peaks = _peaks_line(s)
    if peaks:
        head.append(["peaks (dense)", peaks])
    if s.no_cost_data:
        head.append(["no FLOPs or cost data", f"{s.no_cost_data:,} kernels "
                                              f"({ms(s.no_cost_data_ns)} ms)"])
    filters = filters_text(s.filters)
    if filters:
        head.append(["filters", filters])
    tables.append(("Summary", ["", ""], head))
    products = {d.product or d.arch or "-" for d in s.devices}
    show_product = len(products) > 1
    rows = []
    picked = [(role, s.devices[i]) for role, i in (
        [("", i) for i in range(len(s.devices))] if all_rows else s.device_roles)]
    cut = len(picked) < len(s.devices)
    for role, d in picked:
        t = d.timeline
        rows.append([(f"{role}: " if role else "") + _device_label(d, many_hosts)]
                    + ([d.product or d.arch or "-"] if show_product else [])
                    + [ms(t.span_ns), ms(t.busy_ns), pct(t.compute_ns, t.span_ns),
                       pct(t.exposed_comm_ns, t.span_ns), pct(t.exposed_memory_ns, t.span_ns),
                       pct(t.idle_ns, t.span_ns), ms(t.comm_ns), ms(t.memory_ns),
                       _mfu_text(shown(d, "mfu"), d.mfu_lower_bound, short=True)])
    tables.append(("Per-device timeline (shares of span)" + (
        f"; {len(picked)} of {len(s.devices)} devices: median, slowest and fastest "
        "(the slowest arrives last in most collectives, else waits least in exposed "
        "communication; the fastest waits most) and those with a share more than "
        f"{OUTLIER_POINTS:g} points from the median (--all for every device)" if cut else ""),
                   ["device"] + (["product"] if show_product else [])
                   + ["span ms", "busy ms", "compute", "exp. comm", "exp. mem", "idle",
                      "comm ms", "mem ms", "MFU"], rows))
    idle_rows = [[(f"{role}: " if role else "") + _device_label(d, many_hosts),
                  ms(t.idle_ns),
                  *[pct(getattr(t.idle_breakdown or IdleBreakdown(), f"{p}_ns"), t.idle_ns)
                    for p in IDLE_PARTS]]
                 for role, d in picked for t in [d.timeline] if t.idle_ns]
    if idle_rows:
        tables.append(("Why idle (shares of idle time; docs/definitions.md#idle-breakdown)",
                       ["device", "idle ms", "host launch", "sync wait", "launch latency",
                        "no host data"], idle_rows))
    busy = h.totals.busy_ns
    tables.append(("Categories (all reported devices)",
                   ["category", "count", "sum ms", "exclusive ms", "of busy"],
                   [[c.category, f"{c.count:,}", ms(c.sum_ns), ms(c.exclusive_ns),
                     pct(c.exclusive_ns, busy)] for c in s.category_totals]))
    step_rows = []
    for role, d in picked:
        for st in d.steps:
            t = st.timeline
            step_rows.append([(f"{role}: " if role else "") + _device_label(d, many_hosts),
                              str(st.step), ms(t.span_ns), pct(t.busy_ns, t.span_ns),
                              pct(t.exposed_comm_ns, t.span_ns), pct(t.idle_ns, t.span_ns),
                              _frac(shown(st, "mfu"))])
    if step_rows:
        tables.append(("Per-step timeline (shares of the step)",
                       ["device", "step", "span ms", "busy", "exp. comm", "idle", "MFU"],
                       step_rows))
    tables.append(("Top kernels (why a category: tracelens explain NAME)",
                   ["kernel", "category", "count", "sum ms", "share"],
                   [[short_name(k.name, 160), k.category + (f"/{k.subcategory}"
                                                           if k.subcategory else ""),
                     f"{k.count:,}", ms(k.sum_ns), _share(k, "share_pct")]
                    for k in s.top_kernels]))
    coll = s.summary_collectives
    if coll.by_type:
        rows = [[r.type, f"{r.count:,}", ms(r.sum_ns), ms(r.exposed_ns),
                 _gbps(shown(r.busbw, "median"))] for r in coll.by_type]
        tables.append(("Collectives (details: tracelens collectives)",
                       ["type", "count", "time ms", "exposed ms", "busbw GB/s"], rows))
        if coll.stragglers:
            tables.append(("Who the others wait for in collectives",
                           ["device", "arrived last", "others waited ms"],
                           [[f"{g.host}/{g.device}", f"{g.times_last} of {g.instances}",
                             ms(g.wait_ns)] for g in coll.stragglers]))
    if s.axes:  # one line per mesh axis
        tables.append(("Collectives per mesh axis (details: tracelens axes)",
                       ["axis", "size", "hosts", "types", "exposed ms", "of exposed",
                        "busbw GB/s"],
                       [[a.axis + (" (inferred groups)" if a.groups_inferred else ""),
                         str(a.size),
                         {None: "?", True: "across", False: "within"}[a.crosses_hosts],
                         ", ".join(a.types), ms(a.exposed_ns),
                         _pct_of(shown(a, "exposed_share")), _gbps(shown(a.busbw, "median"))]
                        for a in s.axes]))
    if s.hlo_findings:
        tables.append(("HLO findings (whole trace; why and what to do: tracelens hlo PATH)",
                       ["op", "finding", "exposed ms/step", "bytes/step"],
                       [[f"{f.instruction} [{f.program}]", f.kind,
                         ms(shown(f, "exposed_ns_per_step")), "-" if f.bytes_per_step is None
                         else f"{f.bytes_per_step:,}"] for f in s.hlo_findings]))
    cp = s.critical_path
    if cp is not None and cp.what_if:
        step = "the trace" if cp.step is None else f"step {cp.step}"
        parts = ", ".join(f"{c.component} {ms(c.ns)}" for c in cp.composition if c.ns)
        tables.append((f"Critical path, {step}: {ms(cp.step_ns)} ms on "
                       f"{s.device_name(cp.host, cp.device)} ({parts}; details: tracelens "
                       "critical-path)",
                       ["change", "target", "saves ms", "step ms after"],
                       [[w.change, w.target, ms(w.saved_ns), ms(w.projected_step_ns)]
                        for w in cp.what_if]))
    if s.roofline_groups:  # ops that differ only in an instruction number: one row
        from tracelens.hlo.lens import program_label

        tables.append(("Roofline (top op groups with cost data, by time, ops differing only in "
                       "an instruction number as one; efficiency vs the bound's ceiling, "
                       "time-weighted)",
                       ["op", "category", "count", "sum ms", "GFLOP", "TFLOP/s", "TB/s",
                        "bound", "eff."],
                       [[short_name(r.op if r.program_id is None
                                    else f"{r.op} [{program_label(r.module or '?', r.program_id)}]",
                                    100),
                         r.category or "-", f"{r.count:,}", ms(r.sum_ns),
                         _num(r.flops, 1e-9), _num(r.tflops_per_s), _num(r.tb_per_s),
                         r.bound or "-", _frac(r.efficiency)] for r in s.roofline_groups]))
    if s.memory is not None and s.memory.devices:
        tables.append(memory_table(s))
    return tables


_LAYOUT = re.compile(r"\{[^{}]*\}$")  # a TPU shape's layout suffix: {2,1,0:T(8,128)}


def memory_table(s: Summary) -> tuple[str, list[str], list[list[str]]]:
    """Each allocator's peak and what holds the most at it (``tracelens memory`` has more)."""
    from reports.units import size

    assert s.memory is not None
    rows = []
    for d in s.memory.devices:
        win = next((st for dev in s.devices if dev.host == d.host and dev.device == d.device
                    for st in dev.steps if st.step == d.peak_step), None)
        when = (f"step {d.peak_step} +{ms(d.peak_time_ns - win.start_ns)}" if win
                else "-" if d.peak_step is None else f"step {d.peak_step}")
        most = d.most
        known = any(x.host == d.host and x.device == d.device for x in s.devices)
        rows.append([f"{d.host} host" if d.device is None else
                     s.device_name(d.host, d.device) if known else f"{d.host}/{d.device}",
                     size(d.capacity_bytes), size(d.peak_bytes),
                     "-" if d.peak_pct_of_capacity is None else f"{d.peak_pct_of_capacity:.1f}%",
                     when, f"{d.live_count:,} ({size(d.live_bytes)})",
                     "-" if most is None else f"{most.count} × "
                     f"{_LAYOUT.sub('', most.shape or '') or most.op or '?'} "
                     f"({size(most.total_bytes)})"])
    return ("Memory: peak in use per allocator (allocator events; details: tracelens memory)",
            ["device", "capacity", "peak", "of cap.", "when (ms)",
             "live at peak", "holds the most"], rows)


def _pct_of(share: float | None) -> str:
    return "-" if share is None else f"{100 * share:.1f}%"


def _num(x: float | None, scale: float = 1.0) -> str:
    if x is None:
        return "-"
    v = x * scale
    return f"{v:,.3f}" if abs(v) < 1000 else f"{v:,.0f}"


def _frac(x: float | None) -> str:
    return "-" if x is None else f"{100.0 * x:.1f}%"


def hardware_card(s: Summary) -> str:
    """The HTML card's hardware: :func:`hardware_text` with each product that has no peaks
    marked ``(peaks unknown)`` (the terminal's peaks line says the same)."""
    lacking = set(peaks_unknown(s))
    return ", ".join(hardware_text([c]) + (" (peaks unknown)" if c.kind in lacking else "")
                     for c in s.headline.hardware) or "unknown"


Table = tuple[str, list[str], list[list[str]]]


def _shown(tables: list[Table]) -> list[Table]:
    """The tables worth printing: the headline, and the others that have rows (a trace without
    device activity is the headline and one line saying so, not a page of empty tables)."""
    return [(t, h, r) for t, h, r in tables if r or t == "Summary"]


def render_table(summary: Summary, console: Console, all_rows: bool = False) -> None:
    """The terminal output: short by default (:mod:`reports.summary_brief`), every table with
    ``all_rows`` (``--all``). Warnings and notes are not printed here: they go to stderr
    (:func:`stderr_lines`)."""
    from rich.table import Table  # rich only for the terminal: JSON, CSV and Markdown skip it
    from rich.text import Text

    from reports.summary_brief import (finding_lines, findings_title, nothing_against,
                                       render_brief)

    if not all_rows:
        render_brief(summary, console)
        return
    if summary.devices:
        console.print(Text(findings_title(summary.findings), style="bold"))
        for title, evidence in finding_lines(summary.findings, limit=None,
                                             against=nothing_against(summary)):
            console.print(Text(title))
            if evidence:
                console.print(Text(evidence, style="dim"))
    for title, header, rows in _shown(_tables(summary, all_rows)):
        table = Table(title=title, title_justify="left", show_header=title != "Summary")
        widths = [max([len(col)] + [len(str(r[i])) for r in rows]) for i, col in enumerate(header)]
        flex = next((c for c in ("kernel", "op") if c in header), None)
        if flex:  # the one column that gives way on a narrow terminal
            k = header.index(flex)
            room = console.width - sum(w for i, w in enumerate(widths) if i != k) \
                - 3 * len(header) - 1
            widths[k] = max(24, min(widths[k], room))
            rows = [[short_name(c, widths[k]) if i == k else c for i, c in enumerate(r)]
                    for r in rows]
        for col, width in zip(header, widths):
            table.add_column(col, no_wrap=True, width=width, justify="left" if col in (
                "", "device", "kernel", "category", "product", "op", "bound", "type", "change",
                "target") else "right")
        for row in rows:
            table.add_row(*[Text(str(c)) for c in row])
        console.print(table)
    if not summary.devices:
        console.print(Text("No device activity in this trace."))


def stderr_lines(s: Summary) -> list[str]:
    """What goes to stderr beside the output: each warning, then each note, once."""
    # the explanations a measured fact contradicts (the consistency gate) after the warnings
    said = s.consistency.lines() if s.consistency is not None else []
    return [f"warning: {w}" for w in (*s.warnings, *said)] + [f"note: {n}" for n in s.notes]


def render_markdown(s: Summary, all_rows: bool = False) -> str:
    """Markdown: short by default, every table with ``all_rows``; warnings and notes go to
    stderr, as for the terminal."""
    from reports.summary_brief import (finding_lines, findings_title, nothing_against,
                                       render_brief_markdown)

    if not all_rows:
        return render_brief_markdown(s)
    out = [f"# tracelens summary ({', '.join(i['path'] for i in s.inputs)})", ""]
    if s.devices:
        out += [f"## {findings_title(s.findings)}", ""]
        for title, evidence in finding_lines(s.findings, limit=None,
                                             against=nothing_against(s)):
            out.append(md_cell(title.strip()))
            if evidence:
                out += ["", "   " + md_cell(evidence.strip()), ""]
        out.append("")
    for title, header, rows in _shown(_tables(s, all_rows)):
        out += [f"## {title}", "", "| " + " | ".join(md_cell(h) for h in header) + " |",
                "|" + "---|" * len(header)]
        out += ["| " + " | ".join(md_cell(str(c)) for c in row) + " |" for row in rows]
        out.append("")
    if not s.devices:
        out += ["No device activity in this trace.", ""]
    return "\n".join(out)


def render_json(s: Summary) -> str:
    return to_json(s)


def render_csv(s: Summary) -> str:
    """One row per device (``step`` empty) and per device × step: timeline columns, the idle
    parts (``idle_<part>_ns``), then the exclusive ns of every category (``excl_<category>``,
    whole-trace rows only), then ``mfu``
    (empty when unknown)."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["host", "rank", "device", "product", "step", "start_ns", "end_ns",
                *TIMELINE_COLUMNS, *[f"idle_{p}_ns" for p in IDLE_PARTS],
                *[f"excl_{c}" for c in CATEGORIES], "mfu"])
    for d in s.devices:
        excl = {c.category: c.exclusive_ns for c in d.categories}
        w.writerow([d.host, d.rank, d.device, d.product or "", "", "", "",
                    *_timeline_cells(d.timeline), *[excl.get(c, 0) for c in CATEGORIES],
                    _csv_num(shown(d, "mfu"))])
        for st in d.steps:
            w.writerow([d.host, d.rank, d.device, d.product or "", st.step, st.start_ns,
                        st.end_ns, *_timeline_cells(st.timeline), *[""] * len(CATEGORIES),
                        _csv_num(shown(st, "mfu"))])
    return buf.getvalue()


def _timeline_cells(t: Timeline) -> list[int]:
    idle = t.idle_breakdown or IdleBreakdown()
    return [*[getattr(t, k) for k in TIMELINE_COLUMNS],
            *[getattr(idle, f"{p}_ns") for p in IDLE_PARTS]]


def _csv_num(x: float | None) -> str:
    return "" if x is None else repr(float(x))
