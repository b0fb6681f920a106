"""Markdown tables for untrusted text: cells escape what would break the table or inject HTML."""

from __future__ import annotations


def md_cell(value: object) -> str:
    return (str(value).replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;")
            .replace(">", "&gt;").replace("\n", " "))


def md_table(title: str, header: list[str], rows: list[list[str]]) -> list[str]:
    """Lines of a titled Markdown table, ending with a blank line; a table without rows is
    one line saying so (no empty table is printed)."""
    if not rows:
        return [f"{md_cell(title)}: none", ""]
    out = [f"## {title}", "", "| " + " | ".join(md_cell(h) for h in header) + " |",
           "|" + "---|" * len(header)]
    out += ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in rows]
    return out + [""]
