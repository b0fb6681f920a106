"""Unit formats shared by the renderers (terminal, Markdown, HTML)."""

from __future__ import annotations


def size(b: object) -> str:
    """Bytes in binary units (``-`` when unknown): the one size format of every renderer."""
    if not isinstance(b, (int, float)):
        return "-"
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div:
            return f"{b / div:,.1f} {unit}"
    return f"{int(b)} B"
