"""Warnings that repeat per host, said once: a 128-host job must not print the same sentence
128 times with only the file or host name changed."""

from __future__ import annotations

import re
from typing import Iterable

SHOWN_NAMES = 4
"""How many of the hosts (or files) a folded warning names before it just counts them."""


def fold_per_host(warnings: Iterable[str], names: Iterable[str]) -> list[str]:
    """``warnings`` with those that differ only in a host or file name (one of ``names``)
    merged into one: the first one's text, then "(the same on N hosts/files: a, b, c, d, ...)"
    naming the first host or file each copy mentions. Order: each
    folded warning where its first copy stood; others unchanged."""
    warnings = list(warnings)
    # whole names only (not inside a longer word), and none shorter than 3 characters
    tokens = sorted({n for n in names if n and len(n) >= 3}, key=lambda n: (-len(n), n))
    if len(tokens) < 2 or len(warnings) < 2:
        return warnings
    pattern = re.compile(r"(?<![\w])(?:" + "|".join(re.escape(t) for t in tokens)
                         + r")(?![\w])")
    groups: dict[str, list[tuple[str, list[str]]]] = {}
    order: list[str] = []
    for w in warnings:
        found = pattern.findall(w)
        key = pattern.sub("\0", w) if found else w
        if key not in groups:
            order.append(key)
        groups.setdefault(key, []).append((w, found))
    out = []
    for key in order:
        members = groups[key]
        if len(members) == 1:
            out.append(members[0][0])
            continue
        labels = list(dict.fromkeys(f[0] for _, f in members))  # the name each one opens with
        more = f", ... {len(labels) - SHOWN_NAMES} more" if len(labels) > SHOWN_NAMES else ""
        out.append(f"{members[0][0]} (the same on {len(labels)} hosts/files: "
                   f"{', '.join(labels[:SHOWN_NAMES])}{more})")
    return out
