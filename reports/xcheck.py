"""Render ``tracelens xcheck``: one row per kernel name, ours next to XProf's kernel_stats."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tracelens.xcheck import KernelCheck

COLUMNS = ["kernel", "ours_count", "xprof_count", "ours_us", "xprof_us", "agrees"]


def _row(r: KernelCheck) -> list[Any]:
    return [r.name, r.ours_count, r.xprof_count, None if r.ours_us is None else round(r.ours_us, 3),
            None if r.xprof_us is None else round(r.xprof_us, 3), r.agrees]


def render_json(rows: list[KernelCheck]) -> str:
    return json.dumps({"kernels": [dict(zip(COLUMNS, _row(r))) for r in rows],
                       "agree": sum(r.agrees for r in rows), "total": len(rows)}, indent=2)


def render_csv(rows: list[KernelCheck]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(COLUMNS)
    w.writerows(["" if v is None else v for v in _row(r)] for r in rows)
    return buf.getvalue()


def _text(v: Any) -> str:
    return "-" if v is None else (f"{v:,.3f}" if isinstance(v, float) else str(v))


def render_markdown(rows: list[KernelCheck]) -> str:
    out = [f"# tracelens xcheck: {sum(r.agrees for r in rows)} of {len(rows)} kernels agree "
           "with XProf kernel_stats", "", "| " + " | ".join(COLUMNS) + " |",
           "|" + "---|" * len(COLUMNS)]
    for r in rows:
        cells = [_text(v).replace("|", "\\|").replace("<", "&lt;") for v in _row(r)]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


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
