"""Warnings that repeat per host, said once: a 128-host job must not print the same sentence
128 times with only the file or host name changed."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import PurePath
from typing import Iterable

from tracelens.model import host_from_file_name

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


def host_and_file_names(hosts: Iterable[object], paths: Iterable[str]) -> list[str]:
    """What names a host in warnings (the ``names`` of :func:`fold_per_host`): its host
    names, sorted, then each file's name and its stem."""
    names = sorted(str(h) for h in hosts)
    for path in paths:
        base = PurePath(path).name
        names += [base, host_from_file_name(base)]  # the stem keeps its dots
    return names


def steps_disagree(sources: Iterable[str]) -> str | None:
    """Host files that marked their steps from different sources (some annotated, others
    falling back to a program of their own or to none) are each host's own choice on the
    engine; loading the whole job in one process marks steps once for all hosts and can
    choose differently. Said, not hidden (None when they agree)."""
    counts = Counter(sources)
    if len(counts) < 2:
        return None
    each = ", ".join(f"{src}: {n} host file(s)" for src, n in sorted(counts.items()))
    return (f"steps were marked per host file and the files disagree ({each}); marking them "
            "once for the whole job (tracelens.load of all files) can give other steps")
