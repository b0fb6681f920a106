"""Where the commands write: every output path (``report -o``, ``export -o``/``--perfetto``,
``critical-path --perfetto``, ``--html``, ``history export``'s Parquet files) is checked here
before anything is read or written.

An output replaces only a regular file, or is created. ``export -o /dev/full`` run as root
used to turn the device into a regular file (the writer's ``.part`` file renamed over it), a
FIFO or a symlink was replaced the same way, ``report -o FIFO`` blocked forever opening it,
and an existing file was overwritten without a word. Now anything else at the path (a folder,
a FIFO, a device, a socket, a link out of the target's folder) is refused before any input is
read, a link is never followed out of its folder, and the caller says when an existing file
is replaced (:func:`replacing`)."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Iterable, Sequence

from tracelens.core.errors import TraceInputError, TraceUsageError

_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def check_target(path: Path, flag: str) -> bool:
    """Raise unless ``path`` can be written as an output file: absent (its folder must
    exist), or a regular file (True: it will be replaced), or a link to a regular file in
    the same folder. A folder is the caller's usage error; anything else (a FIFO, a device,
    a socket, a link out of the folder, a dangling link) an input error naming the path."""
    path = Path(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        if not path.parent.is_dir():
            raise TraceInputError(path, f"cannot write: folder {path.parent} does not exist") \
                from None
        return False
    except OSError as exc:
        raise TraceInputError(path, f"cannot write: {exc.strerror or exc}") from None
    if stat.S_ISLNK(st.st_mode):
        target = path.resolve()
        if target.parent != path.parent.resolve():
            raise TraceInputError(path, f"is a link out of its folder (to {target}); an "
                                  "output never follows one: give another name")
        try:
            st = os.stat(path)
        except OSError:
            raise TraceInputError(path, f"is a dangling link (to {target}); give another "
                                  "name") from None
    if stat.S_ISDIR(st.st_mode):
        raise TraceUsageError(f"{flag} {path} is a directory; give a file name")
    if not stat.S_ISREG(st.st_mode):
        raise TraceInputError(path, f"is {_kind(st.st_mode)}, not a regular file: an output "
                              "replaces only a file; give another name")
    return True


def check_outputs(outputs: Iterable[tuple[Path | None, str]], inputs: Sequence[str | Path]
                  ) -> list[Path]:
    """:func:`check_target` of each (path, flag) given (None: no such output), and none of
    them one of ``inputs``; the existing regular files that will be replaced."""
    replaced = []
    for path, flag in outputs:
        if path is None:
            continue
        if check_target(path, flag):
            replaced.append(Path(path))
        resolved = Path(path).resolve()
        if any(Path(p).exists() and Path(p).resolve() == resolved for p in inputs):
            raise TraceUsageError(f"{flag} {path} is one of the inputs")
    return replaced


def replacing(paths: Iterable[Path | None]) -> list[Path]:
    """The regular files (or links to them) among ``paths`` that exist now, so the CLI can
    say, once written, that it replaced them (``note: replaced <path>``)."""
    out = []
    for p in paths:
        if p is None:
            continue
        try:
            if stat.S_ISREG(os.stat(p).st_mode):
                out.append(Path(p))
        except OSError:
            continue
    return out
