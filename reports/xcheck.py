"""Render ``tracelens xcheck``: one row per file and kernel name, ours next to XProf's
kernel_stats. JSON and CSV always carry the file; the table and Markdown show it when the
rows come from several files (a folder)."""

from __future__ import annotations

import csv
import io

from rich.console import Console
from rich.table import Table
from rich.text import Text

from typing import Sequence

from tracelens.results.encode import to_json
from tracelens.results.xcheck import XCheck, clip_note
from tracelens.analyze.xcheck import KernelCheck

COLUMNS = ["file", "kernel", "ours_count", "xprof_count", "ours_us", "clipped_us", "xprof_us",
           "agrees"]
Skipped = Sequence[tuple[str, str]]
"""The files of a folder left out, each with why (``tracelens.analyze.xcheck.check_path``)."""


def _us(v: float | None) -> float | None:
    return None if v is None else round(v, 3)


def _row(r: KernelCheck) -> list[str | int | float | bool | None]:
    return [r.file, r.name, r.ours_count, r.xprof_count, _us(r.ours_us), _us(r.clipped_us),
            _us(r.xprof_us), r.agrees]


def _columns(rows: list[KernelCheck]) -> list[int]:
    """The columns the table and Markdown show: the file only for rows of several files."""
    several = len({r.file for r in rows}) > 1
    return [i for i, c in enumerate(COLUMNS) if c != "file" or several]


def skipped_note(skipped: Skipped) -> str | None:
    """The sentence naming the files of a folder left out, and why (None: none)."""
    if not skipped:
        return None
    return "not checked: " + "; ".join(f"{f} ({why})" for f, why in skipped)


def render_json(result: XCheck) -> str:
    """The JSON: :func:`tracelens.results.encode.to_json` of the typed result."""
    return to_json(result)


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
