"""The short ``summarize``: the headline, what to fix first, and one screen of
tables (about 50 lines on any job); ``--all`` gives every table (:mod:`reports.summary`).

Only formatting: every number is a field of the typed
:class:`~tracelens.results.summary.Summary` (the findings' savings are the what-if solver's).
Trace text (kernel and device names) is untrusted: rich cells are plain ``Text``, Markdown
cells are escaped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reports.markdown import md_cell as _md_cell
from reports.summary_text import (_device_label, _gbps, _mfu_text, _peaks_line,
                                  filters_text, hosts_word, mfu_label, ms, pct, short_name,
                                  shown)
from tracelens.results.findings import Findings, RankedFinding
from tracelens.results.summary import StepSpread, Summary, hardware_text

if TYPE_CHECKING:
    from rich.console import Console

SHOWN_FINDINGS = 5
"""How many findings the short output lists (the JSON has them all)."""

SHOWN_STEPS = 6
"""Up to this many steps each get a row; past it the median, slowest and fastest step."""

SHOWN_KERNELS = 10

SHOWN_STRAGGLERS = 2
"""Devices the others waited for that the short output names (the collectives JSON: three)."""

SHOWN_OUTLIERS = 3
"""Outlier devices the short table lists (the rest counted; ``--all`` lists every device)."""

CRITICAL_PARTS = 3
"""The critical path's largest components the short output names (the rest: counted)."""


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}%"


def headline_lines(s: Summary) -> list[str]:
    """Three lines: what ran (hardware, devices, steps), where its time went, and MFU."""

    h = s.headline
    steps = f"{h.steps} step{'s' if h.steps != 1 else ''}" + (
        f" (median {ms(h.median_step_ns)} ms, from {s.steps_source})"
        if h.median_step_ns is not None else f" (from {s.steps_source})")
    hosts = f" on {h.hosts} {hosts_word(h)}" if h.hosts > 1 else ""
    first = (f"{hardware_text(h.hardware)} · {h.active_devices} active of {h.devices} "
             f"devices{hosts} · {steps}")
    second = " · ".join([f"busy {_pct(shown(h, 'busy_pct'))}",
                         f"exposed communication {_pct(shown(h, 'exposed_comm_pct'))}",
                         f"exposed memory {_pct(shown(h, 'exposed_memory_pct'))}",
                         f"idle {_pct(shown(h, 'idle_pct'))}"])
    third = f"{mfu_label(h)} {_mfu_text(shown(h, 'mfu'), h.mfu_lower_bound)}"
    cov = shown(h, "flops_coverage")
    if cov is not None:
        third += f" · FLOPs for {100.0 * cov:.1f}% of compute time"
    peaks = _peaks_line(s)
    filters = filters_text(s.filters)
    return [first, second, third] + ([f"peaks (dense): {peaks}"] if peaks else []) + (
        [f"filters: {filters}"] if filters else [])


def findings_title(f: Findings) -> str:
    if f.step_ns is None:
        return "What to fix first (no critical path: nothing could be projected)"
    step = "the trace" if f.step is None else f"step {f.step}"
    return (f"What to fix first (saving per step projected by the what-if solver on {step}, "
            f"{ms(f.step_ns)} ms)")


def saving_text(x: RankedFinding) -> str:
    if x.saved_ns is None:
        return f"no projection: {x.unprojected}"
    return f"saves {ms(x.saved_ns)} ms ({x.saved_pct:.1f}%)" if x.saved_pct is not None \
        else f"saves {ms(x.saved_ns)} ms"


def nothing_against(s: Summary) -> str | None:
    """The measured fact that contradicts "nothing found to fix" (the consistency gate)."""
    c = s.consistency
    return next((v.fact for v in c.violations if v.check == "nothing_to_fix"), None) \
        if c is not None else None


