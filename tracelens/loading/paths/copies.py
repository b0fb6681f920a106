"""Byte-identical copies among the files of one job: read once, and said.

A folder holding a trace and a renamed copy of it (``host.xplane.pb`` and
``host (1).xplane.pb``, ``rank0.json`` and ``rank0-copy.json``), or one file named twice by
different paths, used to read as twice the job: twice the hosts, ranks and kernels, exit 0
and no word. Identical content is one file: the first in discovery order is read, the others
are named in a note. Cheap first: only files whose sizes (and first MiB) agree are digested
whole, so a job whose files all differ in size reads no byte here.

A file that stands for a set (a rocprofv3 ``<pid>_kernel_trace.csv`` and its sibling tables,
an SQLite database and its ``-wal``) is compared with its whole set: two sets are copies
only when every member is.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Sequence

from tracelens.core.model import Notice

_HEAD = 1 << 20  # the first MiB, digested before the whole file
_CHUNK = 1 << 20
_CSV_SET = re.compile(r"^(.*?)(kernel_trace|counter_collection)\.csv$", re.IGNORECASE)
_TABLE = re.compile(r"^[a-z][a-z_]*\.csv$", re.IGNORECASE)

COPIES = "discover.copies"


def members(path: Path) -> list[Path]:
    """The files whose bytes make up what ``path`` stands for: itself, a rocprofv3 CSV set's
    sibling tables (``<prefix><table>.csv``), an SQLite database's ``-wal`` file."""
    found = [path]
    m = _CSV_SET.match(path.name)
    if m:
        prefix = m.group(1)
        try:
            siblings = sorted(p for p in path.parent.iterdir() if p != path
                              and p.name.startswith(prefix)
                              and _TABLE.match(p.name[len(prefix):]) and p.is_file())
        except OSError:
            siblings = []
        found += siblings
    wal = path.with_name(path.name + "-wal")
    if wal.is_file():
        found.append(wal)
    return found


def _sizes(path: Path) -> tuple[tuple[str, int], ...] | None:
    """(member name relative to the set, size) of each member; None when one cannot be
    stat'ed (its reader says why later)."""
    try:
        return tuple((_label(path, m), m.stat().st_size) for m in members(path))
    except OSError:
        return None


def _label(path: Path, member: Path) -> str:
    """A member's name within its set: "" for the file itself, ``-wal`` for its journal, a
    sibling table's name without the set's prefix (``/agent_info.csv``)."""
    if member == path:
        return ""
    if member.name.startswith(path.name):
        return member.name[len(path.name):]
    m = _CSV_SET.match(path.name)
    return "/" + member.name[len(m.group(1) if m else ""):]


def _digest(path: Path, limit: int | None) -> str | None:
    """blake2b of every member (the first ``limit`` bytes of each; None: all of it); None
    when one cannot be read."""
    h = hashlib.blake2b(digest_size=32)
    try:
        for m in members(path):
            h.update(b"\0" + _label(path, m).encode() + b"\0")
            with open(m, "rb") as fh:
                left = limit
                while left is None or left > 0:
                    chunk = fh.read(_CHUNK if left is None else min(_CHUNK, left))
                    if not chunk:
                        break
                    h.update(chunk)
                    if left is not None:
                        left -= len(chunk)
    except OSError:
        return None
    return h.hexdigest()


def _split(groups: list[list[Path]], key: object) -> list[list[Path]]:
    """Each group split by ``key(path)``; groups of one (or with an unknown key) dropped."""
    out: list[list[Path]] = []
    for group in groups:
        by: dict[object, list[Path]] = {}
        for p in group:
            k = key(p)  # type: ignore[operator]
            if k is not None:
                by.setdefault(k, []).append(p)
        out += [g for g in by.values() if len(g) > 1]
    return out


def drop_copies(files: Sequence[Path]) -> tuple[list[Path], list[Notice]]:
    """``files`` without the byte-identical copies of an earlier one, and one note per file
    that had copies (naming them). The same file by two paths (a link, ``a/../a/x``) is a
    copy too."""
    if len(files) < 2:
        return list(files), []
    groups = _split([list(files)], _sizes)
    groups = _split(groups, lambda p: _digest(p, _HEAD))
    groups = _split(groups, lambda p: _digest(p, None))
    dropped: set[Path] = set()
    notes = []
    for group in groups:
        keep, *copies = group  # in discovery order: the first is read
        dropped.update(copies)
        notes.append(Notice.of(
            COPIES, "{file}: byte-identical to {copies} ({n} more file(s)); read once, as "
            "one file", file=str(keep), copies=", ".join(str(c) for c in copies),
            n=len(copies)))
    return [f for f in files if f not in dropped], notes
