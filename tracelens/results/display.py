"""How a result shows itself in a notebook or a REPL: in a screen or less. A result's
dataclass ``repr`` lists every row of every table (53,193 characters for one summary);
these show each field once, a table as its row count and its first rows as one short line
each, and leave the whole result a method away (``to_dict()``, the fields themselves,
:func:`tracelens.to_json`). Trace text (kernel and host names) is untrusted: the HTML form
escapes all of it. A result class takes them as class attributes::

    __repr__ = display.short_repr
    _repr_html_ = display.html_repr
    __rich__ = display.rich_table
    to_dict = display.to_dict
"""

from __future__ import annotations

import dataclasses
import html
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.table import Table

    from tracelens.results.encode import JSONValue

TEXT = 60        # characters of one text value
LINE = 110       # characters of one row's line
ROWS = 3         # rows of a table the HTML form shows
REPR = 1500      # characters of the whole repr
HINT = "the whole result: .to_dict(), tracelens.to_json(r), or its fields"


def _cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n - 1] + "…"


def _scalar(v: object) -> str | None:
    """A short text of a plain value (None: not a plain value)."""
    if v is None or isinstance(v, (bool, int)):
        return repr(v)
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, str):
        return repr(_cut(v, TEXT))
    return None


def _row(v: object, width: int = LINE) -> str:
    """One line for a record: its class and its plain fields."""
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        parts = []
        for f in dataclasses.fields(v):
            s = _scalar(getattr(v, f.name))
            if s is not None:
                parts.append(f"{f.name}={s}")
        return _cut(f"{type(v).__name__}({', '.join(parts)})", width)
    return _cut(_value(v), width)


def _value(v: object) -> str:
    """A short text of one field's value: plain values as they are, a record as one line,
    a table as its row count and row type."""
    s = _scalar(v)
    if s is not None:
        return s
    if isinstance(v, (tuple, list)):
        if not v:
            return "[]"
        kinds = sorted({type(x).__name__ for x in v})
        if all(_scalar(x) is not None for x in v) and len(v) <= 4:
            return _cut("[" + ", ".join(_scalar(x) or "" for x in v) + "]", LINE)
        return f"[{len(v)} × {'/'.join(kinds)}]"
    if isinstance(v, dict):
        return f"{{{len(v)} keys}}"
    height, width = getattr(v, "height", None), getattr(v, "width", None)
    if isinstance(height, int) and isinstance(width, int):  # a polars frame
        return f"<{type(v).__name__} {height} rows × {width} columns>"
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return _row(v)
    return _cut(repr(v), LINE)


def _fields(r: object) -> list[tuple[str, object]]:
    return [(f.name, getattr(r, f.name)) for f in dataclasses.fields(r)]  # type: ignore[arg-type]


def short_repr(r: object) -> str:
    """``Name(field=value, ...)``: each field once, tables as their row count."""
    text = f"{type(r).__name__}(" + ", ".join(f"{k}={_value(v)}" for k, v in _fields(r)) + ")"
    return _cut(text, REPR)


def html_repr(r: object) -> str:
    """A table of the fields (each table with its first rows), every text escaped."""
    e = html.escape
    rows = []
    for k, v in _fields(r):
        record = dataclasses.is_dataclass(v) and not isinstance(v, type)
        cell = e(_row(v, 4 * LINE) if record else _value(v))  # a record whole (the headline)
        if isinstance(v, (tuple, list)) and v and _scalar(v[0]) is None:
            shown = "".join(f"<br><code>{e(_row(x))}</code>" for x in v[:ROWS])
            cell += shown + ("<br>…" if len(v) > ROWS else "")
        rows.append(f"<tr><th style='text-align:left'>{e(k)}</th>"
                    f"<td style='text-align:left'>{cell}</td></tr>")
    return (f"<div><b>{e(type(r).__name__)}</b><table>{''.join(rows)}</table>"
            f"<small>{e(HINT)}</small></div>")


def rich_table(r: object) -> Table:
    """The same fields as a rich table (``rich.print(result)``)."""
    from rich.markup import escape
    from rich.table import Table

    t = Table(title=type(r).__name__, show_header=False, caption=HINT)
    for k, v in _fields(r):
        t.add_row(escape(k), escape(_value(v)))
    return t


def to_dict(r: object) -> JSONValue:
    """The whole result as plain data: its JSON form (:func:`tracelens.to_json`'s)."""
    from tracelens.results.encode import encode

    return encode(r)