def finding_lines(f: Findings, limit: int | None = SHOWN_FINDINGS,
                  against: str | None = None) -> list[tuple[str, str]]:
    """(title line, evidence line) per finding shown, then a line of what was left out;
    ``against``: the fact that contradicts "nothing found to fix" (:func:`nothing_against`),
    said with it."""
    items = f.items if limit is None else f.items[:limit]
    # a finding a measured fact contradicts is marked (the consistency gate); the full list
    # (--all) says the fact too, the short one leaves it to stderr (one screen)
    out = [(f"{i}. {'[inconsistent] ' if x.inconsistent else ''}{x.title} — {saving_text(x)}",
            f"   {x.evidence} → {x.command}"
            + (f"; contradicted: {x.inconsistent}" if x.inconsistent and limit is None
               else ""))
           for i, x in enumerate(items, 1)]
    rest = []
    if limit is not None and len(f.items) > limit:
        rest.append(f"{len(f.items) - limit} more finding(s) in --all and the JSON")
    if f.below_floor:
        rest.append(f"{len(f.below_floor)} what-if(s) save under {f.floor_pct:g}% of the step "
                    "each (tracelens critical-path)")
    if rest:
        out.append(("   " + "; ".join(rest), ""))
    if not f.items and not rest:
        out.append(("   nothing found to fix: no what-if saves "
                    f"{f.floor_pct:g}% of the step and no exposure or straggler measured"
                    + (f" [inconsistent: {against}]" if against else ""), ""))
    return out


