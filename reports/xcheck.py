"""Render ``tracelens xcheck``: one row per file and kernel name, ours next to XProf's
kernel_stats. JSON and CSV always carry the file; the table and Markdown show it when the
rows come from several files (a folder)."""

from __future__ import annotations

import csv
import io
import json

from rich.console import Console
from rich.table import Table
from rich.text import Text

from typing import Sequence

from tracelens.xcheck import KernelCheck, clipped_total

COLUMNS = ["file", "kernel", "ours_count", "xprof_count", "ours_us", "clipped_us", "xprof_us",
           "agrees"]
Skipped = Sequence[tuple[str, str]]
"""The files of a folder left out, each with why (``tracelens.xcheck.check_path``)."""


def _us(v: float | None) -> float | None:
    return None if v is None else round(v, 3)


def _row(r: KernelCheck) -> list[str | int | float | bool | None]:
    return [r.file, r.name, r.ours_count, r.xprof_count, _us(r.ours_us), _us(r.clipped_us),
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


def _columns(rows: list[KernelCheck]) -> list[int]:
    """The columns the table and Markdown show: the file only for rows of several files."""
    several = len({r.file for r in rows}) > 1
    return [i for i, c in enumerate(COLUMNS) if c != "file" or several]


def skipped_note(skipped: Skipped) -> str | None:
    """The sentence naming the files of a folder left out, and why (None: none)."""
    if not skipped:
        return None
    return "not checked: " + "; ".join(f"{f} ({why})" for f, why in skipped)


def render_json(rows: list[KernelCheck], skipped: Skipped = ()) -> str:
    names, us = clipped_total(rows)
    return json.dumps({"kernels": [dict(zip(COLUMNS, _row(r))) for r in rows],
                       "agree": sum(r.agrees for r in rows), "total": len(rows),
                       "clipped": {"kernels": names, "us": round(us, 3),
                                   "note": clip_note(rows)},
                       "skipped": [{"file": f, "reason": why} for f, why in skipped]},
                      indent=2)


def render_csv(rows: list[KernelCheck]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(COLUMNS)
    w.writerows(["" if v is None else v for v in _row(r)] for r in rows)
    return buf.getvalue()


def _text(v: str | int | float | bool | None) -> str:
    return "-" if v is None else (f"{v:,.3f}" if isinstance(v, float) else str(v))


def render_markdown(rows: list[KernelCheck], skipped: Skipped = ()) -> str:
    shown = _columns(rows)
    out = [f"# tracelens xcheck: {sum(r.agrees for r in rows)} of {len(rows)} kernels agree "
           "with XProf kernel_stats", "", "| " + " | ".join(COLUMNS[i] for i in shown) + " |",
           "|" + "---|" * len(shown)]
    for r in rows:
        row = _row(r)
        cells = [_text(row[i]).replace("|", "\\|").replace("<", "&lt;") for i in shown]
        out.append("| " + " | ".join(cells) + " |")
    notes = [n for n in (clip_note(rows), skipped_note(skipped)) if n]
    return "\n".join(out + [line for n in notes for line in ("", _md(n))]) + "\n"


def _md(text: str) -> str:
    """A note whose file names come from the folder: escaped as the table's cells are."""
    return text.replace("<", "&lt;")


def render_table(rows: list[KernelCheck], console: Console, skipped: Skipped = ()) -> None:
    table = Table(title=f"{sum(r.agrees for r in rows)} of {len(rows)} kernels agree with "
                        "XProf kernel_stats (count equal, time within 0.1%)",
                  title_justify="left")
    shown = _columns(rows)
    for c in (COLUMNS[i] for i in shown):
        text = c in ("file", "kernel")
        table.add_column(c, justify="left" if text else "right",
                         overflow="ellipsis", max_width=80 if text else None)
    for r in rows:
        row = _row(r)
        table.add_row(*[Text(_text(row[i])) for i in shown])
    console.print(table)
    for note in (clip_note(rows), skipped_note(skipped)):
        if note:
            console.print(Text(note))
