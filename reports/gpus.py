"""Render the GPU spec table (``tracelens gpus``) as a terminal table, JSON, CSV or Markdown."""

from __future__ import annotations

import csv
import io
import json

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tracelens.core.hardware import DTYPES, GpuSpec

HEADER = ["id", "name", "arch", "CUs", "MHz", *DTYPES, "HBM TB/s", "mem GB", "link GB/s"]


def _cell(x: str | int | float | None) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:g}"
    return str(x)


def rows(specs: dict[str, GpuSpec]) -> list[list[str]]:
    return [[s.id, s.name, s.arch or "-", _cell(s.compute_units), _cell(s.clock_mhz),
             *[_cell(s.peak_tflops.get(d)) for d in DTYPES], _cell(s.hbm_tb_per_s),
             _cell(s.memory_gb), _cell(s.link_gb_per_s)] for s in specs.values()]


def render(specs: dict[str, GpuSpec], fmt: str, console: Console | None = None) -> str | None:
    """JSON/CSV/Markdown text, or None after printing a rich table on ``console``."""
    if fmt == "json":
        return json.dumps([s.to_dict() for s in specs.values()], indent=2)
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(HEADER)
        w.writerows(rows(specs))
        return buf.getvalue()
    if fmt == "markdown":
        lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |"
                  for r in rows(specs)]
        return "\n".join(lines + ["", "Dense peaks: TFLOP/s (int8: TOPS). Sources: "
                                      "`tracelens gpus --format json`."])
    if console is None:
        console = Console(soft_wrap=False)
        if not console.is_terminal:
            console.width = max(console.width, 150)
    table = Table(title="GPU peaks (dense TFLOP/s; int8 TOPS; names and sources: "
                  "--format json)", title_justify="left")
    keep = [i for i, col in enumerate(HEADER) if col != "name"]  # the id says it on a terminal
    for i in keep:
        table.add_column(HEADER[i], no_wrap=True,
                         justify="left" if HEADER[i] in ("id", "arch") else "right")
    for r in rows(specs):
        table.add_row(*[Text(r[i]) for i in keep])
    console.print(table)
    return None
