"""How many bytes a reader may hold: the inflation budget that refuses a decompression bomb
(an 11 MB gzip of 11 GiB) or a plain file too large for the machine, before it exhausts memory.

A gzip input may inflate to ``min(100 x its size + 64 MiB, 1/4 of available memory)``, checked
as it is read: at every point the inflated bytes stay within 100 x the compressed bytes read
so far + 64 MiB, so that a bomb (about 1000:1) is refused after about 70 MiB, not 100x its
size. Real traces inflate 2.5-4.7x (XSpace), 9.9-16.5x (Kineto), 23x (rocprofv3 JSON), 26x (a
counter CSV): 100x never refuses one. A plain input may hold 1/4 of available memory: reading
a trace takes about 2.5-4x its text (measured on the shared Kineto and rocprofv3 JSON
traces), so a text of a quarter of the available memory is about what still fits.
``TRACELENS_MAX_INFLATE`` (bytes, or with a K, M, G or T suffix) replaces the budget; a value
that is not a positive size is an error.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from tracelens.core.errors import TraceInputError

ENV = "TRACELENS_MAX_INFLATE"
RATIO = 100  # inflated bytes per compressed byte a gzip input may reach
SLACK = 64 << 20  # plus this, so that a small gzip may hold a trace of some size
MEMORY_SHARE = 4  # at most 1/MEMORY_SHARE of the available memory
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


@dataclass(frozen=True)
class Budget:
    """At most ``limit`` bytes, set as ``why`` says; for a gzip (``ratio`` set), also at
    most ``ratio`` x the compressed bytes read so far + 64 MiB at every point of the stream,
    so that a bomb is refused after inflating little more than 64 MiB, not 100x its size."""

    limit: int
    why: str
    from_env: bool = False
    ratio: int | None = None

    def allows(self, inflated: int, consumed: int) -> bool:
        """Whether ``inflated`` bytes from the first ``consumed`` compressed ones are within."""
        return inflated <= self.limit and (
            self.ratio is None or inflated <= self.ratio * consumed + SLACK)

    def refuse(self, path: Path, what: str, cause: str) -> TraceInputError:
        """The one-line error for ``path``: ``what`` passed the budget (``"3.0 GiB to
        hold"``), ``cause`` what that means, and how to raise the budget."""
        return TraceInputError(path, f"{what}, past the read budget ({self.why}): {cause}; "
                               f"set {ENV} (bytes, or e.g. 16G) to raise it")


def human(n: float) -> str:
    """``n`` bytes as a short size (``1.5 GiB``, ``64.0 MiB``, ``512 B``)."""
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"


def env_limit() -> int | None:
    """The byte count in ``TRACELENS_MAX_INFLATE`` (None when unset); any other value than a
    positive size is an error naming the variable, never a silent default."""
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return None
    m = _SIZE.fullmatch(raw)
    value = int(float(m.group(1)) * _UNITS[m.group(2).lower()]) if m else 0
    if value <= 0:
        raise TraceInputError(ENV, f"must be a positive size in bytes, or with a K, M, G or "
                              f"T suffix (e.g. 16G), not {raw!r}")
    return value


def available_memory() -> int | None:
    """Bytes of memory this process can still get: the kernel's ``MemAvailable``, less where
    a cgroup (a container's memory limit) allows less; None where neither is known."""
    found = []
    try:
        with open("/proc/meminfo", "rb") as fh:
            for line in fh:
                if line.startswith(b"MemAvailable:"):
                    found.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    try:
        cg = Path("/sys/fs/cgroup")
        top = (cg / "memory.max").read_text().strip()
        if top != "max":
            found.append(max(0, int(top) - int((cg / "memory.current").read_text())))
    except (OSError, ValueError):
        pass
    if not found:
        try:
            found.append(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
        except (OSError, ValueError, AttributeError):
            return None
    return min(found)


def memory_budget() -> Budget | None:
    """The budget of what a reader holds in memory: ``TRACELENS_MAX_INFLATE``, else 1/4 of
    the available memory (None, no bound, where that is unknown)."""
    env = env_limit()
    if env is not None:
        return Budget(env, f"{ENV}={os.environ[ENV].strip()}", from_env=True)
    avail = available_memory()
    if avail is None:
        return None
    share = avail // MEMORY_SHARE
    return Budget(share, f"{human(share)}, 1/{MEMORY_SHARE} of the {human(avail)} of memory "
                  "available")


def gzip_budget(compressed: int) -> Budget:
    """The budget of a gzip input of ``compressed`` bytes: ``TRACELENS_MAX_INFLATE``, else
    ``min(100 x compressed + 64 MiB, the memory budget)``, checked as the stream is read."""
    mem = memory_budget()
    if mem is not None and mem.from_env:
        return mem
    whole = RATIO * compressed + SLACK
    why = f"{RATIO} x the compressed bytes read + {human(SLACK)}"
    if mem is not None and mem.limit < whole:
        return Budget(mem.limit, f"{why}, and at most {mem.why}", ratio=RATIO)
    return Budget(whole, f"{why}: {human(whole)} for its {human(compressed)}", ratio=RATIO)


def check_plain(path: Path, size: int) -> None:
    """Refuse a plain (uncompressed) input of ``size`` bytes past the memory budget."""
    budget = memory_budget()
    if budget is not None and size > budget.limit:
        raise budget.refuse(path, f"{human(size)} to hold in memory",
                            "too large to read on this machine")
