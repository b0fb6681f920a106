"""The files of a directory argument, and what in it could not be read.

Discovery used ``Path.rglob``, which skips a folder it may not list (``PermissionError``) and
anything that is not a regular file without a word: a log dir whose ``p1/`` could not be
listed read as 1 host of 8 devices instead of 2 of 16, and a FIFO named like a host's file the
same. This walk keeps what it could not read: a folder it could not list, and an entry named
like a trace file that is not one (a FIFO, a socket, a device, a dangling link), so that
discovery can refuse the job with their names instead of reading part of it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Callable

Problem = tuple[Path, str]


def walk_files(root: Path, traceish: Callable[[str], bool]) -> tuple[list[Path], list[Problem]]:
    """(the regular files under ``root``, links to files included, in sorted order; the
    entries that could not be read: folders that could not be listed, and entries whose
    name ``traceish`` accepts that are not regular files), without following links to
    folders (as ``rglob`` does not)."""
    files: list[Path] = []
    problems: list[Problem] = []
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = list(it)
        except OSError as exc:
            problems.append((folder, f"cannot list the folder ({exc.strerror or exc})"))
            continue
        for entry in entries:
            path = folder / entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(path)
                    continue
                if entry.is_file():
                    files.append(path)
                    continue
            except OSError as exc:
                if traceish(entry.name):
                    problems.append((path, f"cannot read ({exc.strerror or exc})"))
                continue
            if traceish(entry.name):
                problems.append((path, _not_a_file(path)))
    return sorted(files), sorted(problems)


def _not_a_file(path: Path) -> str:
    """What is at ``path`` instead of a regular file."""
    try:
        mode = os.lstat(path).st_mode
    except OSError as exc:
        return f"cannot read ({exc.strerror or exc})"
    if stat.S_ISLNK(mode):
        return f"a dangling link (to {os.readlink(path)}), not a file"
    for test, what in ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return f"{what}, not a regular file"
    return "not a regular file"