def _brief_steps(s: Summary) -> list[tuple[str, StepSpread]]:
    spread = list(s.step_spread)
    if len(spread) <= SHOWN_STEPS:
        return [("", x) for x in spread]
    order = sorted(spread, key=lambda x: (x.median_span_ns, x.step))
    picks = {order[(len(order) - 1) // 2].step: "median", order[-1].step: "slowest",
             order[0].step: "fastest"}
    return [(picks[x.step], x) for x in spread if x.step in picks]


def _span3(v: tuple[float, float, float]) -> str:
    lo, med, hi = v
    return f"{med:.1f}%" if hi - lo < 0.05 else f"{med:.1f}% ({lo:.1f}–{hi:.1f})"


Table = tuple[str, list[str], list[list[str]]]


def brief_tables(s: Summary) -> list[Table]:
    """The short output's tables (empty ones left out by the caller)."""

    many_hosts = s.headline.hosts > 1
    out: list[Table] = []
    roles = list(s.brief_roles)
    outliers = [r for r in roles if r[0] == "outlier"]
    picked = [(role, s.devices[i]) for role, i in
              [r for r in roles if r[0] != "outlier"] + outliers[:SHOWN_OUTLIERS]]
    cut = len(picked) < len(s.devices)
    rows = []
    for role, d in picked:
        t = d.timeline
        rows.append([(f"{role}: " if role else "") + _device_label(d, many_hosts),
                     ms(t.span_ns), pct(t.busy_ns, t.span_ns), pct(t.compute_ns, t.span_ns),
                     pct(t.exposed_comm_ns, t.span_ns), pct(t.idle_ns, t.span_ns),
                     _mfu_text(shown(d, "mfu"), d.mfu_lower_bound, short=True)])
    more = len(outliers) - SHOWN_OUTLIERS
    out.append(((f"Devices ({len(picked)} of {len(s.devices)}; slowest: last in most "
                 "collectives, else waits least; fastest: waits most"
                 + (f"; {more} more outliers" if more > 0 else "") + "; --all: every device)")
                if cut else "Devices (--all: every table)",
                ["device", "span ms", "busy", "compute", "exp. comm", "idle", "MFU"], rows))
    steps = _brief_steps(s)
    out.append(("Steps (median over the devices, lowest–highest in brackets)"
                + (f"; {len(steps)} of {len(s.step_spread)}" if len(steps) < len(s.step_spread)
                   else ""),
                ["step", "devices", "span ms", "busy", "exp. comm", "idle", "MFU"],
                [[(f"{role}: " if role else "") + str(x.step), str(x.devices),
                  ms(x.median_span_ns), _span3(x.busy_pct), _span3(x.exposed_comm_pct),
                  _span3(x.idle_pct), "-" if x.mfu_median is None
                  else f"{100 * x.mfu_median:.1f}%"] for role, x in steps]))
    out.append(("Top kernels (why a category: tracelens explain NAME)",
                ["kernel", "category", "count", "sum ms", "share"],
                [[short_name(k.name, 160), k.category + (f"/{k.subcategory}"
                                                         if k.subcategory else ""),
                  f"{k.count:,}", ms(k.sum_ns),
                  "-" if shown(k, "share_pct") is None else f"{shown(k, 'share_pct'):.1f}%"]
                 for k in s.top_kernels[:SHOWN_KERNELS]]))
    return out


def category_line(s: Summary) -> str:
    """The categories by exclusive time, as shares of busy time, in one line."""

    busy = s.headline.totals.busy_ns
    return "Categories (exclusive time, of busy): " + " · ".join(
        f"{c.category} {pct(c.exclusive_ns, busy)}" for c in s.category_totals)


def collective_lines(s: Summary) -> list[str]:
    """One line per collective type, and one naming who the others waited for."""

    c = s.summary_collectives
    out = [f"{r.type} collectives: {r.count:,}, {ms(r.sum_ns)} ms, {ms(r.exposed_ns)} ms "
           f"exposed, busbw {_gbps(shown(r.busbw, 'median'))} GB/s" for r in c.by_type]
    if c.stragglers:
        out.append("Waited for in collectives: " + ", ".join(
            f"{g.host}/{g.device} {ms(g.wait_ns)} ms (last {g.times_last}/{g.instances})"
            for g in c.stragglers[:SHOWN_STRAGGLERS]))
    return out


def critical_line(s: Summary) -> str | None:
    cp = s.critical_path
    if cp is None:
        return None
    step = "the trace" if cp.step is None else f"step {cp.step}"
    shown = [c for c in cp.composition if c.ns]
    parts = ", ".join(f"{c.component} {ms(c.ns)}" for c in shown[:CRITICAL_PARTS])
    more = f", {len(shown) - CRITICAL_PARTS} more" if len(shown) > CRITICAL_PARTS else ""
    return (f"Critical path, {step}: {ms(cp.step_ns)} ms on {s.device_name(cp.host, cp.device)}: "
            f"{parts}{more}")


def render_brief(s: Summary, console: "Console") -> None:
    """The short terminal output."""
    from rich import box
    from rich.table import Table as RichTable
    from rich.text import Text


    for line in headline_lines(s):
        console.print(Text(line))
    if not s.devices:
        console.print(Text("No device activity in this trace."))
        return
    console.print(Text(findings_title(s.findings), style="bold"))
    for title, evidence in finding_lines(s.findings, against=nothing_against(s)):
        console.print(Text(title))
        if evidence:
            console.print(Text(evidence, style="dim"))
    for title, header, rows in brief_tables(s):
        if not rows:
            continue
        console.print(Text(title, style="italic"))
        table = RichTable(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
        widths = [max([len(col)] + [len(str(r[i])) for r in rows])
                  for i, col in enumerate(header)]
        if "kernel" in header:
            k = header.index("kernel")
            room = console.width - sum(w for i, w in enumerate(widths) if i != k) \
                - 3 * len(header)
            widths[k] = max(24, min(widths[k], room))
            rows = [[short_name(c, widths[k]) if i == k else c for i, c in enumerate(r)]
                    for r in rows]
        for col, width in zip(header, widths):
            table.add_column(col, no_wrap=True, width=width, justify="left" if col in (
                "device", "kernel", "category", "step") else "right")
        for row in rows:
            table.add_row(*[Text(str(c)) for c in row])
        console.print(table)
    console.print(Text(category_line(s)))
    for line in collective_lines(s):  # details: tracelens collectives
        console.print(Text(line))
    cp = critical_line(s)
    if cp:
        console.print(Text(cp))


def render_brief_markdown(s: Summary) -> str:
    """The short output as Markdown (the same sections, cells escaped)."""

    out = [f"# tracelens summary ({', '.join(_md_cell(i['path']) for i in s.inputs)})", ""]
    out += [_md_cell(line) + "  " for line in headline_lines(s)] + [""]
    if not s.devices:
        return "\n".join(out + ["No device activity in this trace.", ""])
    out += [f"## {findings_title(s.findings)}", ""]
    for title, evidence in finding_lines(s.findings, against=nothing_against(s)):
        out.append(_md_cell(title.strip()) if evidence else f"*{_md_cell(title.strip())}*")
        if evidence:
            out += ["", "   " + _md_cell(evidence.strip()), ""]
    out.append("")
    for title, header, rows in brief_tables(s):
        if not rows:
            continue
        out += [f"## {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        out += ["| " + " | ".join(_md_cell(str(c)) for c in r) + " |" for r in rows] + [""]
    out += [_md_cell(category_line(s)), ""]
    coll = collective_lines(s)
    if coll:
        out += ["## Collectives", ""] + [f"- {_md_cell(x)}" for x in coll] + [""]
    cp = critical_line(s)
    if cp:
        out += [_md_cell(cp), ""]
    return "\n".join(out)
