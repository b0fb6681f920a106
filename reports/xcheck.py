"""Render ``tracelens xcheck``: one row per kernel name, ours next to XProf's kernel_stats."""

from __future__ import annotations

import csv
import io
import json

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tracelens.xcheck import KernelCheck, clipped_total

COLUMNS = ["kernel", "ours_count", "xprof_count", "ours_us", "clipped_us", "xprof_us", "agrees"]


def _us(v: float | None) -> float | None:
    return None if v is None else round(v, 3)


def _row(r: KernelCheck) -> list[str | int | float | bool | None]:
    return [r.name, r.ours_count, r.xprof_count, _us(r.ours_us), _us(r.clipped_us),
            _us(r.xprof_us), r.agrees]


def clip_note(rows: list[KernelCheck]) -> str | None:
    """The sentence that says our times are compared before the same-stream clip, and what
    that clip took (None: it took nothing)."""
    names, us = clipped_total(rows)
    if not names:
        return None
    return (f"ours_us is as read, before the same-stream clip; the clip took {us:,.3f} µs "
            f"from {names} kernel name(s) (clipped_us), which every other command leaves out "
            "and XProf keeps")


def render_json(rows: list[KernelCheck]) -> str:
    names, us = clipped_total(rows)
    return json.dumps({"kernels": [dict(zip(COLUMNS, _row(r))) for r in rows],
                       "agree": sum(r.agrees for r in rows), "total": len(rows),
                       "clipped": {"kernels": names, "us": round(us, 3),
                                   "note": clip_note(rows)}}, indent=2)


def render_csv(rows: list[KernelCheck]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(COLUMNS)
    w.writerows(["" if v is None else v for v in _row(r)] for r in rows)
    return buf.getvalue()


def _text(v: str | int | float | bool | None) -> str:
    return "-" if v is None else (f"{v:,.3f}" if isinstance(v, float) else str(v))


def render_markdown(rows: list[KernelCheck]) -> str:
    out = [f"# tracelens xcheck: {sum(r.agrees for r in rows)} of {len(rows)} kernels agree "
           "with XProf kernel_stats", "", "| " + " | ".join(COLUMNS) + " |",
           "|" + "---|" * len(COLUMNS)]
    for r in rows:
        cells = [_text(v).replace("|", "\\|").replace("<", "&lt;") for v in _row(r)]
        out.append("| " + " | ".join(cells) + " |")
    note = clip_note(rows)
    return "\n".join(out + (["", note] if note else [])) + "\n"


def render_table(rows: list[KernelCheck], console: Console) -> None:
    table = Table(title=f"{sum(r.agrees for r in rows)} of {len(rows)} kernels agree with "
                        "XProf kernel_stats (count equal, time within 0.1%)",
                  title_justify="left")
    for c in COLUMNS:
        table.add_column(c, justify="left" if c == "kernel" else "right",
                         overflow="ellipsis", max_width=80 if c == "kernel" else None)
    for r in rows:
        table.add_row(*[Text(_text(v)) for v in _row(r)])
    console.print(table)
    note = clip_note(rows)
    if note:
        console.print(Text(note))
