"""Render the typed ``tracelens critical-path`` result (terminal, Markdown, JSON, Perfetto):
formatting only, nothing computed here."""

from __future__ import annotations

from pathlib import Path

import orjson
from rich.console import Console
from rich.table import Table
from rich.text import Text

from reports.markdown import md_table
from reports.summary import ms
from tracelens.results.critical_path import CriticalPathResult, DevicePath
from tracelens.results.encode import json_bytes

TOP_COMPONENTS = 4


def _who(p: DevicePath) -> str:
    return f"{p.host}/{p.kind}{p.device}"


def _top(p: DevicePath) -> str:
    parts = [f"{c.component} {100 * c.ns / p.length_ns:.0f}%" for c in
             p.composition[:TOP_COMPONENTS]] if p.length_ns else []
    return ", ".join(parts)


MARK = " [inconsistent]"  # an explanation a measured fact contradicts (r.consistency)


def tables(r: CriticalPathResult) -> list[tuple[str, list[str], list[list[str]]]]:
    against = r.consistency.subjects()
    paths = ("Critical path per device (the window's every ns, by component)",
             ["rank", "device", "step", "window ms", "graph", "largest components"],
             [[str(p.rank), _who(p), "-" if p.step is None else str(p.step), ms(p.length_ns),
               p.graph, _top(p) + (MARK if {f"path {_who(p)}", f"path {_who(p)} rank {p.rank}"}
                                   & against.keys() else "")]
              for p in r.paths])
    comps = sorted({c.component for p in r.paths for c in p.composition})
    comp = ("Composition (ms on the path)", ["device", *comps],
            [[_who(p), *[ms(dict((c.component, c.ns) for c in p.composition).get(k, 0))
                         for k in comps]] for p in r.paths])
    what = ("What if (each change solved on the same graph; best first)",
            ["change", "target", "step ms", "projected ms", "saves ms", "on path ms"],
            [[w.change + (MARK if f"{w.change} {w.target}" in against else ""), w.target,
              ms(w.step_ns), ms(w.projected_step_ns), ms(w.saved_ns), ms(w.on_path_ns)]
             for w in r.what_if])
    return [paths, comp, what]


def render_table(r: CriticalPathResult, console: Console) -> None:
    for title, header, rows in tables(r):
        if not rows:  # no empty table
            console.print(Text(f"{title}: none"))
            continue
        t = Table(title=title, title_justify="left")
        for h in header:
            t.add_column(h, justify="left" if h in ("device", "change", "target", "graph",
                                                     "largest components") else "right")
        for row in rows:
            t.add_row(*[Text(c) for c in row])
        console.print(t)
    for note in r.notes:
        console.print(Text(f"note: {note}"))


def render_markdown(r: CriticalPathResult) -> str:
    lines: list[str] = []
    for title, header, rows in tables(r):
        lines += md_table(title, header, rows)
    lines += [f"- note: {n}" for n in r.notes]
    return "\n".join(lines)


def render_json(r: CriticalPathResult) -> bytes:
    """The result's JSON (:func:`tracelens.to_json`) as bytes: a whole trace's paths list
    millions of activities, a GB of text that would otherwise be copied twice more."""
    return json_bytes(r)


def write_perfetto(r: CriticalPathResult, path: Path) -> None:
    """The paths' activities as a Chrome/Perfetto trace, each path's activities linked in
    time order by flow events (as HTA's overlaid critical-path trace): one process per
    device's path, one thread per stream (and one for the host)."""
    events: list[dict[str, object]] = []
    t0 = min((a.start_ns for p in r.paths for a in p.activities), default=0)
    flow = 0
    for pid, p in enumerate(r.paths):
        events.append({"ph": "M", "name": "process_name", "pid": pid,
                       "args": {"name": f"critical path {_who(p)} (rank {p.rank})"}})
        prev: tuple[int, float] | None = None
        for a in p.activities:
            tid = a.stream if a.stream is not None else -1
            ts = (a.start_ns - t0) / 1000
            events.append({"ph": "X", "name": a.name, "cat": a.category or a.kind, "pid": pid,
                           "tid": tid, "ts": ts, "dur": (a.end_ns - a.start_ns) / 1000,
                           "args": {"on_path_ns": a.on_path_ns, "host": a.host}})
            if prev is not None:
                flow += 1
                events.append({"ph": "s", "id": flow, "name": "critical", "cat": "critical",
                               "pid": pid, "tid": prev[0], "ts": prev[1]})
                events.append({"ph": "f", "bp": "e", "id": flow, "name": "critical",
                               "cat": "critical", "pid": pid, "tid": tid, "ts": ts})
            prev = (tid, (a.end_ns - t0) / 1000)
    path.write_bytes(orjson.dumps({"traceEvents": events, "displayTimeUnit": "ns"}))
